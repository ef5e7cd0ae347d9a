package kit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Spec is what a reconciler declares about itself to NewController: its
// name, its queue's retry policy, its sync function and its error counter.
// What it watches is declared afterwards, with For, Owns, Watches and
// Reads, before Run.
type Spec[K comparable] struct {
	// Name names the reconciler in logs (the "controller" field), in its
	// queue's workqueue series and in its error counter's label.
	Name string
	// Sync reconciles one key (see Loop for the error policy).
	Sync func(ctx context.Context, key K) (Result, error)
	// Resource is the primary kind; a NotFound of it under the key's name
	// is absorbed (Loop.Resource). Zero for a reconciler whose keys name no
	// object.
	Resource schema.GroupResource
	// Retry is the failure backoff: BaseDelay after the first failure of a
	// key, doubling up to MaxDelay.
	BaseDelay, MaxDelay time.Duration
	// Workers is how many syncs run at once (at least one).
	Workers int
	// ErrorsMetric names the reconciler's one error counter, a CounterVec
	// labelled controller: failed syncs and failed wiring both count there.
	// Reconcilers that name one metric share it.
	ErrorsMetric string
	// Key turns a namespace/name into a queue key, for For and Owns. Nil
	// for a reconciler keyed by cache.ObjectName.
	Key func(cache.ObjectName) K
	// LogKey names a key in log lines: a field and its value. Nil: the key
	// as namespace/name under LogObject, for keys that are objects.
	LogKey func(K) (field, value string)
}

// Controller is the wiring every reconciler is built on, in the spirit of
// controller-runtime's builder but plain functions over client-go: the
// reconciler declares its primary kind (For), the children it owns (Owns),
// the other objects whose changes map to its keys (Watches), the caches it
// only reads (Reads), its periodic resync (Resync) and what must happen
// before its first sync (WaitFor). Each declaration registers the informer's
// cache-sync, so no list of them is kept by hand, and a wiring error
// (a handler or indexer that could not be added) is kept and fails Run, so
// start-up fails instead of running blind.
//
// One Controller holds the reconciler's one queue, its one error counter
// and its one logger (the "controller" field, and the "object" field per
// key: docs/reconcilers.md#logs).
type Controller[K comparable] struct {
	name    string
	log     zerolog.Logger
	queue   workqueue.TypedRateLimitingInterface[K]
	loop    *Loop[K]
	errors  *prometheus.CounterVec
	clock   clock.WithTicker
	workers int
	key     func(cache.ObjectName) K

	synced  []cache.InformerSynced
	wiring  []error
	waits   []<-chan struct{}
	started []func(ctx context.Context) error
	beside  []func(ctx context.Context)
}

// NewController returns the wiring of the reconciler spec declares, with
// its queue (from d.Queues), logger (from d.Log) and error counter (in
// d.Registry).
func NewController[K comparable](d Deps, spec Spec[K]) *Controller[K] {
	clk := d.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &Controller[K]{
		name:    spec.Name,
		log:     d.Log.With().Str(LogController, spec.Name).Logger(),
		queue:   New(d.Queues, spec.Name, Backoff[K](spec.BaseDelay, spec.MaxDelay)),
		clock:   clk,
		workers: max(spec.Workers, 1),
		key:     spec.Key,
	}
	if c.key == nil {
		if _, ok := any(cache.ObjectName{}).(K); ok {
			c.key = func(n cache.ObjectName) K { return any(n).(K) }
		}
	}
	if spec.ErrorsMetric != "" {
		c.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: spec.ErrorsMetric,
			Help: "Failed syncs and wiring errors, by reconciler.",
		}, []string{"controller"})
		// Two reconcilers may share a counter (their label tells them
		// apart): the second takes the first's.
		var shared prometheus.AlreadyRegisteredError
		switch err := d.Registry.Register(c.errors); {
		case errors.As(err, &shared):
			c.errors = shared.ExistingCollector.(*prometheus.CounterVec)
		case err != nil:
			c.fail(fmt.Errorf("registering %s: %w", spec.ErrorsMetric, err))
		}
	}
	c.loop = &Loop[K]{Name: spec.Name, Queue: c.queue, Sync: spec.Sync, Log: d.Log, Resource: spec.Resource, Errors: c.errors,
		LogKey: spec.LogKey}
	return c
}

// Name implements Reconciler.
func (c *Controller[K]) Name() string { return c.name }

// Queue is the reconciler's queue.
func (c *Controller[K]) Queue() workqueue.TypedRateLimitingInterface[K] { return c.queue }

// Add queues key.
func (c *Controller[K]) Add(key K) { c.queue.Add(key) }

// Log is the reconciler's logger: every line names the reconciler.
func (c *Controller[K]) Log() zerolog.Logger { return c.log }

// LogFor is the reconciler's logger for one key: every line also names
// the object, as namespace/name under LogObject.
func (c *Controller[K]) LogFor(key K) zerolog.Logger {
	field, value := c.loop.logKey(key)
	return c.log.With().Str(field, value).Logger()
}

// Errors is the reconciler's error counter (nil without Spec.ErrorsMetric).
func (c *Controller[K]) Errors() *prometheus.CounterVec { return c.errors }

// Loop is the reconciler's worker loop, for tests that drive one key.
func (c *Controller[K]) Loop() *Loop[K] { return c.loop }

// For declares inf as the primary kind: every added, changed (except a
// status-only change: the reconciler's own status writes must not wake it)
// or deleted object queues its own key.
func (c *Controller[K]) For(inf cache.SharedIndexInformer) {
	if c.key == nil {
		c.fail(fmt.Errorf("For needs a Spec.Key for keys of type %T", *new(K)))
		return
	}
	c.Watches(inf, OwnHandlers(func(n cache.ObjectName) { c.queue.Add(c.key(n)) }))
}

// Owns declares informers of child kinds: every added, changed (status
// included: a child's readiness flows back to its owner) or deleted child
// queues the key owner names. Children owner cannot attribute are ignored.
func (c *Controller[K]) Owns(owner func(metav1.Object) (cache.ObjectName, bool), infs ...cache.SharedIndexInformer) {
	if c.key == nil {
		c.fail(fmt.Errorf("Owns needs a Spec.Key for keys of type %T", *new(K)))
		return
	}
	for _, inf := range infs {
		c.Watches(inf, ChildHandlers(owner, func(n cache.ObjectName) { c.queue.Add(c.key(n)) }))
	}
}

// Watches declares inf with its own handler, which maps its objects to
// keys (c.Add) or does anything else a change calls for.
func (c *Controller[K]) Watches(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	if _, err := inf.AddEventHandler(h); err != nil {
		c.fail(fmt.Errorf("adding an event handler: %w", err))
	}
	c.synced = append(c.synced, inf.HasSynced)
}

// Indexes adds indexers to inf; the reconciler reads through them.
func (c *Controller[K]) Indexes(inf cache.SharedIndexInformer, indexers cache.Indexers) {
	if err := inf.AddIndexers(indexers); err != nil {
		c.fail(fmt.Errorf("adding indexers: %w", err))
	}
}

// Reads declares informers the reconciler only reads: Run waits for their
// caches too.
func (c *Controller[K]) Reads(infs ...cache.SharedIndexInformer) {
	for _, inf := range infs {
		c.synced = append(c.synced, inf.HasSynced)
	}
}

// Fail records a wiring error found by the reconciler itself (a transform
// that could not be set): Run returns it.
func (c *Controller[K]) Fail(err error) { c.fail(err) }

// WaitFor makes Run wait, after the caches synced, until ready is closed
// before the first sync (another reconciler's startup round).
func (c *Controller[K]) WaitFor(ready <-chan struct{}) { c.waits = append(c.waits, ready) }

// OnStart registers f, called in order once the caches synced and every
// WaitFor channel closed, before the workers start (a startup round, a
// first full pass). An error from f fails Run.
func (c *Controller[K]) OnStart(f func(ctx context.Context) error) { c.started = append(c.started, f) }

// Resync calls all every d while Run runs (the periodic full reconcile);
// d zero or less: never.
func (c *Controller[K]) Resync(d time.Duration, all func()) {
	if d <= 0 {
		return
	}
	c.Beside(func(ctx context.Context) { Every(ctx, c.clock, d, all) })
}

// Beside runs f beside the workers while Run runs (a timer, a second
// queue's loop); f returns once ctx is done, and Run waits for it.
func (c *Controller[K]) Beside(f func(ctx context.Context)) { c.beside = append(c.beside, f) }

// Err is every wiring error recorded, joined, or nil.
func (c *Controller[K]) Err() error {
	if len(c.wiring) == 0 {
		return nil
	}
	return fmt.Errorf("%s: wiring: %w", c.name, errors.Join(c.wiring...))
}

func (c *Controller[K]) fail(err error) {
	c.wiring = append(c.wiring, err)
	if c.errors != nil {
		c.errors.WithLabelValues(c.name).Inc()
	}
}

// Run implements Reconciler: it fails on a wiring error, waits for every
// declared cache and WaitFor channel, calls the OnStart functions (failing on their error), then
// runs the workers and the Beside functions until ctx is done, and returns
// once all of them have returned. The queue is shut down on every way out.
func (c *Controller[K]) Run(ctx context.Context) error {
	if err := c.Err(); err != nil {
		c.queue.ShutDown()
		return err
	}
	if err := WaitForSync(c.name, ctx.Done(), c.synced...); err != nil {
		c.queue.ShutDown()
		return err
	}
	for _, ready := range c.waits {
		select {
		case <-ready:
		case <-ctx.Done():
			c.queue.ShutDown()
			return nil
		}
	}
	c.log.Info().Msg("caches synced; starting")
	for _, f := range c.started {
		if err := f(ctx); err != nil {
			c.queue.ShutDown()
			return fmt.Errorf("%s: starting: %w", c.name, err)
		}
	}
	var wg sync.WaitGroup
	for _, f := range c.beside {
		wg.Go(func() { f(ctx) })
	}
	c.loop.Run(ctx, c.workers)
	wg.Wait()
	c.log.Info().Msg("stopped")
	return nil
}
