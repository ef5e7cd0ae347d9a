package devcontrolapi

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/clerum/hcc/pkg/controlapi"
)

var secret = []byte("dev-secret")

func newServer(t *testing.T, clk *clocktesting.FakeClock) (*Server, *httptest.Server) {
	t.Helper()
	s, err := New(Options{HMACSecret: secret, Clock: clk, MigrationAudience: DefaultMigrationAudience})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, srv
}

func post(t *testing.T, url, bearer, body string) (int, map[string]string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]string
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	return resp.StatusCode, out
}

// The controller's own client obtains a credential, and the credential
// exchanges for an RS256 token with exactly the claims hcc-api checks.
func TestCredentialThenExchange(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s, srv := newServer(t, clk)
	client, err := controlapi.New(controlapi.Options{BaseURL: srv.URL, HMACSecret: secret, Clock: clk, MinLifetime: 15 * time.Minute})
	require.NoError(t, err)
	cred, err := client.BootstrapCredential(context.Background(), controlapi.BootstrapRequest{Namespace: "mcp-host", HostRef: "alice", HostUID: "uid-1"})
	require.NoError(t, err)
	assert.Equal(t, clk.Now().Add(DefaultCredentialLifetime).UTC().Truncate(time.Second), cred.ExpiresAt)

	code, out := post(t, srv.URL+RouteTokenExchange, "", `{"credential":"`+cred.Value+`"}`)
	require.Equal(t, http.StatusOK, code)
	parts := strings.Split(out["accessToken"], ".")
	require.Len(t, parts, 3)

	block, _ := pem.Decode([]byte(s.PublicKeyPEM()))
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	require.NoError(t, err)
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	require.NoError(t, rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, sum[:], sig))

	var header, claims map[string]any
	decode := func(seg string, v any) {
		raw, err := base64.RawURLEncoding.DecodeString(seg)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(raw, v))
	}
	decode(parts[0], &header)
	decode(parts[1], &claims)
	assert.Equal(t, "RS256", header["alg"])
	assert.Equal(t, s.kid, header["kid"])
	assert.Equal(t, "control-api", claims["iss"])
	assert.Equal(t, []any{"host-context-controller", "workflow-controller"}, claims["aud"])
	assert.Equal(t, []any{"alice"}, claims["hostRefs"])
	assert.Equal(t, "uid-1", claims["host_uid"])
	assert.Equal(t, []any{CredentialCapability}, claims["capabilities"])
	assert.Equal(t, DefaultAccessTokenTTL.Seconds(), claims["exp"].(float64)-claims["iat"].(float64))
}

// A refreshed credential replaces the old one, and an expired one stops
// exchanging.
func TestReplacedAndExpiredCredentials(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s, srv := newServer(t, clk)
	client, err := controlapi.New(controlapi.Options{BaseURL: srv.URL, HMACSecret: secret, Clock: clk})
	require.NoError(t, err)
	req := controlapi.BootstrapRequest{Namespace: "mcp-host", HostRef: "alice", HostUID: "uid-1"}
	assert.Zero(t, s.Issued())
	first, err := client.BootstrapCredential(context.Background(), req)
	require.NoError(t, err)
	second, err := client.BootstrapCredential(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, 2, s.Issued(), "a replaced credential is counted")
	issued := s.Issuances()
	require.Len(t, issued, 2)
	for _, i := range issued {
		assert.Equal(t, [3]string{"mcp-host", "alice", "uid-1"}, [3]string{i.Namespace, i.HostRef, i.HostUID})
		assert.False(t, i.At.IsZero())
	}
	assert.Len(t, s.Grants(), 1, "but is not live")

	code, _ := post(t, srv.URL+RouteTokenExchange, "", `{"credential":"`+first.Value+`"}`)
	assert.Equal(t, http.StatusUnauthorized, code, "replaced")
	code, _ = post(t, srv.URL+RouteTokenExchange, "", `{"credential":"`+second.Value+`"}`)
	assert.Equal(t, http.StatusOK, code)

	clk.Step(DefaultCredentialLifetime)
	code, _ = post(t, srv.URL+RouteTokenExchange, "", `{"credential":"`+second.Value+`"}`)
	assert.Equal(t, http.StatusUnauthorized, code, "expired")
}

// Only a token signed with the shared secret obtains a credential, and
// only strict bodies are read.
func TestRefusals(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s, srv := newServer(t, clk)
	good, err := controlapi.SignInternalToken(secret, clk.Now(), time.Minute)
	require.NoError(t, err)
	forged, err := controlapi.SignInternalToken([]byte("other"), clk.Now(), time.Minute)
	require.NoError(t, err)
	body := `{"namespace":"mcp-host","hostRef":"alice","hostUid":"uid-1"}`

	for name, tc := range map[string]struct {
		route, bearer, body string
		want                int
	}{
		"no bearer":                {RouteBootstrapCredentials, "", body, http.StatusUnauthorized},
		"bearer of another secret": {RouteBootstrapCredentials, forged, body, http.StatusUnauthorized},
		"unknown member":           {RouteBootstrapCredentials, good, `{"namespace":"a","hostRef":"b","hostUid":"c","x":1}`, http.StatusBadRequest},
		"missing member":           {RouteBootstrapCredentials, good, `{"namespace":"a","hostRef":"b"}`, http.StatusBadRequest},
		"trailing data":            {RouteBootstrapCredentials, good, body + `{}`, http.StatusBadRequest},
		"unknown credential":       {RouteTokenExchange, "", `{"credential":"nope"}`, http.StatusUnauthorized},
		"exchange, wrong member":   {RouteTokenExchange, "", `{"token":"nope"}`, http.StatusBadRequest},
		"exchange, case variant":   {RouteTokenExchange, "", `{"Credential":"nope"}`, http.StatusBadRequest},
		"duplicate member":         {RouteBootstrapCredentials, good, `{"namespace":"a","hostRef":"b","hostUid":"c","hostUid":"d"}`, http.StatusBadRequest},
	} {
		t.Run(name, func(t *testing.T) {
			code, out := post(t, srv.URL+tc.route, tc.bearer, tc.body)
			assert.Equal(t, tc.want, code)
			assert.NotContains(t, out, "credential")
		})
	}
	assert.Empty(t, s.Grants(), "no refused request issued a credential")
}
