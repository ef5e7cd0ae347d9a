package kittest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// StartupCheck checks the startup round and the periodic full reconcile of
// a reconciler whose owners no event may name: both must sync every owner
// the cache holds. Fixture builds the reconciler over a fake API server
// holding objs, with Resync as its resync period, and returns its Run and
// the owner informer's HasSynced; Owner returns an owner named name.
type StartupCheck struct {
	Kind    string // the owners' kind, in messages
	Resync  time.Duration
	Fixture func(f *Fixture) (run func(context.Context) error, synced cache.InformerSynced)
	Owner   func(name string) runtime.Object
}

// start builds the fixture over objs, starts its informers and waits for
// the owners' cache; the returned start runs Run until the test ends, and
// the test fails if Run returned an error.
func (s StartupCheck) start(t *testing.T, objs ...runtime.Object) (*Fixture, func()) {
	t.Helper()
	f := NewFixture(t, objs...)
	run, synced := s.Fixture(f)
	ctx, cancel := context.WithCancel(context.Background())
	f.Deps().Informers.Start(ctx.Done())
	var done chan error // Run's return, once started
	t.Cleanup(func() {
		cancel()
		if done != nil {
			require.NoError(t, <-done)
		}
		f.Deps().Informers.Shutdown()
	})
	require.True(t, cache.WaitForCacheSync(ctx.Done(), synced))
	return f, func() {
		done = make(chan error, 1)
		go func() { done <- run(ctx) }()
	}
}

// WritesOf are f's writes naming name (an owner and its children).
func (f *Fixture) WritesOf(name string) []string {
	var out []string
	for _, w := range f.Writes() {
		if strings.Contains(w, name) {
			out = append(out, w)
		}
	}
	return out
}

// Run runs both checks as subtests.
func (s StartupCheck) Run(t *testing.T) {
	// Run's first full pass queues an owner the cache holds even with no
	// informer event for it (put in the cache only, as a missed event
	// leaves it).
	t.Run("StartupQueuesEvery"+s.Kind, func(t *testing.T) {
		f, start := s.start(t)
		f.Index(s.Owner("unseen"))
		start()
		require.Eventually(t, func() bool { return len(f.WritesOf("unseen")) > 0 }, time.Second, 5*time.Millisecond,
			"the first full pass syncs a %s no event named", s.Kind)
	})
	// Every Resync, Run queues every owner the cache holds, one no event
	// named among them.
	t.Run("ResyncQueuesEvery"+s.Kind, func(t *testing.T) {
		f, start := s.start(t, s.Owner("watched"))
		start()
		// watched's writes: the workers run, the first full pass is over.
		require.Eventually(t, func() bool { return len(f.WritesOf("watched")) > 0 }, time.Second, 5*time.Millisecond)

		f.Index(s.Owner("unseen"))
		time.Sleep(200 * time.Millisecond)
		require.Empty(t, f.WritesOf("unseen"), "no event named it: nothing syncs it before the resync")

		// The resync's ticker is made beside the workers, at a moment the
		// test cannot see: step a Resync until it ticks.
		require.Eventually(t, func() bool {
			f.Clock.Step(s.Resync)
			return len(f.WritesOf("unseen")) > 0
		}, time.Second, 5*time.Millisecond, "the resync syncs a %s no event named", s.Kind)
	})
}
