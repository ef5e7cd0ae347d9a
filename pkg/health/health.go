// Package health serves the liveness, readiness and metrics endpoints both
// binaries expose.
package health

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Readiness is the set of conditions a process must meet before it reports
// ready. Each part of the process registers a named check and flips it; the
// process is ready when every registered check passes. Safe for concurrent use.
type Readiness struct {
	mu     sync.RWMutex
	checks map[string]bool
	// reasons say why a pending check does not pass yet, where its owner
	// knows.
	reasons map[string]string
}

// NewReadiness returns a Readiness with the named checks registered as not
// yet passing.
func NewReadiness(names ...string) *Readiness {
	r := &Readiness{checks: make(map[string]bool, len(names))}
	for _, n := range names {
		r.checks[n] = false
	}
	return r
}

// Set registers check name if needed and records whether it passes.
func (r *Readiness) Set(name string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks[name] = ok
}

// Explain records why check name does not pass yet; "" clears it. /ready
// shows the reasons of the pending checks.
func (r *Readiness) Explain(name, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reason == "" {
		delete(r.reasons, name)
		return
	}
	if r.reasons == nil {
		r.reasons = map[string]string{}
	}
	r.reasons[name] = reason
}

// Reasons returns the recorded reasons of the checks that do not pass yet.
func (r *Readiness) Reasons() map[string]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[string]string{}
	for name, reason := range r.reasons {
		if !r.checks[name] {
			out[name] = reason
		}
	}
	return out
}

// Pending returns the sorted names of the checks that do not pass yet.
func (r *Readiness) Pending() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var pending []string
	for name, ok := range r.checks {
		if !ok {
			pending = append(pending, name)
		}
	}
	sort.Strings(pending)
	return pending
}

// Ready reports whether every registered check passes.
func (r *Readiness) Ready() bool { return len(r.Pending()) == 0 }

// Register adds /health, /ready and /metrics to mux. /health answers 200
// while the process runs (with the readiness verdict in its body, as
// docs/http-api.md shows); /ready answers 503 and names the pending checks
// until all pass.
func Register(mux *http.ServeMux, r *Readiness, gatherer prometheus.Gatherer) {
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		// A struct, not a map, keeps the documented key order: a map is
		// encoded with its keys sorted.
		writeJSON(w, http.StatusOK, healthBody{Status: "ok", Ready: r.Ready()})
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if pending := r.Pending(); len(pending) > 0 {
			body := map[string]any{"ready": false, "pending": pending}
			if reasons := r.Reasons(); len(reasons) > 0 {
				body["reasons"] = reasons
			}
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"ready": true})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
}

// healthBody is the body of /health.
type healthBody struct {
	Status string `json:"status"`
	Ready  bool   `json:"ready"`
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
