package controlapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the client's Prometheus series. Labels have closed sets: the
// route constant, and status codes or the Code constants.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the client's series with reg. Pass its Observe as
// Options.Observe.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_host_control_api_requests_total",
			Help: "Control API requests (attempts, retries included) by route and status code, or invalid, timeout, error, canceled.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clerum_hcc_host_control_api_request_duration_seconds",
			Help:    "Control API request latency by route, per attempt.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	m.duration.WithLabelValues(RouteBootstrapCredentials)
	return m
}

// Observe records one attempt.
func (m *Metrics) Observe(route, code string, d time.Duration) {
	m.requests.WithLabelValues(route, code).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}
