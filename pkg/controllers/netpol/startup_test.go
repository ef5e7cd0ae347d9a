package netpol

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/health"
	"github.com/clerum/hcc/pkg/netpol"
)

// unprimedEgress is a coordinator whose startup round is done only when
// the test closes primed; it counts the passes that reported.
type unprimedEgress struct {
	primed chan struct{}

	mu      sync.Mutex
	applied int
}

func (e *unprimedEgress) Snapshot() (map[string]map[string]netpol.Resolution, uint64) { return nil, 1 }
func (e *unprimedEgress) Primed() <-chan struct{}                                     { return e.primed }
func (e *unprimedEgress) Applied(uint64, EgressReport) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.applied++
}

func (e *unprimedEgress) Landed(uint64, []string, EgressReport) {}

func (e *unprimedEgress) passes() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applied
}

// TestStartupWaitsForTheStartupRound runs the controller's Run with its
// informers started: no pass runs (nothing is written, nothing reported)
// before the coordinator's startup DNS round is done, and the startup pass
// runs once it is.
func TestStartupWaitsForTheStartupRound(t *testing.T) {
	f := kittest.NewFixture(t)
	egress := &unprimedEgress{primed: make(chan struct{})}
	d := f.Deps()
	d.Readiness = health.NewReadiness()
	c := New(d, egress, Options{Plan: testPlanOpts, Caps: Caps{Absolute: 10, Percent: 20}})

	ctx, cancel := context.WithCancel(context.Background())
	defer f.Deps().Informers.Shutdown()
	f.Deps().Informers.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	// The caches sync at once; the first pass still waits for the round.
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, f.Writes(), "no pass before the startup round")
	require.Zero(t, egress.passes(), "no pass before the startup round")

	close(egress.primed)
	require.Eventually(t, func() bool { return egress.passes() > 0 && len(f.Writes()) > 0 }, time.Second, 5*time.Millisecond,
		"the startup pass runs once the round is done")
}
