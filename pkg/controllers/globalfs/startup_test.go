package globalfs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/clerum/hcc/pkg/controllers/globalfs/resources/resourcestest"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
)

const startupResync = time.Minute

// startupFixture builds the reconciler over a fake API server holding
// objs and starts its informers, and waits for the GlobalFileSystem
// cache. start runs Run until the test ends.
func startupFixture(t *testing.T, objs ...runtime.Object) (f *kittest.Fixture, start func()) {
	t.Helper()
	f = kittest.NewFixture(t, objs...)
	c := New(f.Deps(), Config{Namespace: resourcestest.Namespace, Build: resourcestest.Options, Resync: startupResync, Workers: 1, SeedKey: testSeedKey})
	inf := f.Deps().Informers.HCC(resourcestest.Namespace).Clerum().V1alpha1().GlobalFileSystems().Informer()
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
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	return f, func() {
		done = make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
	}
}

// writesOf are the writes to the GlobalFileSystem name and its children.
func writesOf(f *kittest.Fixture, name string) []string {
	var out []string
	for _, w := range f.Writes() {
		if strings.Contains(w, name) {
			out = append(out, w)
		}
	}
	return out
}

// TestStartupQueuesEveryGlobalFileSystem: Run's first full pass queues a
// GlobalFileSystem the cache holds even with no informer event for it
// (put in the cache only, as a missed event leaves it).
func TestStartupQueuesEveryGlobalFileSystem(t *testing.T) {
	f, start := startupFixture(t)
	f.Index(resourcestest.NewGFS("unseen"))
	start()
	require.Eventually(t, func() bool { return len(writesOf(f, "unseen")) > 0 }, time.Second, 5*time.Millisecond,
		"the first full pass syncs a GlobalFileSystem no event named")
}

// TestStartupResyncQueuesEveryGlobalFileSystem: every Resync, Run queues
// every GlobalFileSystem the cache holds, one no event named among them.
func TestStartupResyncQueuesEveryGlobalFileSystem(t *testing.T) {
	f, start := startupFixture(t, resourcestest.NewGFS("watched"))
	start()
	// watched's writes: the workers run, the first full pass is over.
	require.Eventually(t, func() bool { return len(writesOf(f, "watched")) > 0 }, time.Second, 5*time.Millisecond)

	f.Index(resourcestest.NewGFS("unseen"))
	time.Sleep(200 * time.Millisecond)
	require.Empty(t, writesOf(f, "unseen"), "no event named it: nothing syncs it before the resync")

	// The resync's ticker is made beside the workers, at a moment the test
	// cannot see: step a Resync until it ticks.
	require.Eventually(t, func() bool {
		f.Clock.Step(startupResync)
		return len(writesOf(f, "unseen")) > 0
	}, time.Second, 5*time.Millisecond, "the resync syncs a GlobalFileSystem no event named")
}
