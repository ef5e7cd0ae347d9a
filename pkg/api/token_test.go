package api

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// attack is one request that must be refused with the uniform 401.
type attack struct {
	name string
	// reason is the failure the metric must record: proof that the token
	// was refused for the flaw it carries and not by accident.
	reason failure
	// setup may change the world; it returns the Authorization header
	// values to send (none, one or several).
	setup func(t *testing.T, h *harness) []string
}

// bearer wraps one token as the only Authorization header.
func bearer(token string) []string { return []string{"Bearer " + token} }

// withClaims returns a setup signing host-a's valid claims, changed by
// edit, with the issuer key under RS256.
func withClaims(edit func(c jsonObject, now time.Time)) func(*testing.T, *harness) []string {
	return func(t *testing.T, h *harness) []string {
		c := claimsFor("host-a", "uid-a", h.clock.Now())
		edit(c, h.clock.Now())
		return bearer(sign(t, rs256Header(), c))
	}
}

// withHeader returns a setup signing host-a's valid claims under header,
// with alg algorithm and the given key (nil: the issuer key).
func withHeader(header jsonObject, alg string, other bool) func(*testing.T, *harness) []string {
	return func(t *testing.T, h *harness) []string {
		key, attackerKey := keys(t)
		if other {
			key = attackerKey
		}
		c := claimsFor("host-a", "uid-a", h.clock.Now())
		return bearer(signCompact(t, mustJSON(t, header), mustJSON(t, c), alg, key, nil))
	}
}

func publicKeyPEM(t *testing.T) []byte {
	key, _ := keys(t)
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func attacks() []attack {
	return []attack{
		{"alg none without a signature", failMalformed, func(t *testing.T, h *harness) []string {
			c := claimsFor("host-a", "uid-a", h.clock.Now())
			return bearer(signCompact(t, mustJSON(t, jsonObject{"alg": "none"}), mustJSON(t, c), "none", nil, nil))
		}},
		{"alg none with a signature", failAlgorithm, func(t *testing.T, h *harness) []string {
			c := claimsFor("host-a", "uid-a", h.clock.Now())
			return bearer(signCompact(t, mustJSON(t, jsonObject{"alg": "none"}), mustJSON(t, c), "none", nil, nil) + "c2ln")
		}},
		{"HS256 keyed with the public key PEM", failAlgorithm, func(t *testing.T, h *harness) []string {
			c := claimsFor("host-a", "uid-a", h.clock.Now())
			return bearer(signCompact(t, mustJSON(t, jsonObject{"alg": "HS256", "typ": "JWT"}), mustJSON(t, c), "HS256", nil, publicKeyPEM(t)))
		}},
		{"HS256 keyed with the public key DER", failAlgorithm, func(t *testing.T, h *harness) []string {
			key, _ := keys(t)
			der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
			require.NoError(t, err)
			c := claimsFor("host-a", "uid-a", h.clock.Now())
			return bearer(signCompact(t, mustJSON(t, jsonObject{"alg": "HS256"}), mustJSON(t, c), "HS256", nil, der))
		}},
		{"RS512 header and signature by the issuer key", failAlgorithm, withHeader(jsonObject{"alg": "RS512"}, "RS512", false)},
		{"PS256 header and signature by the issuer key", failAlgorithm, withHeader(jsonObject{"alg": "PS256"}, "PS256", false)},
		{"valid RS256 signature under an HS256 header", failAlgorithm, withHeader(jsonObject{"alg": "HS256"}, "RS256", false)},
		{"lower-case rs256", failAlgorithm, withHeader(jsonObject{"alg": "rs256"}, "RS256", false)},
		{"alg missing", failAlgorithm, withHeader(jsonObject{"typ": "JWT"}, "RS256", false)},
		{"JSON flattened serialization of a valid token", failMalformed, func(t *testing.T, h *harness) []string {
			parts := strings.Split(h.token("host-a", "uid-a"), ".")
			return bearer(string(mustJSON(t, jsonObject{"protected": parts[0], "payload": parts[1], "signature": parts[2]})))
		}},
		{"JSON general serialization of a valid token", failMalformed, func(t *testing.T, h *harness) []string {
			parts := strings.Split(h.token("host-a", "uid-a"), ".")
			return bearer(string(mustJSON(t, jsonObject{"payload": parts[1], "signatures": []jsonObject{{"protected": parts[0], "signature": parts[2]}}})))
		}},
		{"signed by another key", failSignature, withHeader(rs256Header(), "RS256", true)},
		{"payload swapped after signing", failSignature, func(t *testing.T, h *harness) []string {
			parts := strings.Split(h.token("host-a", "uid-a"), ".")
			other := strings.Split(h.token("host-b", "uid-b"), ".")
			return bearer(parts[0] + "." + other[1] + "." + parts[2])
		}},
		{"padded base64", failMalformed, func(t *testing.T, h *harness) []string {
			parts := strings.Split(h.token("host-a", "uid-a"), ".")
			return bearer(parts[0] + "=." + parts[1] + "." + parts[2])
		}},
		{"five segments (JWE shape)", failMalformed, func(t *testing.T, h *harness) []string {
			return bearer(h.token("host-a", "uid-a") + ".e30.e30")
		}},
		{"wrong issuer", failIssuer, withClaims(func(c jsonObject, _ time.Time) { c["iss"] = "evil-api" })},
		{"no issuer", failIssuer, withClaims(func(c jsonObject, _ time.Time) { delete(c, "iss") })},
		{"audience superset", failAudience, withClaims(func(c jsonObject, _ time.Time) { c["aud"] = []string{audience, migrationAud, "other"} })},
		{"foreign audience", failAudience, withClaims(func(c jsonObject, _ time.Time) { c["aud"] = "gfs-controller" })},
		{"migration partner alone", failAudience, withClaims(func(c jsonObject, _ time.Time) { c["aud"] = migrationAud })},
		{"migration partner alone in an array", failAudience, withClaims(func(c jsonObject, _ time.Time) { c["aud"] = []string{migrationAud} })},
		{"audience listed twice", failAudience, withClaims(func(c jsonObject, _ time.Time) { c["aud"] = []string{audience, audience} })},
		{"no audience", failAudience, withClaims(func(c jsonObject, _ time.Time) { delete(c, "aud") })},
		{"expired beyond the skew", failExpired, withClaims(func(c jsonObject, now time.Time) {
			c["iat"], c["exp"] = now.Add(-5*time.Minute).Unix(), now.Add(-31*time.Second).Unix()
		})},
		{"iat in the future", failNotYetValid, withClaims(func(c jsonObject, now time.Time) {
			c["iat"], c["exp"] = now.Add(time.Minute).Unix(), now.Add(5*time.Minute).Unix()
		})},
		{"nbf in the future", failNotYetValid, withClaims(func(c jsonObject, now time.Time) { c["nbf"] = now.Add(time.Minute).Unix() })},
		{"nbf not a number", failLifetime, withClaims(func(c jsonObject, now time.Time) { c["nbf"] = "0" })},
		{"TTL over the maximum", failLifetime, withClaims(func(c jsonObject, now time.Time) { c["exp"] = now.Add(601 * time.Second).Unix() })},
		{"exp before iat", failLifetime, withClaims(func(c jsonObject, now time.Time) { c["exp"] = now.Add(-time.Second).Unix() })},
		{"no exp", failLifetime, withClaims(func(c jsonObject, _ time.Time) { delete(c, "exp") })},
		{"no iat", failLifetime, withClaims(func(c jsonObject, _ time.Time) { delete(c, "iat") })},
		{"exp as a string", failLifetime, withClaims(func(c jsonObject, now time.Time) { c["exp"] = "9999999999" })},
		{"zero hostRefs", failHostRefs, withClaims(func(c jsonObject, _ time.Time) { c["hostRefs"] = []string{} })},
		{"two hostRefs", failHostRefs, withClaims(func(c jsonObject, _ time.Time) { c["hostRefs"] = []string{"host-a", "host-b"} })},
		{"hostRefs as a string", failHostRefs, withClaims(func(c jsonObject, _ time.Time) { c["hostRefs"] = "host-a" })},
		{"no host_uid", failHostUIDClaim, withClaims(func(c jsonObject, _ time.Time) { delete(c, "host_uid") })},
		{"wrong host_uid", failHostUIDMismatch, withClaims(func(c jsonObject, _ time.Time) { c["host_uid"] = "uid-b" })},
		{"extra capability", failCapabilities, withClaims(func(c jsonObject, _ time.Time) {
			c["capabilities"] = []string{capabilityCredentialRead, "mcp:credential:write"}
		})},
		{"missing capability", failCapabilities, withClaims(func(c jsonObject, _ time.Time) { delete(c, "capabilities") })},
		{"empty capabilities", failCapabilities, withClaims(func(c jsonObject, _ time.Time) { c["capabilities"] = []string{} })},
		{"different capability", failCapabilities, withClaims(func(c jsonObject, _ time.Time) { c["capabilities"] = []string{"mcp:tools:call"} })},
		{"duplicate claim names", failMalformed, func(t *testing.T, h *harness) []string {
			key, _ := keys(t)
			payload := strings.Replace(string(mustJSON(t, claimsFor("host-a", "uid-a", h.clock.Now()))), `{`, `{"iss":"evil-api",`, 1)
			return bearer(signCompact(t, mustJSON(t, rs256Header()), []byte(payload), "RS256", key, nil))
		}},
		{"unknown crit header", failHeader, withHeader(jsonObject{"alg": "RS256", "crit": []string{"exp-policy"}, "exp-policy": 1}, "RS256", false)},
		{"b64 false header", failHeader, withHeader(jsonObject{"alg": "RS256", "b64": false, "crit": []string{"b64"}}, "RS256", false)},
		{"kid injection with another key", failUnknownKeyID, withHeader(jsonObject{"alg": "RS256", "kid": "../../../dev/null"}, "RS256", true)},
		{"kid injection with the issuer key", failUnknownKeyID, withHeader(jsonObject{"alg": "RS256", "kid": "control-api-2026"}, "RS256", false)},
		{"kid of the issuer key on a token signed by another key", failSignature, func(t *testing.T, h *harness) []string {
			return withHeader(jsonObject{"alg": "RS256", "kid": issuerKeyID(t)}, "RS256", true)(t, h)
		}},
		{"kid not a string", failHeader, withHeader(jsonObject{"alg": "RS256", "kid": 1}, "RS256", false)},
		{"kid null", failHeader, withHeader(jsonObject{"alg": "RS256", "kid": nil}, "RS256", false)},
		{"payload with non-zero trailing bits", failMalformed, func(t *testing.T, h *harness) []string {
			parts := strings.Split(tokenWithTrailingBits(t, h.clock.Now()), ".")
			parts[1] = nonCanonicalSpellings(t, parts[1])[0]
			return bearer(strings.Join(parts, "."))
		}},
		{"signature with non-zero trailing bits", failMalformed, func(t *testing.T, h *harness) []string {
			parts := strings.Split(tokenWithTrailingBits(t, h.clock.Now()), ".")
			parts[2] = nonCanonicalSpellings(t, parts[2])[0]
			return bearer(strings.Join(parts, "."))
		}},
		{"jku injection with another key", failHeader, withHeader(jsonObject{"alg": "RS256", "jku": "https://evil.example/jwks.json"}, "RS256", true)},
		{"jku injection with the issuer key", failHeader, withHeader(jsonObject{"alg": "RS256", "jku": "https://evil.example/jwks.json"}, "RS256", false)},
		{"x5u injection with another key", failHeader, withHeader(jsonObject{"alg": "RS256", "x5u": "https://evil.example/cert.pem"}, "RS256", true)},
		{"embedded jwk of another key", failHeader, func(t *testing.T, h *harness) []string {
			_, attacker := keys(t)
			jwk := jsonObject{"kty": "RSA", "n": b64(attacker.N.Bytes()), "e": "AQAB"}
			c := claimsFor("host-a", "uid-a", h.clock.Now())
			return bearer(signCompact(t, mustJSON(t, jsonObject{"alg": "RS256", "jwk": jwk}), mustJSON(t, c), "RS256", attacker, nil))
		}},
		{"oversized but otherwise valid token", failOversized, withClaims(func(c jsonObject, _ time.Time) { c["padding"] = strings.Repeat("x", maxTokenBytes) })},
		{"garbage", failMalformed, func(*testing.T, *harness) []string { return bearer("not-a-token") }},
		{"empty segments", failMalformed, func(*testing.T, *harness) []string { return bearer("..") }},
		{"no Authorization header", failNoToken, func(*testing.T, *harness) []string { return nil }},
		{"empty bearer", failNoToken, func(*testing.T, *harness) []string { return []string{"Bearer "} }},
		{"Basic scheme", failNoToken, func(*testing.T, *harness) []string { return []string{"Basic aG9zdDpwYXNz"} }},
		{"two Authorization headers", failNoToken, func(t *testing.T, h *harness) []string {
			tok := h.token("host-a", "uid-a")
			return []string{"Bearer " + tok, "Bearer " + tok}
		}},
		{"deleted Host", failHostMissing, func(t *testing.T, h *harness) []string {
			tok := h.token("host-a", "uid-a")
			remove(t, h.world.hosts, newHost("host-a", "uid-a", "ctx-a"))
			return bearer(tok)
		}},
		{"Host recreated with a new UID", failHostUIDMismatch, func(t *testing.T, h *harness) []string {
			tok := h.token("host-a", "uid-a")
			// A valid request first, so the token is in the cache: the
			// recreated Host must be refused on the cached path too.
			require.Equal(t, http.StatusOK, h.inventory(tok).Code)
			put(t, h.world.hosts, newHost("host-a", "uid-a2", "ctx-a"))
			return bearer(tok)
		}},
		{"Host being deleted", failHostMissing, func(t *testing.T, h *harness) []string {
			host := newHost("host-a", "uid-a", "ctx-a")
			host.DeletionTimestamp = &metav1.Time{Time: t0}
			host.Finalizers = []string{"example.com/hold"}
			put(t, h.world.hosts, host)
			return bearer(h.token("host-a", "uid-a"))
		}},
		{"Host's Context missing", failContextMissing, func(t *testing.T, h *harness) []string {
			put(t, h.world.hosts, newHost("host-a", "uid-a", "no-such-context"))
			return bearer(h.token("host-a", "uid-a"))
		}},
		{"Host's Context ignored for a contextId conflict", failContextMissing, func(t *testing.T, h *harness) []string {
			ctx := newContext("ctx-a", "alpha")
			ctx.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionContextIDConflict, Status: metav1.ConditionTrue}}
			put(t, h.world.contexts, ctx)
			return bearer(h.token("host-a", "uid-a"))
		}},
	}
}

func TestEveryAttackGetsTheSame401(t *testing.T) {
	require.GreaterOrEqual(t, len(attacks()), 25)
	for _, route := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v2/hosts/self/mcpservers", ""},
		{http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", `{"serverName":"alpha"}`},
	} {
		var want http.Header
		for _, a := range attacks() {
			t.Run(route.method+" "+a.name, func(t *testing.T) {
				w := standardWorld(t)
				h := newHarness(t, w)
				authz := a.setup(t, h)
				w.secretReads.Store(0) // a setup may have made valid requests
				before := h.authFailures(a.reason)

				r := httptest.NewRequest(route.method, route.path, strings.NewReader(route.body))
				for _, v := range authz {
					r.Header.Add("Authorization", v)
				}
				rec := httptest.NewRecorder()
				h.handler.ServeHTTP(rec, r)

				assert.Equal(t, http.StatusUnauthorized, rec.Code)
				assert.Equal(t, `{"error":"unauthorized"}`, rec.Body.String())
				if want == nil {
					want = rec.Header().Clone()
				}
				assert.Equal(t, want, rec.Header(), "headers differ between causes")
				assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
				assert.Equal(t, before+1, h.authFailures(a.reason), "refused for another reason than %s", a.reason)
				assert.Zero(t, w.secretReads.Load(), "a refused request read a Secret")
			})
		}
	}
}

func TestValidTokenVariantsAreAccepted(t *testing.T) {
	cases := []struct {
		name   string
		header jsonObject
		edit   func(c jsonObject, now time.Time)
	}{
		{"single-string HCC audience", rs256Header(), func(jsonObject, time.Time) {}},
		{"HCC audience in a one-element array", rs256Header(), func(c jsonObject, _ time.Time) { c["aud"] = []string{audience} }},
		{"HCC and migration audiences", rs256Header(), func(c jsonObject, _ time.Time) { c["aud"] = []string{audience, migrationAud} }},
		{"migration and HCC audiences, reversed", rs256Header(), func(c jsonObject, _ time.Time) { c["aud"] = []string{migrationAud, audience} }},
		{"nbf in the past", rs256Header(), func(c jsonObject, now time.Time) { c["nbf"] = now.Add(-time.Minute).Unix() }},
		{"iat within the skew ahead", rs256Header(), func(c jsonObject, now time.Time) { c["iat"] = now.Add(20 * time.Second).Unix() }},
		{"exp within the skew behind", rs256Header(), func(c jsonObject, now time.Time) {
			c["iat"], c["exp"] = now.Add(-5*time.Minute).Unix(), now.Add(-10*time.Second).Unix()
		}},
		{"TTL exactly the maximum", rs256Header(), func(c jsonObject, now time.Time) { c["exp"] = now.Add(600 * time.Second).Unix() }},
		{"fractional dates", rs256Header(), func(c jsonObject, now time.Time) {
			c["iat"], c["exp"] = float64(now.Unix())+0.25, float64(now.Add(time.Minute).Unix())+0.5
		}},
		{"kid of the configured key", jsonObject{"alg": "RS256", "kid": issuerKeyID(t)}, func(jsonObject, time.Time) {}},
		{"no typ", jsonObject{"alg": "RS256"}, func(jsonObject, time.Time) {}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, standardWorld(t))
			c := claimsFor("host-a", "uid-a", h.clock.Now())
			tc.edit(c, h.clock.Now())
			rec := h.inventory(sign(t, tc.header, c))
			assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		})
	}
}

func TestAudienceSets(t *testing.T) {
	cases := []struct {
		aud  string
		want bool
	}{
		{`"hcc"`, true},
		{`["hcc"]`, true},
		{`["hcc","wfc"]`, true},
		{`["wfc","hcc"]`, true},
		{`"wfc"`, false},
		{`["wfc"]`, false},
		{`["hcc","hcc"]`, false},
		{`["hcc","other"]`, false},
		{`["hcc","wfc","other"]`, false},
		{`[]`, false},
		{`null`, false},
		{`""`, false},
		{`["hcc",1]`, false},
		{`{"hcc":true}`, false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, audienceAccepted(json.RawMessage(tc.aud), "hcc", "wfc"), tc.aud)
	}
}

func TestVerifierReturnsTheClaims(t *testing.T) {
	auth := hostAuth(t)
	c := claimsFor("host-a", "uid-a", t0)
	got, err := verifyHostToken(sign(t, rs256Header(), c), newTokenRules(auth), t0)
	require.NoError(t, err)
	assert.Equal(t, HostClaims{HostRef: "host-a", HostUID: "uid-a", Expiry: t0.Add(5 * time.Minute)}, got)
}

// base64URLAlphabet is RFC 4648 §5's alphabet, in value order.
const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// nonCanonicalSpellings returns every other unpadded base64url spelling of
// segment s: its last character also carries 2 or 4 unused trailing bits,
// which a lenient decoder ignores.
func nonCanonicalSpellings(t *testing.T, s string) []string {
	t.Helper()
	unused := map[int]uint{2: 4, 3: 2}[len(s)%4]
	require.NotZero(t, unused, "segment %q has no trailing bits", s)
	last := strings.IndexByte(base64URLAlphabet, s[len(s)-1])
	var out []string
	for x := 1; x < 1<<unused; x++ {
		out = append(out, s[:len(s)-1]+string(base64URLAlphabet[last^x]))
	}
	return out
}

// tokenWithTrailingBits is a valid token for host-a whose three segments
// each end in unused bits: a "pad" member (which grants nothing) moves the
// header and payload lengths off a multiple of three, and a 2048-bit
// signature is 256 bytes.
func tokenWithTrailingBits(t *testing.T, now time.Time) string {
	t.Helper()
	key, _ := keys(t)
	padded := func(obj jsonObject) []byte {
		b, pad := mustJSON(t, obj), ""
		for len(b)%3 == 0 {
			pad += "x"
			obj["pad"] = pad
			b = mustJSON(t, obj)
		}
		return b
	}
	return signCompact(t, padded(rs256Header()), padded(claimsFor("host-a", "uid-a", now)), "RS256", key, nil)
}

func TestNonCanonicalBase64SegmentsAreRefusedBeforeTheSignature(t *testing.T) {
	valid := tokenWithTrailingBits(t, t0)
	v, _, _ := newCachingVerifier(t, 8)
	h := newHarness(t, standardWorld(t))
	segments := strings.Split(valid, ".")
	refused := 0
	for i, name := range []string{"header", "payload", "signature"} {
		t.Run("a "+name+" with non-zero trailing bits", func(t *testing.T) {
			want, err := base64.RawURLEncoding.DecodeString(segments[i])
			require.NoError(t, err)
			spellings := nonCanonicalSpellings(t, segments[i])
			refused += len(spellings)
			for _, spelling := range spellings {
				// The same bytes to a lenient decoder: the same token.
				got, err := base64.RawURLEncoding.DecodeString(spelling)
				require.NoError(t, err)
				require.Equal(t, want, got)

				variant := slices.Clone(segments)
				variant[i] = spelling
				raw := strings.Join(variant, ".")
				_, err = verifyHostToken(raw, newTokenRules(hostAuth(t)), t0)
				assert.Equal(t, failMalformed, err, "refused before any RSA work")
				_, err = v.VerifyHostToken(raw)
				assert.Error(t, err)

				rec := h.inventory(raw)
				assert.Equal(t, http.StatusUnauthorized, rec.Code)
				assert.Equal(t, `{"error":"unauthorized"}`, rec.Body.String())
			}
			assert.Zero(t, v.cache.order.Len(), "a refused spelling took a cache slot")
			assert.Zero(t, h.world.secretReads.Load())
		})
	}
	assert.Equal(t, float64(refused), h.authFailures(failMalformed))

	t.Run("the canonical spelling verifies and takes one slot", func(t *testing.T) {
		_, err := v.VerifyHostToken(valid)
		require.NoError(t, err)
		assert.Equal(t, 1, v.cache.order.Len())
		assert.Equal(t, http.StatusOK, h.inventory(valid).Code)
	})
}

func TestSegmentsWithLineBreaksAreRefused(t *testing.T) {
	// The standard decoder skips CR and LF even in strict mode; only
	// re-encoding notices them.
	parts := strings.Split(tokenWithTrailingBits(t, t0), ".")
	for i := range parts {
		variant := slices.Clone(parts)
		variant[i] = variant[i][:4] + "\n" + variant[i][4:]
		_, err := verifyHostToken(strings.Join(variant, "."), newTokenRules(hostAuth(t)), t0)
		assert.Equal(t, failMalformed, err, "segment %d", i)
	}
}
