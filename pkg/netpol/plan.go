package netpol

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// Compute plans the complete desired set of the NetworkPolicies the
// NetworkPolicy operator owns. It is pure and deterministic: the same
// inventory and options, in any list order, yield an identical Plan.
func Compute(inv Inventory, opts Options) *Plan {
	opts = opts.withCache()
	p := newPlanner(inv, opts)
	for _, policy := range appendDefaults(nil, opts) {
		p.add(policy, owner{})
	}
	p.planContexts()
	for _, s := range inv.Servers {
		if p.servers[s.Name] != s {
			continue // disabled, misnamed, or a repeat of an indexed name
		}
		p.planExternalEgress(s, inv.Resolved[s.Name])
		p.planRecipeBindings(s)
	}
	return p.plan()
}

// owner is what a planned policy is for. Names join DNS labels with '-', so
// two owners can derive the same name (Context "a-b" with server "c", and
// Context "a" with server "b-c"); the owner decides, deterministically, which
// one keeps the name, and names the other in a Rejection.
type owner struct {
	server string
	kind   string // "" for an egress binding, "context" or "recipe"
	key    string // the binding name, contextId or recipe
}

func (o owner) binding() string {
	if o.kind == "" {
		return o.key
	}
	return o.kind + ":" + o.key
}

func (o owner) rejectionKind() RejectionKind {
	switch o.kind {
	case "context":
		return RejectedContextAllow
	case "recipe":
		return RejectedRecipeBinding
	}
	return RejectedEgressBinding
}

// plannedPolicy is a policy and its owner. It carries copies of the
// policy's namespace and name so that sorting tens of thousands of them reads
// contiguous memory instead of chasing a pointer per comparison.
type plannedPolicy struct {
	namespace, name string
	policy          *networkingv1.NetworkPolicy
	owner           owner
}

// compare orders by namespace, name, then owner. It is the hot loop of a
// large plan, so it compares lazily rather than through cmp.Or, which
// evaluates every operand.
func (a *plannedPolicy) compare(b *plannedPolicy) int {
	if c := strings.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	if c := strings.Compare(a.owner.server, b.owner.server); c != 0 {
		return c
	}
	if c := strings.Compare(a.owner.kind, b.owner.kind); c != 0 {
		return c
	}
	return strings.Compare(a.owner.key, b.owner.key)
}

type planner struct {
	opts  Options
	rules *EgressRules
	// servers indexes the enabled McpServers by name: a disabled server is
	// planned exactly like a missing one.
	servers    map[string]*clerumv1alpha1.McpServer
	contexts   []*clerumv1alpha1.Context
	conflicts  []ContextConflict
	policies   []plannedPolicy
	rejections []Rejection
}

func newPlanner(inv Inventory, opts Options) *planner {
	servers := make(map[string]*clerumv1alpha1.McpServer, len(inv.Servers))
	size := 4*len(opts.RuntimeNamespaces) + 1
	for _, s := range inv.Servers {
		// A name that is not a DNS label cannot be a label value, so no
		// policy could select the server's pods (the CRD rejects such names;
		// render input may hold them).
		if _, dup := servers[s.Name]; dup || !opts.ServerActive(s) || len(validation.IsDNS1123Label(s.Name)) > 0 {
			continue
		}
		servers[s.Name] = s
		size += len(s.Spec.EgressBindings)
	}
	contexts, conflicts := claimContextIDs(inv.Contexts)
	for _, c := range contexts {
		size += 3 * len(c.Spec.McpServers)
	}
	return &planner{
		opts:      opts,
		rules:     NewEgressRules(opts),
		servers:   servers,
		contexts:  contexts,
		conflicts: conflicts,
		policies:  make([]plannedPolicy, 0, size),
	}
}

func (p *planner) add(policy *networkingv1.NetworkPolicy, o owner) {
	p.policies = append(p.policies, plannedPolicy{namespace: policy.Namespace, name: policy.Name, policy: policy, owner: o})
}

func (p *planner) reject(kind RejectionKind, server, binding, reason string) {
	p.rejections = append(p.rejections, Rejection{Kind: kind, Server: server, Binding: binding, Reason: reason})
}

// planContexts adds the three L2 policies of every existing, enabled server
// each Context names.
func (p *planner) planContexts() {
	for _, c := range p.contexts {
		id := c.Spec.ContextID
		for _, name := range c.Spec.McpServers {
			s, ok := p.servers[name]
			if !ok {
				continue
			}
			port := s.Spec.Transport.EffectivePort()
			o := owner{server: name, kind: "context", key: id}
			ingress, egress, rpcProxy := buildContextAllows(id, name, port, p.opts)
			p.add(ingress, o)
			p.add(egress, o)
			p.add(rpcProxy, o)
		}
	}
}

// planExternalEgress adds the ext-egress policy of every valid binding of s
// and a rejection for every invalid one.
func (p *planner) planExternalEgress(s *clerumv1alpha1.McpServer, resolved map[string]Resolution) {
	bindings := s.Spec.EgressBindings
	for i := range bindings {
		b := &bindings[i]
		if slices.ContainsFunc(bindings[:i], func(prev clerumv1alpha1.EgressBinding) bool { return prev.Name == b.Name }) {
			// The CRD keys the list by name; render input may repeat one.
			p.reject(RejectedEgressBinding, s.Name, b.Name, fmt.Sprintf("binding name %q is used more than once; the first one counts", b.Name))
			continue
		}
		var answer []netip.Addr
		if r, ok := resolved[b.Name]; ok && r.answers(s, b) {
			answer = r.Addrs
		}
		rule, err := p.rules.externalEgressRule(b, answer)
		switch {
		case err != nil:
			p.reject(RejectedEgressBinding, s.Name, b.Name, err.Error())
		case rule != nil:
			p.add(buildExternalEgress(s.Name, b.Name, rule, p.opts), owner{server: s.Name, key: b.Name})
		}
	}
}

// planRecipeBindings adds both halves of every valid recipe binding of s.
func (p *planner) planRecipeBindings(s *clerumv1alpha1.McpServer) {
	annotation, ok := s.Annotations[names.AnnotationRecipeBindings]
	if !ok {
		return
	}
	bindings, rejections := parseRecipeBindings(s.Name, annotation)
	p.rejections = append(p.rejections, rejections...)
	for pair := range recipePairs(bindings) {
		o := owner{server: s.Name, kind: "recipe", key: pair[0].Recipe}
		p.add(buildRecipeEgress(pair, p.opts), o)
		p.add(buildRecipeIngress(pair, p.opts), o)
	}
}

// plan sorts the planned policies and keeps one per namespace and name: the
// same owner planning a policy twice (a server listed twice) is no conflict;
// of different owners the smallest keeps the name and the others are
// rejected, so no input order can make two passes disagree.
func (p *planner) plan() *Plan {
	slices.SortFunc(p.policies, func(a, b plannedPolicy) int { return a.compare(&b) })
	policies := make([]*networkingv1.NetworkPolicy, 0, len(p.policies))
	servers := make([]string, 0, len(p.policies))
	var kept *plannedPolicy
	for i := range p.policies {
		pp := &p.policies[i]
		if kept != nil && kept.namespace == pp.namespace && kept.name == pp.name {
			if kept.owner != pp.owner {
				p.rejections = append(p.rejections, collisionRejection(pp, kept))
			}
			continue
		}
		kept = pp
		policies = append(policies, pp.policy)
		servers = append(servers, pp.owner.server)
	}
	slices.SortFunc(p.rejections, func(a, b Rejection) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Binding, b.Binding), cmp.Compare(a.Reason, b.Reason))
	})
	return &Plan{Policies: policies, Servers: servers, Rejections: p.rejections, Conflicts: p.conflicts}
}

// collisionRejection rejects loser's policy, whose name kept's owner
// keeps.
func collisionRejection(loser, kept *plannedPolicy) Rejection {
	return Rejection{Kind: loser.owner.rejectionKind(), Server: loser.owner.server, Binding: loser.owner.binding(),
		Reason: fmt.Sprintf("NetworkPolicy %s/%s is already planned for server %s, %s",
			loser.namespace, loser.name, kept.owner.server, kept.owner.binding())}
}

func comparePolicies(a, b *networkingv1.NetworkPolicy) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// sortPolicies sorts policies by namespace and name, dropping repeats.
func sortPolicies(policies []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
	slices.SortFunc(policies, comparePolicies)
	return slices.CompactFunc(policies, func(a, b *networkingv1.NetworkPolicy) bool { return comparePolicies(a, b) == 0 })
}
