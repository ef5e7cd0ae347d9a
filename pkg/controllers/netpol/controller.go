// Package netpol is the NetworkPolicy operator: it writes the policy set
// pkg/netpol plans to the cluster. Informer handlers note what changed and
// signal; one coalescing, single-flight pass applies the difference, so a
// burst of events costs one pass and a pass over an unchanged cluster
// writes nothing. A full pass plans and compares the whole set; after one
// that converged, a signalled pass replans and compares only what the
// changes touched (incremental.go, docs/networkpolicy.md "Incremental
// passes").
package netpol

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/clerum/hcc/pkg/controllers/kit"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	clerumlisters "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/health"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
)

// ReadinessCheck is the name of the readiness check this operator holds
// pending until stale allows have been revoked.
const ReadinessCheck = "netpol-certified"

// passKind is a work-queue key: the queue coalesces repeated signals of one
// kind into one pass and never runs two passes of one kind at once.
type passKind string

const (
	passFull     passKind = "full"
	passDefaults passKind = "defaults"
)

// metricIncremental is the kind label of a passFull signal that ran as an
// incremental pass (docs/networkpolicy.md, "Incremental passes").
const metricIncremental = "incremental"

// The results of a pass: the label result of its duration.
const (
	passSuccess = "success"
	passError   = "error"
)

// EgressSource supplies the resolved external egress the planner needs. The
// external-egress coordinator implements it.
type EgressSource interface {
	// Snapshot returns, per server and hostname binding, the addresses
	// currently proven by DNS, and the version of that state.
	Snapshot() (resolved map[string]map[string]netpol.Resolution, version uint64)
	// Applied reports that a pass built from Snapshot version is in the
	// cluster for every server but those report names, so the coordinator
	// may release the servers it gates.
	Applied(version uint64, report EgressReport)
	// Landed reports, while a pass is still writing, that the policies of
	// servers planned from Snapshot version are all in the cluster: the
	// namespace-wide layers and every revocation of the pass landed, and so
	// did each server's own policies. report holds the planner's
	// rejections and the servers it planned without bindings, and no
	// failures. Applied follows at the end of the pass, and only Applied
	// says anything of the servers Landed has not named.
	Landed(version uint64, servers []string, report EgressReport)
	// Primed is closed once the startup resolution round is done.
	Primed() <-chan struct{}
}

// EgressReport is what a pass tells the external-egress coordinator besides
// the version it applied.
type EgressReport struct {
	// Failed are servers some of whose policies the pass could not write
	// (or whose names objects HCC does not own hold): their gates stay
	// closed.
	Failed sets.Set[string]
	// Rejected holds the planner's rejections of egress bindings, by server
	// and binding (two servers' bindings mapping to one policy name, among
	// others): reported on the loser's status, whose gate stays closed.
	Rejected map[string]map[string]string
	// Blocked is set when the MCP server namespace's default deny could not
	// be written: no server's pods are isolated, so every gate stays closed.
	Blocked bool
	// Bindingless looks up a server the pass planned with no egress
	// bindings, with the UID and generation it planned: the pass revoked
	// every external allow under its name, unless it is among Failed. It
	// is valid only during Applied and Landed.
	Bindingless func(server string) (PlannedServer, bool)
}

// PlannedServer is a server as one pass's inventory held it.
type PlannedServer struct {
	UID        types.UID
	Generation int64
}

// DefaultMinInterval is the shortest time between the starts of two full
// passes that signals ask for: a burst of events becomes one pass.
const DefaultMinInterval = time.Second

// Options configures the controller.
type Options struct {
	Plan netpol.Options
	Caps Caps
	// Resync and DefaultsResync are the timer periods; 0 disables a timer.
	Resync         time.Duration
	DefaultsResync time.Duration
	// MinInterval spaces signalled passes; 0 means DefaultMinInterval.
	MinInterval time.Duration
}

// Controller applies the planned NetworkPolicy set.
type Controller struct {
	kube kubernetes.Interface
	hcc  clientset.Interface
	opts Options

	serverLister  clerumlisters.McpServerLister
	contextLister clerumlisters.ContextLister
	// podLister and hostLister are the Host pods (metadata only) and the
	// Hosts of the host namespace: a contextId some pod carries without its
	// Host's Context holding it gets no new allow (withhold.go).
	podLister  corelisters.PodNamespaceLister
	hostLister clerumlisters.HostNamespaceLister
	// policyListers has one lister per namespace policies may live in; each
	// informer lists only policies labelled managed-by HCC.
	policyListers []networkinglisters.NetworkPolicyLister
	// policyListersByNS are the same listers by namespace.
	policyListersByNS map[string]networkinglisters.NetworkPolicyLister
	// cacheVersions are the informers' last synced resourceVersions, in
	// the order readConsistently lists: McpServers, Contexts, then the
	// policies of each of PolicyNamespaces.
	cacheVersions []func() string
	// quorumVersions are the resourceVersions of the last consistent read,
	// aligned with cacheVersions; caughtUp is set once every cache has
	// reached them, and passes read the caches from then on.
	quorumVersions []string
	caughtUp       atomic.Bool

	egress    EgressSource
	base      *kit.Controller[passKind]
	queue     workqueue.TypedRateLimitingInterface[passKind] // base's
	readiness *health.Readiness
	recorder  record.EventRecorder
	metrics   *Metrics
	clock     clock.WithTicker
	// statusWrites skips a status write the cache has not shown yet.
	statusWrites *kit.StatusWrites
	log          zerolog.Logger

	// observed remembers the deletions seen since the last pass whose
	// revocations all succeeded.
	observed *observations
	// created remembers this process's creates the cache has not shown.
	created *createdPolicies
	// capped is what the orphan caps held back in the last full pass.
	capped atomic.Pointer[cappedOrphans]
	// lastStart is when the last full pass started, in Unix nanoseconds.
	lastStart atomic.Int64

	// plan, when set, computes the desired set of full passes in place of
	// the incremental planner, and every pass is then full: a seam for
	// tests that plan by hand.
	plan func(netpol.Inventory, netpol.Options) *netpol.Plan
	// dirty is what the informer handlers saw change since a pass last
	// took it.
	dirty *dirtySet
	// inc is the planner holding the plan the cluster converged on in the
	// last pass, which a signalled pass edits; nil when the next pass must
	// be full. Only the pass worker touches it.
	inc *netpol.Incremental
	// forceFull makes the next pass full (the resync timer's).
	forceFull atomic.Bool

	certified atomic.Bool
	// inFlight marks a running pass per kind, for the timers' skip rule.
	fullInFlight, defaultsInFlight atomic.Bool
	// conflicted remembers Contexts already warned about, so a duplicate
	// contextId yields one event, not one per pass.
	conflicted sets.Set[string]
	// rejected remembers the rejections already reported as events.
	rejected sets.Set[string]
	// unmanaged remembers the names held by objects HCC does not own that
	// were already reported.
	unmanaged sets.Set[policyKey]
	// missingReported and keptReported are what was last logged of missing
	// namespaces and kept L0/L1 policies, so a steady state logs once.
	missingReported string
	keptReported    int
	// withheldReported is why certification was last withheld, as logged.
	withheldReported string
	// grantsWarned are the contextIds whose withheld grants were reported.
	grantsWarned sets.Set[string]
}

// PolicyNamespaces returns every namespace the planner may put a policy in;
// the controller watches exactly these.
func PolicyNamespaces(o netpol.Options) []string {
	ns := sets.New(o.RuntimeNamespaces...)
	ns.Insert(o.McpServerNamespace, o.HostNamespace, o.RPCProxyNamespace, o.SandboxNamespace)
	return sets.List(ns)
}

// New returns a controller over the McpServers and Contexts of the MCP
// server namespace, the Hosts and managed pods of the host namespace and
// the managed NetworkPolicies of every policy namespace, taken from
// d.Informers. An informer that cannot be wired makes Run fail.
func New(d kit.Deps, egress EgressSource, opts Options) *Controller {
	if opts.MinInterval <= 0 {
		opts.MinInterval = DefaultMinInterval
	}
	clk := d.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	hcc := d.Informers.HCC(opts.Plan.McpServerNamespace).Clerum().V1alpha1()
	servers, contexts := hcc.McpServers(), hcc.Contexts()
	c := &Controller{
		kube:          d.Kube,
		hcc:           d.HCC,
		opts:          opts,
		serverLister:  servers.Lister(),
		contextLister: contexts.Lister(),
		egress:        egress,
		readiness:     d.Readiness,
		recorder:      d.Recorder,
		metrics:       NewMetrics(d.Registry),
		clock:         clk,
		statusWrites:  kit.NewStatusWrites(clk),
		observed:      newObservations(),
		dirty:         newDirtySet(),

		policyListersByNS: map[string]networkinglisters.NetworkPolicyLister{},
		created:           newCreatedPolicies(),
		conflicted:        sets.New[string](),
		rejected:          sets.New[string](),
		unmanaged:         sets.New[policyKey](),
		grantsWarned:      sets.New[string](),
	}
	// A failed pass retries after 1 s, doubling to at most 2 min: fast
	// enough to converge after a blip, slow enough not to hammer an API
	// server that is refusing writes. The queue also coalesces: signals
	// while a pass is queued or running make one more pass. Two workers: a
	// full pass and a defaults-only pass may overlap (their write sets are
	// L0/L1 ensures at worst, which the API server serialises), but the
	// queue never runs two passes of one kind.
	c.base = kit.NewController(d, kit.Spec[passKind]{Name: "netpol", Sync: c.sync,
		BaseDelay: time.Second, MaxDelay: 2 * time.Minute, Workers: 2,
		ErrorsMetric: "clerum_hcc_netpol_reconcile_errors_total",
		// A pass is about no one object: its lines name the pass.
		LogKey: func(kind passKind) (string, string) { return "pass", string(kind) }})
	c.queue, c.log = c.base.Queue(), c.base.Log()
	c.readiness.Set(ReadinessCheck, false)
	handle := c.base.Watches
	handle(servers.Informer(), c.serverHandlers())
	handle(contexts.Informer(), c.contextHandlers())
	c.cacheVersions = append(c.cacheVersions, servers.Informer().LastSyncResourceVersion, contexts.Informer().LastSyncResourceVersion)
	for _, ns := range PolicyNamespaces(opts.Plan) {
		inf := d.Informers.Kube(ns, kit.ManagedObjects, "networkpolicies").Networking().V1().NetworkPolicies()
		handle(inf.Informer(), c.policyHandlers())
		c.policyListers = append(c.policyListers, inf.Lister())
		c.policyListersByNS[ns] = inf.Lister()
		c.cacheVersions = append(c.cacheVersions, inf.Informer().LastSyncResourceVersion)
	}
	// Every pod an L2 allow can select is labelled managed by HCC, so the
	// managed pods of the host namespace are exactly the ones that can
	// withhold a grant; only their metadata is cached (a reconciler that
	// needs more of a Host pod cannot share this informer). Neither informer
	// takes part in cacheVersions: passes read them from the caches always.
	hostNS := opts.Plan.HostNamespace
	pods := d.Informers.Kube(hostNS, kit.ManagedObjects, "pods").Core().V1().Pods()
	if err := d.Informers.SetTransform(hostNS, "pods", pods.Informer(), kit.Transform{Name: "pod-metadata", Func: podMetadata}); err != nil {
		c.base.Fail(fmt.Errorf("the Host pod informer's transform: %w", err))
	}
	hosts := d.Informers.HCC(hostNS).Clerum().V1alpha1().Hosts()
	handle(pods.Informer(), c.podHandlers())
	handle(hosts.Informer(), c.hostHandlers())
	c.podLister = pods.Lister().Pods(hostNS)
	c.hostLister = hosts.Lister().Hosts(hostNS)
	// The first pass must start from proven DNS answers, or it would
	// revoke every hostname allow a restart finds.
	c.base.WaitFor(egress.Primed())
	c.base.OnStart(func(context.Context) error { c.Signal(); return nil })
	c.base.Beside(c.resyncTimers)
	return c
}

// Name implements kit.Reconciler.
func (c *Controller) Name() string { return "netpol" }

// cappedOrphans is the rule of a tripped cap and the orphans it held back.
type cappedOrphans struct {
	rule     string
	policies []types.NamespacedName
}

// HeldBack reports the orphan cap rule that tripped in the last full pass,
// if any, and the unexplained orphans it held back (`hcc-controller
// diff`).
func (c *Controller) HeldBack() (rule string, policies []types.NamespacedName) {
	if p := c.capped.Load(); p != nil {
		return p.rule, p.policies
	}
	return "", nil
}

// Signal asks for a pass: incremental when the last pass converged and
// nothing asks for a full one. Signals arriving while one is queued or
// running coalesce into at most one more pass, and passes start at least
// MinInterval apart, so a burst of events costs one pass.
func (c *Controller) Signal() {
	wait := c.opts.MinInterval - c.clock.Since(time.Unix(0, c.lastStart.Load()))
	c.queue.AddAfter(passFull, wait) // a wait <= 0 adds at once
}

// Run waits for the caches and the coordinator's startup resolution round,
// runs the startup pass and then serves signals and timers until ctx is
// done; it returns once the pass under way and the timers have stopped. An
// informer that could not be wired makes it fail at once.
func (c *Controller) Run(ctx context.Context) error { return c.base.Run(ctx) }

func (c *Controller) sync(ctx context.Context, kind passKind) (kit.Result, error) {
	start := c.clock.Now()
	var after time.Duration
	var err error
	metricKind := string(kind)
	switch kind {
	case passFull:
		c.lastStart.Store(start.UnixNano())
		c.fullInFlight.Store(true)
		var incremental bool
		after, incremental, err = c.syncSignalled(ctx)
		c.fullInFlight.Store(false)
		if incremental {
			metricKind = metricIncremental
		}
		if err == nil {
			// An incremental pass runs only on the state of a full pass
			// that converged, and leaves the cluster as a full pass would.
			c.metrics.LastSuccess.Set(float64(c.clock.Now().Unix()))
		}
	case passDefaults:
		c.defaultsInFlight.Store(true)
		after, err = c.syncDefaults(ctx)
		c.defaultsInFlight.Store(false)
	}
	result := passSuccess
	if err != nil {
		result = passError
	}
	took := c.clock.Since(start).Seconds()
	c.metrics.PassDuration.WithLabelValues(metricKind, result).Observe(took)
	c.metrics.LastPassDuration.WithLabelValues(metricKind).Set(took)
	return kit.Result{RequeueAfter: after}, err
}

// resyncTimers queues the periodic full and defaults-only passes until ctx
// is done, and returns once both timers have stopped. A tick that finds a
// pass of its kind running is skipped and counted, not queued; a skipped
// full tick still makes the next pass full.
func (c *Controller) resyncTimers(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { c.tickEvery(ctx, c.opts.Resync, &c.fullInFlight, passFull, "pass-in-flight") })
	wg.Go(func() {
		c.tickEvery(ctx, c.opts.DefaultsResync, &c.defaultsInFlight, passDefaults, "defaults-only-in-flight")
	})
	wg.Wait()
}

// tickEvery queues kind every period until ctx is done, unless a pass of
// that kind is running; with period zero or less it never does.
func (c *Controller) tickEvery(ctx context.Context, period time.Duration, inFlight *atomic.Bool, kind passKind, reason string) {
	if period <= 0 {
		return
	}
	wait.UntilWithContext(ctx, func(context.Context) {
		if kind == passFull {
			c.forceFull.Store(true)
		}
		if inFlight.Load() {
			c.metrics.TicksSkipped.WithLabelValues(reason).Inc()
			return
		}
		c.queue.Add(kind)
	}, period)
}

// livePolicies returns every managed policy in the watched namespaces.
func (c *Controller) livePolicies() ([]*networkingv1.NetworkPolicy, error) {
	var all []*networkingv1.NetworkPolicy
	for _, l := range c.policyListers {
		ps, err := l.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		all = append(all, ps...)
	}
	return all, nil
}

// inventory reads the planner's input from the listers.
func (c *Controller) inventory(resolved map[string]map[string]netpol.Resolution) (netpol.Inventory, error) {
	ns := c.opts.Plan.McpServerNamespace
	servers, err := c.serverLister.McpServers(ns).List(labels.Everything())
	if err != nil {
		return netpol.Inventory{}, err
	}
	contexts, err := c.contextLister.Contexts(ns).List(labels.Everything())
	if err != nil {
		return netpol.Inventory{}, err
	}
	// Listers return cache order; sort so logs and events are stable. The
	// planner sorts its own output regardless.
	sort.Slice(servers, func(i, j int) bool { return servers[i].Name < servers[j].Name })
	sort.Slice(contexts, func(i, j int) bool { return contexts[i].Name < contexts[j].Name })
	return netpol.Inventory{Contexts: contexts, Servers: servers, Resolved: resolved}, nil
}

// readConsistently reads the planner's input and the managed policies with
// quorum LISTs (resourceVersion ""), which the API server serves from etcd
// at its current revision: everything that existed when the read began is
// in it, whatever the watch cache has caught up with.
func (c *Controller) readConsistently(ctx context.Context, resolved map[string]map[string]netpol.Resolution) (netpol.Inventory, []*networkingv1.NetworkPolicy, error) {
	ns := c.opts.Plan.McpServerNamespace
	quorum := metav1.ListOptions{ResourceVersion: ""}
	serverList, err := c.hcc.ClerumV1alpha1().McpServers(ns).List(ctx, quorum)
	if err != nil {
		return netpol.Inventory{}, nil, fmt.Errorf("listing McpServers: %w", err)
	}
	contextList, err := c.hcc.ClerumV1alpha1().Contexts(ns).List(ctx, quorum)
	if err != nil {
		return netpol.Inventory{}, nil, fmt.Errorf("listing Contexts: %w", err)
	}
	versions := []string{serverList.ResourceVersion, contextList.ResourceVersion}
	inv := netpol.Inventory{Resolved: resolved}
	for i := range serverList.Items {
		inv.Servers = append(inv.Servers, &serverList.Items[i])
	}
	for i := range contextList.Items {
		inv.Contexts = append(inv.Contexts, &contextList.Items[i])
	}
	sort.Slice(inv.Servers, func(i, j int) bool { return inv.Servers[i].Name < inv.Servers[j].Name })
	sort.Slice(inv.Contexts, func(i, j int) bool { return inv.Contexts[i].Name < inv.Contexts[j].Name })

	managed := metav1.ListOptions{LabelSelector: labels.Set{names.LabelManagedBy: names.ManagedByValue}.String()}
	var live []*networkingv1.NetworkPolicy
	for _, pns := range PolicyNamespaces(c.opts.Plan) {
		list, err := c.kube.NetworkingV1().NetworkPolicies(pns).List(ctx, managed)
		if err != nil {
			return netpol.Inventory{}, nil, fmt.Errorf("listing NetworkPolicies in %s: %w", pns, err)
		}
		for i := range list.Items {
			live = append(live, &list.Items[i])
		}
		versions = append(versions, list.ResourceVersion)
	}
	c.quorumVersions = versions
	return inv, live, nil
}

// cachesCaughtUp reports whether every cache has reached the
// resourceVersion of the last consistent read, which was taken after this
// process started: from then on the caches hold everything that read saw,
// and a pass may read them. Until then a lagging cache could still show an
// owner deleted before the start and bring its revoked allows back.
// resourceVersions are compared as the etcd revisions the API server
// serves; one that does not parse keeps the passes reading consistently.
func (c *Controller) cachesCaughtUp() bool {
	if c.caughtUp.Load() {
		return true
	}
	if len(c.quorumVersions) != len(c.cacheVersions) {
		return false
	}
	for i, version := range c.cacheVersions {
		have, err1 := strconv.ParseUint(version(), 10, 64)
		want, err2 := strconv.ParseUint(c.quorumVersions[i], 10, 64)
		if err1 != nil || err2 != nil || have < want {
			return false
		}
	}
	c.caughtUp.Store(true)
	c.log.Info().Msg("caches caught up with the certifying read; passes read the caches")
	return true
}
