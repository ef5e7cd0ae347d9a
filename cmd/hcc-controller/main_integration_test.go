//go:build integration

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/internal/testing/testenv"
	"github.com/clerum/hcc/pkg/logging"
)

func TestControllerTakesTheLeaseAndReleasesItOnShutdown(t *testing.T) {
	// klog's logger is process-wide: route it before any client runs, as
	// the binary does, so run's own Setup call does not swap it under them.
	logging.Setup(binary, "info")
	cp := controlplane.Start(t, controlplane.Options{})
	kube := kubernetes.NewForConfigOrDie(cp.Config())
	ctx := context.Background()
	// The leader is ready once its NetworkPolicy pass has certified, which
	// needs the namespaces the policies live in.
	for _, ns := range []string{"control-plane", "mcp-server", "mcp-host", "rpc-proxy", "sandbox-recipes"} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	kubeconfig := asControllerServiceAccount(t, cp, kube)
	port := testenv.FreePort(t)
	t.Setenv("INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "integration-secret")
	t.Setenv("HCC_CONTROLLER_PORT", strconv.Itoa(port))
	t.Setenv("POD_NAME", "replica-a")

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		var stdout, stderr bytes.Buffer
		done <- run(runCtx, []string{"--kubeconfig", kubeconfig}, &stdout, &stderr)
	}()

	holder := func() string {
		lease, err := kube.CoordinationV1().Leases("control-plane").Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return holder() == "replica-a", nil })
	require.NoError(t, err, "the controller should hold the lease")
	assert.Equal(t, http.StatusOK, testenv.WaitHTTP(fmt.Sprintf("http://127.0.0.1:%d/ready", port), http.StatusOK, 10*time.Second))

	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop after its context ended")
	}
	// ReleaseOnCancel hands the lease over at once instead of after its
	// duration, so a rolling update has no reconcile gap.
	var lease *coordinationv1.Lease
	lease, err = kube.CoordinationV1().Leases("control-plane").Get(ctx, leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, ptrValue(lease.Spec.HolderIdentity))
}

// asControllerServiceAccount applies deploy/controller/rbac.yaml and returns
// a kubeconfig acting as the controller's service account, so the tests
// prove the shipped Roles are enough.
func asControllerServiceAccount(t *testing.T, cp *controlplane.ControlPlane, kube kubernetes.Interface) string {
	t.Helper()
	_, err := controlplane.ApplyRBAC(context.Background(), kube, filepath.Join("..", "..", "deploy", "controller", "rbac.yaml"))
	require.NoError(t, err)
	return cp.ImpersonatingKubeconfig("system:serviceaccount:control-plane:hcc-controller",
		"system:serviceaccounts", "system:serviceaccounts:control-plane")
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
