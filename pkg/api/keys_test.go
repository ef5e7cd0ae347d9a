package api

import (
	"crypto"
	"crypto/rsa"
	"encoding/base64"
	"math/big"
	"net/http"
	"testing"

	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/pkg/config"
)

func TestKeyIDIsTheRFC7638Thumbprint(t *testing.T) {
	t.Run("of the example key of RFC 7638 section 3.1", func(t *testing.T) {
		n, err := base64.RawURLEncoding.DecodeString("0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw")
		require.NoError(t, err)
		key := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: 65537}
		assert.Equal(t, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs", KeyID(key))
	})
	t.Run("as jwx computes it", func(t *testing.T) {
		for _, k := range []*rsa.PrivateKey{issuerKey, otherKey, nextIssuerKey(t)} {
			j, err := jwk.FromRaw(&k.PublicKey)
			require.NoError(t, err)
			sum, err := j.Thumbprint(crypto.SHA256)
			require.NoError(t, err)
			assert.Equal(t, base64.RawURLEncoding.EncodeToString(sum), KeyID(&k.PublicKey))
		}
	})
}

// rotationRules are the token rules of a replica in the middle of a key
// rotation: the issuer's current key and its next one, in that order.
func rotationRules(t *testing.T, order ...*rsa.PrivateKey) tokenRules {
	auth := hostAuth(t)
	auth.PublicKeys = nil
	for _, k := range order {
		auth.PublicKeys = append(auth.PublicKeys, &k.PublicKey)
	}
	return newTokenRules(auth)
}

func TestTokensVerifyUnderEveryConfiguredKey(t *testing.T) {
	current, stranger := keys(t)
	next := nextIssuerKey(t)
	kid := func(k *rsa.PrivateKey) jsonObject { return jsonObject{"alg": "RS256", "kid": KeyID(&k.PublicKey)} }
	noKid := rs256Header()
	cases := []struct {
		name   string
		header jsonObject
		signer *rsa.PrivateKey
		want   error
	}{
		{"the current key without a kid", noKid, current, nil},
		{"the next key without a kid", noKid, next, nil},
		{"the current key naming itself", kid(current), current, nil},
		{"the next key naming itself", kid(next), next, nil},
		{"a third key without a kid", noKid, stranger, failSignature},
		{"a third key naming itself", kid(stranger), stranger, failUnknownKeyID},
		{"a third key naming the current key", kid(current), stranger, failSignature},
		// Only the key a kid names is tried: these signatures are good
		// under the other configured key, and still fail.
		{"the next key naming the current key", kid(current), next, failSignature},
		{"the current key naming the next key", kid(next), current, failSignature},
	}
	for _, order := range [][]*rsa.PrivateKey{{current, next}, {next, current}} {
		rules := rotationRules(t, order...)
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				raw := signCompact(t, mustJSON(t, tc.header), mustJSON(t, claimsFor("host-a", "uid-a", t0)), "RS256", tc.signer, nil)
				claims, err := verifyHostToken(raw, rules, t0)
				if tc.want != nil {
					assert.Equal(t, tc.want, err)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, "host-a", claims.HostRef)
			})
		}
	}
}

func TestTheAPIAcceptsTokensOfEitherKeyDuringARotation(t *testing.T) {
	current, stranger := keys(t)
	next := nextIssuerKey(t)
	h := newHarness(t, standardWorld(t), func(o *Options) {
		o.HostAuth.PublicKeys = []*rsa.PublicKey{&current.PublicKey, &next.PublicKey}
	})
	for name, signer := range map[string]*rsa.PrivateKey{"current": current, "next": next} {
		raw := signCompact(t, mustJSON(t, rs256Header()), mustJSON(t, claimsFor("host-a", "uid-a", t0)), "RS256", signer, nil)
		assert.Equal(t, http.StatusOK, h.inventory(raw).Code, name)
	}
	raw := signCompact(t, mustJSON(t, rs256Header()), mustJSON(t, claimsFor("host-a", "uid-a", t0)), "RS256", stranger, nil)
	rec := h.inventory(raw)
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
	assert.Equal(t, `{"error":"unauthorized"}`, rec.Body.String())
}

func TestVerificationKeysKeepTheConfiguredOrder(t *testing.T) {
	current, _ := keys(t)
	next := nextIssuerKey(t)
	got := verificationKeys(config.HostAuth{PublicKeys: []*rsa.PublicKey{&next.PublicKey, &current.PublicKey}}.PublicKeys)
	require.Len(t, got, 2)
	assert.Equal(t, KeyID(&next.PublicKey), got[0].kid)
	assert.Equal(t, KeyID(&current.PublicKey), got[1].kid)
}
