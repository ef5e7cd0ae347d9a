// Package diff is `hcc-controller diff`: what a leader would do on its
// first passes over a live cluster, without writing to it. It runs HCC's
// own reconcilers, built exactly as the controller builds them, against an
// overlay of the cluster (overlay.go) that reads the live objects and keeps
// the reconcilers' writes to itself, until they have nothing left to do;
// then it reports their writes, their refusals and the NetworkPolicy
// operator's verdict. No second planner: every decision is the
// reconcilers' (docs/diff.md).
package diff

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"

	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controllers/kit"
	netpolcontroller "github.com/clerum/hcc/pkg/controllers/netpol"
	hccscheme "github.com/clerum/hcc/pkg/generated/clientset/versioned/scheme"
	"github.com/clerum/hcc/pkg/health"
)

// scheme knows every kind HCC reads or writes.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(kubescheme.AddToScheme(s))
	utilruntime.Must(hccscheme.AddToScheme(s))
	return s
}()

// Options configure one diff.
type Options struct {
	// Live reads the cluster; nothing is ever written through it.
	Live dynamic.Interface
	// Build builds the reconcilers from deps, as the controller does.
	Build  func(deps kit.Deps) ([]kit.Reconciler, error)
	Config *config.Config
	// Log receives the reconcilers' logs.
	Log zerolog.Logger
	// Settle is how long the reconcilers must have had nothing to do
	// before the run ends (default 2s); Timeout bounds the run (default
	// 5m).
	Settle, Timeout time.Duration
}

// Report is what a leader would do.
type Report struct {
	Writes        []Write       `json:"writes"`
	Refusals      []Refusal     `json:"refusals"`
	NetworkPolicy NetworkPolicy `json:"networkPolicy"`
	// StatusWrites counts the status updates the reconcilers would make;
	// they are not listed.
	StatusWrites int `json:"statusWrites"`
	// CredentialsIssued counts the Hosts whose credential a leader would
	// ask the Control API for (diff never asks).
	CredentialsIssued int `json:"credentialsIssued"`
}

// Empty reports whether a leader would do nothing: no write and no
// refusal.
func (r *Report) Empty() bool { return len(r.Writes) == 0 && len(r.Refusals) == 0 }

// Write is one write to an object HCC writes.
type Write struct {
	Controller string `json:"controller"`
	// Verb is the API verb (create, update, patch, delete); Action what it
	// does to the object: create, update, delete, or take-over (an update
	// that makes a live owner the object's controller).
	Verb      string   `json:"verb"`
	Action    string   `json:"action"`
	Group     string   `json:"group"`
	Resource  string   `json:"resource"`
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Fields    []string `json:"fields,omitempty"`
	// Error is the API error the write would meet in the overlay (for
	// example a create of a name an unmanaged object holds).
	Error string `json:"error,omitempty"`
}

// Refusal is an object a reconciler would refuse (a name another object
// holds, a change it cannot make) or block (kept from deploying), as its
// Warning event says.
type Refusal struct {
	Controller string `json:"controller"`
	Type       string `json:"type"` // block or refuse
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
}

// NetworkPolicy is the NetworkPolicy operator's verdict after its first
// passes.
type NetworkPolicy struct {
	// Certified is whether readiness would be certified; Message says why
	// not.
	Certified bool   `json:"certified"`
	Message   string `json:"message,omitempty"`
	// CapRule names the orphan delete cap that would trip; HeldBack are
	// the unexplained orphans it would keep.
	CapRule  string     `json:"capRule,omitempty"`
	HeldBack []HeldBack `json:"heldBack"`
}

// HeldBack is a policy the orphan caps would keep.
type HeldBack struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Reason    string `json:"reason"`
}

// CapReporter is the NetworkPolicy operator's account of its last full
// pass: the cap rule that tripped, if any, and the orphans it held back.
type CapReporter interface {
	HeldBack() (rule string, policies []types.NamespacedName)
}

// Run runs the reconcilers over the overlay of opts.Live until they have
// nothing left to do, and reports what they did.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Settle <= 0 {
		opts.Settle = 2 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Minute
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	o := newOverlay(runCtx, opts.Live)
	registry := prometheus.NewRegistry()
	events := &recorder{}
	readiness := health.NewReadiness()
	deps := kit.Deps{
		Kube:      o.kube,
		HCC:       o.hcc,
		Informers: kit.NewInformers(o.kube, o.hcc),
		Recorder:  events,
		Registry:  registry,
		Queues:    kit.NewQueues(registry, clock.RealClock{}),
		Clock:     clock.RealClock{},
		Log:       opts.Log,
		Config:    opts.Config,
		Readiness: readiness,
	}
	reconcilers, err := opts.Build(deps)
	if err != nil {
		return nil, err
	}

	deps.Informers.Start(runCtx.Done())
	done := make(chan error, 1)
	go func() { done <- kit.RunAll(runCtx, reconcilers) }()
	settleErr := settle(ctx, registry, o, events, opts.Settle, opts.Timeout, done)
	stop()
	runErr := <-done
	deps.Informers.Shutdown()
	if settleErr != nil {
		return nil, settleErr
	}
	if err := o.failure(); err != nil {
		return nil, err
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return nil, runErr
	}

	report := &Report{NetworkPolicy: NetworkPolicy{HeldBack: []HeldBack{}}}
	report.Writes, report.StatusWrites = writesOf(o.recorded())
	report.Refusals = events.refusals(o.liveConditions)
	for _, r := range reconcilers {
		if c, ok := r.(CapReporter); ok {
			rule, held := c.HeldBack()
			report.NetworkPolicy.CapRule = rule
			for _, p := range held {
				report.NetworkPolicy.HeldBack = append(report.NetworkPolicy.HeldBack,
					HeldBack{Namespace: p.Namespace, Name: p.Name, Reason: "unexplained orphan; cap " + rule + " tripped"})
			}
		}
	}
	report.NetworkPolicy.Certified = true
	for _, pending := range readiness.Pending() {
		if pending == netpolcontroller.ReadinessCheck {
			report.NetworkPolicy.Certified = false
			report.NetworkPolicy.Message = readiness.Reasons()[pending]
		}
	}
	return report, nil
}

// settle returns once the reconcilers have had nothing to do for settle:
// the NetworkPolicy operator has finished a full pass, every queue is
// empty with no item in flight, and no write or event came for the whole
// period. A failed read of the live cluster, a reconciler that stops
// early, or a run longer than timeout, is an error.
func settle(ctx context.Context, registry *prometheus.Registry, o *overlay, events *recorder, settle, timeout time.Duration, done <-chan error) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last activity
	var quietSince time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-done:
			if err == nil {
				err = errors.New("the reconcilers stopped")
			}
			return fmt.Errorf("before they settled: %w", err)
		case <-deadline.C:
			return fmt.Errorf("the reconcilers did not settle within %s (queued or in-flight work: %d; NetworkPolicy passes: %d)", timeout, last.pending, last.passes)
		case now := <-tick.C:
			// A read the live cluster refused voids the run: stop now,
			// not once the reconcilers settle on what they could read.
			if err := o.failure(); err != nil {
				return err
			}
			a, err := measure(registry, o, events)
			if err != nil {
				return err
			}
			if a != last || a.pending > 0 || a.passes == 0 {
				last, quietSince = a, now
				continue
			}
			if now.Sub(quietSince) >= settle {
				return nil
			}
		}
	}
}

// activity is what changes while the reconcilers work.
type activity struct {
	pending, passes int64
	writes, events  int
}

// measure reads the work queues' series: items queued (depth) and items
// handed to a worker and not done yet (taken minus finished).
func measure(registry *prometheus.Registry, o *overlay, events *recorder) (activity, error) {
	families, err := registry.Gather()
	if err != nil {
		return activity{}, err
	}
	var a activity
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "workqueue_depth":
				a.pending += int64(m.GetGauge().GetValue())
			case "workqueue_queue_duration_seconds":
				a.pending += int64(m.GetHistogram().GetSampleCount())
			case "workqueue_work_duration_seconds":
				a.pending -= int64(m.GetHistogram().GetSampleCount())
			case "clerum_hcc_netpol_pass_duration_seconds":
				for _, l := range m.GetLabel() {
					if l.GetName() == "kind" && l.GetValue() == "full" {
						a.passes += int64(m.GetHistogram().GetSampleCount())
					}
				}
			}
		}
	}
	a.writes = o.writeCount()
	a.events = events.count()
	return a, nil
}

// recorder keeps the reconcilers' events (record.EventRecorder).
type recorder struct {
	mu     sync.Mutex
	events []event
}

type event struct {
	kind, namespace, name  string
	eventType, reason, msg string
}

func (r *recorder) Event(obj runtime.Object, eventType, reason, message string) {
	e := event{eventType: eventType, reason: reason, msg: message}
	if kinds, _, err := scheme.ObjectKinds(obj); err == nil {
		e.kind = kinds[0].Kind
	}
	if m, err := meta.Accessor(obj); err == nil {
		e.namespace, e.name = m.GetNamespace(), m.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (r *recorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	r.Eventf(obj, eventType, reason, format, args...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}
