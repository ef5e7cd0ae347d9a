package kit

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/client-go/util/workqueue"
)

// activity is what every queue of one process has to do: the items
// waiting, the items being synced, the items ever added, and when any of
// these last changed. The queues report it through their metrics (the
// *Activity wrappers below), so it covers every queue Queues made,
// whoever runs it.
type activity struct {
	mu      sync.Mutex
	queued  int // items waiting, over every queue (the depths' sum)
	syncing int // items taken and not yet done
	adds    uint64
	changed time.Time // the last add, take or done
	nowFunc func() time.Time
}

func (a *activity) update(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f()
	a.changed = a.nowFunc()
}

// activitySnapshot is the queues' activity at one moment.
type activitySnapshot struct {
	changed time.Time // the last add, take or done
	idle    bool      // nothing waiting, nothing being synced
	adds    uint64    // items ever added
}

func (a *activity) snapshot() activitySnapshot {
	a.mu.Lock()
	defer a.mu.Unlock()
	return activitySnapshot{changed: a.changed, idle: a.queued == 0 && a.syncing == 0, adds: a.adds}
}

// The workqueue calls its metrics at each step of an item (client-go's
// util/workqueue/metrics.go): on Add the adds counter and the depth go
// up; on Get the depth goes down and the time queued is observed; on Done
// the work duration is observed. These wrappers follow those calls.
type (
	depthActivity struct {
		workqueue.GaugeMetric
		a *activity
	}
	addsActivity struct {
		workqueue.CounterMetric
		a *activity
	}
	takenActivity struct {
		workqueue.HistogramMetric
		a *activity
	}
	doneActivity struct {
		workqueue.HistogramMetric
		a *activity
	}
)

func (m depthActivity) Inc() {
	m.GaugeMetric.Inc()
	m.a.update(func() { m.a.queued++ })
}

func (m depthActivity) Dec() {
	m.GaugeMetric.Dec()
	m.a.update(func() { m.a.queued-- })
}

func (m addsActivity) Inc() {
	m.CounterMetric.Inc()
	m.a.update(func() { m.a.adds++ })
}

// Observe is called once per Get: the item is being synced.
func (m takenActivity) Observe(v float64) {
	m.HistogramMetric.Observe(v)
	m.a.update(func() { m.a.syncing++ })
}

// Observe is called once per Done of an item taken by Get.
func (m doneActivity) Observe(v float64) {
	m.HistogramMetric.Observe(v)
	m.a.update(func() { m.a.syncing-- })
}

// Releasing the memory a burst of work left behind (docs/deploy.md#memory).
const (
	// IdleBeforeRelease is how long every queue must have been idle after
	// work before the heap's free memory is returned.
	IdleBeforeRelease = 10 * time.Second
	// MinReleaseInterval bounds the releases to one per interval.
	MinReleaseInterval = time.Minute
	// MinReleasable is the least heap a release must be able to return,
	// beyond the live heap, to be worth a collection: a trickle of work
	// (a timer's resync of a few objects) leaves less and costs nothing.
	MinReleasable = 64 << 20
)

// ReleaseMemoryWhenIdle returns the heap's free memory to the operating
// system each time the process falls idle after a burst of work: once
// every queue of q has had nothing waiting and nothing being synced for
// idle (items a requeue or a retry's backoff delays are not waiting yet),
// an item was added since the last release, the heap holds at least
// MinReleasable beyond what the last collection found live, and the last
// release is at least every ago. It runs until ctx is done.
//
// Why: the Go runtime sets its next heap goal from the heap the last
// collection marked. The start-up lists and a full resync are bursts of
// garbage, and a collection during one leaves a goal of several times the
// caches' size; a process that then allocates almost nothing is not
// collected again for minutes, and keeps the memory under that goal
// resident. debug.FreeOSMemory collects once and returns what is free:
// the resident set falls to the caches and the goal to twice them. A
// release costs one collection, the marking of the live heap.
func (q *Queues) ReleaseMemoryWhenIdle(ctx context.Context, idle, every time.Duration, log zerolog.Logger) {
	q.releaseWhenIdle(ctx, idle, every, newHeapReleasable(), func(releasable uint64) {
		started := q.clock.Now()
		debug.FreeOSMemory()
		log.Debug().Dur("took", q.clock.Since(started)).Uint64("releasableBytes", releasable).
			Msg("returned free memory to the operating system after the queues fell idle")
	})
}

// IdleMemoryReleaser runs ReleaseMemoryWhenIdle over Queues as one of the
// reconcilers, so it starts and stops with the queues it watches.
type IdleMemoryReleaser struct {
	Queues *Queues
	Log    zerolog.Logger
}

var _ Reconciler = IdleMemoryReleaser{}

func (IdleMemoryReleaser) Name() string { return "idle-memory-release" }

// Run releases with the shipped thresholds until ctx is done.
func (r IdleMemoryReleaser) Run(ctx context.Context) error {
	r.Queues.ReleaseMemoryWhenIdle(ctx, IdleBeforeRelease, MinReleaseInterval, r.Log)
	return nil
}

// releaseWhenIdle is ReleaseMemoryWhenIdle with releasable and release in
// place of the heap's reader and debug.FreeOSMemory; it looks every
// idle/4.
func (q *Queues) releaseWhenIdle(ctx context.Context, idle, every time.Duration, releasable func() uint64, release func(releasable uint64)) {
	r := &releaser{a: q.activity, idle: idle, every: every, releasable: releasable, release: release, releases: q.metrics.releases}
	Every(ctx, q.clock, max(idle/4, time.Millisecond), func() { r.tick(q.clock.Now()) })
}

// releaser decides when to release. Only its own goroutine uses it.
type releaser struct {
	a           *activity
	idle, every time.Duration
	releasable  func() uint64 // the heap a release would return, in bytes
	release     func(releasable uint64)
	releases    prometheus.Counter
	last        time.Time // the last release; zero before the first
	addsThen    uint64    // the items ever added, at the last release
}

// tick releases if, at now, the queues have had work since the last
// release and been idle for r.idle, a release would return at least
// MinReleasable, and the last release is r.every ago.
func (r *releaser) tick(now time.Time) (released bool) {
	s := r.a.snapshot()
	switch {
	case s.adds == r.addsThen, !s.idle, now.Sub(s.changed) < r.idle:
		return false
	case !r.last.IsZero() && now.Sub(r.last) < r.every:
		return false
	}
	releasable := r.releasable()
	if releasable < MinReleasable {
		return false // not yet worth a collection; looked at again next tick
	}
	r.release(releasable)
	r.last, r.addsThen = now, s.adds
	r.releases.Inc()
	return true
}

// heapSamples are the runtime/metrics a heap reader reads.
var heapSamples = []string{
	"/memory/classes/heap/objects:bytes", // live and not yet swept dead objects
	"/memory/classes/heap/unused:bytes",  // reserved for objects, not holding any
	"/memory/classes/heap/free:bytes",    // free and not yet returned to the system
	"/gc/heap/live:bytes",                // what the last collection marked live
}

// newHeapReleasable returns a reader of the heap the process holds beyond
// what its last collection found live: what a collection and a return
// could give back. A read stops nothing (runtime/metrics, not
// runtime.ReadMemStats) and allocates nothing; the reader reuses its
// samples, so one goroutine at a time may call it.
func newHeapReleasable() func() uint64 {
	samples := make([]metrics.Sample, len(heapSamples))
	for i, name := range heapSamples {
		samples[i].Name = name
	}
	return func() uint64 {
		metrics.Read(samples)
		var held uint64
		for _, s := range samples[:3] {
			held += s.Value.Uint64()
		}
		live := samples[3].Value.Uint64()
		if held < live {
			return 0
		}
		return held - live
	}
}

// newReleasesMetric is the counter of ReleaseMemoryWhenIdle's releases.
func newReleasesMetric() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "clerum_hcc_idle_memory_releases_total",
		Help: "Times hcc-controller returned the heap's free memory to the operating system after its work queues fell idle (docs/deploy.md#memory).",
	})
}
