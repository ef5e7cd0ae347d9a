//go:build integration

package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/hack/devcontrolapi"
)

// overloadShare is the share of the controller's requests (every one but
// its watches) the fault proxy fails during the overload, half 429 with
// Retry-After, half 500.
const overloadShare = 0.3

// For 30 s the API server, as the controller reaches it, answers a share
// of requests (lists and writes alike) 429 and 500, while a fleet
// converges and a Context loses a server. The invariants: the orphan caps
// never trip (a failed list fails the pass; it is never planned from as a
// partial one), the allow the Context edit made stale is gone by the end
// of the first successful full pass after the overload, no Host's
// credential is issued twice (the development Control API's issuances
// equal the Hosts), the process stays up (no restart, no exit), and the
// fleet converges to exactly the planned objects.
//
// It found a Host stalled for good after the overload: its workspace claim
// was created, the update that marks it answered 500, the volume binder
// bound it to a static volume, and every later sync refused it as an
// unmarked claim with a volume (docs/ownership.md, "Claims"). The process
// now remembers a claim it created and could not mark, and marks it on the
// next sync.
func TestAPIServerOverload(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	proxy, kubeconfig := startProxy(t)
	issued := countingControlAPI(t, e)
	c := e.startControllerVia(kubeconfig, "solo", "HCC_LEADER_ELECT=false", "CONTROL_API_BASE_URL="+issued.url)
	defer e.cleanUp()
	e.eventually("the controller is ready", time.Minute, func() bool { return ready(c) })

	proxy.SetFailure(overloadShare)
	overload := time.Now()
	e.fleet(6, 2)
	time.Sleep(10 * time.Second)
	// srv-01 leaves the Context during the overload: its allows are stale.
	e.update(contextOf("fleet", "srv-00", "srv-02", "srv-03", "srv-04", "srv-05"))
	time.Sleep(20 * time.Second)
	passes := scrapeMetric(t, c, "clerum_hcc_netpol_pass_duration_seconds_count", `kind="full",result="success"`)
	proxy.SetFailure(0)
	end := time.Now()
	tooMany, internal := proxy.Failed()
	t.Logf("overload of %s: %d requests answered 429, %d answered 500", time.Since(overload).Round(time.Second), tooMany, internal)
	require.Positive(t, tooMany, "the overload happened")
	require.Positive(t, internal, "the overload happened")

	stale := map[string]string{"ctx-fleet-srv-01": "mcp-server", "ctx-fleet-srv-01-egress": "mcp-host", "rpc-egress-fleet-srv-01": "rpc-proxy"}
	e.eventually("the stale allows are revoked", 3*time.Minute, func() bool {
		for name, ns := range stale {
			if _, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
	after := scrapeMetric(t, c, "clerum_hcc_netpol_pass_duration_seconds_count", `kind="full",result="success"`) - passes
	t.Logf("stale allows gone %s after the overload, %v successful full passes after it", time.Since(end).Round(time.Millisecond), after)
	assert.LessOrEqual(t, after, 1.0, "the stale allows outlive the overload by at most one pass")
	e.waitConverged(3 * time.Minute)
	e.waitPlanned(time.Minute, "exactly the planned objects")
	assert.Zero(t, scrapeSum(t, c, "clerum_hcc_netpol_orphan_sweep_capped_total"), "no orphan cap tripped")
	assert.NotContains(t, logSince(t, c, 0), "orphan delete cap tripped")
	assert.Equal(t, int64(2), issued.count.Load(), "one credential per Host")
	select {
	case <-c.Done():
		t.Fatalf("the controller exited: %v", c.Err())
	default:
	}
	assert.Equal(t, 1.0, scrapeMetric(t, c, "clerum_hcc_netpol_certified", ""))
}

// controlAPICounter forwards to the scenario's development Control API
// and counts the bootstrap credentials issued through it.
type controlAPICounter struct {
	url   string
	count atomic.Int64
}

func countingControlAPI(t *testing.T, e *env) *controlAPICounter {
	t.Helper()
	target, err := url.Parse(e.devURL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	c := &controlAPICounter{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, devcontrolapi.RouteBootstrapCredentials) {
			c.count.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// logSince is b's log from offset on.
func logSince(t *testing.T, b *binary, offset int64) string {
	t.Helper()
	raw, err := os.ReadFile(b.log)
	require.NoError(t, err)
	if int64(len(raw)) < offset {
		return ""
	}
	return string(raw[offset:])
}
