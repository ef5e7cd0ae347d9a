package api

import (
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
)

func TestTombstonedV1RoutesAreGone(t *testing.T) {
	h := newHarness(t, standardWorld(t))
	tok := h.token("host-a", "uid-a")
	for _, path := range []string{
		"/api/v1/mcpservers/context/ctx-a",
		"/api/v1/mcpservers/context/*",
		"/api/v1/mcpservers/alpha/auth",
		"/api/v1/mcpservers/context/auth",
	} {
		for _, token := range []string{"", tok} {
			rec := h.do(http.MethodGet, path, token, "")
			assert.Equal(t, http.StatusGone, rec.Code, path)
			assert.Equal(t, `{"error":"gone"}`, rec.Body.String(), path)
		}
	}
	assert.Zero(t, h.world.secretReads.Load())
}

func TestDesktopRoute(t *testing.T) {
	w := standardWorld(t)
	desktop := newHost("desk", "uid-desk", "ctx-a")
	desktop.Spec.Desktop = &v1alpha1.DesktopSpec{Enabled: true}
	desktop.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
	put(t, w.hosts, desktop)

	t.Run("with a token configured", func(t *testing.T) {
		h := newHarness(t, w, func(o *Options) { o.DesktopToken = "desk-token" })
		for _, bad := range []string{"", "desk-toke", "desk-token2", "DESK-TOKEN", "x"} {
			rec := h.do(http.MethodGet, "/api/v1/desktop/desk", bad, "")
			assert.Equal(t, http.StatusUnauthorized, rec.Code, bad)
			assert.Equal(t, `{"error":"unauthorized"}`, rec.Body.String())
			assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
		}
		rec := h.do(http.MethodGet, "/api/v1/desktop/desk", "desk-token", "")
		require.Equal(t, http.StatusOK, rec.Code)
		assert.JSONEq(t, `{"hostRef":"desk","enabled":true,"ready":true}`, rec.Body.String())
		assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))

		rec = h.do(http.MethodGet, "/api/v1/desktop/host-a", "desk-token", "")
		assert.JSONEq(t, `{"hostRef":"host-a","enabled":false,"ready":false}`, rec.Body.String())
		rec = h.do(http.MethodGet, "/api/v1/desktop/nobody", "desk-token", "")
		assert.Equal(t, http.StatusNotFound, rec.Code)
		assert.Equal(t, `{"error":"not_found"}`, rec.Body.String())
	})

	t.Run("open when no token is configured", func(t *testing.T) {
		h := newHarness(t, w)
		rec := h.do(http.MethodGet, "/api/v1/desktop/desk", "", "")
		assert.Equal(t, http.StatusOK, rec.Code)
	})

	t.Run("compares digests of equal length", func(t *testing.T) {
		d := sha256.Sum256([]byte("s3cret"))
		hd := &handler{desktopDigest: d[:]}
		assert.True(t, hd.desktopTokenMatches("s3cret"))
		for _, bad := range []string{"", "s3cre", "s3crett", "S3cret", strings.Repeat("s3cret", 100)} {
			assert.False(t, hd.desktopTokenMatches(bad), bad)
		}
	})
}

func TestAPIRoutesAnswer503UntilTheCachesSync(t *testing.T) {
	h := newHarness(t, standardWorld(t))
	h.readiness.Set("informers", false)
	tok := h.token("host-a", "uid-a")
	for _, rec := range []*httptest.ResponseRecorder{
		h.do(http.MethodGet, "/api/v1/mcpservers", "", ""),
		h.do(http.MethodGet, "/api/v1/desktop/host-a", "", ""),
		h.inventory(tok),
		h.credential(tok, "alpha"),
	} {
		assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
		assert.Equal(t, `{"error":"unavailable"}`, rec.Body.String())
	}
	assert.Zero(t, h.world.secretReads.Load())
	assert.Equal(t, http.StatusOK, h.do(http.MethodGet, "/health", "", "").Code)
	assert.Equal(t, http.StatusServiceUnavailable, h.do(http.MethodGet, "/ready", "", "").Code)

	h.readiness.Set("informers", true)
	assert.Equal(t, http.StatusOK, h.do(http.MethodGet, "/ready", "", "").Code)
	assert.Equal(t, http.StatusOK, h.inventory(tok).Code)
}

func TestInfoUnknownRoutesAndMethods(t *testing.T) {
	h := newHarness(t, standardWorld(t))
	rec := h.do(http.MethodGet, "/", "", "")
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), `"name":"hcc-api"`)

	rec = h.do(http.MethodGet, "/api/v3/anything", "", "")
	assert.Equal(t, http.StatusNotFound, rec.Code)
	assert.Equal(t, `{"error":"not_found"}`, rec.Body.String())

	rec = h.do(http.MethodGet, "/api/v2/hosts/self/mcpservers/credential", "", "")
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	rec = h.do(http.MethodDelete, "/api/v2/hosts/self/mcpservers", "", "")
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}

func TestMetricsAreExposedByRoutePattern(t *testing.T) {
	h := newHarness(t, standardWorld(t))
	tok := h.token("host-a", "uid-a")
	h.inventory(tok)
	h.inventory("garbage")
	h.do(http.MethodGet, "/api/v1/desktop/host-a", "", "")
	h.do(http.MethodGet, "/no/such/path/12345", "", "")

	rec := h.do(http.MethodGet, "/metrics", "", "")
	require.Equal(t, http.StatusOK, rec.Code)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	text := string(body)
	for _, want := range []string{
		`clerum_hcc_api_requests_total{code="200",route="/api/v2/hosts/self/mcpservers"} 1`,
		`clerum_hcc_api_requests_total{code="401",route="/api/v2/hosts/self/mcpservers"} 1`,
		`clerum_hcc_api_requests_total{code="200",route="/api/v1/desktop/{hostRef}"} 1`,
		`clerum_hcc_api_requests_total{code="404",route="unmatched"} 1`,
		`clerum_hcc_api_request_duration_seconds_count{route="/api/v2/hosts/self/mcpservers"} 2`,
		`clerum_hcc_api_auth_failures_total{reason="malformed"} 1`,
		`clerum_hcc_api_auth_failures_total{reason="signature"} 0`,
		`clerum_hcc_api_rate_limited_total{action="credential"} 0`,
		`clerum_hcc_api_token_cache_lookups_total{result="miss"} 2`,
	} {
		assert.Contains(t, text, want)
	}
	assert.NotContains(t, text, "12345", "raw paths never become labels")
}

// The dev-mode fixtures of the example in docs/http-api.md.
const (
	exampleServers  = `[{"name":"filesystem","spec":{"contextRef":"dev-context","description":"Filesystem operations","image":"mcp/filesystem:latest","transport":{"type":"sse","url":"http://localhost:3001/sse","port":3001},"enabled":true}}]`
	exampleContexts = `[{"name":"dev-context","namespace":"dev","spec":{"contextId":"dev-context","description":"Dev context","mcpServers":["filesystem"]}}]`
	exampleAuth     = `{"github":"ghp_your_token_here"}`
)

func devHarness(t *testing.T, dev config.Dev) *harness {
	return newHarness(t, newWorld(), func(o *Options) {
		o.Dev = LoadDevFixtures(dev, serverNS, zerolog.Nop())
	})
}

func TestDevModeServesV1FromFixturesAndFailsV2Closed(t *testing.T) {
	h := devHarness(t, config.Dev{McpServersJSON: exampleServers, ContextsJSON: exampleContexts, McpAuthJSON: exampleAuth})
	rec := h.do(http.MethodGet, "/api/v1/mcpservers", "", "")
	require.Equal(t, http.StatusOK, rec.Code)
	assert.JSONEq(t, `{
		"servers": [{
			"name": "filesystem",
			"contextRef": "dev-context",
			"transport": {"type": "sse", "url": "http://localhost:3001/sse"},
			"enabled": true,
			"status": {"deployed": true, "ready": true}
		}],
		"contextRef": "*",
		"timestamp": "2026-02-14T15:11:12.000Z"
	}`, rec.Body.String())

	// Even a perfectly valid token for a Host the fixtures could name gets
	// the uniform 401: dev mode has no live Host authority.
	tok := h.token("dev-host", "uid-dev")
	for _, rec := range []*httptest.ResponseRecorder{h.inventory(tok), h.credential(tok, "filesystem")} {
		assert.Equal(t, http.StatusUnauthorized, rec.Code)
		assert.Equal(t, `{"error":"unauthorized"}`, rec.Body.String())
	}
	assert.Equal(t, 2.0, h.authFailures(failDevMode))
	assert.Equal(t, http.StatusGone, h.do(http.MethodGet, "/api/v1/mcpservers/filesystem/auth", "", "").Code)
}

func TestDevModeFixtures(t *testing.T) {
	t.Run("a fixture without a url gets the in-cluster one", func(t *testing.T) {
		h := devHarness(t, config.Dev{McpServersJSON: `[{"name":"bridge","spec":{"image":"x","transport":{"type":"stdio"}}}]`})
		inv := decode[systemInventory](t, h.do(http.MethodGet, "/api/v1/mcpservers", "", ""))
		require.Len(t, inv.Servers, 1)
		assert.Equal(t, transportInfo{"streamable-http", "http://bridge.mcp-server.svc.cluster.local:3000/mcp"}, inv.Servers[0].Transport)
	})
	for name, dev := range map[string]config.Dev{
		"not JSON":                {McpServersJSON: `[{`, ContextsJSON: `nope`, McpAuthJSON: `{`},
		"an object, not an array": {McpServersJSON: `{"name":"x"}`, ContextsJSON: `{}`, McpAuthJSON: `[]`},
		"the wrong element type":  {McpServersJSON: `[{"name":"ok","spec":{"transport":{"type":"sse"}}}, 7]`},
		"empty":                   {},
	} {
		t.Run(name+" yields empty", func(t *testing.T) {
			f := LoadDevFixtures(dev, serverNS, zerolog.Nop())
			assert.Empty(t, f.servers)
			h := devHarness(t, dev)
			rec := h.do(http.MethodGet, "/api/v1/mcpservers", "", "")
			require.Equal(t, http.StatusOK, rec.Code)
			assert.Empty(t, decode[systemInventory](t, rec).Servers)
		})
	}
	t.Run("a server without a name or with a bad spec is skipped", func(t *testing.T) {
		f := LoadDevFixtures(config.Dev{McpServersJSON: `[{"spec":{}},{"name":"bad","spec":{"enabled":"yes"}},{"name":"good","spec":{"transport":{"type":"sse"}}}]`}, serverNS, zerolog.Nop())
		require.Len(t, f.servers, 1)
		assert.Equal(t, "good", f.servers[0].Name)
	})
}
