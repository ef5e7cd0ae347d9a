// Package egress is the external-egress coordinator, the sole owner of
// McpServer external egress: it validates each server's egress bindings,
// resolves hostname bindings through DNS with a deadline, refreshes them
// periodically, publishes the proven addresses to the NetworkPolicy pass,
// writes ExternalEgressReady and resolvedEgressIPs to McpServer status (field
// manager hcc-netpol), and gates each server's runtime until the policies of
// its current generation are in the cluster.
//
// Fail-closed rules (docs/networkpolicy.md, "External egress"): an address is
// allowed only while a current DNS answer proves it. A failed lookup or
// refresh withdraws every address of that binding at once (the allow is
// revoked on the next pass) and blocks only that server's runtime. On
// successful refreshes the union of answers seen within the last two refresh
// periods is kept, for the same server and the same binding destination, so
// round-robin DNS that rotates through a pool does not cut live connections.
//
// Files: coordinator.go (the loop), state.go (what is known of each server,
// the gate), status.go (conditions and events). The lookups themselves are
// in the resolve subpackage, which `hcc-controller render` shares.
package egress

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/egress/resolve"
	"github.com/clerum/hcc/pkg/controllers/kit"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	clerumlisters "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/netpol"
)

const (
	// primeConcurrency bounds the servers resolved in parallel during the
	// startup round (each resolves a bounded number of names at once, see
	// resolve.Resolve).
	primeConcurrency = 16
	// DefaultPrimeDeadline bounds the whole startup round: a server not
	// resolved by then starts unproven (no allow, runtime blocked) and is
	// resolved by the workers.
	DefaultPrimeDeadline = time.Minute
	// DefaultSettleDeadline bounds how long, after the startup round or
	// the first pass's last release of a server (Landed), the coordinator
	// waits for the first NetworkPolicy pass's report before it publishes
	// egress state anyway (see Settled).
	DefaultSettleDeadline = time.Minute
	// Workers is how many servers the coordinator syncs at once.
	Workers = 4
)

// Options configures the coordinator.
type Options struct {
	Namespace  string        // the MCP server namespace
	DNSTimeout time.Duration // per-hostname lookup deadline
	Refresh    time.Duration // periodic re-resolution; 0 disables
	// Rules judge bindings and answers, as the planner does.
	Rules *netpol.EgressRules
	// PrimeDeadline bounds Prime; 0 means DefaultPrimeDeadline.
	PrimeDeadline time.Duration
	// SettleDeadline bounds the wait for Settled while the first pass
	// releases no server; 0 means DefaultSettleDeadline.
	SettleDeadline time.Duration
	// Active reports whether a server may hold egress: the planner's
	// netpol.Options.ServerActive (enabled, and not refused by the image
	// allowlist in enforce mode). A server that may not is neither
	// resolved nor gated, like a disabled one. Nil means enabled.
	Active func(*clerumv1alpha1.McpServer) bool
}

// Metrics are the coordinator's Prometheus series.
type Metrics struct {
	DNSFailures *prometheus.CounterVec
}

// NewMetrics registers the coordinator's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		DNSFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_netpol_dns_failures_total",
			Help: "Failed egress hostname lookups by McpServer; a server's series goes with the server.",
		}, []string{"server"}),
	}
	reg.MustRegister(m.DNSFailures)
	return m
}

// Coordinator owns McpServer external egress. Its exported methods are safe
// for concurrent use.
type Coordinator struct {
	hcc      clientset.Interface
	lister   clerumlisters.McpServerLister
	synced   cache.InformerSynced
	resolver resolve.Resolver
	opts     Options
	base     *kit.Controller[string]
	queue    workqueue.TypedRateLimitingInterface[string] // base's
	// dnsBackoff spaces the retries of a failing lookup: 2 s doubling to 5
	// min, so a DNS outage is not hammered but recovery is noticed quickly.
	// It is apart from the queue's limiter, which spaces API errors: events
	// that arrive while a lookup is failing neither retry it early nor
	// lengthen its backoff.
	dnsBackoff workqueue.TypedRateLimiter[string]
	recorder   record.EventRecorder
	metrics    *Metrics
	clock      clock.WithTicker
	// statusWrites skips a status write the cache has not shown yet.
	statusWrites *kit.StatusWrites
	log          zerolog.Logger
	// primed is closed when the startup resolution round is done.
	primed chan struct{}
	// settled is closed by the first NetworkPolicy pass's report, or the
	// settle deadline.
	settled    chan struct{}
	settleOnce sync.Once

	// handlers are the McpServer informer's event handlers.
	handlers cache.ResourceEventHandler

	// onChange asks for a NetworkPolicy pass; set with OnChange.
	onChange func()
	// onGate is told when a server's gate may have opened or closed.
	onGate func(server string)

	mu     sync.Mutex
	states map[string]*serverState
	// revoking holds servers forgotten (deleted, disabled) at the version
	// whose pass revokes their allows, until a pass has applied it: a
	// server re-created under the name waits for that pass.
	revoking map[string]uint64
	// passApplied: a NetworkPolicy pass has landed since this process
	// started, so allows of servers changed while it was down are gone.
	passApplied bool
	// landed holds, until passApplied, the servers without state a pass
	// released (Landed): the allows under their names are gone too.
	landed map[string]struct{}
	// lastRelease is when a pass last released servers (Landed): the
	// settle deadline runs from it.
	lastRelease time.Time
	// blocked: the last pass could not write a namespace's default deny,
	// which keeps every gate closed.
	blocked bool
	version uint64 // bumped on every change of what a pass must program
}

// New returns a coordinator over the McpServers of opts.Namespace, taken
// from d.Informers.
func New(d kit.Deps, resolver resolve.Resolver, opts Options) *Coordinator {
	if opts.PrimeDeadline <= 0 {
		opts.PrimeDeadline = DefaultPrimeDeadline
	}
	if opts.SettleDeadline <= 0 {
		opts.SettleDeadline = DefaultSettleDeadline
	}
	if opts.Active == nil {
		opts.Active = func(s *clerumv1alpha1.McpServer) bool { return s.Spec.IsEnabled() }
	}
	if opts.Rules == nil {
		// Permissive defaults (no API-server or cluster ranges, no cluster
		// domain) would be a silent hole: the caller must pass the rules
		// the planner uses.
		panic("egress: Options.Rules is required")
	}
	clk := d.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	servers := d.Informers.HCC(opts.Namespace).Clerum().V1alpha1().McpServers()
	c := &Coordinator{
		hcc:          d.HCC,
		lister:       servers.Lister(),
		synced:       servers.Informer().HasSynced,
		resolver:     resolver,
		opts:         opts,
		dnsBackoff:   kit.Backoff[string](2*time.Second, 5*time.Minute),
		recorder:     d.Recorder,
		metrics:      NewMetrics(d.Registry),
		clock:        clk,
		statusWrites: kit.NewStatusWrites(clk),
		primed:       make(chan struct{}),
		settled:      make(chan struct{}),
		onChange:     func() {},
		onGate:       func(string) {},
		states:       map[string]*serverState{},
		revoking:     map[string]uint64{},
		landed:       map[string]struct{}{},
	}
	// Status writes that fail retry after 1 s, doubling to 2 min.
	c.base = kit.NewController(d, kit.Spec[string]{Name: "external-egress", Sync: c.sync,
		Resource: clerumv1alpha1.Resource("mcpservers"), BaseDelay: time.Second, MaxDelay: 2 * time.Minute,
		Workers: Workers, ErrorsMetric: "clerum_hcc_netpol_reconcile_errors_total",
		Key:    func(n cache.ObjectName) string { return n.Name },
		LogKey: func(name string) (string, string) { return kit.LogObject, opts.Namespace + "/" + name }})
	c.queue, c.log = c.base.Queue(), c.base.Log()
	// Status-only updates (this coordinator's own writes among them) queue
	// nothing: they change nothing it reads, and would re-run a failing
	// server's lookups.
	c.handlers = kit.OwnHandlers(func(key cache.ObjectName) { c.queue.Add(key.Name) })
	c.base.Watches(servers.Informer(), c.handlers)
	c.base.OnStart(c.prime)
	c.base.Beside(func(ctx context.Context) { c.settleAfter(ctx, c.opts.SettleDeadline) })
	return c
}

// Name implements kit.Reconciler.
func (c *Coordinator) Name() string { return "external-egress" }

// Primed is closed once the startup resolution round is done: the first
// NetworkPolicy pass waits for it.
func (c *Coordinator) Primed() <-chan struct{} { return c.primed }

// Settled is closed once the first NetworkPolicy pass has reported
// (Applied), or SettleDeadline after the startup round if none has. Until
// then a closed gate is closed for want of a pass, which says nothing about
// a server: the coordinator publishes only open gates (servers the pass
// released as their policies landed, Landed), and the McpServer operator
// syncs only the servers whose gates are open, so a restart does not mark
// every server pending and then ready again — two status writes and two
// events per server for nothing.
func (c *Coordinator) Settled() <-chan struct{} { return c.settled }

// settle closes Settled once and queues every server, here and in the
// McpServer operator (onGate), whose status was held back until now.
func (c *Coordinator) settle() {
	c.settleOnce.Do(func() {
		close(c.settled)
		servers, err := c.lister.McpServers(c.opts.Namespace).List(labels.Everything())
		if err != nil {
			return // a lister does not fail; the servers' next events queue them
		}
		for _, s := range servers {
			c.queue.Add(s.Name)
			c.onGate(s.Name)
		}
	})
}

// OnChange registers the function that asks for a NetworkPolicy pass.
func (c *Coordinator) OnChange(f func()) { c.onChange = f }

// OnGate registers the function told when a server's gate may have changed,
// for the McpServer reconciler to re-queue that server.
func (c *Coordinator) OnGate(f func(server string)) { c.onGate = f }

// Prime resolves every server once, before the first NetworkPolicy pass, so
// that pass starts from proven addresses instead of revoking every hostname
// allow for want of an answer. Lookups run with bounded concurrency, each
// bound by the DNS deadline, and the whole round by PrimeDeadline: a server
// not reached by then starts unproven, which fails closed.
func (c *Coordinator) Prime(ctx context.Context) error {
	if err := kit.WaitForSync("external-egress", ctx.Done(), c.synced); err != nil {
		return err
	}
	return c.prime(ctx)
}

// prime is Prime once the cache has synced.
func (c *Coordinator) prime(ctx context.Context) error {
	servers, err := c.lister.McpServers(c.opts.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.PrimeDeadline)
	defer cancel()
	sem := make(chan struct{}, primeConcurrency)
	var wg sync.WaitGroup
	primed := 0
	for _, s := range servers {
		if !c.opts.Active(s) || len(s.Spec.EgressBindings) == 0 {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		primed++
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c.refresh(ctx, s)
		}()
	}
	wg.Wait()
	close(c.primed)
	ev := c.log.Info()
	if ctx.Err() != nil {
		ev = c.log.Warn().Dur("deadline", c.opts.PrimeDeadline)
	}
	ev.Int("servers", len(servers)).Int("resolved", primed).Msg("startup resolution round done")
	return nil
}

// Run waits for the cache, resolves every server once (Prime) and then
// processes servers with Workers goroutines until ctx is done; it returns
// once they have stopped.
func (c *Coordinator) Run(ctx context.Context) error { return c.base.Run(ctx) }

// settleAfter settles the coordinator after d unless a pass did first. A
// release of the first pass (Landed) starts d again: that pass is making
// progress, and settling before its report would publish every server it
// has not released yet as pending — on a cold start two status writes per
// server, spent from the budget the pass's own writes need.
func (c *Coordinator) settleAfter(ctx context.Context, d time.Duration) {
	deadline := c.clock.NewTimer(d)
	defer func() { deadline.Stop() }()
	for {
		select {
		case <-deadline.C():
			c.mu.Lock()
			since := c.clock.Since(c.lastRelease)
			released := !c.lastRelease.IsZero()
			c.mu.Unlock()
			if released && since < d {
				deadline = c.clock.NewTimer(d - since)
				continue
			}
			select {
			case <-c.settled:
			default:
				c.log.Warn().Dur("deadline", d).
					Msg("no NetworkPolicy pass has reported yet; publishing egress state with every gate closed")
				c.settle()
			}
			return
		case <-c.settled:
			return
		case <-ctx.Done():
			return
		}
	}
}

// sync adapts syncServer to the kit's loop. A failing lookup is not an
// error here: it is retried on the DNS backoff, which syncServer returns as
// a delay. Only API errors (a status write) go through the queue's limiter.
func (c *Coordinator) sync(ctx context.Context, name string) (kit.Result, error) {
	after, err := c.syncServer(ctx, name)
	return kit.Result{RequeueAfter: after}, err
}

// syncServer brings one server's egress state, published addresses and
// status up to date, and returns when it next needs attention: the retry of
// a failing lookup, or the next refresh.
func (c *Coordinator) syncServer(ctx context.Context, name string) (time.Duration, error) {
	server, err := c.lister.McpServers(c.opts.Namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !c.opts.Active(server)) {
		c.forget(name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if c.due(server) {
		c.refresh(ctx, server)
	}
	st, ready := c.view(server)
	select {
	case <-c.settled:
	default:
		if !ready {
			// No pass has judged it: settle queues every server again.
			return c.nextAttention(st), nil
		}
	}
	if err := c.writeStatus(ctx, server, st, ready); err != nil {
		return 0, err
	}
	c.emitRejections(server, st)
	return c.nextAttention(st), nil
}

// nextAttention is how long until st needs another resolution round.
func (c *Coordinator) nextAttention(st serverState) time.Duration {
	now := c.clock.Now()
	switch {
	case len(st.failed) > 0:
		return max(st.retryAt.Sub(now), time.Millisecond)
	case c.opts.Refresh > 0 && st.hostnames:
		return max(st.resolvedAt.Add(c.opts.Refresh).Sub(now), time.Millisecond)
	}
	return 0
}
