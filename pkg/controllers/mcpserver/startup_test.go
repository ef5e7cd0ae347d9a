package mcpserver

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources/resourcestest"
	"github.com/clerum/hcc/pkg/imagepolicy"
)

// unsettledGate is a gate whose Settled closes, and whose servers' gates
// open, only when the test says so.
type unsettledGate struct {
	settled chan struct{}
	mu      sync.Mutex
	open    map[string]bool
	told    func(string)
}

func (g *unsettledGate) Ready(s *clerumv1alpha1.McpServer) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open[s.Name]
}
func (g *unsettledGate) OnGate(f func(string))    { g.told = f }
func (g *unsettledGate) Settled() <-chan struct{} { return g.settled }

// release opens server's gate, as the first NetworkPolicy pass does when
// the server's policies have landed, and tells the operator.
func (g *unsettledGate) release(server string) {
	g.mu.Lock()
	g.open[server] = true
	g.mu.Unlock()
	g.told(server)
}

// TestBeforeTheGatesSettleOnlyReleasedServersSync runs the operator's Run
// with its informers started. Until the egress gates settle, a server whose
// gate is closed is not synced (nothing is written: at a new leader its
// status would say pending, then ready again), and a server the first pass
// released is synced at once (a cold start deploys it). Settling syncs the
// rest.
func TestBeforeTheGatesSettleOnlyReleasedServersSync(t *testing.T) {
	f := kittest.NewFixture(t, resourcestest.NewServer("github", clerumv1alpha1.TransportSSE),
		resourcestest.NewServer("slack", clerumv1alpha1.TransportSSE))
	policy, err := imagepolicy.Parse(testPrefixes)
	require.NoError(t, err)
	gate := &unsettledGate{settled: make(chan struct{}), open: map[string]bool{}}
	c := New(f.Deps(), gate, Config{Namespace: "mcp-server", Build: resourcestest.Options, Images: policy, Workers: 1})

	ctx, cancel := context.WithCancel(context.Background())
	defer f.Deps().Informers.Shutdown()
	f.Deps().Informers.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()
	wrote := func(server string) bool {
		return slices.ContainsFunc(f.Writes(), func(w string) bool { return strings.HasSuffix(w, "/"+server) || strings.Contains(w, "/"+server+"/") })
	}

	// The caches sync at once; no gate has said anything yet.
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, f.Writes(), "no server is synced before its gate opens or the gates settle")

	gate.release("github")
	require.Eventually(t, func() bool { return wrote("github") }, time.Second, 5*time.Millisecond,
		"a server the first pass released is synced before the gates settle")
	assert.Contains(t, f.Writes(), "create deployments/github")
	time.Sleep(100 * time.Millisecond)
	assert.False(t, wrote("slack"), "a server whose gate is still closed waits")

	close(gate.settled)
	gate.told("slack") // settling re-queues every server
	require.Eventually(t, func() bool { return wrote("slack") }, time.Second, 5*time.Millisecond,
		"the server is synced once the gates have settled")
	assert.NotContains(t, f.Writes(), "create deployments/slack", "blocked by its closed gate")
}
