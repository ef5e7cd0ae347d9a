package netpol

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
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
	// owner: the first is the winner.
	byKey   map[Key][]candidate
	touched sets.Set[Key]
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
	policies   []plannedPolicy
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
// inv.
func NewIncremental(inv Inventory, opts Options) *Incremental {
	inc := &Incremental{
		opts: opts, rules: NewEgressRules(opts),
		contexts: map[string]*clerumv1alpha1.Context{}, active: map[string]*clerumv1alpha1.McpServer{},
		resolved: map[string]map[string]Resolution{}, byID: map[string]sets.Set[string]{}, claims: map[string]claim{},
		naming: map[string]sets.Set[string]{}, units: map[unit]unitPlan{}, byKey: map[Key][]candidate{},
		touched: sets.New[Key](),
	}
	p := &planner{opts: opts}
	for _, policy := range appendDefaults(nil, opts) {
		p.add(policy, owner{})
	}
	inc.setUnit(unit{}, unitPlan{policies: p.policies})
	for _, s := range inv.Servers {
		if _, seen := inc.active[s.Name]; !seen {
			inc.SetServer(s, inv.Resolved[s.Name])
		}
	}
	for _, c := range inv.Contexts {
		if _, seen := inc.contexts[c.Name]; !seen {
			inc.SetContext(c)
		}
	}
	inc.touched = sets.New[Key]()
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
	delete(inc.active, s.Name)
	if inc.opts.ServerActive(s) && len(validation.IsDNS1123Label(s.Name)) == 0 {
		inc.active[s.Name] = s
	}
	inc.resolved[s.Name] = resolved
	inc.replanServer(s.Name)
}

// DeleteServer removes the McpServer name, if held.
func (inc *Incremental) DeleteServer(name string) {
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
	keys := slices.SortedFunc(maps.Keys(inc.byKey), func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	plan := &Plan{Policies: make([]*networkingv1.NetworkPolicy, 0, len(keys)), Servers: make([]string, 0, len(keys))}
	for _, k := range keys {
		cands := inc.byKey[k]
		plan.Policies = append(plan.Policies, cands[0].policy)
		plan.Servers = append(plan.Servers, cands[0].owner.server)
		plan.Rejections = append(plan.Rejections, collisions(cands)...)
	}
	for _, u := range inc.units {
		plan.Rejections = append(plan.Rejections, u.rejections...)
	}
	slices.SortFunc(plan.Rejections, func(a, b Rejection) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Binding, b.Binding), cmp.Compare(a.Reason, b.Reason))
	})
	for _, cl := range inc.claims {
		plan.Conflicts = append(plan.Conflicts, cl.conflicts...)
	}
	slices.SortFunc(plan.Conflicts, func(a, b ContextConflict) int {
		return cmp.Or(cmp.Compare(a.Context, b.Context), cmp.Compare(a.ContextID, b.ContextID))
	})
	return plan
}

// collisions are the rejections of the candidates for one name that lose it
// to another owner, as plan() reports them.
func collisions(cands []candidate) []Rejection {
	var out []Rejection
	kept := &cands[0]
	for i := range cands[1:] {
		pp := &cands[i+1]
		if pp.owner != kept.owner {
			out = append(out, Rejection{Kind: pp.owner.rejectionKind(), Server: pp.owner.server, Binding: pp.owner.binding(),
				Reason: fmt.Sprintf("NetworkPolicy %s/%s is already planned for server %s, %s",
					pp.namespace, pp.name, kept.owner.server, kept.owner.binding())})
		}
	}
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
	var up unitPlan
	if s, ok := inc.active[name]; ok {
		p := &planner{opts: inc.opts, rules: inc.rules}
		p.planExternalEgress(s, inc.resolved[name])
		p.planRecipeBindings(s)
		up = unitPlan{policies: p.policies, rejections: p.rejections}
	}
	inc.setUnit(unit{server: name}, up)
	for c := range inc.naming[name] {
		inc.replanContext(c)
	}
}

// replanContext replans the allows of the Context name: none unless it
// exists and holds its contextId.
func (inc *Incremental) replanContext(name string) {
	var up unitPlan
	if c, ok := inc.contexts[name]; ok && inc.claims[c.Spec.ContextID].holder == name {
		p := &planner{opts: inc.opts, servers: inc.active, contexts: []*clerumv1alpha1.Context{c}}
		p.planContexts()
		up = unitPlan{policies: p.policies}
	}
	inc.setUnit(unit{context: name}, up)
}

// setUnit replaces u's candidates and rejections with up's.
func (inc *Incremental) setUnit(u unit, up unitPlan) {
	for _, pp := range inc.units[u].policies {
		k := Key{pp.namespace, pp.name}
		inc.touched.Insert(k)
		// By unit, not only owner: while a contextId changes hands, its
		// new holder may have planned the owner its old holder leaves.
		cands := slices.DeleteFunc(inc.byKey[k], func(c candidate) bool { return c.unit == u })
		if len(cands) == 0 {
			delete(inc.byKey, k)
		} else {
			inc.byKey[k] = cands
		}
	}
	for _, pp := range up.policies {
		k := Key{pp.namespace, pp.name}
		inc.touched.Insert(k)
		cands := inc.byKey[k]
		i, _ := slices.BinarySearchFunc(cands, pp, func(a candidate, b plannedPolicy) int { return a.compare(&b) })
		inc.byKey[k] = slices.Insert(cands, i, candidate{plannedPolicy: pp, unit: u})
	}
	if len(up.policies) == 0 && len(up.rejections) == 0 {
		delete(inc.units, u)
		return
	}
	inc.units[u] = up
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
