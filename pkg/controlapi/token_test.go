package controlapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"
)

func TestSignInternalTokenClaims(t *testing.T) {
	tests := []struct {
		name    string
		now     time.Time
		ttl     time.Duration
		wantTTL int64
	}{
		{"the full minute", testNow, MaxTokenTTL, 60},
		{"a fraction of a second on the clock", testNow.Add(999 * time.Millisecond), MaxTokenTTL, 60},
		{"a lifetime in part seconds is truncated", testNow.Add(500 * time.Millisecond), 59900 * time.Millisecond, 59},
		{"the shortest lifetime", testNow, time.Second, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := testingclock.NewFakePassiveClock(tt.now)
			token, err := SignInternalToken(testSecret, clock.Now(), tt.ttl)
			require.NoError(t, err)

			var claims struct {
				Iss string `json:"iss"`
				Aud string `json:"aud"`
				Iat int64  `json:"iat"`
				Exp int64  `json:"exp"`
				Jti string `json:"jti"`
			}
			require.NoError(t, json.Unmarshal(mustSegment(t, token, 1), &claims))
			assert.Equal(t, "host-context-controller", claims.Iss)
			assert.Equal(t, "control-api", claims.Aud)
			assert.Equal(t, tt.now.Unix(), claims.Iat)
			assert.Equal(t, tt.wantTTL, claims.Exp-claims.Iat)
			assert.LessOrEqual(t, claims.Exp-claims.Iat, int64(60), "iat and exp at most 60 s apart")
			assert.Len(t, claims.Jti, 22, "16 random bytes")

			verified, err := VerifyInternalToken(token, testSecret, clock.Now())
			require.NoError(t, err)
			assert.Equal(t, claims.Jti, verified.ID)
			assert.Equal(t, time.Unix(claims.Exp, 0).UTC(), verified.Expiry)
		})
	}
}

func TestSignInternalTokenRefusesBadInput(t *testing.T) {
	for name, call := range map[string]func() (string, error){
		"empty secret":      func() (string, error) { return SignInternalToken(nil, testNow, time.Minute) },
		"zero lifetime":     func() (string, error) { return SignInternalToken(testSecret, testNow, 0) },
		"sub-second":        func() (string, error) { return SignInternalToken(testSecret, testNow, 999*time.Millisecond) },
		"beyond the minute": func() (string, error) { return SignInternalToken(testSecret, testNow, 61*time.Second) },
		"negative lifetime": func() (string, error) { return SignInternalToken(testSecret, testNow, -time.Second) },
	} {
		t.Run(name, func(t *testing.T) {
			token, err := call()
			assert.Error(t, err)
			assert.Empty(t, token)
		})
	}
}

func TestSignInternalTokenUsesFreshIDs(t *testing.T) {
	a, err := SignInternalToken(testSecret, testNow, time.Minute)
	require.NoError(t, err)
	b, err := SignInternalToken(testSecret, testNow, time.Minute)
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
}

// rawToken signs header and payload, given as JSON text, with HMAC-SHA256
// under secret whatever the header says.
func rawToken(header, payload string, secret []byte) string {
	input := b64(header) + "." + b64(payload)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// claimsJSON returns valid claims issued at now for lifetime, edited.
func claimsJSON(t *testing.T, now time.Time, edit func(map[string]any)) string {
	t.Helper()
	c := map[string]any{
		"iss": Issuer, "aud": Audience,
		"iat": now.Unix(), "exp": now.Unix() + 60, "jti": "id-1",
	}
	if edit != nil {
		edit(c)
	}
	data, err := json.Marshal(c)
	require.NoError(t, err)
	return string(data)
}

func TestVerifyInternalToken(t *testing.T) {
	now := testNow
	const header = `{"alg":"HS256","typ":"JWT"}`
	valid := claimsJSON(t, now, nil)
	tests := []struct {
		name   string
		token  func() string
		secret []byte
		at     time.Time
		// reason is a fragment of the error; "" means the token is valid.
		reason string
	}{
		{name: "a valid token", token: func() string { return rawToken(header, valid, testSecret) }},
		{name: "typ absent", token: func() string { return rawToken(`{"alg":"HS256"}`, valid, testSecret) }},
		{name: "aud as a one-element array", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["aud"] = []string{Audience} }), testSecret)
		}},
		{name: "no jti", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { delete(c, "jti") }), testSecret)
		}},
		{name: "within the clock skew after exp", at: now.Add(60*time.Second + TokenClockSkew - time.Second),
			token: func() string { return rawToken(header, valid, testSecret) }},

		{name: "alg none unsigned", reason: "segment", token: func() string {
			return b64(`{"alg":"none","typ":"JWT"}`) + "." + b64(valid) + "."
		}},
		{name: "alg none with a signature", reason: "algorithm", token: func() string {
			return rawToken(`{"alg":"none","typ":"JWT"}`, valid, testSecret)
		}},
		{name: "alg HS384", reason: "algorithm", token: func() string { return rawToken(`{"alg":"HS384"}`, valid, testSecret) }},
		{name: "alg RS256", reason: "algorithm", token: func() string { return rawToken(`{"alg":"RS256"}`, valid, testSecret) }},
		{name: "alg in lower case", reason: "algorithm", token: func() string { return rawToken(`{"alg":"hs256"}`, valid, testSecret) }},
		{name: "no alg", reason: "algorithm", token: func() string { return rawToken(`{"typ":"JWT"}`, valid, testSecret) }},
		{name: "duplicate alg", reason: "header", token: func() string {
			return rawToken(`{"alg":"none","alg":"HS256"}`, valid, testSecret)
		}},
		{name: "typ other than JWT", reason: "typ", token: func() string { return rawToken(`{"alg":"HS256","typ":"at+jwt"}`, valid, testSecret) }},
		{name: "a kid", reason: "header parameter", token: func() string { return rawToken(`{"alg":"HS256","kid":"k"}`, valid, testSecret) }},
		{name: "crit", reason: "header parameter", token: func() string {
			return rawToken(`{"alg":"HS256","crit":["exp"]}`, valid, testSecret)
		}},
		{name: "another secret", reason: "signature", token: func() string { return rawToken(header, valid, []byte("other-secret")) }},
		{name: "verified without a secret", reason: "no secret", secret: []byte{}, token: func() string { return rawToken(header, valid, nil) }},
		{name: "a tampered payload", reason: "signature", token: func() string {
			parts := strings.Split(rawToken(header, valid, testSecret), ".")
			parts[1] = b64(claimsJSON(t, now, func(c map[string]any) { c["exp"] = now.Unix() + 59 }))
			return strings.Join(parts, ".")
		}},
		{name: "padded segment", reason: "segment", token: func() string {
			parts := strings.Split(rawToken(header, valid, testSecret), ".")
			return parts[0] + "." + parts[1] + "." + base64.URLEncoding.EncodeToString(mustDecode(t, parts[2]))
		}},
		{name: "two segments", reason: "compact", token: func() string {
			parts := strings.Split(rawToken(header, valid, testSecret), ".")
			return parts[0] + "." + parts[1]
		}},
		{name: "empty", reason: "empty", token: func() string { return "" }},
		{name: "oversized", reason: "oversized", token: func() string { return strings.Repeat("a", 5000) }},
		{name: "claims not an object", reason: "claims", token: func() string { return rawToken(header, `[1]`, testSecret) }},
		{name: "duplicate claim", reason: "claims", token: func() string {
			return rawToken(header, strings.Replace(valid, `{`, `{"iss":"someone-else",`, 1), testSecret)
		}},
		{name: "another issuer", reason: "issuer", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["iss"] = "control-api" }), testSecret)
		}},
		{name: "another audience", reason: "audience", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["aud"] = "host-context-controller" }), testSecret)
		}},
		{name: "an audience set with another member", reason: "audience", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["aud"] = []string{Audience, "other"} }), testSecret)
		}},
		{name: "no audience", reason: "audience", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { delete(c, "aud") }), testSecret)
		}},
		{name: "61 s between iat and exp", reason: "lifetime", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["exp"] = now.Unix() + 61 }), testSecret)
		}},
		{name: "exp before iat", reason: "lifetime", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["exp"] = now.Unix() - 1 }), testSecret)
		}},
		{name: "no iat", reason: "lifetime", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { delete(c, "iat") }), testSecret)
		}},
		{name: "null iat", reason: "lifetime", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["iat"] = nil }), testSecret)
		}},
		{name: "exp as a string", reason: "lifetime", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["exp"] = "1893553505" }), testSecret)
		}},
		{name: "expired beyond the skew", reason: "expired", at: now.Add(60*time.Second + TokenClockSkew),
			token: func() string { return rawToken(header, valid, testSecret) }},
		{name: "issued in the future", reason: "future", at: now.Add(-TokenClockSkew - time.Second),
			token: func() string { return rawToken(header, valid, testSecret) }},
		{name: "nbf in the future", reason: "not yet valid", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["nbf"] = now.Unix() + 45 }), testSecret)
		}},
		{name: "null nbf", reason: "not yet valid", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["nbf"] = nil }), testSecret)
		}},
		{name: "jti not a string", reason: "jti", token: func() string {
			return rawToken(header, claimsJSON(t, now, func(c map[string]any) { c["jti"] = 7 }), testSecret)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := testSecret
			if tt.secret != nil {
				secret = tt.secret
			}
			at := now
			if !tt.at.IsZero() {
				at = tt.at
			}
			claims, err := VerifyInternalToken(tt.token(), secret, at)
			if tt.reason == "" {
				require.NoError(t, err)
				assert.Equal(t, now, claims.IssuedAt)
				return
			}
			require.ErrorIs(t, err, ErrInvalidToken)
			assert.Contains(t, err.Error(), tt.reason)
			assert.Zero(t, claims)
		})
	}
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}
