package mcpserver

import (
	"context"
	"testing"
	"time"

	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources/resourcestest"

	"github.com/stretchr/testify/require"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/imagepolicy"
)

// unsettledGate is a gate, open to every server, whose Settled closes
// only when the test says so.
type unsettledGate struct{ settled chan struct{} }

func (g *unsettledGate) Ready(*clerumv1alpha1.McpServer) bool { return true }
func (g *unsettledGate) OnGate(func(string))                  {}
func (g *unsettledGate) Settled() <-chan struct{}             { return g.settled }

// TestStartupWaitsForTheGatesToSettle runs the operator's Run with its
// informers started: no server is synced (nothing is written) before the
// egress gates have settled, and the server is synced once they have.
func TestStartupWaitsForTheGatesToSettle(t *testing.T) {
	f := kittest.NewFixture(t, resourcestest.NewServer("github", clerumv1alpha1.TransportStdio))
	policy, err := imagepolicy.Parse(testPrefixes)
	require.NoError(t, err)
	gate := &unsettledGate{settled: make(chan struct{})}
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

	// The caches sync at once; the first sync still waits for the gates.
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, f.Writes(), "no sync before the gates have settled")

	close(gate.settled)
	require.Eventually(t, func() bool { return len(f.Writes()) > 0 }, time.Second, 5*time.Millisecond,
		"the server is synced once the gates have settled")
}
