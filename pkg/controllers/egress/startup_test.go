package egress

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/netpol"
)

const settleDeadline = 30 * time.Second

// startCoordinator builds the coordinator over a fake API server holding
// s1, which binds api.example.com, and runs its Run with the informers
// started until the test ends.
func startCoordinator(t *testing.T) (*kittest.Fixture, *Coordinator, *fakeResolver) {
	t.Helper()
	f := kittest.NewFixture(t, &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1", UID: "uid-1", Generation: 1},
		Spec: clerumv1alpha1.McpServerSpec{
			Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE},
			EgressBindings: []clerumv1alpha1.EgressBinding{hostBinding("api", "api.example.com")},
		},
	})
	resolver := &fakeResolver{answers: map[string][]netip.Addr{}, errs: map[string]error{}}
	resolver.set("api.example.com", "203.0.113.10")
	c := New(f.Deps(), resolver, Options{Namespace: "mcp-server", DNSTimeout: 50 * time.Millisecond, Refresh: refresh,
		SettleDeadline: settleDeadline, Rules: netpol.NewEgressRules(netpol.Options{ClusterDomain: "corp.example"})})

	ctx, cancel := context.WithCancel(context.Background())
	f.Deps().Informers.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		f.Deps().Informers.Shutdown()
	})
	return f, c, resolver
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestStartupPrimesBeforeTheFirstPass: Run resolves every server once
// before its workers start, and Primed, which the first NetworkPolicy pass
// waits for, closes once that round is done.
func TestStartupPrimesBeforeTheFirstPass(t *testing.T) {
	_, c, resolver := startCoordinator(t)

	select {
	case <-c.Primed():
	case <-time.After(time.Second):
		t.Fatal("Primed did not close: no startup resolution round")
	}
	resolver.mu.Lock()
	asked := append([]string(nil), resolver.asked...)
	resolver.mu.Unlock()
	require.NotEmpty(t, asked, "Primed closed before the startup round resolved s1's host")
	require.Contains(t, asked[0], "api.example.com")
}

// TestStartupSettlesAfterTheDeadline: with no NetworkPolicy pass to
// report, Settled stays open until SettleDeadline has passed, then closes.
func TestStartupSettlesAfterTheDeadline(t *testing.T) {
	f, c, _ := startCoordinator(t)

	select {
	case <-c.Primed():
	case <-time.After(time.Second):
		t.Fatal("Primed did not close")
	}
	time.Sleep(100 * time.Millisecond)
	require.False(t, closed(c.Settled()), "settled with no pass reported and no time passed")
	f.Clock.Step(settleDeadline - time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.False(t, closed(c.Settled()), "settled before the deadline with no pass reported")

	// The deadline's timer is set beside the workers, at a moment the
	// test cannot see: step past the deadline until it fires.
	require.Eventually(t, func() bool {
		f.Clock.Step(settleDeadline)
		return closed(c.Settled())
	}, time.Second, 5*time.Millisecond, "Settled did not close after SettleDeadline")
}
