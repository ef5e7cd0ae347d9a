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
// the gate), resolve.go (lookups), status.go (conditions and events).
package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/clerum/hcc/pkg/controllers/kit"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	clerumlisters "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/netpol"
)

// Resolver looks up the addresses of a hostname. *net.Resolver satisfies
// it; tests inject fakes.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

var _ Resolver = (*net.Resolver)(nil)

const (
	// primeConcurrency bounds the servers resolved in parallel during the
	// startup round (each resolves up to lookupConcurrency names at once).
	primeConcurrency = 16
	// DefaultPrimeDeadline bounds the whole startup round: a server not
	// resolved by then starts unproven (no allow, runtime blocked) and is
	// resolved by the workers.
	DefaultPrimeDeadline = time.Minute
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
	// Clock drives the backoff, the refresh and the queue's delays; nil
	// means the real clock.
	Clock clock.WithTicker
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
	resolver Resolver
	opts     Options
	queue    workqueue.TypedRateLimitingInterface[string]
	// dnsBackoff spaces the retries of a failing lookup: 2 s doubling to 5
	// min, so a DNS outage is not hammered but recovery is noticed quickly.
	// It is apart from the queue's limiter, which spaces API errors: events
	// that arrive while a lookup is failing neither retry it early nor
	// lengthen its backoff.
	dnsBackoff workqueue.TypedRateLimiter[string]
	recorder   record.EventRecorder
	metrics    *Metrics
	clock      clock.WithTicker
	log        zerolog.Logger

	// onChange asks for a NetworkPolicy pass; set with OnChange.
	onChange func()
	// onGate is told when a server's gate may have opened or closed.
	onGate func(server string)

	mu      sync.Mutex
	states  map[string]*serverState
	version uint64 // bumped on every change of what a pass must program
}

// New returns a coordinator over servers (an informer on the MCP server
// namespace).
func New(log zerolog.Logger, hcc clientset.Interface, servers interface {
	Informer() cache.SharedIndexInformer
	Lister() clerumlisters.McpServerLister
}, resolver Resolver, recorder record.EventRecorder, metrics *Metrics, opts Options) *Coordinator {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PrimeDeadline <= 0 {
		opts.PrimeDeadline = DefaultPrimeDeadline
	}
	if opts.Rules == nil {
		// Permissive defaults (no API-server or cluster ranges, no cluster
		// domain) would be a silent hole: the caller must pass the rules
		// the planner uses.
		panic("egress: Options.Rules is required")
	}
	c := &Coordinator{
		hcc:      hcc,
		lister:   servers.Lister(),
		synced:   servers.Informer().HasSynced,
		resolver: resolver,
		opts:     opts,
		// Status writes that fail retry after 1 s, doubling to 2 min.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, 2*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "external-egress", Clock: opts.Clock}),
		dnsBackoff: workqueue.NewTypedItemExponentialFailureRateLimiter[string](2*time.Second, 5*time.Minute),
		recorder:   recorder,
		metrics:    metrics,
		clock:      opts.Clock,
		log:        log.With().Str("controller", "external-egress").Logger(),
		onChange:   func() {},
		onGate:     func(string) {},
		states:     map[string]*serverState{},
	}
	_, _ = servers.Informer().AddEventHandler(c.eventHandlers())
	return c
}

// eventHandlers queue a server on every change but one that only touches
// status: status writes (this coordinator's own among them) change nothing
// it reads, and queueing them would re-run a failing server's lookups.
func (c *Coordinator) eventHandlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, cur any) {
			if !kit.StatusOnly(old, cur) {
				c.enqueue(cur)
			}
		},
		DeleteFunc: c.enqueue,
	}
}

// OnChange registers the function that asks for a NetworkPolicy pass.
func (c *Coordinator) OnChange(f func()) { c.onChange = f }

// OnGate registers the function told when a server's gate may have changed,
// for the McpServer reconciler to re-queue that server.
func (c *Coordinator) OnGate(f func(server string)) { c.onGate = f }

func (c *Coordinator) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(name)
}

// Prime resolves every server once, before the first NetworkPolicy pass, so
// that pass starts from proven addresses instead of revoking every hostname
// allow for want of an answer. Lookups run with bounded concurrency, each
// bound by the DNS deadline, and the whole round by PrimeDeadline: a server
// not reached by then starts unproven, which fails closed.
func (c *Coordinator) Prime(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return errors.New("external-egress: McpServer cache did not sync")
	}
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
		if !s.Spec.IsEnabled() || len(s.Spec.EgressBindings) == 0 {
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
	ev := c.log.Info()
	if ctx.Err() != nil {
		ev = c.log.Warn().Dur("deadline", c.opts.PrimeDeadline)
	}
	ev.Int("servers", len(servers)).Int("resolved", primed).Msg("startup resolution round done")
	return nil
}

// Run processes servers with workers goroutines until ctx is done, and
// returns once they have stopped. Call Prime first.
func (c *Coordinator) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, c.runWorker, time.Second)
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
}

func (c *Coordinator) runWorker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

// processNext syncs one server. A failing lookup is not an error here: it
// is retried on the DNS backoff, which syncServer returns as a delay. Only
// API errors (a status write) go through the queue's rate limiter.
func (c *Coordinator) processNext(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	after, err := c.syncServer(ctx, name)
	if err != nil {
		if apierrors.IsConflict(err) {
			c.log.Info().Str("server", name).Msg("McpServer changed while writing status; retrying")
		} else {
			c.log.Warn().Err(err).Str("server", name).Msg("writing external egress status failed; retrying")
		}
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	if after > 0 {
		c.queue.AddAfter(name, after)
	}
	return true
}

// syncServer brings one server's egress state, published addresses and
// status up to date, and returns when it next needs attention: the retry of
// a failing lookup, or the next refresh.
func (c *Coordinator) syncServer(ctx context.Context, name string) (time.Duration, error) {
	server, err := c.lister.McpServers(c.opts.Namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !server.Spec.IsEnabled()) {
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
