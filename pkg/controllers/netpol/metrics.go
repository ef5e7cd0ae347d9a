package netpol

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/clerum/hcc/pkg/controllers/kit"
)

// Metrics are the NetworkPolicy operator's Prometheus series, all named
// clerum_hcc_netpol_* (docs/networkpolicy.md, "Metrics").
type Metrics struct {
	PassDuration  *prometheus.HistogramVec
	Policies      *prometheus.GaugeVec
	Writes        *prometheus.CounterVec
	WriteErrors   *prometheus.CounterVec
	OrphanCapped  *prometheus.CounterVec
	TicksSkipped  *prometheus.CounterVec
	Certified     prometheus.Gauge
	Orphans       prometheus.Gauge
	Rejections    prometheus.Gauge
	ContextIgnore prometheus.Gauge

	Disowned           prometheus.Gauge
	KeptDefaults       prometheus.Gauge
	UnmanagedConflicts prometheus.Gauge
	// DefaultDenyWithheld counts deny-all names held by policies HCC does
	// not manage that are not default denies: each withholds readiness.
	DefaultDenyWithheld prometheus.Gauge
	MissingNamespaces   prometheus.Gauge
	LastSuccess         prometheus.Gauge
	// LastPassDuration is how long the last pass of each kind took,
	// whatever its result: a pass that fails after minutes is the one an
	// operator comparing pass time with the resync period must see.
	LastPassDuration *prometheus.GaugeVec
	// FullPasses counts the full passes a signal, a timer or an
	// incremental pass asked for, by why the pass could not be incremental.
	FullPasses *prometheus.CounterVec
	// GrantsWithheld counts the contextIds whose new allows the last full
	// pass held back while pods of another holder carried them.
	GrantsWithheld prometheus.Gauge
}

// passBuckets are the pass histogram's upper bounds: 5 ms doubling to 41 s,
// then on to 15 minutes, since a full pass over a large fleet takes
// minutes and a resync period is only safe well above the slowest pass
// (docs/networkpolicy.md, "Metrics").
var passBuckets = append(prometheus.ExponentialBuckets(0.005, 2, 14), 60, 120, 300, 600, 900)

// NewMetrics registers the operator's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		PassDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "clerum_hcc_netpol_pass_duration_seconds",
			Help:    "Duration of NetworkPolicy passes, by kind (full, incremental or defaults) and result.",
			Buckets: passBuckets,
		}, []string{"kind", "result"}),
		Policies: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clerum_hcc_netpol_policies",
			Help: "Desired NetworkPolicies by policy type, as of the last pass.",
		}, []string{"type"}),
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_netpol_writes_total",
			Help: "NetworkPolicy writes by verb (create, update, delete).",
		}, []string{"verb"}),
		WriteErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_netpol_write_errors_total",
			Help: "Failed NetworkPolicy writes by verb.",
		}, []string{"verb"}),
		OrphanCapped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_netpol_orphan_sweep_capped_total",
			Help: "Passes whose orphan deletes a cap refused, by rule (absolute or percent).",
		}, []string{"rule"}),
		TicksSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_netpol_resync_ticks_skipped_total",
			Help: "Resync timer ticks skipped because a pass of the same kind was running.",
		}, []string{"reason"}),
		Certified: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clerum_hcc_netpol_certified",
			Help: "1 once stale allows have been revoked and readiness certified.",
		}),
		Orphans: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clerum_hcc_netpol_orphan_candidates",
			Help: "Orphaned NetworkPolicies found by the last full pass, deleted or not.",
		}),
		Rejections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clerum_hcc_netpol_rejected_bindings",
			Help: "Egress and recipe bindings rejected by the last pass.",
		}),
		ContextIgnore: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "clerum_hcc_netpol_ignored_contexts",
			Help: "Contexts ignored for a duplicate contextId in the last pass.",
		}),
	}
	m.Disowned = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clerum_hcc_netpol_disowned",
		Help: "Allows the inventory disowns found by the last pass; revoked whatever the orphan caps.",
	})
	m.KeptDefaults = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clerum_hcc_netpol_stale_defaults",
		Help: "L0/L1 policies no longer planned (their namespace left the runtime list): kept, never swept.",
	})
	m.UnmanagedConflicts = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clerum_hcc_netpol_unmanaged_conflicts",
		Help: "NetworkPolicy names HCC needs that objects it does not manage hold, as of the last pass; never written.",
	})
	m.DefaultDenyWithheld = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clerum_hcc_netpol_default_deny_withheld",
		Help: "Runtime namespaces whose deny-all name a policy HCC does not manage holds that is not a default deny, as of the last full pass; while any does, readiness is withheld.",
	})
	m.MissingNamespaces = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clerum_hcc_netpol_missing_namespaces",
		Help: "Policy namespaces that do not exist or are being deleted, as of the last full pass; their policies are written once they exist.",
	})
	m.LastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clerum_hcc_netpol_last_success_timestamp_seconds",
		Help: "Unix time the last full or incremental pass succeeded; alert when it falls behind while this replica leads.",
	})
	m.LastPassDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "clerum_hcc_netpol_last_pass_duration_seconds",
		Help: "Duration of the last NetworkPolicy pass of each kind (full, incremental or defaults), successful or not.",
	}, []string{"kind"})
	m.FullPasses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clerum_hcc_netpol_full_passes_total",
		Help: "Full NetworkPolicy passes run where a signal or timer asked for a pass, by why it could not be incremental.",
	}, []string{"reason"})
	m.GrantsWithheld = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "clerum_hcc_netpol_contextid_grants_withheld",
		Help: "contextIds whose new allows the last full pass withheld because pods of a Host whose Context does not hold them (or of no Host) still carry them; granted once those pods are gone.",
	})
	reg.MustRegister(m.PassDuration, m.Policies, m.Writes, m.WriteErrors, m.OrphanCapped,
		m.TicksSkipped, m.Certified, m.Orphans, m.Rejections, m.ContextIgnore,
		m.Disowned, m.KeptDefaults, m.UnmanagedConflicts, m.DefaultDenyWithheld, m.MissingNamespaces, m.LastSuccess, m.GrantsWithheld,
		m.LastPassDuration, m.FullPasses)
	// Every series of a closed label set exists from the start, at zero: a
	// counter that appears at 1 hides that first increase from rate() and
	// increase(), so an alert on a single cap trip would never fire
	// (docs/monitoring.md).
	for _, kind := range []string{string(passFull), metricIncremental, string(passDefaults)} {
		for _, result := range []string{passSuccess, passError} {
			m.PassDuration.WithLabelValues(kind, result)
		}
	}
	for _, verb := range []string{verbCreate, verbUpdate, verbDelete} {
		m.Writes.WithLabelValues(verb)
		m.WriteErrors.WithLabelValues(verb)
	}
	for _, rule := range kit.CapRules {
		m.OrphanCapped.WithLabelValues(rule)
	}
	return m
}
