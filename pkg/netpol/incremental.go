package netpol

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// Incremental keeps a plan and, on each edit of one Context, McpServer or
// server's DNS answers, replans only the policies of the owners the edit
// touches (docs/networkpolicy.md, "Incremental passes"). Its plan is by
// construction the one Compute returns for the same inventory: the same
// unit planners build each owner's policies, and the same rule (the
// smallest owner keeps a name) decides every name two owners plan. The
// property test holds it to that after every step of random edits.
//
// Each edit records the policy names whose winner may have changed; Touched
// hands them to the applier, which diffs only those. Incremental is not safe
// for concurrent use.
type Incremental struct {
	opts  Options
	rules *EgressRules

	contexts map[string]*clerumv1alpha1.Context
	// servers are every McpServer held, active or not: the Judge's
	// inventory.
	servers map[string]*clerumv1alpha1.McpServer
	// active are the servers that may hold allows (ServerActive, and a name
	// that is a DNS label): the planner's servers map.
	active   map[string]*clerumv1alpha1.McpServer
	resolved map[string]map[string]Resolution
	// byID are the Context names per contextId, and claims what
	// claimContextIDs decides among them: the holder and the conflicts.
	byID   map[string]sets.Set[string]
	claims map[string]claim
	// naming are the Contexts that name each server, held or not.
	naming map[string]sets.Set[string]

	// units are the policies and rejections each unit planned last.
	units map[unit]unitPlan
	// byKey are every unit's candidates per policy name, kept sorted by
	// owner: the first is the winner. A name only one unit plans, nearly
	// every name, holds a slice of that unit's own candidates of length and
	// capacity one (no allocation of its own); a second candidate makes
	// slices.Insert copy it out, so only a slice of two or more is ever
	// written in place.
	byKey map[Key][]candidate
	// contested are the names more than one unit planned: the only ones
	// whose candidates may reject one another.
	contested sets.Set[Key]
	// types counts the planned policies (winners) by policy type.
	types map[string]int

	// touched and touchedIDs are nil while NewIncremental builds: its
	// caller diffs everything.
	touched    sets.Set[Key]
	touchedIDs sets.Set[string]

	// scratch is the planner's policies, reused from unit to unit.
	scratch []plannedPolicy
}

// Key names a policy by namespace and name.
type Key struct{ Namespace, Name string }

// KeyOf returns p's Key.
func KeyOf(p *networkingv1.NetworkPolicy) Key { return Key{p.Namespace, p.Name} }

// unit is what plans a group of policies: the defaults (the zero unit), a
// Context by name, or a server's own bindings by name.
type unit struct {
	context, server string
}

type unitPlan struct {
	policies   []candidate
	rejections []Rejection
}

// candidate is a policy a unit planned under a name.
type candidate struct {
	plannedPolicy
	unit unit
}

type claim struct {
	holder    string
	conflicts []ContextConflict
}

// NewIncremental returns an incremental planner holding Compute's plan of
// inv. It sizes its indexes from inv, plans each server's bindings and each
// Context holding its contextId once, and records no touched names.
func NewIncremental(inv Inventory, opts Options) *Incremental {
	opts = opts.withCache()
	grants := 0
	for _, c := range inv.Contexts {
		grants += len(c.Spec.McpServers)
	}
	bindings := 0
	for _, s := range inv.Servers {
		bindings += len(s.Spec.EgressBindings)
	}
	nc, ns := len(inv.Contexts), len(inv.Servers)
	inc := &Incremental{
		opts: opts, rules: NewEgressRules(opts),
		contexts: make(map[string]*clerumv1alpha1.Context, nc), servers: make(map[string]*clerumv1alpha1.McpServer, ns),
		active: make(map[string]*clerumv1alpha1.McpServer, ns), resolved: make(map[string]map[string]Resolution, ns),
		byID: make(map[string]sets.Set[string], nc), claims: make(map[string]claim, nc), naming: make(map[string]sets.Set[string], ns),
		units: make(map[unit]unitPlan, nc+ns+1),
		// The same count newPlanner sizes Compute's policies by.
		byKey:     make(map[Key][]candidate, 4*len(opts.RuntimeNamespaces)+1+bindings+3*grants),
		contested: sets.New[Key](), types: map[string]int{},
	}
	p := &planner{opts: opts}
	for _, policy := range appendDefaults(nil, opts) {
		p.add(policy, owner{})
	}
	inc.setUnit(unit{}, p.policies, nil)
	for _, s := range inv.Servers {
		if _, seen := inc.servers[s.Name]; !seen {
			inc.SetServer(s, inv.Resolved[s.Name])
		}
	}
	// The Contexts all at once: one claimContextIDs, as Compute's, and one
	// plan per holder, where SetContext would replan a contextId's holder
	// again at each of its other Contexts.
	held := make([]*clerumv1alpha1.Context, 0, nc)
	for _, c := range inv.Contexts {
		if _, seen := inc.contexts[c.Name]; !seen {
			inc.contexts[c.Name] = c
			inc.indexContext(nil, c)
			held = append(held, c)
		}
	}
	claimed, conflicts := claimContextIDs(held)
	for _, c := range claimed {
		inc.claims[c.Spec.ContextID] = claim{holder: c.Name}
	}
	// conflicts are sorted by Context name, so each contextId's are too, as
	// replanContextIDs records them.
	for _, cf := range conflicts {
		cl := inc.claims[cf.ContextID]
		cl.conflicts = append(cl.conflicts, cf)
		inc.claims[cf.ContextID] = cl
	}
	for _, c := range claimed {
		inc.replanContext(c.Name)
	}
	inc.touched, inc.touchedIDs = sets.New[Key](), sets.New[string]()
	return inc
}

// SetContext adds or replaces the Context c.
func (inc *Incremental) SetContext(c *clerumv1alpha1.Context) {
	old := inc.contexts[c.Name]
	inc.contexts[c.Name] = c
	inc.indexContext(old, c)
	inc.replanContextIDs(idsOf(old, c)...)
}

// DeleteContext removes the Context name, if held.
func (inc *Incremental) DeleteContext(name string) {
	old, ok := inc.contexts[name]
	if !ok {
		return
	}
	delete(inc.contexts, name)
	inc.indexContext(old, nil)
	inc.replanContextIDs(old.Spec.ContextID)
}

// SetServer adds or replaces the McpServer s, with its current DNS answers.
func (inc *Incremental) SetServer(s *clerumv1alpha1.McpServer, resolved map[string]Resolution) {
	inc.servers[s.Name] = s
	delete(inc.active, s.Name)
	if inc.opts.ServerActive(s) && len(validation.IsDNS1123Label(s.Name)) == 0 {
		inc.active[s.Name] = s
	}
	inc.resolved[s.Name] = resolved
	inc.replanServer(s.Name)
}

// DeleteServer removes the McpServer name, if held.
func (inc *Incremental) DeleteServer(name string) {
	delete(inc.servers, name)
	delete(inc.active, name)
	delete(inc.resolved, name)
	inc.replanServer(name)
}

// Touched returns the policy names whose winner may have changed since the
// last call, and forgets them.
func (inc *Incremental) Touched() sets.Set[Key] {
	t := inc.touched
	inc.touched = sets.New[Key]()
	return t
}

// TouchedContexts returns the Contexts that hold, or are refused, a
// contextId some edit since the last call touched — the ones whose
// ContextIDConflict condition may have changed — and forgets those ids.
func (inc *Incremental) TouchedContexts() []*clerumv1alpha1.Context {
	var out []*clerumv1alpha1.Context
	for id := range inc.touchedIDs {
		for name := range inc.byID[id] {
			out = append(out, inc.contexts[name])
		}
	}
	inc.touchedIDs = sets.New[string]()
	slices.SortFunc(out, func(a, b *clerumv1alpha1.Context) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Holder returns the Context holding the contextId id, or nil.
func (inc *Incremental) Holder(id string) *clerumv1alpha1.Context {
	if cl, ok := inc.claims[id]; ok {
		return inc.contexts[cl.holder]
	}
	return nil
}

// ChangedResolutions returns the servers held whose DNS answers in
// resolved differ from those they were last set with.
func (inc *Incremental) ChangedResolutions(resolved map[string]map[string]Resolution) []string {
	var out []string
	for name := range inc.servers {
		if !sameResolutions(inc.resolved[name], resolved[name]) {
			out = append(out, name)
		}
	}
	return out
}

// sameResolutions reports whether a and b hold the same answers; no
// answer and an empty set of answers are the same.
func sameResolutions(a, b map[string]Resolution) bool {
	if len(a) != len(b) {
		return false
	}
	for binding, ra := range a {
		rb, ok := b[binding]
		if !ok || ra.ServerUID != rb.ServerUID || ra.Host != rb.Host || ra.Port != rb.Port || ra.Protocol != rb.Protocol ||
			!slices.Equal(ra.Addrs, rb.Addrs) {
			return false
		}
	}
	return true
}

// Server returns the McpServer name as last set, active or not.
func (inc *Incremental) Server(name string) (*clerumv1alpha1.McpServer, bool) {
	s, ok := inc.servers[name]
	return s, ok
}

// PolicyCounts returns how many policies are planned, by policy type.
func (inc *Incremental) PolicyCounts() map[string]int { return maps.Clone(inc.types) }

// Size returns how many policies are planned.
func (inc *Incremental) Size() int { return len(inc.byKey) }

// Winner returns the policy planned under k and the server it is for (""
// for L0/L1), or ok false when none is.
func (inc *Incremental) Winner(k Key) (policy *networkingv1.NetworkPolicy, server string, ok bool) {
	cands := inc.byKey[k]
	if len(cands) == 0 {
		return nil, "", false
	}
	return cands[0].policy, cands[0].owner.server, true
}

// Plan returns the whole plan, as Compute would.
func (inc *Incremental) Plan() *Plan {
	winners := make([]*candidate, 0, len(inc.byKey))
	for _, cands := range inc.byKey {
		winners = append(winners, &cands[0])
	}
	slices.SortFunc(winners, func(a, b *candidate) int {
		if c := strings.Compare(a.namespace, b.namespace); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	plan := &Plan{Policies: make([]*networkingv1.NetworkPolicy, len(winners)), Servers: make([]string, len(winners)),
		Rejections: inc.Rejections(), Conflicts: inc.Conflicts()}
	for i, w := range winners {
		plan.Policies[i], plan.Servers[i] = w.policy, w.owner.server
	}
	return plan
}

// Rejections returns the plan's rejections, as Plan reports them, without
// building the plan: the units' own and those of the names two owners
// planned.
func (inc *Incremental) Rejections() []Rejection {
	var out []Rejection
	for _, u := range inc.units {
		out = append(out, u.rejections...)
	}
	for k := range inc.contested {
		cands := inc.byKey[k]
		for i := range cands[1:] {
			if cands[i+1].owner != cands[0].owner {
				out = append(out, collisionRejection(&cands[i+1].plannedPolicy, &cands[0].plannedPolicy))
			}
		}
	}
	slices.SortFunc(out, func(a, b Rejection) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Binding, b.Binding), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// Conflicts returns the Contexts ignored for a duplicate contextId, as Plan
// reports them.
func (inc *Incremental) Conflicts() []ContextConflict {
	var out []ContextConflict
	for _, cl := range inc.claims {
		out = append(out, cl.conflicts...)
	}
	slices.SortFunc(out, func(a, b ContextConflict) int {
		return cmp.Or(cmp.Compare(a.Context, b.Context), cmp.Compare(a.ContextID, b.ContextID))
	})
	return out
}

// idsOf returns the contextIds of the Contexts given, skipping nil ones.
func idsOf(cs ...*clerumv1alpha1.Context) []string {
	var ids []string
	for _, c := range cs {
		if c != nil {
			ids = append(ids, c.Spec.ContextID)
		}
	}
	return ids
}

// indexContext moves a Context from old's entries in byID and naming to
// now's; either may be nil.
func (inc *Incremental) indexContext(old, now *clerumv1alpha1.Context) {
	if old != nil {
		deleteFrom(inc.byID, old.Spec.ContextID, old.Name)
		for _, s := range old.Spec.McpServers {
			deleteFrom(inc.naming, s, old.Name)
		}
	}
	if now != nil {
		insertInto(inc.byID, now.Spec.ContextID, now.Name)
		for _, s := range now.Spec.McpServers {
			insertInto(inc.naming, s, now.Name)
		}
	}
}

// replanContextIDs decides again who holds each of ids and replans every
// Context that has or had one of them.
func (inc *Incremental) replanContextIDs(ids ...string) {
	replan := sets.New[string]()
	for _, id := range ids {
		if cl, ok := inc.claims[id]; ok {
			replan.Insert(cl.holder)
		}
		var contexts []*clerumv1alpha1.Context
		for name := range inc.byID[id] {
			contexts = append(contexts, inc.contexts[name])
		}
		claimed, conflicts := claimContextIDs(contexts)
		if inc.touchedIDs != nil {
			inc.touchedIDs.Insert(id)
		}
		delete(inc.claims, id)
		if len(claimed) > 0 {
			inc.claims[id] = claim{holder: claimed[0].Name, conflicts: conflicts}
			replan.Insert(claimed[0].Name)
		}
	}
	// A Context that holds no contextId (any more) plans nothing.
	for name := range replan {
		inc.replanContext(name)
	}
}

// replanServer replans s's own bindings and every Context allow of it.
func (inc *Incremental) replanServer(name string) {
	p := &planner{opts: inc.opts, rules: inc.rules, policies: inc.scratch[:0]}
	if s, ok := inc.active[name]; ok {
		p.planExternalEgress(s, inc.resolved[name])
		p.planRecipeBindings(s)
	}
	inc.setUnit(unit{server: name}, p.policies, p.rejections)
	inc.scratch = p.policies[:0]
	for c := range inc.naming[name] {
		inc.replanContext(c)
	}
}

// replanContext replans the allows of the Context name: none unless it
// exists and holds its contextId.
func (inc *Incremental) replanContext(name string) {
	p := &planner{opts: inc.opts, servers: inc.active, policies: inc.scratch[:0]}
	if c, ok := inc.contexts[name]; ok && inc.claims[c.Spec.ContextID].holder == name {
		p.contexts = []*clerumv1alpha1.Context{c}
		p.planContexts()
	}
	inc.setUnit(unit{context: name}, p.policies, nil)
	inc.scratch = p.policies[:0]
}

// setUnit replaces u's candidates and rejections with policies (which it
// copies) and rejections.
func (inc *Incremental) setUnit(u unit, policies []plannedPolicy, rejections []Rejection) {
	var now []candidate
	if len(policies) > 0 {
		now = make([]candidate, len(policies))
		for i := range policies {
			now[i] = candidate{plannedPolicy: policies[i], unit: u}
		}
	}
	old := inc.units[u].policies
	for i := range old {
		inc.withdraw(u, &old[i])
	}
	for i := range now {
		inc.offer(now[i : i+1 : i+1])
	}
	if len(now) == 0 && len(rejections) == 0 {
		delete(inc.units, u)
		return
	}
	inc.units[u] = unitPlan{policies: now, rejections: rejections}
}

// withdraw removes u's candidates under c's name, c among them.
func (inc *Incremental) withdraw(u unit, c *candidate) {
	k := Key{c.namespace, c.name}
	cands := inc.byKey[k]
	was := winner(cands)
	switch {
	case len(cands) == 1 && cands[0].unit == u:
		// Perhaps a unit's own slice: never written.
		delete(inc.byKey, k)
		cands = nil
	default:
		// By unit, not only owner: while a contextId changes hands, its
		// new holder may have planned the owner its old holder leaves.
		// A slice of two or more is the index's own (byKey).
		cands = slices.DeleteFunc(cands, func(c candidate) bool { return c.unit == u })
		if len(cands) == 0 {
			delete(inc.byKey, k)
		} else {
			inc.byKey[k] = cands
		}
	}
	inc.settle(k, was, cands)
}

// offer adds one as a candidate under its name; one is a slice of length
// and capacity one of its unit's candidates.
func (inc *Incremental) offer(one []candidate) {
	k := Key{one[0].namespace, one[0].name}
	cands := inc.byKey[k]
	was := winner(cands)
	if len(cands) == 0 {
		cands = one
	} else {
		i, _ := slices.BinarySearchFunc(cands, &one[0].plannedPolicy, func(a candidate, b *plannedPolicy) int { return a.compare(b) })
		cands = slices.Insert(cands, i, one[0])
	}
	inc.byKey[k] = cands
	inc.settle(k, was, cands)
}

// settle records an edit of k's candidates, from a winner was (nil for
// none) to cands: the name is touched, the counts by type follow its
// winner, and it is contested while more than one unit plans it.
func (inc *Incremental) settle(k Key, was *networkingv1.NetworkPolicy, cands []candidate) {
	if inc.touched != nil {
		inc.touched.Insert(k)
	}
	if now := winner(cands); now != was {
		if was != nil {
			inc.types[was.Labels[names.LabelPolicyType]]--
		}
		if now != nil {
			inc.types[now.Labels[names.LabelPolicyType]]++
		}
	}
	if len(cands) > 1 {
		inc.contested.Insert(k)
	} else if len(inc.contested) > 0 {
		inc.contested.Delete(k)
	}
}

// winner is the policy of the first of cands, or nil.
func winner(cands []candidate) *networkingv1.NetworkPolicy {
	if len(cands) == 0 {
		return nil
	}
	return cands[0].policy
}

func insertInto(m map[string]sets.Set[string], k, v string) {
	if m[k] == nil {
		m[k] = sets.New[string]()
	}
	m[k].Insert(v)
}

func deleteFrom(m map[string]sets.Set[string], k, v string) {
	m[k].Delete(v)
	if m[k].Len() == 0 {
		delete(m, k)
	}
}
