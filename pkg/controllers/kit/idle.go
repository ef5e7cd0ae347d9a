package kit

import (
	"context"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/client-go/util/workqueue"
)

// activity is what every queue of one process has to do: the items
// waiting, the items being synced, the items ever added, and when any of
// these last changed. The queues report it through their metrics (see
// activityMetrics), so it covers every queue Queues made, whoever runs it.
type activity struct {
	mu       sync.Mutex
	queued   int // items waiting, over every queue (the depths' sum)
	syncing  int // items taken and not yet done
	adds     uint64
	changed  time.Time // the last add, take or done
	nowFunc  func() time.Time
	released uint64 // adds at the last release (ReleaseMemoryWhenIdle)
}

func (a *activity) update(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f()
	a.changed = a.nowFunc()
}

// idleSince returns when the queues last had work, and whether they have
// none now (nothing waiting, nothing being synced).
func (a *activity) idleSince() (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed, a.queued == 0 && a.syncing == 0
}

// The workqueue calls its metrics at each step of an item (client-go's
// util/workqueue/metrics.go): on Add the adds counter and the depth go
// up; on Get the depth goes down and the time queued is observed; on Done
// the work duration is observed. activityMetrics follow those calls.
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
	// MinReleaseInterval bounds the releases to one per interval, so a
	// trickle of work pays for at most one extra collection per interval.
	MinReleaseInterval = time.Minute
)

// ReleaseMemoryWhenIdle returns the heap's free memory to the operating
// system each time the process falls idle after work: once every queue of
// q has had nothing waiting and nothing being synced for idle, an item
// was added since the last release, and the last release is at least
// every ago. It runs until ctx is done.
//
// Why: the Go runtime sets its next heap goal from the heap the last
// collection marked. The start-up lists and a full resync are bursts of
// garbage, and a collection during one leaves a goal of several times the
// caches' size; a process that then allocates almost nothing is not
// collected again for minutes, and keeps the memory under that goal
// resident. debug.FreeOSMemory collects once and returns what is free:
// the resident set falls to the caches and the goal to twice them. A
// release costs one collection, the marking of the live heap, once per
// burst of work, never more often than every.
func (q *Queues) ReleaseMemoryWhenIdle(ctx context.Context, idle, every time.Duration, log zerolog.Logger) {
	q.releaseWhenIdle(ctx, idle, every, func() {
		started := q.clock.Now()
		debug.FreeOSMemory()
		log.Debug().Dur("took", q.clock.Since(started)).Msg("returned free memory to the operating system after the queues fell idle")
	})
}

// releaseWhenIdle is ReleaseMemoryWhenIdle with release in place of
// debug.FreeOSMemory; it looks every idle/4.
func (q *Queues) releaseWhenIdle(ctx context.Context, idle, every time.Duration, release func()) {
	r := &releaser{a: q.activity, idle: idle, every: every, release: release, releases: q.metrics.releases}
	Every(ctx, q.clock, max(idle/4, time.Millisecond), func() { r.tick(q.clock.Now()) })
}

// releaser decides when to release.
type releaser struct {
	a           *activity
	idle, every time.Duration
	release     func()
	releases    prometheus.Counter
	last        time.Time // the last release; zero before the first
}

// tick releases if, at now, the queues have worked since the last release
// and been idle for r.idle since, and the last release is r.every ago.
func (r *releaser) tick(now time.Time) (released bool) {
	since, quiet := r.a.idleSince()
	r.a.mu.Lock()
	adds := r.a.adds
	worked := adds != r.a.released
	r.a.mu.Unlock()
	if !worked || !quiet || now.Sub(since) < r.idle || (!r.last.IsZero() && now.Sub(r.last) < r.every) {
		return false
	}
	r.release()
	r.last = now
	r.a.mu.Lock()
	r.a.released = adds
	r.a.mu.Unlock()
	r.releases.Inc()
	return true
}

// newReleasesMetric is the counter of ReleaseMemoryWhenIdle's releases.
func newReleasesMetric() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Name: "clerum_hcc_idle_memory_releases_total",
		Help: "Times hcc-controller returned the heap's free memory to the operating system after its work queues fell idle (docs/deploy.md#memory).",
	})
}
