// Package egress is the external-egress coordinator, the sole owner of
// McpServer external egress: it validates each server's egress bindings,
// resolves hostname bindings through DNS with a deadline, refreshes them
// periodically, publishes the proven addresses to the NetworkPolicy pass,
// writes ExternalEgressReady and resolvedEgressIPs to McpServer status (field
// manager hcc-netpol), and gates each server's runtime until its egress
// policies are in the cluster.
//
// Fail-closed rules: an address is allowed only while a current DNS answer
// proves it. A failed lookup or refresh withdraws every address of that
// binding at once (the allow is revoked on the next pass) and blocks only that
// server's runtime. On successful refreshes the union of answers seen within
// the last two refresh periods is kept, so round-robin DNS that rotates
// through a pool does not cut live connections.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	applymetav1 "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	applyv1alpha1 "github.com/clerum/hcc/pkg/generated/applyconfiguration/clerum/v1alpha1"
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

// primeConcurrency bounds parallel lookups during the startup round.
const primeConcurrency = 16

// Condition reasons of ExternalEgressReady.
const (
	ReasonNoBindings       = "NoBindings"
	ReasonProgrammed       = "Programmed"
	ReasonPending          = "Pending"
	ReasonBindingRejected  = "BindingRejected"
	ReasonResolutionFailed = "ResolutionFailed"
)

// Options configures the coordinator.
type Options struct {
	Namespace  string        // the MCP server namespace
	DNSTimeout time.Duration // per-hostname lookup deadline
	Refresh    time.Duration // periodic re-resolution; 0 disables
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
			Help: "Failed egress hostname lookups by McpServer.",
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
	recorder record.EventRecorder
	metrics  *Metrics
	clock    clock.Clock
	log      zerolog.Logger

	// onChange asks for a NetworkPolicy pass; set with OnChange.
	onChange func()
	// onGate is told when a server's gate may have opened or closed.
	onGate func(server string)

	mu      sync.Mutex
	states  map[string]*serverState
	version uint64 // bumped on every change of the published addresses
	applied uint64 // the newest version a pass has put into the cluster
}

// serverState is what the coordinator knows of one server.
type serverState struct {
	uid        types.UID
	generation int64
	resolvedAt time.Time // last resolution round, successful or not
	// version is the coordinator version at which this server's published
	// addresses last changed.
	version uint64
	// seen holds, per hostname binding, each address with the last time a
	// successful answer contained it.
	seen     map[string]map[netip.Addr]time.Time
	rejected map[string]string // binding → why it gets no allow, for good
	failed   map[string]string // binding → lookup error, retried
	// eventKey is the rejection summary last emitted as an event.
	eventKey string
}

// New returns a coordinator over servers (an informer on the MCP server
// namespace).
func New(log zerolog.Logger, hcc clientset.Interface, servers interface {
	Informer() cache.SharedIndexInformer
	Lister() clerumlisters.McpServerLister
}, resolver Resolver, recorder record.EventRecorder, metrics *Metrics, opts Options) *Coordinator {
	c := &Coordinator{
		hcc:      hcc,
		lister:   servers.Lister(),
		synced:   servers.Informer().HasSynced,
		resolver: resolver,
		opts:     opts,
		// Failed lookups retry after 2 s, doubling to at most 5 min, so a
		// DNS outage is not hammered but recovery is noticed quickly.
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](2*time.Second, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "external-egress"}),
		recorder: recorder,
		metrics:  metrics,
		clock:    clock.RealClock{},
		log:      log.With().Str("controller", "external-egress").Logger(),
		onChange: func() {},
		onGate:   func(string) {},
		states:   map[string]*serverState{},
	}
	_, _ = servers.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	return c
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
// that pass starts from proven addresses instead of revoking every
// hostname allow for want of an answer. Lookups run in parallel, each bound
// by the DNS deadline.
func (c *Coordinator) Prime(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return errors.New("external-egress: McpServer cache did not sync")
	}
	servers, err := c.lister.McpServers(c.opts.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	sem := make(chan struct{}, primeConcurrency)
	var wg sync.WaitGroup
	for _, s := range servers {
		if !s.Spec.IsEnabled() || len(s.Spec.EgressBindings) == 0 {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c.refresh(ctx, s)
		}()
	}
	wg.Wait()
	c.log.Info().Int("servers", len(servers)).Msg("startup resolution round done")
	return nil
}

// Run processes servers until ctx is done. Call Prime first.
func (c *Coordinator) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	for range workers {
		go wait.UntilWithContext(ctx, c.runWorker, time.Second)
	}
	<-ctx.Done()
}

func (c *Coordinator) runWorker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Coordinator) processNext(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	if err := c.syncServer(ctx, name); err != nil {
		c.log.Warn().Err(err).Str("server", name).Msg("external egress not converged; retrying")
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	if c.opts.Refresh > 0 {
		c.queue.AddAfter(name, c.opts.Refresh)
	}
	return true
}

// syncServer brings one server's egress state, published addresses and
// status up to date. It returns an error while a lookup fails, so the
// server is retried with backoff.
func (c *Coordinator) syncServer(ctx context.Context, name string) error {
	server, err := c.lister.McpServers(c.opts.Namespace).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && !server.Spec.IsEnabled()) {
		c.forget(name)
		return nil
	}
	if err != nil {
		return err
	}
	if c.due(server) {
		c.refresh(ctx, server)
	}
	st, ready := c.view(server)
	if err := c.writeStatus(ctx, server, st, ready); err != nil {
		return err
	}
	c.emitRejections(server, st)
	if len(st.failed) > 0 {
		return fmt.Errorf("%d egress hostname lookup(s) failed", len(st.failed))
	}
	return nil
}

// forget drops a deleted or disabled server; its allows go with the next pass.
func (c *Coordinator) forget(name string) {
	c.mu.Lock()
	_, had := c.states[name]
	if had {
		delete(c.states, name)
		c.version++
	}
	c.mu.Unlock()
	if had {
		c.onChange()
		c.onGate(name)
	}
}

// due reports whether server needs a resolution round now: never resolved,
// spec changed, a lookup failing, or the refresh period elapsed.
func (c *Coordinator) due(server *clerumv1alpha1.McpServer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.states[server.Name]
	switch {
	case !ok, st.uid != server.UID, st.generation != server.Generation, len(st.failed) > 0:
		return true
	case c.opts.Refresh > 0:
		return c.clock.Since(st.resolvedAt) >= c.opts.Refresh
	}
	return false
}

// refresh validates and resolves every binding of server and publishes the
// result, signalling a pass when the published addresses changed.
func (c *Coordinator) refresh(ctx context.Context, server *clerumv1alpha1.McpServer) {
	now := c.clock.Now()
	next := &serverState{
		uid:        server.UID,
		generation: server.Generation,
		resolvedAt: now,
		seen:       map[string]map[netip.Addr]time.Time{},
	}
	c.mu.Lock()
	prev := c.states[server.Name]
	c.mu.Unlock()

	answer := Resolve(ctx, c.resolver, c.opts.DNSTimeout, server)
	next.rejected, next.failed = answer.Rejected, answer.Failed
	for binding, addrs := range answer.Addrs {
		next.seen[binding] = c.union(prev, binding, addrs, now)
	}
	for range answer.Failed {
		c.metrics.DNSFailures.WithLabelValues(server.Name).Inc()
	}

	c.mu.Lock()
	if prev != nil {
		next.eventKey, next.version = prev.eventKey, prev.version
	}
	changed := prev == nil || !samePublished(prev, next)
	if changed {
		c.version++
		next.version = c.version
	}
	c.states[server.Name] = next
	c.mu.Unlock()
	if changed {
		c.onChange()
		c.onGate(server.Name)
	}
}

// union keeps the addresses of earlier successful answers for two refresh
// periods, so a round-robin pool stays allowed as it rotates.
func (c *Coordinator) union(prev *serverState, binding string, addrs []netip.Addr, now time.Time) map[netip.Addr]time.Time {
	seen := map[netip.Addr]time.Time{}
	if prev != nil && c.opts.Refresh > 0 {
		window := 2 * c.opts.Refresh
		for a, t := range prev.seen[binding] {
			if now.Sub(t) < window {
				seen[a] = t
			}
		}
	}
	for _, a := range addrs {
		seen[a.Unmap()] = now
	}
	return seen
}

// Answer is the outcome of resolving one server's egress bindings.
type Answer struct {
	// Addrs holds, per hostname binding, the addresses of a good answer.
	Addrs map[string][]netip.Addr
	// Rejected holds bindings that can never be allowed as written (a
	// reserved hostname, a private CIDR, an answer with a private address),
	// with the reason.
	Rejected map[string]string
	// Failed holds hostname bindings whose lookup failed, with the error.
	Failed map[string]string
}

// Resolve validates every egress binding of server and looks up its
// hostname bindings, each within timeout. The coordinator and
// `hcc-controller render` share it, so both judge bindings alike.
func Resolve(ctx context.Context, resolver Resolver, timeout time.Duration, server *clerumv1alpha1.McpServer) Answer {
	answer := Answer{Addrs: map[string][]netip.Addr{}, Rejected: map[string]string{}, Failed: map[string]string{}}
	for i := range server.Spec.EgressBindings {
		b := &server.Spec.EgressBindings[i]
		if reason := validateBinding(b); reason != "" {
			answer.Rejected[b.Name] = reason
			continue
		}
		if b.EffectiveMode() != clerumv1alpha1.EgressModeExactHost || b.Host == "" {
			continue // public-web and CIDR bindings need no DNS
		}
		addrs, err := lookup(ctx, resolver, timeout, b.Host)
		if err != nil {
			answer.Failed[b.Name] = fmt.Sprintf("looking up %s: %v", b.Host, err)
			continue
		}
		if reason := checkAddrs(addrs); reason != "" {
			answer.Rejected[b.Name] = fmt.Sprintf("%s resolves to %s", b.Host, reason)
			continue
		}
		answer.Addrs[b.Name] = addrs
	}
	return answer
}

// lookup resolves host within the DNS deadline.
func lookup(ctx context.Context, resolver Resolver, timeout time.Duration, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addrs, err := resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, errors.New("no addresses")
	}
	return addrs, nil
}

// validateBinding returns why a binding can never be allowed, or "".
func validateBinding(b *clerumv1alpha1.EgressBinding) string {
	if b.EffectiveMode() == clerumv1alpha1.EgressModePublicWeb {
		return ""
	}
	switch {
	case b.CIDR != "":
		prefix, err := netip.ParsePrefix(b.CIDR)
		if err == nil {
			err = netpol.CheckEgressPrefix(prefix)
		}
		if err != nil {
			return err.Error()
		}
	case b.Host != "":
		if err := netpol.ValidateEgressHostname(b.Host); err != nil {
			return err.Error()
		}
	default:
		return "an exact-host binding needs a host or a cidr"
	}
	return ""
}

// checkAddrs rejects an answer holding any address in an exception range:
// one private answer makes the whole name suspect (DNS rebinding).
func checkAddrs(addrs []netip.Addr) string {
	for _, a := range addrs {
		if err := netpol.CheckEgressAddr(a); err != nil {
			return err.Error()
		}
	}
	return ""
}

// samePublished reports whether two states publish the same addresses and
// verdicts.
func samePublished(a, b *serverState) bool {
	if len(a.seen) != len(b.seen) || len(a.rejected) != len(b.rejected) || len(a.failed) != len(b.failed) {
		return false
	}
	for binding, as := range a.seen {
		bs, ok := b.seen[binding]
		if !ok || len(as) != len(bs) {
			return false
		}
		for addr := range as {
			if _, ok := bs[addr]; !ok {
				return false
			}
		}
	}
	for k := range a.rejected {
		if _, ok := b.rejected[k]; !ok {
			return false
		}
	}
	for k := range a.failed {
		if _, ok := b.failed[k]; !ok {
			return false
		}
	}
	return true
}

// Snapshot implements the NetworkPolicy controller's EgressSource.
func (c *Coordinator) Snapshot() (map[string]map[string][]netip.Addr, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[string][]netip.Addr, len(c.states))
	for server, st := range c.states {
		if len(st.seen) == 0 {
			continue
		}
		bindings := make(map[string][]netip.Addr, len(st.seen))
		for b, seen := range st.seen {
			bindings[b] = sortedAddrs(seen)
		}
		out[server] = bindings
	}
	return out, c.version
}

// Applied implements EgressSource: servers whose state the pass covered may
// now report Programmed and open their gate.
func (c *Coordinator) Applied(version uint64) {
	c.mu.Lock()
	old := c.applied
	if version <= old {
		c.mu.Unlock()
		return
	}
	c.applied = version
	var released []string
	for name, st := range c.states {
		if st.version > old && st.version <= version {
			released = append(released, name)
		}
	}
	c.mu.Unlock()
	for _, name := range released {
		c.queue.Add(name)
		c.onGate(name)
	}
}

// Ready is the runtime gate: true when every binding of server's current
// generation is valid, resolved and in the cluster. A server without
// bindings is ready once seen at its generation.
func (c *Coordinator) Ready(server *clerumv1alpha1.McpServer) bool {
	if len(server.Spec.EgressBindings) == 0 {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.states[server.Name]
	return ok && st.uid == server.UID && st.generation == server.Generation &&
		len(st.rejected) == 0 && len(st.failed) == 0 && st.version <= c.applied
}

// view returns a copy of server's state and whether its gate is open.
func (c *Coordinator) view(server *clerumv1alpha1.McpServer) (serverState, bool) {
	ready := c.Ready(server)
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.states[server.Name]; ok {
		return *st, ready
	}
	return serverState{}, ready
}

// condition computes ExternalEgressReady and resolvedEgressIPs.
func condition(server *clerumv1alpha1.McpServer, st serverState, ready bool) (metav1.ConditionStatus, string, string, []string) {
	var ips []string
	for _, seen := range st.seen {
		for a := range seen {
			ips = append(ips, a.String())
		}
	}
	sort.Strings(ips)
	ips = slices.Compact(ips)

	switch {
	case len(server.Spec.EgressBindings) == 0:
		return metav1.ConditionTrue, ReasonNoBindings, "the server declares no egress bindings", nil
	case len(st.rejected) > 0:
		return metav1.ConditionFalse, ReasonBindingRejected, describe(st.rejected), ips
	case len(st.failed) > 0:
		return metav1.ConditionFalse, ReasonResolutionFailed, describe(st.failed), ips
	case !ready:
		return metav1.ConditionFalse, ReasonPending, "egress policies are being programmed", ips
	}
	return metav1.ConditionTrue, ReasonProgrammed, fmt.Sprintf("%d egress binding(s) programmed", len(server.Spec.EgressBindings)), ips
}

// describe renders binding → reason pairs in binding order.
func describe(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("binding %s: %s", k, m[k])
	}
	return strings.Join(parts, "; ")
}

// writeStatus applies ExternalEgressReady and resolvedEgressIPs when they
// differ from what the server shows.
func (c *Coordinator) writeStatus(ctx context.Context, server *clerumv1alpha1.McpServer, st serverState, ready bool) error {
	status, reason, message, ips := condition(server, st, ready)
	have := meta.FindStatusCondition(server.Status.Conditions, clerumv1alpha1.ConditionExternalEgressReady)
	if have != nil && have.Status == status && have.Reason == reason && have.Message == message &&
		have.ObservedGeneration == server.Generation && slices.Equal(server.Status.ResolvedEgressIPs, ips) {
		return nil
	}
	transition := metav1.NewTime(c.clock.Now())
	if have != nil && have.Status == status {
		transition = have.LastTransitionTime
	}
	apply := applyv1alpha1.McpServer(server.Name, server.Namespace).WithStatus(applyv1alpha1.McpServerStatus().
		WithResolvedEgressIPs(ips...).
		WithConditions(applymetav1.Condition().
			WithType(clerumv1alpha1.ConditionExternalEgressReady).WithStatus(status).
			WithReason(reason).WithMessage(message).
			WithObservedGeneration(server.Generation).WithLastTransitionTime(transition)))
	_, err := c.hcc.ClerumV1alpha1().McpServers(server.Namespace).ApplyStatus(ctx, apply,
		metav1.ApplyOptions{FieldManager: clerumv1alpha1.FieldManagerNetPol, Force: true})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// emitRejections posts one Warning event per new set of rejected bindings.
func (c *Coordinator) emitRejections(server *clerumv1alpha1.McpServer, st serverState) {
	key := describe(st.rejected)
	if key == st.eventKey {
		return
	}
	c.mu.Lock()
	if cur, ok := c.states[server.Name]; ok {
		cur.eventKey = key
	}
	c.mu.Unlock()
	if key != "" {
		c.recorder.Event(server, corev1.EventTypeWarning, "EgressBindingRejected", key)
	}
}

func sortedAddrs(seen map[netip.Addr]time.Time) []netip.Addr {
	out := make([]netip.Addr, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}
