package netpol

import (
	"context"
	"fmt"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
)

// Incremental passes (docs/networkpolicy.md, "Incremental passes").
//
// A full pass plans the whole set from every Context and McpServer and
// compares it with every managed policy: at tens of thousands of policies
// that is hundreds of milliseconds, spent again on every edit. After a full
// pass that converged — every write landed, nothing capped, withheld,
// refused or skipped — the cluster holds exactly the plan, and the
// planner (netpol.Incremental) that made it is kept. A signalled pass then
// feeds the planner only what the informer handlers saw change (the
// Contexts, McpServers and managed policies named in dirty) and the
// servers whose DNS answers differ from what it planned, and compares only
// the policy names the planner reports touched plus the policies that
// changed: everything else is as the last pass left it.
//
// The safety rules are the full pass's: the same judge (built from the
// planner's inventory) decides every revocation, the same write order
// applies, and anything an incremental pass cannot judge alone makes it
// hand over to a full pass before it writes: an unexplained orphan (the
// caps judge the whole set), an L0/L1 policy to write, a name held by
// another writer, a change to a quarter of the plan or more (a relist).
// A pass that does not converge drops the planner, so the next pass is
// full; so does every resync tick.
//
// Why handler notes and not a comparison of every cached object: the
// informer stores an object before it calls the handlers, so a pass that
// takes the notes first and reads the caches after sees every change whose
// note it took, and a change whose note comes later makes another pass.
// Incremental passes run only once the caches have caught up with the
// certifying read (cachesCaughtUp), so no cache read can go back past
// what the full pass planned from.

// Reasons for a full pass (clerum_hcc_netpol_full_passes_total).
const (
	reasonNoState         = "no-converged-state"
	reasonResync          = "resync"
	reasonStarting        = "certifying"
	reasonPlanSeam        = "fixed-planner"
	reasonUnreadableEvent = "unreadable-event"
	reasonOrphan          = "unexplained-orphan"
	reasonDefaults        = "l0-l1-changed"
	reasonConflict        = "name-held-by-another-writer"
	reasonRelist          = "relist"
	reasonCacheError      = "cache-error"
)

// An incremental pass that would touch more than a quarter of the plan, and
// more than relistFloor names, hands over to a full pass: it would cost
// about as much, and so many changes at once are most likely a relist
// after a broken watch. Below the floor a pass is cheap either way.
const (
	relistShare = 4
	relistFloor = 256
)

// dirtySet is what the informer handlers saw change since the last pass
// took it. Safe for concurrent use.
type dirtySet struct {
	mu       sync.Mutex
	contexts sets.Set[string]
	servers  sets.Set[string]
	policies sets.Set[policyKey]
	// full names why the next pass must be full, if one must.
	full string
}

func newDirtySet() *dirtySet {
	return &dirtySet{contexts: sets.New[string](), servers: sets.New[string](), policies: sets.New[policyKey]()}
}

func (d *dirtySet) context(name string) { d.mu.Lock(); d.contexts.Insert(name); d.mu.Unlock() }
func (d *dirtySet) server(name string)  { d.mu.Lock(); d.servers.Insert(name); d.mu.Unlock() }
func (d *dirtySet) policy(k policyKey)  { d.mu.Lock(); d.policies.Insert(k); d.mu.Unlock() }

func (d *dirtySet) needFull(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.full == "" {
		d.full = reason
	}
}

// take returns what was noted and starts afresh.
func (d *dirtySet) take() dirty {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := dirty{contexts: d.contexts, servers: d.servers, policies: d.policies, full: d.full}
	d.contexts, d.servers, d.policies, d.full = sets.New[string](), sets.New[string](), sets.New[policyKey](), ""
	return out
}

// dirty is what one pass took of a dirtySet.
type dirty struct {
	contexts, servers sets.Set[string]
	policies          sets.Set[policyKey]
	full              string
}

// syncSignalled runs the pass a signal or a timer queued: incremental when
// the last pass converged and nothing asks for a full pass, full
// otherwise. incremental reports which ran.
func (c *Controller) syncSignalled(ctx context.Context) (after time.Duration, incremental bool, err error) {
	reason := ""
	switch {
	case c.plan != nil:
		reason = reasonPlanSeam
	case !c.certified.Load() || !c.caughtUp.Load():
		reason = reasonStarting
	case c.forceFull.Swap(false):
		reason = reasonResync
	case c.inc == nil:
		reason = reasonNoState
	}
	if reason == "" {
		after, reason, err = c.syncIncremental(ctx)
		if reason == "" {
			return after, true, err
		}
		c.log.Debug().Str("reason", reason).Msg("an incremental pass handed over to a full pass")
	}
	c.metrics.FullPasses.WithLabelValues(reason).Inc()
	after, err = c.syncFull(ctx)
	return after, false, err
}

// syncIncremental is one incremental pass on c.inc. It returns a reason,
// and writes nothing, when the change needs a full pass instead.
func (c *Controller) syncIncremental(ctx context.Context) (time.Duration, string, error) {
	// The observations before the notes: a deletion noted after this
	// snapshot was taken is judged by a later pass, which sees both.
	observed, seq := c.observed.snapshot()
	d := c.dirty.take()
	if d.full != "" {
		return 0, d.full, nil
	}
	resolved, version := c.egress.Snapshot()
	inc := c.inc
	if err := c.replan(inc, d, resolved); err != nil {
		// The planner may hold part of the edits: it is dropped.
		c.inc = nil
		c.log.Warn().Err(err).Msg("reading the caches for an incremental pass")
		return 0, reasonCacheError, nil
	}
	touched := inc.Touched()
	for k := range d.policies {
		touched.Insert(netpol.Key{Namespace: k.ns, Name: k.name})
	}
	if len(touched) > relistFloor && len(touched) > inc.Size()/relistShare {
		return 0, reasonRelist, nil
	}

	desired := make([]*networkingv1.NetworkPolicy, 0, len(touched))
	desiredServers := make([]string, 0, len(touched))
	live := make([]*networkingv1.NetworkPolicy, 0, len(touched))
	for k := range touched {
		if p, server, ok := inc.Winner(k); ok {
			desired = append(desired, p)
			desiredServers = append(desiredServers, server)
		}
		p, err := c.livePolicy(k)
		if err != nil {
			c.inc = nil
			return 0, reasonCacheError, nil
		}
		if p != nil {
			live = append(live, p)
		}
	}
	sortPolicies(desired) // the writes go out in a stable order
	judge := inc.Judge(observed)
	ch := diff(desired, desiredServers, live, c.opts.Caps, nil, judge.Dispose)
	switch {
	case len(ch.orphans) > 0:
		return 0, reasonOrphan, nil
	case len(ch.kept) > 0 || anyDefault(ch.creates) || anyDefault(ch.updates):
		return 0, reasonDefaults, nil
	case len(ch.conflicts) > 0:
		return 0, reasonConflict, nil
	}
	var held map[string]*heldGrant
	holder := inc.Holder
	if grants(ch) {
		stale, err := c.staleContextIDs(holder)
		if err != nil {
			return 0, "", err
		}
		held = withholdGrants(&ch, live, stale)
	}
	after, err := c.apply(ctx, passPlan{
		ch: ch, held: held, holder: holder, version: version, seq: seq, desired: inc.Size(),
		counts: inc.PolicyCounts(), rejections: inc.Rejections(), conflicts: inc.Conflicts(),
		contexts: inc.TouchedContexts(), server: inc.Server, bindingless: bindinglessOf(inc.Server),
	})
	return after, "", err
}

// replan feeds inc the Contexts and McpServers d names, as the caches hold
// them now, and every server whose DNS answers in resolved differ from
// those it planned with.
func (c *Controller) replan(inc *netpol.Incremental, d dirty, resolved map[string]map[string]netpol.Resolution) error {
	ns := c.opts.Plan.McpServerNamespace
	for name := range d.contexts {
		obj, err := c.contextLister.Contexts(ns).Get(name)
		switch {
		case apierrors.IsNotFound(err):
			inc.DeleteContext(name)
		case err != nil:
			return fmt.Errorf("reading Context %s/%s: %w", ns, name, err)
		default:
			inc.SetContext(obj)
		}
	}
	servers := d.servers
	for _, name := range inc.ChangedResolutions(resolved) {
		servers.Insert(name)
	}
	for name := range servers {
		obj, err := c.serverLister.McpServers(ns).Get(name)
		switch {
		case apierrors.IsNotFound(err):
			inc.DeleteServer(name)
		case err != nil:
			return fmt.Errorf("reading McpServer %s/%s: %w", ns, name, err)
		default:
			inc.SetServer(obj, resolved[name])
		}
	}
	return nil
}

// livePolicy returns the managed policy k as the cache holds it, or nil.
func (c *Controller) livePolicy(k netpol.Key) (*networkingv1.NetworkPolicy, error) {
	l := c.policyListersByNS[k.Namespace]
	if l == nil {
		return nil, nil // a namespace no policy is planned in
	}
	p, err := l.NetworkPolicies(k.Namespace).Get(k.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return p, err
}

func anyDefault(ps []*networkingv1.NetworkPolicy) bool {
	for _, p := range ps {
		if isDefault(p) {
			return true
		}
	}
	return false
}

// grants reports whether ch creates or updates an L2 policy: only those
// can be withheld, and only they need the Host pods read.
func grants(ch changes) bool {
	for _, ps := range [][]*networkingv1.NetworkPolicy{ch.creates, ch.updates} {
		for _, p := range ps {
			typ, _ := policyType(p)
			if typ == names.PolicyTypeContextAllow || typ == names.PolicyTypeRPCProxyEgress {
				return true
			}
		}
	}
	return false
}
