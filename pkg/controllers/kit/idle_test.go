package kit

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

// idleFixture is a Queues on a fake clock, with one real queue (q), and a
// releaser over it that counts its releases.
type idleFixture struct {
	clock      *clocktesting.FakeClock
	queues     *Queues
	q          workqueue.TypedRateLimitingInterface[string]
	releaser   *releaser
	released   int
	releasable uint64   // what the heap would give back
	reads      int      // of releasable
	given      []uint64 // what each release was told it would return
}

func newIdleFixture(t *testing.T) *idleFixture {
	t.Helper()
	f := &idleFixture{clock: clocktesting.NewFakeClock(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))}
	f.queues = NewQueues(prometheus.NewRegistry(), f.clock)
	f.q = New(f.queues, "q", Backoff[string](time.Millisecond, time.Second))
	t.Cleanup(f.q.ShutDown)
	f.releasable = MinReleasable
	f.releaser = &releaser{a: f.queues.activity, idle: 10 * time.Second, every: time.Minute,
		releasable: func() uint64 { f.reads++; return f.releasable },
		release:    func(n uint64) { f.released++; f.given = append(f.given, n) },
		releases:   f.queues.metrics.releases}
	return f
}

// work adds key to the queue, takes it and is done with it.
func (f *idleFixture) work(key string) {
	f.q.Add(key)
	item, _ := f.q.Get()
	f.q.Done(item)
}

// after steps the clock by d and lets the releaser look.
func (f *idleFixture) after(d time.Duration) bool {
	f.clock.Step(d)
	return f.releaser.tick(f.clock.Now())
}

func TestQueuesAreIdleOnlyWithNothingWaitingAndNothingBeingSynced(t *testing.T) {
	f := newIdleFixture(t)
	q := f.q
	idle := func() bool { return f.queues.activity.snapshot().idle }

	require.True(t, idle(), "a new queue")
	q.Add("a")
	q.Add("a") // a duplicate is no second item
	assert.False(t, idle(), "an item waiting")
	item, _ := q.Get()
	assert.False(t, idle(), "an item being synced")
	q.Add("a") // added again while it is synced: waits for its Done
	q.Done(item)
	assert.False(t, idle(), "the item added again while it was synced waits")
	item, _ = q.Get()
	q.Done(item)
	assert.True(t, idle(), "every item done")

	q.AddAfter("b", time.Hour)
	assert.True(t, idle(), "an item due later is nothing to do yet")
}

func TestMemoryIsReleasedOnceTheQueuesFellIdleAfterWork(t *testing.T) {
	f := newIdleFixture(t)
	q, work := f.q, f.work

	assert.False(t, f.after(time.Hour), "no work yet: nothing to release")

	work("a")
	assert.False(t, f.after(9*time.Second), "idle for less than 10 s")
	assert.True(t, f.after(time.Second), "idle for 10 s after work")
	assert.False(t, f.after(time.Hour), "no work since the last release")

	// Work that outlasts the idle period keeps its memory until it is done.
	q.Add("b")
	item, _ := q.Get()
	assert.False(t, f.after(time.Hour), "an item still being synced")
	q.Done(item)
	assert.False(t, f.after(9*time.Second))
	assert.True(t, f.after(time.Second))

	// At most one release a minute, however often the queues fall idle.
	work("c")
	assert.False(t, f.after(20*time.Second), "idle, but released 20 s ago")
	work("d")
	assert.False(t, f.after(30*time.Second), "idle, but released 50 s ago")
	assert.True(t, f.after(10*time.Second), "a minute after the last release")

	assert.Equal(t, 3, f.released)
	var m dto.Metric
	require.NoError(t, f.queues.metrics.releases.Write(&m))
	assert.Equal(t, 3.0, m.GetCounter().GetValue(), "clerum_hcc_idle_memory_releases_total")
}

func TestMemoryIsReleasedOnlyWhenAReleaseWouldReturnEnough(t *testing.T) {
	f := newIdleFixture(t)
	f.work("a")

	f.releasable = MinReleasable - 1
	assert.False(t, f.after(time.Hour), "a trickle of work left too little to be worth a collection")
	f.releasable = MinReleasable + 1
	assert.True(t, f.after(time.Second), "the heap grew: worth it now")
	assert.Equal(t, []uint64{MinReleasable + 1}, f.given, "the release is told what it will return")
	assert.Equal(t, 2, f.reads, "the heap is read once a look, and not again to release")
}

// A release must not take an add it did not see as released: the burst
// that add starts is released in its turn.
func TestWorkAddedAfterTheLookIsReleasedInItsTurn(t *testing.T) {
	f := newIdleFixture(t)
	f.work("a")
	f.clock.Step(10 * time.Second)
	f.releaser.release = func(uint64) { f.released++; f.work("b") } // b lands while the release runs
	require.True(t, f.releaser.tick(f.clock.Now()))
	f.releaser.release = func(uint64) { f.released++ }
	assert.True(t, f.after(time.Minute), "b's burst, idle and a minute after the last release")
}

// garbageSink keeps the compiler from eliding the allocation.
var garbageSink []byte

func TestHeapReleasableCountsWhatACollectionWouldGiveBack(t *testing.T) {
	runtime.GC()
	garbageSink = make([]byte, 2*MinReleasable)
	for i := range garbageSink {
		garbageSink[i] = 1 // touched, so resident
	}
	garbageSink = nil
	runtime.GC() // frees it, but returns it only at the scavenger's pace
	heapReleasable := newHeapReleasable()
	assert.GreaterOrEqual(t, heapReleasable(), uint64(MinReleasable), "128 MiB freed and not yet returned")
	debug.FreeOSMemory()
	assert.Less(t, heapReleasable(), uint64(MinReleasable), "everything free returned")
}

func TestReleaseMemoryWhenIdleRunsUntilItsContextIsDone(t *testing.T) {
	f := newIdleFixture(t)
	f.work("a")

	ctx, cancel := context.WithCancel(context.Background())
	released := make(chan struct{}, 1)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		f.queues.releaseWhenIdle(ctx, 10*time.Second, time.Minute,
			func() uint64 { return MinReleasable }, func(uint64) { released <- struct{}{} })
	}()
	// The releaser's ticker may start at any step: step until it released.
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		f.clock.Step(time.Second)
		select {
		case <-released:
			done = true
		case <-time.After(5 * time.Millisecond):
		case <-deadline:
			t.Fatal("no release after the queues fell idle")
		}
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("still running after its context was done")
	}
}
