package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/internal/testing/apitest"
	"github.com/clerum/hcc/pkg/api"
	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
	"github.com/clerum/hcc/pkg/health"
)

// TestTheInformersKeepTheInventoryCacheCurrent runs hcc-api's own caches
// (newCaches) over fake clientsets and edits the objects through the
// clients, so each edit reaches the handler as a watch event through the
// informers, their transforms and their event handlers. After each, the
// cached inventory must come to equal, byte for byte, one built afresh
// from the same caches, and must show the edit.
func TestTheInformersKeepTheInventoryCacheCurrent(t *testing.T) {
	ns := config.Namespaces{McpServer: "mcp-server", Host: "mcp-host"}
	// The fake clientsets store objects as given: each gets a new
	// resourceVersion here, as the API server would give it.
	version := 0
	stored := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		version++
		m.ResourceVersion = strconv.Itoa(version)
		return m
	}
	server := func(name string, port int32, secret string) *v1alpha1.McpServer {
		s := &v1alpha1.McpServer{
			ObjectMeta: stored(metav1.ObjectMeta{Namespace: ns.McpServer, Name: name, UID: types.UID("uid-" + name)}),
			Spec: v1alpha1.McpServerSpec{
				Image:     "example/" + name + ":1",
				Transport: v1alpha1.Transport{Type: v1alpha1.TransportSSE, Port: ptr.To(port)},
			},
		}
		if secret != "" {
			s.Spec.Auth = &v1alpha1.Auth{SecretRef: v1alpha1.SecretKeyReference{Name: secret, Key: "token"}}
		}
		return s
	}
	secret := func(value string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: stored(metav1.ObjectMeta{Namespace: ns.McpServer, Name: "alpha-creds", UID: "uid-alpha-creds"}),
			Data:       map[string][]byte{"token": []byte(value)},
		}
	}
	contextOf := func(servers ...string) *v1alpha1.Context {
		return &v1alpha1.Context{
			ObjectMeta: stored(metav1.ObjectMeta{Namespace: ns.McpServer, Name: "ctx-a", UID: "uid-ctx-a"}),
			Spec:       v1alpha1.ContextSpec{ContextID: "ctx-a", McpServers: servers},
		}
	}
	kube := kubefake.NewClientset(secret("s3cret-1"))
	hcc := hccfake.NewSimpleClientset(
		server("alpha", 3000, "alpha-creds"), server("beta", 3000, ""), server("gamma", 3000, "alpha-creds"),
		contextOf("alpha", "beta"),
		&v1alpha1.Host{ObjectMeta: stored(metav1.ObjectMeta{Namespace: ns.Host, Name: "host-a", UID: "uid-host-a"}), Spec: v1alpha1.HostSpec{ContextRef: "ctx-a"}},
	)

	reg := prometheus.NewRegistry()
	metrics := api.NewMetrics(reg)
	caches, err := newCaches(kube, hcc, ns, metrics)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		caches.shutdown()
	})
	readiness := health.NewReadiness(informersCheck)
	caches.run(ctx, readiness, metrics, zerolog.Nop())
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return readiness.Ready(), nil }))

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	clock := clocktesting.NewFakePassiveClock(time.Now())
	handler := func(inventory *api.InventoryCache, reg *prometheus.Registry) http.Handler {
		return api.NewHandler(api.Options{
			Sources:   caches.sources,
			Inventory: inventory,
			Namespace: ns.McpServer, ClusterDomain: "cluster.local",
			HostAuth: config.HostAuth{
				PublicKeys: []*rsa.PublicKey{&key.PublicKey}, Issuer: "control-api", Audience: "host-context-controller",
				MigrationAudience: "workflow-controller", MaxTTL: 10 * time.Minute, RateLimitPerMinute: 1 << 20,
			},
			TokenCacheSize: 16, Readiness: readiness, Gatherer: reg, Metrics: api.NewMetrics(reg), Clock: clock, Log: zerolog.Nop(),
		})
	}
	cachedReg := prometheus.NewRegistry()
	cached, fresh := handler(caches.inventory, cachedReg), handler(nil, prometheus.NewRegistry())
	token := apitest.HostToken(t, key, "host-a", "uid-host-a")
	inventory := func(h http.Handler) string {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/api/v2/hosts/self/mcpservers", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		return rec.Body.String()
	}
	// settled waits for the edit to show in both answers: the fresh one as
	// soon as the informer stored it, the cached one once its handler ran.
	settled := func(what string, shows func(body string) bool) string {
		t.Helper()
		var got, want string
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			want = inventory(fresh)
			got = inventory(cached)
			return shows(want) && got == want, nil
		})
		require.NoError(t, err, "%s: cached %s, fresh %s", what, got, want)
		return got
	}
	revisionOf := func(body, server string) string {
		for _, s := range apitest.DecodeInventory(t, body).Servers {
			if s["name"] == server {
				return s["credentialRevision"].(string)
			}
		}
		return ""
	}
	first := settled("start", func(string) bool { return true })
	require.Equal(t, first, inventory(cached))
	require.Regexp(t, `clerum_hcc_api_inventory_cache_lookups_total\{result="hit"\} [1-9]`, scrapeMetrics(t, cachedReg),
		"the objects have resourceVersions, as from an API server, and the cache serves them")

	_, err = kube.CoreV1().Secrets(ns.McpServer).Update(ctx, secret("s3cret-2"), metav1.UpdateOptions{})
	require.NoError(t, err)
	rotated := settled("a Secret update", func(body string) bool { return revisionOf(body, "alpha") != revisionOf(first, "alpha") })

	_, err = hcc.ClerumV1alpha1().Contexts(ns.McpServer).Update(ctx, contextOf("alpha", "beta", "gamma"), metav1.UpdateOptions{})
	require.NoError(t, err)
	settled("a Context edit", func(body string) bool { return strings.Contains(body, `"name":"gamma"`) })

	_, err = hcc.ClerumV1alpha1().McpServers(ns.McpServer).Update(ctx, server("beta", 8443, ""), metav1.UpdateOptions{})
	require.NoError(t, err)
	settled("a server update", func(body string) bool { return strings.Contains(body, "beta.mcp-server.svc.cluster.local:8443") })

	require.NoError(t, hcc.ClerumV1alpha1().McpServers(ns.McpServer).Delete(ctx, "beta", metav1.DeleteOptions{}))
	settled("a server deleted", func(body string) bool { return !strings.Contains(body, `"name":"beta"`) })

	require.NoError(t, kube.CoreV1().Secrets(ns.McpServer).Delete(ctx, "alpha-creds", metav1.DeleteOptions{}))
	gone := settled("a Secret deleted", func(body string) bool {
		return revisionOf(body, "alpha") != revisionOf(rotated, "alpha") && revisionOf(body, "gamma") != revisionOf(rotated, "gamma")
	})
	assert.NotEqual(t, revisionOf(gone, "alpha"), revisionOf(gone, "gamma"))

	for _, informer := range []string{"secrets", "contexts", "mcpservers"} {
		assert.Contains(t, scrapeMetrics(t, reg), `clerum_hcc_api_informer_events_total{event="update",informer="`+informer+`"} 1`)
	}
	assert.Contains(t, scrapeMetrics(t, reg), `clerum_hcc_api_informer_events_total{event="delete",informer="secrets"} 1`)
	assert.Contains(t, scrapeMetrics(t, reg), `clerum_hcc_api_informer_events_total{event="add",informer="mcpservers"} 3`)
}

func scrapeMetrics(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	mux := http.NewServeMux()
	health.Register(mux, health.NewReadiness(), reg)
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}
