package controlapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/clerum/hcc/pkg/base64url"
	"github.com/clerum/hcc/pkg/strictjson"
)

// The InternalControl token of docs/control-api.md.
const (
	// Issuer is the iss claim of every token HCC signs.
	Issuer = "host-context-controller"
	// Audience is the aud claim: the Control API.
	Audience = "control-api"
	// MaxTokenTTL bounds exp - iat (docs/control-api.md): a token that leaks
	// from a request is worth at most this long.
	MaxTokenTTL = 60 * time.Second
	// TokenClockSkew is how far the signer's and the verifier's clocks may
	// disagree when VerifyInternalToken checks exp, iat and nbf.
	TokenClockSkew = 30 * time.Second
)

const (
	// tokenHeader is the only protected header HCC signs. A constant keeps
	// the header byte-for-byte the one the contract names.
	tokenHeader = `{"alg":"HS256","typ":"JWT"}`
	// maxTokenBytes caps a token before any decoding.
	maxTokenBytes = 4 << 10
)

// ErrInvalidToken is what VerifyInternalToken returns, wrapped with a fixed
// reason that never quotes the token.
var ErrInvalidToken = errors.New("invalid InternalControl token")

// InternalClaims are what a verified InternalControl token asserts. Issuer
// and Audience are not repeated: verification requires them to be the
// package constants.
type InternalClaims struct {
	IssuedAt time.Time
	Expiry   time.Time
	ID       string // jti; empty when the token carries none
}

// internalClaims is the payload in the order HCC writes it.
type internalClaims struct {
	Issuer   string `json:"iss"`
	Audience string `json:"aud"`
	IssuedAt int64  `json:"iat"`
	Expiry   int64  `json:"exp"`
	ID       string `json:"jti"`
}

// SignInternalToken returns a compact HS256 JWT with header
// {"alg":"HS256","typ":"JWT"} and claims iss Issuer, aud Audience, iat now,
// exp now + ttl and a random jti. ttl is truncated to whole seconds and must
// be between 1 s and MaxTokenTTL, so exp - iat never exceeds the bound
// whatever fraction of a second now carries.
func SignInternalToken(secret []byte, now time.Time, ttl time.Duration) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("controlapi: empty HMAC secret")
	}
	seconds := int64(ttl / time.Second)
	if seconds < 1 || ttl > MaxTokenTTL {
		return "", fmt.Errorf("controlapi: token lifetime %s outside [1s, %s]", ttl, MaxTokenTTL)
	}
	// The jti lets a Control API that keeps recent ids refuse a replay
	// within the token's minute.
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", fmt.Errorf("controlapi: token id: %w", err)
	}
	iat := now.Unix()
	payload, err := json.Marshal(internalClaims{
		Issuer:   Issuer,
		Audience: Audience,
		IssuedAt: iat,
		Expiry:   iat + seconds,
		ID:       base64.RawURLEncoding.EncodeToString(id),
	})
	if err != nil {
		return "", fmt.Errorf("controlapi: token claims: %w", err)
	}
	signingInput := base64.RawURLEncoding.EncodeToString([]byte(tokenHeader)) + "." +
		base64.RawURLEncoding.EncodeToString(payload)
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(hs256(secret, signingInput)), nil
}

// VerifyInternalToken checks raw as the Control API must: a compact JWS of
// three canonical unpadded base64url segments; a header of alg "HS256"
// (none and every other algorithm refused before any signature work) and
// optionally typ "JWT", nothing else; an HMAC-SHA256 signature under secret;
// iss Issuer; aud Audience (a string or a one-element array); numeric iat
// and exp with 0 < exp - iat <= MaxTokenTTL; not expired, not issued in the
// future and, when nbf is present, not before it, each within
// TokenClockSkew of now. JSON objects with duplicate member names are
// refused. Every error wraps ErrInvalidToken.
func VerifyInternalToken(raw string, secret []byte, now time.Time) (InternalClaims, error) {
	if len(secret) == 0 {
		// HMAC under an empty key is a signature anyone can make.
		return InternalClaims{}, invalidToken("no secret to verify with")
	}
	if raw == "" || len(raw) > maxTokenBytes {
		return InternalClaims{}, invalidToken("empty or oversized")
	}
	segments := strings.Split(raw, ".")
	if len(segments) != 3 {
		return InternalClaims{}, invalidToken("not a compact JWS")
	}
	decoded := make([][]byte, 3)
	for i, s := range segments {
		b, ok := base64url.DecodeCanonical(s)
		if !ok {
			return InternalClaims{}, invalidToken("segment not canonical base64url")
		}
		decoded[i] = b
	}
	if err := checkTokenHeader(decoded[0]); err != nil {
		return InternalClaims{}, err
	}
	if !hmac.Equal(decoded[2], hs256(secret, segments[0]+"."+segments[1])) {
		return InternalClaims{}, invalidToken("signature")
	}
	return checkTokenClaims(decoded[1], now)
}

func checkTokenHeader(header []byte) error {
	members, err := strictjson.Object(header)
	if err != nil {
		return invalidToken("header not a JSON object")
	}
	if alg, ok := strictjson.String(members["alg"]); !ok || alg != "HS256" {
		return invalidToken("algorithm not HS256")
	}
	for name, value := range members {
		switch name {
		case "alg":
		case "typ":
			if typ, ok := strictjson.String(value); !ok || typ != "JWT" {
				return invalidToken("typ not JWT")
			}
		default:
			// kid, crit, jku, jwk, b64 and the rest: one shared secret
			// needs none of them, and honouring any would change what is
			// verified.
			return invalidToken("unexpected header parameter")
		}
	}
	return nil
}

func checkTokenClaims(payload []byte, now time.Time) (InternalClaims, error) {
	claims, err := strictjson.Object(payload)
	if err != nil {
		return InternalClaims{}, invalidToken("claims not a JSON object")
	}
	if iss, ok := strictjson.String(claims["iss"]); !ok || iss != Issuer {
		return InternalClaims{}, invalidToken("issuer")
	}
	if !audienceIs(claims["aud"], Audience) {
		return InternalClaims{}, invalidToken("audience")
	}
	iat, okIat := numericDate(claims["iat"])
	exp, okExp := numericDate(claims["exp"])
	if !okIat || !okExp || !exp.After(iat) || exp.Sub(iat) > MaxTokenTTL {
		return InternalClaims{}, invalidToken("lifetime")
	}
	if !now.Before(exp.Add(TokenClockSkew)) {
		return InternalClaims{}, invalidToken("expired")
	}
	if iat.After(now.Add(TokenClockSkew)) {
		return InternalClaims{}, invalidToken("issued in the future")
	}
	if raw, ok := claims["nbf"]; ok {
		nbf, ok := numericDate(raw)
		if !ok || nbf.After(now.Add(TokenClockSkew)) {
			return InternalClaims{}, invalidToken("not yet valid")
		}
	}
	var id string
	if raw, ok := claims["jti"]; ok {
		if id, ok = strictjson.String(raw); !ok {
			return InternalClaims{}, invalidToken("jti not a string")
		}
	}
	return InternalClaims{IssuedAt: iat, Expiry: exp, ID: id}, nil
}

func invalidToken(reason string) error {
	return fmt.Errorf("%w: %s", ErrInvalidToken, reason)
}

func hs256(secret []byte, signingInput string) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signingInput))
	return mac.Sum(nil)
}

// audienceIs reports whether aud is exactly {want}: the string itself or a
// one-element array of it (RFC 7519 §4.1.3).
func audienceIs(raw json.RawMessage, want string) bool {
	if s, ok := strictjson.String(raw); ok {
		return s == want
	}
	if len(raw) == 0 || raw[0] != '[' {
		return false
	}
	var set []json.RawMessage
	if json.Unmarshal(raw, &set) != nil || len(set) != 1 {
		return false
	}
	s, ok := strictjson.String(set[0])
	return ok && s == want
}

// numericDate decodes a present JSON number of seconds since the epoch.
func numericDate(raw json.RawMessage) (time.Time, bool) {
	if len(raw) == 0 {
		return time.Time{}, false
	}
	// Only a number: json.Unmarshal would also take null as zero.
	var f float64
	if c := raw[0]; (c < '0' || c > '9') && c != '-' || json.Unmarshal(raw, &f) != nil {
		return time.Time{}, false
	}
	// The upper bound keeps the conversion exact enough and far from
	// overflow; no legitimate token is dated after year 5000.
	if f < 0 || f > 1e11 || math.IsNaN(f) {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}
