package netpol

import (
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// Revocation: what a full pass does with a managed policy of the NetworkPolicy
// operator's types that the plan no longer holds (docs/networkpolicy.md,
// "Revocation and the orphan caps").
//
// The orphan caps exist to stop a wrong inventory (an empty list, a partial
// cache) from wiping the fleet. They must never hold back a revocation the
// inventory itself asks for: a cap that froze those would keep allows open
// that their owners withdrew. So each unplanned policy is explained, if it
// can be, by the live inventory or by a deletion this process observed, and
// only what nothing explains counts against the caps.

// Disposition is what a full pass does with an unplanned policy.
type Disposition int

const (
	// Orphan: nothing in the live inventory or in the observed deletions
	// accounts for the policy (its owner went while no controller ran, or
	// the inventory came back wrong). Its delete counts against the caps.
	Orphan Disposition = iota
	// Disowned: the inventory disowns the allow (its Context exists and no
	// longer names the server, its server exists and is disabled or no
	// longer has that binding or recipe entry), or this process saw its
	// Context or server deleted or the contextId change. Revoked whatever
	// the caps.
	Disowned
	// Kept: an L0 or L1 policy the operator ensures but never sweeps (a
	// namespace that left the runtime list keeps its default deny).
	Kept
)

func (d Disposition) String() string {
	switch d {
	case Disowned:
		return "disowned"
	case Kept:
		return "kept"
	}
	return "orphan"
}

// Observed is what this process saw go away since the last full pass whose
// revocations all succeeded: the evidence that explains the deletes of
// allows whose owner is no longer in the inventory.
type Observed struct {
	// DeletedServers are McpServer names seen deleted.
	DeletedServers map[string]bool
	// RetiredContextIDs are contextIds of Contexts seen deleted, or seen
	// changing their contextId away from them.
	RetiredContextIDs map[string]bool
}

// Judge explains unplanned policies against one inventory.
//
// A policy is attributed to its owners by the owner labels HCC writes on it
// (docs/names.md), never by splitting its name on dashes: a contextId, a
// server name and a binding name may all hold dashes, so a name can read as
// more than one owner, and the wrong reading would revoke a policy whatever
// the caps. Label values are names.Label of the owner's name, so the judge
// keys the inventory the same way.
type Judge struct {
	opts Options
	// server looks up an McpServer of the inventory, enabled or not, by the
	// label value of its name.
	server func(label string) (*clerumv1alpha1.McpServer, bool)
	// holder looks up the Context holding a contextId by the label value of
	// the contextId.
	holder func(label string) (*clerumv1alpha1.Context, bool)
	// deletedServers and retiredIDs are the observed deletions, by label
	// value.
	deletedServers, retiredIDs map[string]bool
	runtime                    map[string]bool
}

// NewJudge returns a Judge of inv under opts with the deletions observed.
func NewJudge(inv Inventory, opts Options, observed Observed) *Judge {
	servers := make(map[string]*clerumv1alpha1.McpServer, len(inv.Servers))
	for _, s := range inv.Servers {
		if _, dup := servers[names.Label(s.Name)]; !dup {
			servers[names.Label(s.Name)] = s
		}
	}
	holders := map[string]*clerumv1alpha1.Context{}
	claimed, _ := claimContextIDs(inv.Contexts)
	for _, c := range claimed {
		holders[names.Label(c.Spec.ContextID)] = c
	}
	return newJudge(opts, observed, lookup(servers), lookup(holders))
}

// Judge returns a Judge of the inventory inc holds, with the deletions
// observed. It reads inc's maps, so it is valid until inc's next edit.
func (inc *Incremental) Judge(observed Observed) *Judge {
	server := func(label string) (*clerumv1alpha1.McpServer, bool) {
		// A server's label value is its name whenever that is a DNS
		// label, as the CRD requires; only a shortened label needs the
		// search, and then the smallest name wins, as in NewJudge.
		if s, ok := inc.servers[label]; ok && names.Label(s.Name) == label {
			return s, true
		}
		if !names.IsShortened(label, names.MaxLabel) {
			return nil, false
		}
		var found *clerumv1alpha1.McpServer
		for _, s := range inc.servers {
			if names.Label(s.Name) == label && (found == nil || s.Name < found.Name) {
				found = s
			}
		}
		return found, found != nil
	}
	holder := func(label string) (*clerumv1alpha1.Context, bool) {
		// Only a DNS-label contextId is ever held, and its label value is
		// itself.
		cl, ok := inc.claims[label]
		if !ok {
			return nil, false
		}
		return inc.contexts[cl.holder], true
	}
	return newJudge(inc.opts, observed, server, holder)
}

func lookup[V any](m map[string]V) func(string) (V, bool) {
	return func(k string) (V, bool) { v, ok := m[k]; return v, ok }
}

func newJudge(opts Options, observed Observed, server func(string) (*clerumv1alpha1.McpServer, bool),
	holder func(string) (*clerumv1alpha1.Context, bool)) *Judge {
	j := &Judge{
		opts:           opts,
		server:         server,
		holder:         holder,
		deletedServers: make(map[string]bool, len(observed.DeletedServers)),
		retiredIDs:     make(map[string]bool, len(observed.RetiredContextIDs)),
		runtime:        map[string]bool{},
	}
	for s, ok := range observed.DeletedServers {
		if ok {
			j.deletedServers[names.Label(s)] = true
		}
	}
	for id, ok := range observed.RetiredContextIDs {
		if ok {
			j.retiredIDs[names.Label(id)] = true
		}
	}
	for _, ns := range opts.RuntimeNamespaces {
		j.runtime[ns] = true
	}
	return j
}

// Dispose says what to do with the unplanned policy p of policyType (for the
// repairable class, the type its reserved name implies), and names the
// McpServer it is attributed to, if any.
func (j *Judge) Dispose(p *networkingv1.NetworkPolicy, policyType string) (Disposition, string) {
	switch policyType {
	case names.PolicyTypeDenyAll:
		return Kept, ""
	case names.PolicyTypeInfrastructure:
		return j.disposeInfrastructure(p.Namespace, p.Name), ""
	case names.PolicyTypeContextAllow, names.PolicyTypeRPCProxyEgress:
		id, idOK := p.Labels[names.LabelContext]
		server, serverOK := p.Labels[names.LabelMcpServer]
		if !idOK || !serverOK {
			var ok bool
			if id, server, ok = j.contextAllowByName(p.Namespace, p.Name, policyType); !ok {
				return Orphan, ""
			}
			id, server = names.Label(id), names.Label(server)
		}
		return j.disposeContextAllow(id, server)
	case names.PolicyTypeExternalEgress, names.PolicyTypeRecipeBinding:
		server, ok := p.Labels[names.LabelMcpServer]
		if !ok {
			if server, ok = j.serverByName(p.Namespace, p.Name, policyType); !ok {
				return Orphan, ""
			}
			server = names.Label(server)
		}
		// An unplanned policy of a live server is one the server no longer
		// has (disabled, binding or recipe entry gone); of a server seen
		// deleted, one whose owner went.
		if s, live := j.server(server); live {
			return Disowned, s.Name
		}
		if j.deletedServers[server] {
			return Disowned, server
		}
		return Orphan, ""
	}
	return Orphan, ""
}

// disposeInfrastructure revokes the L1 policies a namespace that stays on
// the runtime list no longer needs (it became minimal-infra, or lost its
// discovery class or API-server ranges); every other L1 policy is kept.
func (j *Judge) disposeInfrastructure(namespace, name string) Disposition {
	if !j.runtime[namespace] {
		return Kept
	}
	switch name {
	case names.DNSEgressPolicy(namespace), names.HCCAPIEgressPolicy(namespace), names.K8sAPIEgressPolicy(namespace):
		return Disowned
	}
	return Kept
}

// disposeContextAllow explains an L2 policy of the contextId and server
// whose label values are id and server. It is disowned when its owners no
// longer want it: the Context holding id exists and does not name the
// server, the server exists and may hold no allows, or this process saw
// either go. An owner absent from the inventory explains nothing: the
// policy is an orphan, and the caps hold it.
func (j *Judge) disposeContextAllow(id, server string) (Disposition, string) {
	name := server
	s, live := j.server(server)
	if live {
		name = s.Name
	}
	if j.deletedServers[server] || (live && !j.opts.ServerActive(s)) {
		return Disowned, name
	}
	// A live holder decides for its id, whatever was seen of the id's
	// earlier holders: its spec is the evidence.
	if holder, ok := j.holder(id); ok {
		if !slices.ContainsFunc(holder.Spec.McpServers, func(n string) bool { return names.Label(n) == server }) {
			return Disowned, name
		}
		return Orphan, ""
	}
	if j.retiredIDs[id] {
		return Disowned, name
	}
	return Orphan, ""
}

// Policies without owner labels were written by an older HCC. Their name is
// the only evidence, and it is trusted only when it can be read one way: a
// reading is a split of the name into parts that are each a DNS label, and
// so could each name an owner, whether the inventory holds that owner or
// not. A name with two readings is ambiguous whatever the inventory says
// (the other reading may name an owner deleted while no controller ran), so
// it is an orphan, and the caps hold it. So is a name Fit shortened, whose
// tail is a hash.

// contextAllowByName reads CONTEXTID and SERVER from an unlabelled
// ctx-CONTEXTID-SERVER (MCP server namespace), ctx-CONTEXTID-SERVER-egress
// (host namespace; both readings should the two namespaces be one) or
// rpc-egress-CONTEXTID-SERVER; ok is false unless exactly one reading
// exists.
func (j *Judge) contextAllowByName(namespace, name, policyType string) (id, server string, ok bool) {
	if names.IsShortened(name, names.MaxObjectName) {
		return "", "", false
	}
	var readings [][]string
	if policyType == names.PolicyTypeRPCProxyEgress {
		if x, found := strings.CutPrefix(name, "rpc-egress-"); found && namespace == j.opts.RPCProxyNamespace {
			readings = append(readings, splits(x, 2)...)
		}
	} else if x, found := strings.CutPrefix(name, "ctx-"); found {
		if namespace == j.opts.McpServerNamespace {
			readings = append(readings, splits(x, 2)...)
		}
		if y, egress := strings.CutSuffix(x, "-egress"); egress && namespace == j.opts.HostNamespace {
			readings = append(readings, splits(y, 2)...)
		}
	}
	if len(readings) != 1 {
		return "", "", false
	}
	return readings[0][0], readings[0][1], true
}

// serverByName reads SERVER from an unlabelled ext-egress-SERVER-BINDING
// or bind-RECIPE-SERVER-TO-{egress,ingress}; ok is false unless exactly one
// reading exists.
func (j *Judge) serverByName(namespace, name, policyType string) (string, bool) {
	if names.IsShortened(name, names.MaxObjectName) {
		return "", false
	}
	var readings [][]string
	server := 0
	switch policyType {
	case names.PolicyTypeExternalEgress:
		if x, found := strings.CutPrefix(name, "ext-egress-"); found && namespace == j.opts.McpServerNamespace {
			readings = splits(x, 2)
		}
	case names.PolicyTypeRecipeBinding:
		x, found := strings.CutPrefix(name, "bind-")
		if y, egress := strings.CutSuffix(x, "-egress"); found && egress && namespace == j.opts.McpServerNamespace {
			readings = append(readings, splits(y, 3)...)
		}
		if y, ingress := strings.CutSuffix(x, "-ingress"); found && ingress && namespace == j.opts.SandboxNamespace {
			readings = append(readings, splits(y, 3)...)
		}
		server = 1
	}
	if len(readings) != 1 {
		return "", false
	}
	return readings[0][server], true
}

// splits returns every way of cutting s at dashes into n parts that are
// each a DNS label.
func splits(s string, n int) [][]string {
	if n == 1 {
		if len(validation.IsDNS1123Label(s)) > 0 {
			return nil
		}
		return [][]string{{s}}
	}
	var out [][]string
	for i := 1; i < len(s)-1; i++ {
		if s[i] != '-' || len(validation.IsDNS1123Label(s[:i])) > 0 {
			continue
		}
		for _, rest := range splits(s[i+1:], n-1) {
			out = append(out, append([]string{s[:i]}, rest...))
		}
	}
	return out
}
