package api

import (
	"encoding/json"
	"math"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jws"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/clerum/hcc/pkg/base64url"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/strictjson"
)

const (
	// maxTokenBytes caps a bearer token before any decoding, so parsing
	// cost is bounded by a constant. The server's header limit sits well
	// above it so an oversized token still reaches the handler and gets
	// the uniform 401 instead of a transport error.
	maxTokenBytes = 8 << 10
	// clockSkew is how far the clocks of the Control API and this replica
	// may disagree when exp, iat and nbf are checked.
	clockSkew = 30 * time.Second
	// capabilityCredentialRead is the single capability a token must carry.
	capabilityCredentialRead = "mcp:credential:read"
)

// HostClaims are what a verified token asserts: which Host presents it,
// under which UID, until when.
type HostClaims struct {
	HostRef string
	HostUID types.UID
	Expiry  time.Time
}

// TokenVerifier verifies a raw bearer token against the token rules of
// docs/http-api.md. Every error is a failure, whose value names the cause
// for logs and metrics and never reaches the client.
type TokenVerifier interface {
	VerifyHostToken(raw string) (HostClaims, error)
}

// failure is why a request was refused. Its value is a metric label, so
// the set is closed: the constants below.
type failure string

func (f failure) Error() string { return string(f) }

const (
	failNoToken         failure = "no_token"
	failOversized       failure = "oversized"
	failMalformed       failure = "malformed"
	failHeader          failure = "header"
	failAlgorithm       failure = "algorithm"
	failUnknownKeyID    failure = "unknown_kid"
	failSignature       failure = "signature"
	failIssuer          failure = "issuer"
	failAudience        failure = "audience"
	failExpired         failure = "expired"
	failNotYetValid     failure = "not_yet_valid"
	failLifetime        failure = "lifetime"
	failHostRefs        failure = "host_refs"
	failHostUIDClaim    failure = "host_uid_claim"
	failCapabilities    failure = "capabilities"
	failHostMissing     failure = "host_missing"
	failHostUIDMismatch failure = "host_uid_mismatch"
	failContextMissing  failure = "context_missing"
	failDevMode         failure = "dev_mode"
)

// failures lists every failure so their metric series exist from the start.
var failures = []failure{
	failNoToken, failOversized, failMalformed, failHeader, failAlgorithm,
	failUnknownKeyID, failSignature, failIssuer, failAudience, failExpired,
	failNotYetValid, failLifetime, failHostRefs, failHostUIDClaim,
	failCapabilities, failHostMissing, failHostUIDMismatch,
	failContextMissing, failDevMode,
}

// refusedHeaders are protected header parameters a token must not carry:
// crit names extensions this verifier does not implement (RFC 7515 §4.1.11
// requires rejecting them), b64 changes what the signature covers, and the
// rest offer key material or key locations. The configured public keys
// are the only keys ever used, so a token that points elsewhere is refused
// rather than silently accepted under a key it did not ask for. kid is
// allowed: it names one of the configured keys (see keysFor).
var refusedHeaders = []string{"crit", "b64", "jku", "jwk", "x5u", "x5c"}

// tokenRules are the verification parameters of docs/http-api.md.
type tokenRules struct {
	keys              []verificationKey
	issuer            string
	audience          string
	migrationAudience string
	maxTTL            time.Duration
}

func newTokenRules(auth config.HostAuth) tokenRules {
	return tokenRules{
		keys:              verificationKeys(auth.PublicKeys),
		issuer:            auth.Issuer,
		audience:          auth.Audience,
		migrationAudience: auth.MigrationAudience,
		maxTTL:            auth.MaxTTL,
	}
}

// rs256Verifier verifies every token in full.
type rs256Verifier struct {
	rules tokenRules
	clock clock.PassiveClock
}

var _ TokenVerifier = (*rs256Verifier)(nil)

func (v *rs256Verifier) VerifyHostToken(raw string) (HostClaims, error) {
	return verifyHostToken(raw, v.rules, v.clock.Now())
}

// verifyHostToken checks raw at time now. jwx alone is not enough: given a
// key it verifies with that key's algorithm whatever the header says, it
// accepts the JSON serialization and unknown crit parameters, and it
// decodes base64 leniently. So the shape, the encoding and the header are
// checked here first, jwx verifies only the signature, and every claim
// rule is applied here to the signed payload.
func verifyHostToken(raw string, rules tokenRules, now time.Time) (HostClaims, error) {
	if raw == "" {
		return HostClaims{}, failNoToken
	}
	if len(raw) > maxTokenBytes {
		return HostClaims{}, failOversized
	}
	header, ok := compactHeader(raw)
	if !ok {
		return HostClaims{}, failMalformed
	}
	kid, err := checkHeader(header)
	if err != nil {
		return HostClaims{}, err
	}
	keys, err := rules.keysFor(kid)
	if err != nil {
		return HostClaims{}, err
	}
	// jwx parses the token once and tries the keys in order.
	options := make([]jws.VerifyOption, 0, len(keys))
	for _, k := range keys {
		options = append(options, jws.WithKey(jwa.RS256, k.key))
	}
	payload, err := jws.Verify([]byte(raw), options...)
	if err != nil {
		return HostClaims{}, failSignature
	}
	return checkClaims(payload, rules, now)
}

// compactHeader returns the decoded protected header of raw if raw is a
// compact serialization: exactly three non-empty segments, each canonical
// unpadded base64url. Anything else (JSON serialization, JWE, padding,
// whitespace) is not a token this API accepts.
func compactHeader(raw string) ([]byte, bool) {
	segments := strings.Split(raw, ".")
	if len(segments) != 3 {
		return nil, false
	}
	var header []byte
	for i, s := range segments {
		// One spelling per token: jwx signs over its own re-encoding, so
		// each lenient spelling would cost an RSA verification and a
		// token-cache slot.
		decoded, ok := base64url.DecodeCanonical(s)
		if !ok {
			return nil, false
		}
		if i == 0 {
			header = decoded
		}
	}
	return header, true
}

// checkHeader requires alg RS256 before any signature work, refuses the
// parameters of refusedHeaders, and returns the kid member, nil when
// absent. typ is ignored.
func checkHeader(header []byte) (json.RawMessage, error) {
	members, err := strictjson.Object(header)
	if err != nil {
		return nil, failMalformed
	}
	var alg string
	if json.Unmarshal(members["alg"], &alg) != nil || alg != string(jwa.RS256) {
		return nil, failAlgorithm
	}
	for _, name := range refusedHeaders {
		if _, ok := members[name]; ok {
			return nil, failHeader
		}
	}
	return members["kid"], nil
}

// checkClaims applies the claim rules of docs/http-api.md to a verified
// payload.
func checkClaims(payload []byte, rules tokenRules, now time.Time) (HostClaims, error) {
	claims, err := strictjson.Object(payload)
	if err != nil {
		return HostClaims{}, failMalformed
	}

	var iss string
	if json.Unmarshal(claims["iss"], &iss) != nil || iss != rules.issuer {
		return HostClaims{}, failIssuer
	}
	if !audienceAccepted(claims["aud"], rules.audience, rules.migrationAudience) {
		return HostClaims{}, failAudience
	}

	exp, okExp := numericDate(claims["exp"])
	iat, okIat := numericDate(claims["iat"])
	if !okExp || !okIat || !exp.After(iat) || exp.Sub(iat) > rules.maxTTL {
		return HostClaims{}, failLifetime
	}
	if !now.Before(exp.Add(clockSkew)) {
		return HostClaims{}, failExpired
	}
	if iat.After(now.Add(clockSkew)) {
		return HostClaims{}, failNotYetValid
	}
	if raw, ok := claims["nbf"]; ok {
		nbf, ok := numericDate(raw)
		if !ok {
			return HostClaims{}, failLifetime
		}
		if nbf.After(now.Add(clockSkew)) {
			return HostClaims{}, failNotYetValid
		}
	}

	var hostRefs []string
	if json.Unmarshal(claims["hostRefs"], &hostRefs) != nil || len(hostRefs) != 1 || hostRefs[0] == "" {
		return HostClaims{}, failHostRefs
	}
	var hostUID string
	if json.Unmarshal(claims["host_uid"], &hostUID) != nil || hostUID == "" {
		return HostClaims{}, failHostUIDClaim
	}
	var capabilities []string
	if json.Unmarshal(claims["capabilities"], &capabilities) != nil ||
		len(capabilities) != 1 || capabilities[0] != capabilityCredentialRead {
		return HostClaims{}, failCapabilities
	}
	return HostClaims{HostRef: hostRefs[0], HostUID: types.UID(hostUID), Expiry: exp}, nil
}

// audienceAccepted reports whether aud is exactly {audience} or exactly
// {audience, migration}. A single string is the one-element set (RFC 7519
// §4.1.3); duplicates, supersets and the migration audience alone fail.
func audienceAccepted(raw json.RawMessage, audience, migration string) bool {
	var single string
	if json.Unmarshal(raw, &single) == nil {
		return single == audience
	}
	var set []string
	if json.Unmarshal(raw, &set) != nil {
		return false
	}
	switch len(set) {
	case 1:
		return set[0] == audience
	case 2:
		return set[0] != set[1] &&
			(set[0] == audience || set[1] == audience) &&
			(set[0] == migration || set[1] == migration)
	}
	return false
}

// numericDate decodes a present JSON number of seconds since the epoch.
// Strings, null and absent values are not dates.
func numericDate(raw json.RawMessage) (time.Time, bool) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return time.Time{}, false
	}
	f, ok := v.(float64)
	// The upper bound keeps the conversion to nanoseconds exact enough and
	// far from overflow; no legitimate token is dated after year 5000.
	if !ok || f < 0 || f > 1e11 || math.IsNaN(f) {
		return time.Time{}, false
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}
