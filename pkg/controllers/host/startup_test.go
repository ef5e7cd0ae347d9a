package host

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/names"
)

// TestStartupSweepsOrphans runs the operator's Run with its informers
// started over a fake API server holding a managed Service of a Host that
// no longer exists: the first sweep, at startup, deletes it. Nothing else
// looks for orphans before the next sweep, a Resync later.
func TestStartupSweepsOrphans(t *testing.T) {
	orphan := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "gone-mcp-host", UID: "uid-orphan",
		Labels: map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: names.Label("gone")}}}
	f := kittest.NewFixture(t, hostConfigMap(), orphan)
	issuer := &fakeIssuer{clock: f.Clock, value: credentialValue, lifetime: lifetime}
	c := New(f.Deps(), issuer, Config{
		ContextNamespace: contextNS, TargetNamespace: targetNS, Build: resourcestest.Options,
		RefreshBefore: refreshBefore, Resync: 10 * time.Minute, Caps: kit.Caps{Absolute: 10, Percent: 100}, Workers: 1,
	})

	ctx, cancel := context.WithCancel(context.Background())
	defer f.Deps().Informers.Shutdown()
	f.Deps().Informers.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	require.Eventually(t, func() bool { return slices.Contains(f.Writes(), "delete services/gone-mcp-host") },
		time.Second, 5*time.Millisecond, "the startup sweep deletes the orphan")
}
