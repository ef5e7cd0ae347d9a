//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/internal/testing/testenv"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/logging"
)

// cluster is a control plane with the platform's namespaces and the
// controller's shipped RBAC.
type cluster struct {
	cp   *controlplane.ControlPlane
	kube kubernetes.Interface
	// kubeconfig acts as the controller's service account, so the tests
	// prove deploy/base/controller/rbac.yaml is enough.
	kubeconfig string
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startClusterWith(t, controlplane.Options{})
}

// startClusterWith is startCluster with opts (an audit policy).
func startClusterWith(t *testing.T, opts controlplane.Options) *cluster {
	t.Helper()
	// klog's logger is process-wide: route it before any client runs, as
	// the binary does, so run's own Setup call does not swap it under them.
	logging.Setup(binary, "info")
	cp := controlplane.Start(t, opts)
	kube := kubernetes.NewForConfigOrDie(cp.Config())
	ctx := context.Background()
	for _, ns := range []string{"control-plane", "mcp-server", "mcp-host", "rpc-proxy", "sandbox-recipes", "sandbox-ui", "channels", "gfs"} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := controlplane.ApplyRBAC(ctx, kube, filepath.Join("..", "..", "deploy", "base", "controller", "rbac.yaml"))
	require.NoError(t, err)
	return &cluster{
		cp:   cp,
		kube: kube,
		kubeconfig: cp.ImpersonatingKubeconfig("system:serviceaccount:control-plane:hcc-controller",
			"system:serviceaccounts", "system:serviceaccounts:control-plane"),
	}
}

// controller is hcc-controller's run loop in this process.
type controller struct {
	base   string // http://127.0.0.1:PORT of its health and metrics
	cancel context.CancelFunc
	done   chan int
	code   *int // the exit code, once stopped
}

// startController runs the controller against c with env set, and stops it
// when the test ends if the test did not.
func startController(t *testing.T, c *cluster, env map[string]string) *controller {
	t.Helper()
	port := testenv.FreePort(t)
	t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "integration-secret")
	t.Setenv("HCC_CONTROLLER_PORT", strconv.Itoa(port))
	for k, v := range env {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ctrl := &controller{base: fmt.Sprintf("http://127.0.0.1:%d", port), cancel: cancel, done: make(chan int, 1)}
	go func() {
		var stdout, stderr bytes.Buffer
		ctrl.done <- run(ctx, []string{"--kubeconfig", c.kubeconfig}, &stdout, &stderr)
	}()
	t.Cleanup(func() { ctrl.stop(t) })
	return ctrl
}

// stop cancels the controller and returns its exit code, -1 if it did not
// stop in time. Later calls return the same code at once.
func (c *controller) stop(t *testing.T) int {
	if c.code != nil {
		return *c.code
	}
	c.cancel()
	code := -1
	select {
	case code = <-c.done:
	case <-time.After(30 * time.Second):
		t.Error("controller did not stop after its context ended")
	}
	c.code = &code
	return code
}

// poller returns a test's wait for the cluster: it checks cond every 100ms
// until it holds and fails t with what after timeout.
func poller(t *testing.T, timeout time.Duration) func(what string, cond func() bool) {
	return func(what string, cond func() bool) {
		t.Helper()
		kittest.WaitFor(t, 100*time.Millisecond, timeout, what, cond)
	}
}
