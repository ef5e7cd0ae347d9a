package netpol

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	applyv1alpha1 "github.com/clerum/hcc/pkg/generated/applyconfiguration/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
	"github.com/clerum/hcc/pkg/reasons"
)

// missingNamespaceRetry is how soon a pass that skipped namespaces that do
// not exist runs again: HCC does not watch namespaces, and one created
// later must still get its default deny.
const missingNamespaceRetry = time.Minute

// outcome collects what the writes of one pass did. Every write of a pass
// is attempted: one policy that cannot be written (RBAC, quota, a webhook,
// a name held by an object HCC does not own) must not stop the revocations
// and creates of every other.
type outcome struct {
	errs []error
	// behind is set when a write met a lagging cache.
	behind bool
	// failed are the servers whose policies did not all land: their runtime
	// gates stay closed.
	failed sets.Set[string]
	// missing are namespaces that do not exist; their policies are skipped.
	missing sets.Set[string]
	// conflicts are the objects HCC does not own that hold names it needs.
	conflicts []*networkingv1.NetworkPolicy
	// withheld says, per deny-all name held by an object HCC does not own
	// that is no default deny, why: each withholds certification.
	withheld []string
	// failedKeys are the policies whose write failed.
	failedKeys sets.Set[policyKey]
	// createFailures counts failed creates; past maxCreateFailures the
	// pass skips its remaining creates (counted in skipped).
	createFailures, skipped int
}

// maxCreateFailures bounds the creates one pass attempts after they keep
// failing: a systemic refusal (a quota, a webhook that is down) would
// otherwise cost a request per planned policy on every pass and delay the
// next pass's revocations. Deletes and updates, which revoke, are always
// attempted.
const maxCreateFailures = 20

func newOutcome() *outcome {
	return &outcome{failed: sets.New[string](), missing: sets.New[string](), failedKeys: sets.New[policyKey]()}
}

// syncFull is one full pass, in the order that keeps the cluster safe at
// every step (docs/networkpolicy.md, "The safety order"):
//
//  1. ensure L0/L1 (default deny and infrastructure),
//  2. revoke: delete disowned allows whatever the caps, orphans unless a
//     cap refuses, and rewrite changed allows,
//  3. certify readiness once every revocation succeeded — from then on no
//     stale allow survives,
//  4. add: create the allows that are new,
//  5. open the runtime gates of the servers whose policies all landed.
//
// A failed write does not stop the pass: it is collected, keeps only the
// gate of the server it belongs to closed, and makes the pass retry with
// backoff. A failed revocation withholds certification; so does a default
// deny that could not be created or any L0/L1 update (an update may narrow),
// since a namespace without its default deny is open.
//
// A pass that read the caches and converged keeps its planner for the
// incremental passes (incremental.go).
func (c *Controller) syncFull(ctx context.Context) (time.Duration, error) {
	c.inc = nil
	// The observations are read before the inventory: the informer updates
	// its cache before it calls the handlers, so a deletion that lands in
	// between is then either in this inventory or in the next snapshot, never
	// settled by a pass that planned the object as still there. The notes
	// of what changed are taken for the same reason: this pass reads
	// everything they name.
	observed, seq := c.observed.snapshot()
	c.dirty.take()
	resolved, version := c.egress.Snapshot()
	// Until readiness is certified, and then until the caches have caught
	// up with the certifying read, the pass reads the world from the API
	// server (docs/networkpolicy.md, "Certification"): informers list from
	// the API server's watch cache, which may lag behind etcd, and a
	// certification from a cache that never saw a stale allow, or still
	// shows a Context deleted before this process started, would certify
	// an allow that survives; a pass after it would bring that allow back.
	consistent := !c.certified.Load() || !c.cachesCaughtUp()
	var inv netpol.Inventory
	var live []*networkingv1.NetworkPolicy
	var err error
	if consistent {
		inv, live, err = c.readConsistently(ctx, resolved)
	} else {
		inv, err = c.inventory(resolved)
		if err == nil {
			live, err = c.livePolicies()
		}
	}
	if err != nil {
		return 0, err
	}
	var plan *netpol.Plan
	var inc *netpol.Incremental
	if c.plan != nil {
		plan = c.plan(inv, c.opts.Plan)
	} else {
		inc = netpol.NewIncremental(inv, c.opts.Plan)
		plan = inc.Plan()
	}
	judge := netpol.NewJudge(inv, c.opts.Plan, observed)
	ch := diff(plan.Policies, plan.Servers, live, c.opts.Caps, nil, judge.Dispose)
	holders := netpol.ContextIDHolders(inv.Contexts)
	holder := func(id string) *clerumv1alpha1.Context { return holders[id] }
	stale, err := c.staleContextIDs(holder)
	if err != nil {
		return 0, err
	}
	held := withholdGrants(&ch, live, stale)
	c.observeFullPass(ch)
	byName := make(map[string]*clerumv1alpha1.McpServer, len(inv.Servers))
	for _, s := range inv.Servers {
		byName[s.Name] = s
	}
	after, err := c.apply(ctx, passPlan{
		ch: ch, held: held, holder: holder, version: version, seq: seq, desired: len(plan.Policies),
		counts: countByType(plan.Policies), rejections: plan.Rejections, conflicts: plan.Conflicts,
		contexts: inv.Contexts, server: lookup(byName), bindingless: bindinglessOf(lookup(byName)),
		servers: slices.Sorted(maps.Keys(byName)),
		onConverged: func() {
			// Only a pass that read the caches leaves a planner the
			// incremental passes can edit: they read the caches too.
			if !consistent {
				c.inc = inc
			}
		},
	})
	return after, err
}

// passPlan is what a pass planned and compared, however it read the world.
type passPlan struct {
	ch   changes
	held map[string]*heldGrant
	// holder returns the Context holding a contextId, or nil.
	holder func(id string) *clerumv1alpha1.Context
	// version is the egress snapshot planned from; seq the observations
	// judged with.
	version, seq uint64
	// desired is how many policies are planned, counts how many of each
	// type.
	desired    int
	counts     map[string]int
	rejections []netpol.Rejection
	conflicts  []netpol.ContextConflict
	// contexts are the Contexts whose ContextIDConflict condition to
	// reconcile.
	contexts []*clerumv1alpha1.Context
	// server looks up an McpServer of the inventory by name.
	server      func(name string) (*clerumv1alpha1.McpServer, bool)
	bindingless func(name string) (PlannedServer, bool)
	// onConverged, if set, is called when every write landed and the
	// cluster holds exactly the plan.
	onConverged func()
	// servers, when set, are the inventory's McpServers, each released as
	// soon as its own policies land (createAllows).
	servers []string
}

// createAllows creates the allows of a pass, after the namespace-wide
// layers and the revocations. When release is set — every default deny and
// revocation landed — it writes them server by server and tells the
// external-egress coordinator as each server's last one lands, so a cold
// start releases its first server after that server's policies rather than
// after the whole fleet's (docs/networkpolicy.md, "Releasing servers as
// their policies land"). Servers with nothing to create go first, at once.
// A server with a failed write of the pass is never released early; the
// pass's Applied decides for it, as for everything else.
func (c *Controller) createAllows(ctx context.Context, pp passPlan, ch changes, out *outcome, release bool) {
	creates := filter(ch.creates, not(isDefault))
	if !release || pp.servers == nil {
		c.write(ctx, verbCreate, creates, ch.servers, out)
		return
	}
	report := EgressReport{Rejected: egressRejections(pp.rejections), Bindingless: pp.bindingless}
	byServer := map[string][]*networkingv1.NetworkPolicy{}
	for _, p := range creates {
		s := ch.servers[keyOf(p)]
		byServer[s] = append(byServer[s], p)
	}
	// Allows no server owns (none today) go before any server is released.
	c.write(ctx, verbCreate, byServer[""], ch.servers, out)
	var ready []string
	for _, s := range pp.servers {
		if _, pending := byServer[s]; !pending && !out.failed.Has(s) {
			ready = append(ready, s)
		}
	}
	c.egress.Landed(pp.version, ready, report)
	for _, s := range slices.Sorted(maps.Keys(byServer)) {
		if s == "" {
			continue
		}
		c.write(ctx, verbCreate, byServer[s], ch.servers, out)
		if !out.failed.Has(s) {
			c.egress.Landed(pp.version, []string{s}, report)
		}
	}
}

// apply writes a pass's changes in the safety order (syncFull), certifies,
// tells the external-egress coordinator which gates may open, and reports.
func (c *Controller) apply(ctx context.Context, pp passPlan) (time.Duration, error) {
	ch := pp.ch
	// An allow this process created and the cache has not shown yet is not
	// sent again: a pass that runs before the watch delivers it would only
	// meet AlreadyExists. Defaults are sent again whatever: a default deny
	// deleted before the cache saw it must come back at once, and a
	// missing allow only denies.
	ch.creates = slices.DeleteFunc(ch.creates, func(p *networkingv1.NetworkPolicy) bool {
		return !isDefault(p) && c.created.pendingFor(keyOf(p), c.clock.Now())
	})
	c.observePlan(pp, ch)

	out := newOutcome()
	out.conflicts = ch.conflicts
	for _, p := range ch.conflicts {
		if s := ch.servers[keyOf(p)]; s != "" {
			out.failed.Insert(s)
		}
	}
	isDenyAll := func(p *networkingv1.NetworkPolicy) bool {
		return p.Labels[names.LabelPolicyType] == names.PolicyTypeDenyAll
	}
	serverDenyAll := func(p *networkingv1.NetworkPolicy) bool {
		return isDenyAll(p) && p.Namespace == c.opts.Plan.McpServerNamespace
	}
	revoked := c.write(ctx, verbCreate, filter(ch.creates, isDenyAll), ch.servers, out)
	// A deny-all name another writer's managed policy holds is never
	// written (diff reports it as a conflict); like an unmanaged holder, it
	// stands in for the default deny only if it is one.
	heldOpen := false
	for _, p := range ch.conflicts {
		if c.isDenyAllName(p) && !c.standsInForDefaultDeny(p, out) {
			revoked = false
			heldOpen = heldOpen || p.Namespace == c.opts.Plan.McpServerNamespace
		}
	}
	revoked = c.write(ctx, verbUpdate, filter(ch.updates, isDefault), ch.servers, out) && revoked
	blocked := heldOpen || c.failedAny(filter(ch.creates, serverDenyAll), out) || c.failedAny(filter(ch.updates, serverDenyAll), out)
	c.write(ctx, verbCreate, filter(ch.creates, and(isDefault, not(isDenyAll))), ch.servers, out)
	revoked = c.write(ctx, verbDelete, ch.revokes, ch.servers, out) && revoked
	revoked = c.write(ctx, verbDelete, ch.deletes, ch.servers, out) && revoked
	revoked = c.write(ctx, verbUpdate, filter(ch.updates, not(isDefault)), ch.servers, out) && revoked
	if revoked {
		c.certify(ch)
	} else if !c.certified.Load() {
		c.explainWithheld(out)
	}
	c.metrics.DefaultDenyWithheld.Set(float64(len(out.withheld)))
	c.createAllows(ctx, pp, ch, out, revoked && !blocked)

	// What this pass saw deleted is forgotten only once its revocations all
	// succeeded against a cache that had caught up with HCC's own creates:
	// a policy this process created that the cache did not show yet could
	// belong to a server deleted since, and would then look unexplained.
	if revoked && !out.behind && c.created.settled(c.clock.Now()) {
		c.observed.settle(pp.seq)
	}
	c.egress.Applied(pp.version, EgressReport{Failed: out.failed, Rejected: egressRejections(pp.rejections), Blocked: blocked,
		Bindingless: pp.bindingless})
	c.reportRejections(pp.server, pp.rejections)
	c.reportUnmanaged(pp.server, out.conflicts, ch.servers)
	c.reportMissing(out.missing)
	c.reportWithheld(pp.held, pp.holder)
	if out.skipped > 0 {
		c.log.Warn().Int("skipped", out.skipped).Int("failed", out.createFailures).
			Msg("creates skipped for the rest of the pass after repeated failures; revocations were all attempted")
	}
	if err := c.reportConflicts(ctx, pp.contexts, pp.conflicts); err != nil {
		out.errs = append(out.errs, err)
	}
	converged := revoked && !blocked && len(out.errs) == 0 && !out.behind && out.missing.Len() == 0 &&
		out.failed.Len() == 0 && len(out.conflicts) == 0 && len(out.withheld) == 0 && out.skipped == 0 &&
		ch.capped == "" && len(pp.held) == 0
	if converged && pp.onConverged != nil {
		pp.onConverged()
	} else if !converged {
		c.inc = nil
	}
	return c.finish(out)
}

func lookup[V any](m map[string]V) func(string) (V, bool) {
	return func(k string) (V, bool) { v, ok := m[k]; return v, ok }
}

// countByType counts policies by policy type.
func countByType(policies []*networkingv1.NetworkPolicy) map[string]int {
	out := map[string]int{}
	for _, p := range policies {
		out[p.Labels[names.LabelPolicyType]]++
	}
	return out
}

// failedAny reports whether any of policies is among the writes of out that
// failed.
func (c *Controller) failedAny(policies []*networkingv1.NetworkPolicy, out *outcome) bool {
	for _, p := range policies {
		if out.failedKeys.Has(keyOf(p)) {
			return true
		}
	}
	return false
}

// finish turns a pass's outcome into the worker's verdict: real errors
// retry with backoff, a lagging cache retries quietly, missing namespaces
// retry after a minute, and anything else is a success.
func (c *Controller) finish(out *outcome) (time.Duration, error) {
	if len(out.errs) > 0 {
		return 0, errors.Join(out.errs...)
	}
	if out.behind {
		return 0, kit.ErrCacheBehind
	}
	if out.missing.Len() > 0 {
		return missingNamespaceRetry, nil
	}
	return 0, nil
}

// certify marks readiness once: the first pass whose revocations all
// succeeded proves that no stale allow survives.
func (c *Controller) certify(ch changes) {
	if c.certified.Swap(true) {
		return
	}
	c.log.Info().Int("revoked", len(ch.revokes)).Int("orphans", len(ch.orphans)).Str("capped", ch.capped).
		Msg("stale allows revoked; readiness certified")
	c.metrics.Certified.Set(1)
	c.readiness.Set(ReadinessCheck, true)
}

// explainWithheld says on /ready why this pass did not certify, and logs
// it when that changes.
func (c *Controller) explainWithheld(out *outcome) {
	reason := strings.Join(out.withheld, "; ")
	if reason == "" {
		reason = "not every revocation or default deny of the last pass succeeded; the pass is retried (see the log and clerum_hcc_netpol_write_errors_total)"
	}
	c.readiness.Explain(ReadinessCheck, reason)
	if reason != c.withheldReported {
		c.withheldReported = reason
		c.log.Warn().Str("reason", reason).Msg("readiness withheld")
	}
}

// isDenyAllName reports whether p holds the deny-all name of its namespace
// in a runtime namespace.
func (c *Controller) isDenyAllName(p *networkingv1.NetworkPolicy) bool {
	return p.Name == names.DenyAllPolicy(p.Namespace) && slices.Contains(c.opts.Plan.RuntimeNamespaces, p.Namespace)
}

// standsInForDefaultDeny reports whether holder, an object HCC may not
// write that holds a runtime namespace's deny-all name, is itself a default
// deny and so counts as that namespace's (docs/networkpolicy.md). When it
// is not, the reason goes to out.withheld: readiness stays withheld, since
// the namespace may be open, and /ready says which object and why.
func (c *Controller) standsInForDefaultDeny(holder *networkingv1.NetworkPolicy, out *outcome) bool {
	why := netpol.NotADefaultDeny(&holder.Spec)
	if why == "" {
		return true
	}
	msg := fmt.Sprintf("NetworkPolicy %s/%s holds the default deny's name but is not a default deny: %s", holder.Namespace, holder.Name, why)
	out.withheld = append(out.withheld, msg)
	return false
}

// egressRejections returns the planner's rejections of egress bindings by
// server and binding, for the external-egress coordinator to report.
func egressRejections(rejections []netpol.Rejection) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, r := range rejections {
		if r.Kind != netpol.RejectedEgressBinding {
			continue
		}
		if out[r.Server] == nil {
			out[r.Server] = map[string]string{}
		}
		if _, seen := out[r.Server][r.Binding]; !seen {
			out[r.Server][r.Binding] = r.Reason
		}
	}
	return out
}

// reportMissing logs the namespaces a pass could not write into when that
// set changes, and exports their number.
func (c *Controller) reportMissing(missing sets.Set[string]) {
	c.metrics.MissingNamespaces.Set(float64(missing.Len()))
	summary := strings.Join(sets.List(missing), ",")
	if summary == c.missingReported {
		return
	}
	c.missingReported = summary
	if summary != "" {
		c.log.Warn().Strs("namespaces", sets.List(missing)).
			Msg("namespaces do not exist or are being deleted; their policies are written once they exist")
	}
}

// reportUnmanaged reports every name HCC needs that an object it does not
// own holds: a Warning event on that object (and on the server the policy
// is for) the first time, and a gauge. The object is never written.
func (c *Controller) reportUnmanaged(server func(string) (*clerumv1alpha1.McpServer, bool), conflicts []*networkingv1.NetworkPolicy, servers map[policyKey]string) {
	c.metrics.UnmanagedConflicts.Set(float64(len(conflicts)))
	current := sets.New[policyKey]()
	for _, p := range conflicts {
		k := keyOf(p)
		current.Insert(k)
		if c.unmanaged.Has(k) {
			continue
		}
		message := fmt.Sprintf("NetworkPolicy %s/%s is needed by HCC but held by an object HCC does not manage; it is left as it is", p.Namespace, p.Name)
		log := kit.LogObjectOf(c.log, p.Namespace, p.Name)
		log.Warn().Msg("name held by an unmanaged NetworkPolicy; skipped")
		c.recorder.Event(p, corev1.EventTypeWarning, reasons.EventUnmanagedConflict, message)
		if s, ok := server(servers[k]); ok {
			c.recorder.Event(s, corev1.EventTypeWarning, reasons.EventUnmanagedConflict, message)
		}
	}
	c.unmanaged = current
}

// reportRejections emits one Warning event on the McpServer for each new
// rejected recipe binding or colliding Context allow. Egress binding
// rejections are the external-egress coordinator's to report, with status.
func (c *Controller) reportRejections(server func(string) (*clerumv1alpha1.McpServer, bool), rejections []netpol.Rejection) {
	current := sets.New[string]()
	for _, r := range rejections {
		if r.Kind == netpol.RejectedEgressBinding {
			continue
		}
		key := r.Server + "\x00" + r.Binding + "\x00" + r.Reason
		current.Insert(key)
		if s, ok := server(r.Server); ok && !c.rejected.Has(key) {
			c.recorder.Eventf(s, corev1.EventTypeWarning, reasons.EventRecipeBindingRejected, "%s: %s", r.Binding, r.Reason)
		}
	}
	c.rejected = current
}

// syncDefaults ensures L0/L1 only. It never deletes: L0/L1 are never swept,
// and revocation is the full pass's job.
func (c *Controller) syncDefaults(ctx context.Context) (time.Duration, error) {
	live, err := c.livePolicies()
	if err != nil {
		return 0, err
	}
	keepAll := func(*networkingv1.NetworkPolicy, string) (netpol.Disposition, string) { return netpol.Kept, "" }
	ch := diff(netpol.Defaults(c.opts.Plan), nil, live, c.opts.Caps, isDefault, keepAll)
	out := newOutcome()
	out.conflicts = ch.conflicts
	c.write(ctx, verbCreate, ch.creates, nil, out)
	c.write(ctx, verbUpdate, ch.updates, nil, out)
	return c.finish(out)
}

// observeFullPass records what only a full pass finds: the orphans, what
// the caps held back, and the L0/L1 policies kept.
func (c *Controller) observeFullPass(ch changes) {
	c.metrics.Orphans.Set(float64(len(ch.orphans)))
	c.metrics.KeptDefaults.Set(float64(len(ch.kept)))
	held := &cappedOrphans{rule: ch.capped}
	if ch.capped != "" {
		for _, p := range ch.orphans {
			held.policies = append(held.policies, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	c.capped.Store(held)
	if ch.capped != "" {
		c.metrics.OrphanCapped.WithLabelValues(ch.capped).Inc()
		c.log.Warn().Int("orphans", len(ch.orphans)).Str("rule", ch.capped).
			Int("absoluteCap", c.opts.Caps.Absolute).Int("percentCap", c.opts.Caps.Percent).
			Msg("orphan delete cap tripped: no unexplained orphan deleted (disowned allows are still revoked); raise the cap to let the sweep proceed")
	}
	if kept := len(ch.kept); kept != c.keptReported {
		c.keptReported = kept
		if kept > 0 {
			c.log.Info().Int("policies", kept).
				Msg("L0/L1 policies outside the runtime namespaces are kept, never swept; `hcc-controller census` lists them")
		}
	}
}

// observePlan records what a pass planned and is about to write.
func (c *Controller) observePlan(pp passPlan, ch changes) {
	for t := range ownedTypes {
		c.metrics.Policies.WithLabelValues(t).Set(float64(pp.counts[t]))
	}
	c.metrics.Disowned.Set(float64(len(ch.revokes)))
	c.metrics.Rejections.Set(float64(len(pp.rejections)))
	c.metrics.ContextIgnore.Set(float64(len(pp.conflicts)))
	if len(ch.creates)+len(ch.updates)+len(ch.revokes)+len(ch.deletes) > 0 {
		c.log.Info().Int("creates", len(ch.creates)).Int("updates", len(ch.updates)).
			Int("revokes", len(ch.revokes)).Int("orphanDeletes", len(ch.deletes)).
			Int("desired", pp.desired).Msg("applying NetworkPolicy changes")
	}
}

// Verbs of write.
const (
	verbCreate = "create"
	verbUpdate = "update"
	verbDelete = "delete"
)

// write applies one verb to each policy, attempting every one, and reports
// whether all of them succeeded. Errors go to out; a policy that failed
// marks the server it belongs to (servers) failed.
func (c *Controller) write(ctx context.Context, verb string, policies []*networkingv1.NetworkPolicy, servers map[policyKey]string, out *outcome) bool {
	ok := true
	for _, p := range policies {
		if verb != verbDelete && out.missing.Has(p.Namespace) {
			continue
		}
		var err error
		if verb == verbCreate && out.createFailures >= maxCreateFailures {
			out.skipped++
			err = errSkipped
		} else {
			err = c.writeOne(ctx, verb, p, out)
		}
		if err == nil {
			continue
		}
		if errors.Is(err, errHeldByDefaultDeny) {
			// As good as written: the namespace is isolated.
			continue
		}
		ok = false
		out.failedKeys.Insert(keyOf(p))
		if s := servers[keyOf(p)]; s != "" {
			out.failed.Insert(s)
		}
		if errors.Is(err, errSkipped) {
			continue
		}
		// A lagging cache is retried quietly; a name held by an object HCC
		// does not own is reported by reportUnmanaged. Neither is an error
		// of the pass.
		if !errors.Is(err, kit.ErrCacheBehind) && !errors.Is(err, errUnmanaged) {
			c.metrics.WriteErrors.WithLabelValues(verb).Inc()
			out.errs = append(out.errs, err)
			if verb == verbCreate {
				out.createFailures++
			}
		}
	}
	return ok
}

// writeOne writes one policy. It returns nil when the policy is as wanted,
// or when it was skipped for a reason reported elsewhere (its namespace does
// not exist, or an object HCC does not own holds its name).
func (c *Controller) writeOne(ctx context.Context, verb string, p *networkingv1.NetworkPolicy, out *outcome) error {
	client := c.kube.NetworkingV1().NetworkPolicies(p.Namespace)
	var err error
	switch verb {
	case verbCreate:
		_, err = client.Create(ctx, p, metav1.CreateOptions{FieldManager: clerumv1alpha1.FieldManagerNetPol})
		switch {
		case isNamespaceNotFound(err, p.Namespace):
			// A namespace that does not exist holds no pod to protect, so it
			// blocks neither certification nor a gate.
			out.missing.Insert(p.Namespace)
			return nil
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// A namespace being deleted refuses every create (403, "is
			// being terminated") and may stay so for as long as a
			// finalizer holds it; no pod can start in it and those it
			// has are being deleted. Skipped like a missing namespace:
			// failing the pass would withhold certification and stall
			// every other namespace's writes behind the backoff.
			out.missing.Insert(p.Namespace)
			return nil
		case apierrors.IsAlreadyExists(err):
			return c.createConflict(ctx, p, out)
		case err == nil:
			c.created.add(keyOf(p), c.clock.Now())
		}
	case verbUpdate:
		_, err = client.Update(ctx, p, metav1.UpdateOptions{FieldManager: clerumv1alpha1.FieldManagerNetPol})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Changed or deleted since the cache saw it: re-plan from the
			// newer object.
			out.behind = true
			return kit.ErrCacheBehind
		}
	case verbDelete:
		// The preconditions make sure we delete the policy we judged, not
		// one recreated under its name since, nor one relabelled (handed
		// over to someone else) since the cache saw it.
		err = client.Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
			UID: &p.UID, ResourceVersion: &p.ResourceVersion}})
		switch {
		case apierrors.IsNotFound(err):
			err = nil
		case apierrors.IsConflict(err):
			out.behind = true
			return kit.ErrCacheBehind
		}
	}
	if err != nil {
		return fmt.Errorf("%s NetworkPolicy %s/%s: %w", verb, p.Namespace, p.Name, err)
	}
	c.metrics.Writes.WithLabelValues(verb).Inc()
	log := kit.LogObjectOf(c.log, p.Namespace, p.Name)
	log.Debug().Str("verb", verb).Msg("NetworkPolicy written")
	return nil
}

// createConflict handles a create refused because the name is taken. The
// informer lists only managed policies, so the holder is either one HCC
// wrote that the cache has not seen yet (as planned: done; otherwise retry
// quietly from the newer object) or an object HCC must not touch (report
// and skip; docs/ownership.md).
func (c *Controller) createConflict(ctx context.Context, p *networkingv1.NetworkPolicy, out *outcome) error {
	holder, err := c.kube.NetworkingV1().NetworkPolicies(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		out.behind = true // deleted since: the next pass creates it
		return kit.ErrCacheBehind
	case err != nil:
		return fmt.Errorf("create NetworkPolicy %s/%s: reading the object holding its name: %w", p.Namespace, p.Name, err)
	case owned(holder) && updateFor(p, holder) == nil:
		// HCC's own create of this very policy, which the cache has not
		// shown yet (one pass created it and the next met a cache that
		// had not caught up, or a relist briefly dropped it): the policy
		// is in place as planned, so it does not fail its server's gate.
		// The pass still read a cache that is behind — what else that
		// cache misses it cannot know — so it is retried quietly, and
		// neither converges nor settles its observations.
		out.behind = true
		return nil
	case owned(holder):
		out.behind = true
		return kit.ErrCacheBehind
	}
	out.conflicts = append(out.conflicts, holder)
	if c.isDenyAllName(holder) && c.standsInForDefaultDeny(holder, out) {
		return errHeldByDefaultDeny
	}
	return errUnmanaged
}

// errHeldByDefaultDeny marks a deny-all create skipped because an object
// HCC does not own holds the name and is itself a default deny: reported
// like any unmanaged holder, but the namespace is isolated, so it blocks
// neither certification nor a gate.
var errHeldByDefaultDeny = errors.New("name held by a default deny HCC does not manage")

// errSkipped marks a create the pass skipped after maxCreateFailures.
var errSkipped = errors.New("skipped after repeated create failures")

// isNamespaceNotFound reports whether err says namespace ns does not exist;
// any other NotFound is an ordinary failure.
func isNamespaceNotFound(err error, ns string) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Kind == "namespaces" && d.Name == ns
}

// errUnmanaged marks a policy skipped because an object HCC does not own
// holds its name; it is reported, not retried as an error.
var errUnmanaged = errors.New("name held by an object HCC does not manage")

// reportConflicts sets the ContextIDConflict condition on every Context
// ignored for a duplicate contextId, clears it on one that is no longer, and
// emits one Warning event when a Context starts being ignored. A Context that
// never conflicted gets no condition, so healthy Contexts cost no writes.
func (c *Controller) reportConflicts(ctx context.Context, contexts []*clerumv1alpha1.Context, conflicts []netpol.ContextConflict) error {
	byName := make(map[string]netpol.ContextConflict, len(conflicts))
	for _, cf := range conflicts {
		byName[cf.Context] = cf
	}
	var errs []error
	for _, ctxObj := range contexts {
		have := meta.FindStatusCondition(ctxObj.Status.Conditions, clerumv1alpha1.ConditionContextIDConflict)
		cf, conflicted := byName[ctxObj.Name]
		if !conflicted && (have == nil || have.Status == metav1.ConditionFalse) {
			c.conflicted.Delete(ctxObj.Name)
			continue
		}
		want := kit.Condition{Type: clerumv1alpha1.ConditionContextIDConflict, Status: metav1.ConditionFalse,
			Reason: reasons.UniqueContextID, Message: "contextId " + ctxObj.Spec.ContextID + " is held by this Context"}
		if conflicted {
			want.Status, want.Reason = metav1.ConditionTrue, reasons.DuplicateContextID
			want.Message = fmt.Sprintf("contextId %s is already held by Context %s; this Context is ignored", cf.ContextID, cf.HeldBy)
			if !c.conflicted.Has(ctxObj.Name) {
				c.recorder.Event(ctxObj, corev1.EventTypeWarning, reasons.EventDuplicateContextID, want.Message)
			}
			c.conflicted.Insert(ctxObj.Name)
		} else {
			c.conflicted.Delete(ctxObj.Name)
		}
		// hcc-netpol owns this one condition of a Context's status.
		conds := kit.BuildConditions(ctxObj.Status.Conditions, ctxObj.Generation, c.clock.Now(), want)
		if !conds.Changed {
			continue
		}
		apply := applyv1alpha1.Context(ctxObj.Name, ctxObj.Namespace).WithStatus(applyv1alpha1.ContextStatus().
			WithConditions(conds.Apply...))
		err := kit.ApplyStatus(c.statusWrites, ctxObj, apply, func() (metav1.Object, error) {
			return c.hcc.ClerumV1alpha1().Contexts(ctxObj.Namespace).ApplyStatus(ctx, apply,
				metav1.ApplyOptions{FieldManager: clerumv1alpha1.FieldManagerNetPol, Force: true})
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("status of Context %s/%s: %w", ctxObj.Namespace, ctxObj.Name, err))
		}
	}
	return errors.Join(errs...)
}

func filter(ps []*networkingv1.NetworkPolicy, keep func(*networkingv1.NetworkPolicy) bool) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, p := range ps {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func not(f func(*networkingv1.NetworkPolicy) bool) func(*networkingv1.NetworkPolicy) bool {
	return func(p *networkingv1.NetworkPolicy) bool { return !f(p) }
}

func and(f, g func(*networkingv1.NetworkPolicy) bool) func(*networkingv1.NetworkPolicy) bool {
	return func(p *networkingv1.NetworkPolicy) bool { return f(p) && g(p) }
}

// bindinglessOf looks up a server of the inventory server reads that
// declares no egress binding, as the pass planned it.
func bindinglessOf(server func(string) (*clerumv1alpha1.McpServer, bool)) func(string) (PlannedServer, bool) {
	return func(name string) (PlannedServer, bool) {
		s, ok := server(name)
		if !ok || len(s.Spec.EgressBindings) > 0 {
			return PlannedServer{}, false
		}
		return PlannedServer{UID: s.UID, Generation: s.Generation}, true
	}
}
