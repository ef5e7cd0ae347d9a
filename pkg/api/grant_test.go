package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

func TestCredentialForUngrantedServersIsTheSame404WithoutReadingASecret(t *testing.T) {
	causes := map[string]string{
		"ungranted (exists, in no Context)":         "delta",
		"cross-Context (granted to another Host)":   "gamma",
		"granted but missing":                       "missing",
		"granted but disabled":                      "disabled",
		"granted but being deleted":                 "deleting",
		"neither granted nor existing":              "nonexistent",
		"not a DNS label":                           "../alpha",
		"a granted name in another case":            "ALPHA",
		"a granted name with trailing whitespace":   "alpha ",
		"the Context's own name":                    "ctx-a",
		"the Secret's name of a granted server":     "alpha-creds",
		"a Host name":                               "host-a",
		"a server granted to the caller's neighbor": "gamma",
	}
	w := standardWorld(t)
	h := newHarness(t, w)
	tok := h.token("host-a", "uid-a")
	var want http.Header
	for cause, name := range causes {
		rec := h.credential(tok, name)
		assert.Equal(t, http.StatusNotFound, rec.Code, cause)
		assert.Equal(t, `{"error":"not_found"}`, rec.Body.String(), cause)
		if want == nil {
			want = rec.Header().Clone()
		}
		assert.Equal(t, want, rec.Header(), cause)
		assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"), cause)
	}
	assert.Zero(t, w.secretReads.Load(), "a Secret was read before the grant check passed")

	rec := h.credential(tok, "alpha")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, int32(2), w.secretReads.Load(), "one read, one revalidation")
	got := decode[credentialResponse](t, rec)
	require.NotNil(t, got.Token)
	assert.Equal(t, "s3cret-alpha", *got.Token)
	assert.NotEmpty(t, got.CredentialRevision)
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
}

func TestMalformedCredentialBodiesGet400WithoutReadingASecret(t *testing.T) {
	cases := []struct {
		name string
		body string
	}{
		{"an empty body", ``},
		{"a body that is not JSON", `serverName=alpha`},
		{"an array", `["alpha"]`},
		{"null", `null`},
		{"a bare string", `"alpha"`},
		{"an object without members", `{}`},
		{"an empty serverName", `{"serverName":""}`},
		{"a number", `{"serverName":1}`},
		{"null for the name", `{"serverName":null}`},
		{"a boolean", `{"serverName":true}`},
		{"an array of names", `{"serverName":["alpha"]}`},
		{"an object for the name", `{"serverName":{"name":"alpha"}}`},
		{"the name in lower case", `{"servername":"alpha"}`},
		{"the name in upper case", `{"SERVERNAME":"alpha"}`},
		{"a case variant after the name", `{"serverName":"beta","SERVERNAME":"alpha"}`},
		{"a case variant before the name", `{"ServerName":"alpha","serverName":"beta"}`},
		{"the name twice", `{"serverName":"beta","serverName":"alpha"}`},
		{"the name twice with the same value", `{"serverName":"alpha","serverName":"alpha"}`},
		{"another member beside the name", `{"serverName":"alpha","contextRef":"ctx-b"}`},
		{"another member alone", `{"name":"alpha"}`},
		{"a trailing document", `{"serverName":"alpha"}{"serverName":"gamma"}`},
		{"trailing garbage", `{"serverName":"alpha"} x`},
		{"a trailing comma", `{"serverName":"alpha",}`},
		{"a truncated object", `{"serverName":"alpha"`},
		{"a body over the size limit", `{"serverName":"alpha","x":"` + strings.Repeat("a", maxCredentialBodyBytes) + `"}`},
		{"a body padded past the size limit", `{"serverName":"alpha"}` + strings.Repeat(" ", maxCredentialBodyBytes)},
	}
	w := standardWorld(t)
	h := newHarness(t, w)
	tok := h.token("host-a", "uid-a")
	var want http.Header
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.do(http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", tok, tc.body)
			assert.Equal(t, http.StatusBadRequest, rec.Code)
			assert.Equal(t, `{"error":"bad_request"}`, rec.Body.String())
			if want == nil {
				want = rec.Header().Clone()
			}
			assert.Equal(t, want, rec.Header(), "headers differ between causes")
			assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
		})
	}
	assert.Zero(t, w.secretReads.Load())
}

func TestWellFormedCredentialBodiesAreAccepted(t *testing.T) {
	cases := []struct {
		name string
		body string
	}{
		{"the plain body", `{"serverName":"alpha"}`},
		{"whitespace around the tokens", " {\n\t\"serverName\" : \"alpha\"\n} \n"},
		{"an escaped character in the name", `{"server\u004eame":"alpha"}`},
		{"an escaped character in the value", `{"serverName":"\u0061lpha"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, standardWorld(t))
			rec := h.do(http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", h.token("host-a", "uid-a"), tc.body)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			assert.Equal(t, "s3cret-alpha", *decode[credentialResponse](t, rec).Token)
		})
	}
}

func TestCredentialWithoutAuthIsNullWithARevision(t *testing.T) {
	h := newHarness(t, standardWorld(t))
	rec := h.credential(h.token("host-a", "uid-a"), "beta")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{"token":null,"credentialRevision":"`+credential{}.revision(newServer("beta", v1alpha1.TransportStdio))+`"}`, rec.Body.String())
	assert.Zero(t, h.world.secretReads.Load(), "a server without auth has no Secret to read")
}

func TestCredentialWithAMissingSecretIsUnavailable(t *testing.T) {
	w := standardWorld(t)
	remove(t, w.secrets, newSecret("alpha-creds", "uid-secret-alpha", nil))
	h := newHarness(t, w)
	rec := h.credential(h.token("host-a", "uid-a"), "alpha")
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, `{"error":"credential_unavailable"}`, rec.Body.String())
}

// The authority is checked again after the Secret read: a revocation that
// lands while the value is read wins, and the value never leaves.
func TestCredentialRevalidatesAuthorityAfterTheRead(t *testing.T) {
	cases := []struct {
		name       string
		revoke     func(t *testing.T, w *world)
		wantStatus int
	}{
		{"Host deleted", func(t *testing.T, w *world) { remove(t, w.hosts, newHost("host-a", "uid-a", "ctx-a")) }, http.StatusUnauthorized},
		{"Host recreated with a new UID", func(t *testing.T, w *world) { put(t, w.hosts, newHost("host-a", "uid-a2", "ctx-a")) }, http.StatusUnauthorized},
		{"Host moved to another Context", func(t *testing.T, w *world) { put(t, w.hosts, newHost("host-a", "uid-a", "ctx-b")) }, http.StatusNotFound},
		{"Context deleted", func(t *testing.T, w *world) { remove(t, w.contexts, newContext("ctx-a")) }, http.StatusUnauthorized},
		{"server removed from the Context", func(t *testing.T, w *world) { put(t, w.contexts, newContext("ctx-a", "beta")) }, http.StatusNotFound},
		{"server disabled", func(t *testing.T, w *world) {
			s := withAuth(newServer("alpha", v1alpha1.TransportSSE), "alpha-creds", "token")
			s.Spec.Enabled = ptr.To(false)
			put(t, w.servers, s)
		}, http.StatusNotFound},
		{"server recreated", func(t *testing.T, w *world) {
			s := withAuth(newServer("alpha", v1alpha1.TransportSSE), "alpha-creds", "token")
			s.UID = "uid-server-alpha-2"
			put(t, w.servers, s)
		}, http.StatusNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := standardWorld(t)
			h := newHarness(t, w)
			tok := h.token("host-a", "uid-a")
			w.onSecretRead = func() { tc.revoke(t, w) }
			rec := h.credential(tok, "alpha")
			assert.Equal(t, tc.wantStatus, rec.Code)
			assert.NotContains(t, rec.Body.String(), "s3cret")
			assert.Equal(t, int32(1), w.secretReads.Load())
		})
	}
}

// What the credential answer is made of, the server's auth reference and
// the Secret's identity and version, is compared again after the read: a
// value read from an object that changed before the answer left is never
// handed out. The swap happens after the read returned, so the read itself
// saw the old objects.
func TestCredentialRevalidatesTheServerAuthAndTheSecretAfterTheRead(t *testing.T) {
	alphaWithAuth := func(secret, key string) *v1alpha1.McpServer {
		return withAuth(newServer("alpha", v1alpha1.TransportSSE), secret, key)
	}
	cases := []struct {
		name       string
		swap       func(t *testing.T, w *world)
		wantStatus int
	}{
		{"the Secret's value is rotated", func(t *testing.T, w *world) {
			put(t, w.secrets, newSecret("alpha-creds", "uid-secret-alpha", map[string]string{"token": "s3cret-rotated"}))
		}, http.StatusNotFound},
		{"the Secret is updated without a value change", func(t *testing.T, w *world) {
			put(t, w.secrets, newSecret("alpha-creds", "uid-secret-alpha", map[string]string{"token": "s3cret-alpha"}))
		}, http.StatusNotFound},
		{"the Secret is recreated", func(t *testing.T, w *world) {
			put(t, w.secrets, newSecret("alpha-creds", "uid-secret-alpha-2", map[string]string{"token": "s3cret-alpha"}))
		}, http.StatusNotFound},
		{"the Secret is deleted", func(t *testing.T, w *world) {
			remove(t, w.secrets, newSecret("alpha-creds", "uid-secret-alpha", nil))
		}, http.StatusNotFound},
		{"the server's auth names another Secret", func(t *testing.T, w *world) {
			put(t, w.servers, alphaWithAuth("gamma-creds", "token"))
		}, http.StatusNotFound},
		{"the server's auth names another key", func(t *testing.T, w *world) {
			put(t, w.servers, alphaWithAuth("alpha-creds", "other"))
		}, http.StatusNotFound},
		{"the server's auth is removed", func(t *testing.T, w *world) {
			put(t, w.servers, newServer("alpha", v1alpha1.TransportSSE))
		}, http.StatusNotFound},
		{"only the server's status changes", func(t *testing.T, w *world) {
			s := alphaWithAuth("alpha-creds", "token")
			s.Status.Ready = false
			put(t, w.servers, s)
		}, http.StatusOK},
		{"only another server's Secret changes", func(t *testing.T, w *world) {
			put(t, w.secrets, newSecret("gamma-creds", "uid-secret-gamma", map[string]string{"token": "s3cret-gamma-2"}))
		}, http.StatusOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := standardWorld(t)
			h := newHarness(t, w)
			tok := h.token("host-a", "uid-a")
			var once sync.Once
			w.afterSecretRead = func() { once.Do(func() { tc.swap(t, w) }) }
			rec := h.credential(tok, "alpha")
			require.Equal(t, tc.wantStatus, rec.Code, rec.Body.String())
			if tc.wantStatus == http.StatusOK {
				assert.Equal(t, "s3cret-alpha", *decode[credentialResponse](t, rec).Token)
				return
			}
			assert.Equal(t, `{"error":"not_found"}`, rec.Body.String())
			assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
		})
	}
}

func TestEachCredentialHandOutIsAuditedWithoutTheValue(t *testing.T) {
	var logs strings.Builder
	h := newHarness(t, standardWorld(t), func(o *Options) { o.Log = zerolog.New(&logs) })
	tok := h.token("host-a", "uid-a")
	require.Equal(t, http.StatusOK, h.credential(tok, "alpha").Code)
	require.Equal(t, http.StatusNotFound, h.credential(tok, "gamma").Code)
	require.Equal(t, http.StatusUnauthorized, h.credential("garbage", "alpha").Code)

	var audits []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
		if entry["audit"] == "credential" {
			audits = append(audits, entry)
		}
	}
	require.Len(t, audits, 1, "one audit line per hand-out, none for refusals")
	a := audits[0]
	assert.Equal(t, "host-a", a["host"])
	assert.Equal(t, "uid-a", a["hostUID"])
	assert.Equal(t, "alpha", a["server"])
	assert.NotEmpty(t, a["credentialRevision"])
	assert.NotContains(t, logs.String(), "s3cret-alpha", "the value never reaches a log")
}
