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
	"github.com/clerum/hcc/pkg/controllers/kit"
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

// TestControllerReturnsMemoryOnceItsQueuesFallIdle: the leader returns its
// free heap once its work queues have been idle for kit.IdleBeforeRelease
// after the start-up syncs (docs/deploy.md#memory), and not again while
// nothing is queued.
func TestControllerReturnsMemoryOnceItsQueuesFallIdle(t *testing.T) {
	c := startCluster(t)
	ctrl := startController(t, c, map[string]string{"POD_NAME": "replica-a"})
	require.Equal(t, http.StatusOK, testenv.WaitHTTP(ctrl.base+"/ready", http.StatusOK, 30*time.Second))

	releases := func() float64 { return scrape(t, ctrl.base, "clerum_hcc_idle_memory_releases_total") }
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, kit.IdleBeforeRelease+30*time.Second, true,
		func(context.Context) (bool, error) { return releases() > 0, nil })
	require.NoError(t, err, "no release after the start-up syncs")
	assert.Zero(t, scrape(t, ctrl.base, "workqueue_depth"), "released with items queued")
	time.Sleep(kit.IdleBeforeRelease + time.Second)
	assert.Equal(t, 1.0, releases(), "released again with nothing queued since")
}
