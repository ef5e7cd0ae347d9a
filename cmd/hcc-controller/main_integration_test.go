//go:build integration

package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/clerum/hcc/internal/testing/testenv"
)

func TestControllerTakesTheLeaseAndReleasesItOnShutdown(t *testing.T) {
	c := startCluster(t)
	kube, ctx := c.kube, context.Background()
	ctrl := startController(t, c, map[string]string{"POD_NAME": "replica-a"})

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
	assert.Equal(t, http.StatusOK, testenv.WaitHTTP(ctrl.base+"/ready", http.StatusOK, 10*time.Second))
	assert.Equal(t, 0, ctrl.stop(t))
	// ReleaseOnCancel hands the lease over at once instead of after its
	// duration, so a rolling update has no reconcile gap.
	var lease *coordinationv1.Lease
	lease, err = kube.CoordinationV1().Leases("control-plane").Get(ctx, leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, ptrValue(lease.Spec.HolderIdentity))
}

func ptrValue(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
