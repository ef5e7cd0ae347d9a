package api

import (
	"encoding/json"
	"net/http"
	"strings"
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
	assert.Equal(t, int32(1), w.secretReads.Load())
	got := decode[credentialResponse](t, rec)
	require.NotNil(t, got.Token)
	assert.Equal(t, "s3cret-alpha", *got.Token)
	assert.NotEmpty(t, got.CredentialRevision)
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
}

func TestMalformedCredentialBodiesGet400WithoutReadingASecret(t *testing.T) {
	bodies := map[string]string{
		"empty":                ``,
		"not JSON":             `serverName=alpha`,
		"an array":             `["alpha"]`,
		"null":                 `null`,
		"no serverName":        `{}`,
		"empty serverName":     `{"serverName":""}`,
		"serverName a number":  `{"serverName":1}`,
		"unknown field":        `{"serverName":"alpha","contextRef":"ctx-b"}`,
		"trailing document":    `{"serverName":"alpha"}{"serverName":"gamma"}`,
		"trailing garbage":     `{"serverName":"alpha"} x`,
		"truncated":            `{"serverName":"alpha"`,
		"over the size limit":  `{"serverName":"alpha","x":"` + strings.Repeat("a", maxCredentialBodyBytes) + `"}`,
		"padded past the size": `{"serverName":"alpha"}` + strings.Repeat(" ", maxCredentialBodyBytes),
	}
	w := standardWorld(t)
	h := newHarness(t, w)
	tok := h.token("host-a", "uid-a")
	for name, body := range bodies {
		rec := h.do(http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", tok, body)
		assert.Equal(t, http.StatusBadRequest, rec.Code, name)
		assert.Equal(t, `{"error":"bad_request"}`, rec.Body.String(), name)
		assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"), name)
	}
	assert.Zero(t, w.secretReads.Load())
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
