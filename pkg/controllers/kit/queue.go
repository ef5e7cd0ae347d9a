package kit

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Queues makes the work queues of one process, all reporting client-go's
// standard workqueue series (workqueue_depth, workqueue_adds_total,
// workqueue_queue_duration_seconds, workqueue_work_duration_seconds,
// workqueue_unfinished_work_seconds,
// workqueue_longest_running_processor_seconds, workqueue_retries_total,
// label name) to one registry, so the dashboards built for
// kube-controller-manager read HCC's queues too.
type Queues struct {
	metrics  *queueMetrics
	clock    clock.WithTicker
	activity *activity
}

// NewQueues registers the workqueue series with reg. Call it once per
// registry; clk drives every queue's delays (nil: the real clock).
func NewQueues(reg prometheus.Registerer, clk clock.WithTicker) *Queues {
	if clk == nil {
		clk = clock.RealClock{}
	}
	a := &activity{nowFunc: clk.Now, changed: clk.Now()}
	return &Queues{metrics: newQueueMetrics(reg, a), clock: clk, activity: a}
}

// Backoff is the rate limiter of a reconciler's failures: base after the
// first failure of an item, doubling up to max. Items fail independently;
// Forget (on success) starts an item over.
func Backoff[T comparable](base, max time.Duration) workqueue.TypedRateLimiter[T] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[T](base, max)
}

// New returns a rate-limited queue named name (the series' name label;
// unique per process) retrying failures on limiter.
func New[T comparable](q *Queues, name string, limiter workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[T]{
		Name:            name,
		MetricsProvider: q.metrics,
		Clock:           q.clock,
	})
}

// queueMetrics implements workqueue.MetricsProvider with the series and
// buckets of k8s.io/component-base's workqueue metrics.
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
	releases                   prometheus.Counter
	// activity follows every queue's items (ReleaseMemoryWhenIdle).
	activity *activity
}

var _ workqueue.MetricsProvider = (*queueMetrics)(nil)

func newQueueMetrics(reg prometheus.Registerer, a *activity) *queueMetrics {
	name := []string{"name"}
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12) // 10 ns .. 1000 s
	m := &queueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_depth", Help: "Current depth of workqueue",
		}, name),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_adds_total", Help: "Total number of adds handled by workqueue",
		}, name),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_queue_duration_seconds", Help: "How long in seconds an item stays in workqueue before being requested.",
			Buckets: buckets,
		}, name),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_work_duration_seconds", Help: "How long in seconds processing an item from workqueue takes.",
			Buckets: buckets,
		}, name),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_unfinished_work_seconds",
			Help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads.",
		}, name),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running.",
		}, name),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_retries_total", Help: "Total number of retries handled by workqueue",
		}, name),
		releases: newReleasesMetric(),
		activity: a,
	}
	reg.MustRegister(m.depth, m.adds, m.latency, m.work, m.unfinished, m.longest, m.retries, m.releases)
	return m
}

func (m *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return depthActivity{m.depth.WithLabelValues(name), m.activity}
}

func (m *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return addsActivity{m.adds.WithLabelValues(name), m.activity}
}

func (m *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return takenActivity{m.latency.WithLabelValues(name), m.activity}
}

func (m *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return doneActivity{m.work.WithLabelValues(name), m.activity}
}

func (m *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.unfinished.WithLabelValues(name)
}

func (m *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return m.longest.WithLabelValues(name)
}

func (m *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return m.retries.WithLabelValues(name)
}
