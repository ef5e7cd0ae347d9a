package api

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are hcc-api's Prometheus series. Every label has a closed set of
// values (route patterns, status codes, failure reasons, actions, informer
// names), so no caller can grow the series count.
type Metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	authFailures *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec
	tokenCache   *prometheus.CounterVec
	cacheSynced  *prometheus.GaugeVec
	// inventoryHits and inventoryMisses count InventoryCache lookups.
	inventoryHits, inventoryMisses prometheus.Counter
	informerEvents                 *prometheus.CounterVec
}

// NewMetrics registers hcc-api's series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_api_requests_total",
			Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clerum_hcc_api_request_duration_seconds",
			Help:    "HTTP request latency by route pattern.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"route"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_api_auth_failures_total",
			Help: "Refused v2 requests by reason; the client always sees the same 401.",
		}, []string{"reason"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_api_rate_limited_total",
			Help: "v2 requests answered 429 by action.",
		}, []string{"action"}),
		tokenCache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_api_token_cache_lookups_total",
			Help: "Verified-token cache lookups by result (hit, miss).",
		}, []string{"result"}),
		informerEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_api_informer_events_total",
			Help: "Objects the informer caches delivered, by informer and event (add, update, delete).",
		}, []string{"informer", "event"}),
		cacheSynced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clerum_hcc_api_informer_synced",
			Help: "1 once the informer cache has synced (or, in dev mode, the fixtures are loaded), else 0.",
		}, []string{"informer"}),
	}
	inventoryCache := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clerum_hcc_api_inventory_cache_lookups_total",
		Help: "v2 inventory cache lookups by result (hit, miss).",
	}, []string{"result"})
	m.inventoryHits, m.inventoryMisses = inventoryCache.WithLabelValues("hit"), inventoryCache.WithLabelValues("miss")
	reg.MustRegister(m.requests, m.duration, m.authFailures, m.rateLimited, m.tokenCache, m.cacheSynced, m.informerEvents, inventoryCache)
	for _, f := range failures {
		m.authFailures.WithLabelValues(string(f))
	}
	for _, a := range []action{actionInventory, actionCredential} {
		m.rateLimited.WithLabelValues(string(a))
	}
	return m
}

// SetCacheSynced records whether the named informer cache has synced.
func (m *Metrics) SetCacheSynced(informer string, synced bool) {
	v := 0.0
	if synced {
		v = 1
	}
	m.cacheSynced.WithLabelValues(informer).Set(v)
}

// InformerEvent counts one object the named informer delivered: event is
// add, update or delete.
func (m *Metrics) InformerEvent(informer, event string) {
	m.informerEvents.WithLabelValues(informer, event).Inc()
}
