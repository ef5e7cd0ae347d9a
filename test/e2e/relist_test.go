//go:build integration

package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// The controller's watches break while etcd is compacted past every
// resourceVersion its informers hold, so each informer's watch comes back
// 410 "too old resource version" and it relists (the controller's log
// shows it; the test requires it). The invariants: a relist over a
// converged cluster writes nothing (the relisted objects are observed:
// the work queues take them in and drain), and a delete that happened
// during the gap — an McpServer, which the relist delivers as a deletion
// tombstone, and, in a second gap, a Host — is still acted on: the server's allows are
// revoked, the Host's finalizer released, and the cluster converges to
// exactly the planned objects.
//
// The controller reaches the API server through a fault proxy that
// counts the watch responses refusing a resourceVersion as too old
// (client-go logs them at V(4) only). The watches break as in a paused node: the controller is frozen
// (SIGSTOP) while the gap's deletes land, etcd is compacted, and
// kube-apiserver restarts (its watch cache starts again at the compacted
// revision, closing every watch); then the controller resumes.
func TestWatchRelistAfterCompaction(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	proxy, kubeconfig := startProxy(t)
	c := e.startControllerVia(kubeconfig, "solo", "HCC_LEADER_ELECT=false")
	defer e.cleanUp()
	e.fleet(3, 2)
	e.waitConverged(2 * time.Minute)
	e.eventually("the controller is ready", 30*time.Second, func() bool { return ready(c) })
	// Ready Hosts and servers do not mean the NetworkPolicy pass for them
	// has run: wait until every queue is idle before counting writes.
	e.waitQueuesIdle(c)

	// A relist over a converged cluster.
	offset := auditOffset(t)
	adds := scrapeSum(t, c, "workqueue_adds_total")
	tooOld := proxy.TooOld()
	breakWatches(t, c, func() {})
	e.waitRelisted(proxy, tooOld)
	e.eventually("the relisted objects are taken in", 30*time.Second, func() bool { return scrapeSum(t, c, "workqueue_adds_total") > adds })
	e.waitQueuesIdle(c)
	var what []string
	for _, w := range controllerWrites(t, offset) {
		what = append(what, describe(w))
	}
	assert.Empty(t, what, "a relist over a converged cluster writes nothing")

	// Deletes in the gap.
	policies := map[string]string{"ctx-fleet-srv-02": "mcp-server", "ctx-fleet-srv-02-egress": "mcp-host", "rpc-egress-fleet-srv-02": "rpc-proxy"}
	for name, ns := range policies {
		_, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, "srv-02's allow %s/%s exists before the gap", ns, name)
	}
	tooOld = proxy.TooOld()
	breakWatches(t, c, func() {
		require.NoError(t, hcc.ClerumV1alpha1().McpServers("mcp-server").Delete(ctx, "srv-02", metav1.DeleteOptions{}))
		delete(e.created, "McpServer/mcp-server/srv-02")
	})
	resumed := time.Now()
	e.waitRelisted(proxy, tooOld)
	e.eventually("srv-02's allows are revoked", time.Minute, func() bool {
		for name, ns := range policies {
			if _, err := kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	})
	t.Logf("srv-02's allows revoked %s after the controller resumed", time.Since(resumed).Round(time.Millisecond))

	// A Host deleted in a gap of its own: its finalizer is HCC's to release.
	tooOld = proxy.TooOld()
	breakWatches(t, c, func() {
		require.NoError(t, hcc.ClerumV1alpha1().Hosts("mcp-host").Delete(ctx, "fleet-1", metav1.DeleteOptions{}))
		delete(e.created, "Host/mcp-host/fleet-1")
	})
	e.waitRelisted(proxy, tooOld)
	e.eventually("the Host deleted in the gap is gone", time.Minute, func() bool {
		_, err := hcc.ClerumV1alpha1().Hosts("mcp-host").Get(ctx, "fleet-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	e.waitConverged(time.Minute)
	e.waitPlanned(time.Minute, "exactly the planned objects")
}

// breakWatches freezes c, runs gap, compacts etcd at its current revision,
// restarts kube-apiserver and resumes c: every watch c held is closed, and
// none can resume from the resourceVersion it had.
func breakWatches(t *testing.T, c *binary, gap func()) {
	t.Helper()
	require.NoError(t, c.Signal(syscall.SIGSTOP))
	resumed := false
	defer func() {
		if !resumed {
			_ = c.Signal(syscall.SIGCONT)
		}
	}()
	gap()
	rev, err := cluster.CompactEtcd(context.Background())
	require.NoError(t, err)
	t.Logf("etcd compacted at revision %d", rev)
	require.NoError(t, cluster.StopAPIServer())
	require.NoError(t, cluster.StartAPIServer())
	require.NoError(t, c.Signal(syscall.SIGCONT))
	resumed = true
}

// waitRelisted waits until a watch response the proxy carried after
// before relists refused a resourceVersion as too old: the relist this
// file is about happened.
func (e *env) waitRelisted(proxy *controlplane.FaultProxy, before int64) {
	e.t.Helper()
	e.eventually("the controller's informers are told \"too old resource version\"", time.Minute, func() bool {
		return proxy.TooOld() > before
	})
	e.t.Logf("%d watches refused as too old", proxy.TooOld()-before)
}

// startControllerVia runs hcc-controller as identity through kubeconfig
// and waits for /health.
func (e *env) startControllerVia(kubeconfig, identity string, extra ...string) *binary {
	e.t.Helper()
	return e.start("hcc-controller", identity, kubeconfig, func(port int) []string { return e.controllerEnv(identity, port, extra...) })
}

// startProxy starts a fault proxy and writes the controller's
// impersonating kubeconfig through it.
func startProxy(t *testing.T) (*controlplane.FaultProxy, string) {
	t.Helper()
	proxy, err := cluster.StartFaultProxy()
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	kubeconfig, err := proxy.WriteKubeconfig(controllerUser, "system:serviceaccounts", "system:serviceaccounts:control-plane")
	require.NoError(t, err)
	return proxy, kubeconfig
}

func equalSets(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }
