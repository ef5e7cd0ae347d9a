package api

import (
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"github.com/clerum/hcc/pkg/strictjson"
	"math/big"
)

// verificationKey is one configured token key and the kid that names it.
type verificationKey struct {
	kid string
	key *rsa.PublicKey
}

// verificationKeys pairs each configured key with its kid, in the order of
// HCC_MCP_HOST_JWT_PUBLIC_KEY. The configuration refuses repeated keys, so
// kids are unique.
func verificationKeys(keys []*rsa.PublicKey) []verificationKey {
	out := make([]verificationKey, 0, len(keys))
	for _, k := range keys {
		out = append(out, verificationKey{kid: KeyID(k), key: k})
	}
	return out
}

// KeyID is the kid a token names key by: its RFC 7638 JWK thumbprint,
// the unpadded base64url SHA-256 of {"e":…,"kty":"RSA","n":…}. Both
// members are base64url, so the JSON needs no escaping, and the required
// members in lexicographic order are the whole canonical form.
func KeyID(key *rsa.PublicKey) string {
	e := big.NewInt(int64(key.E)).Bytes()
	jwk := `{"e":"` + base64.RawURLEncoding.EncodeToString(e) +
		`","kty":"RSA","n":"` + base64.RawURLEncoding.EncodeToString(key.N.Bytes()) + `"}`
	sum := sha256.Sum256([]byte(jwk))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// keysFor returns the keys a token whose header holds kid (nil when
// absent) is tried against. A kid names exactly one configured key; a
// token without one is tried against each key in turn, which the
// rotation procedure of docs/http-api.md relies on.
//
// An unknown kid is refused rather than tried against every key: the
// issuer says the token was signed by a key this replica does not hold,
// and accepting it under another key would hide that disagreement (a
// rotation step taken too early) behind a token that happens to verify.
// It also bounds the RSA work of a token with a kid to one verification.
func (r tokenRules) keysFor(kid json.RawMessage) ([]verificationKey, error) {
	if kid == nil {
		return r.keys, nil
	}
	name, ok := strictjson.String(kid)
	if !ok {
		return nil, failHeader
	}
	for i := range r.keys {
		if r.keys[i].kid == name {
			return r.keys[i : i+1], nil
		}
	}
	return nil, failUnknownKeyID
}
