package netpol

import (
	"slices"
	"strings"

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
type Judge struct {
	opts     Options
	observed Observed
	// servers holds every McpServer of the inventory, enabled or not.
	servers map[string]*clerumv1alpha1.McpServer
	// holders maps each contextId to the Context that holds it.
	holders map[string]*clerumv1alpha1.Context
	runtime map[string]bool
}

// NewJudge returns a Judge of inv under opts with the deletions observed.
func NewJudge(inv Inventory, opts Options, observed Observed) *Judge {
	j := &Judge{
		opts:     opts,
		observed: observed,
		servers:  make(map[string]*clerumv1alpha1.McpServer, len(inv.Servers)),
		holders:  map[string]*clerumv1alpha1.Context{},
		runtime:  map[string]bool{},
	}
	for _, s := range inv.Servers {
		if _, dup := j.servers[s.Name]; !dup {
			j.servers[s.Name] = s
		}
	}
	claimed, _ := claimContextIDs(inv.Contexts)
	for _, c := range claimed {
		j.holders[c.Spec.ContextID] = c
	}
	for _, ns := range opts.RuntimeNamespaces {
		j.runtime[ns] = true
	}
	return j
}

// Dispose says what to do with the unplanned policy namespace/name of
// policyType (for the repairable class, the type its reserved name implies),
// and names the McpServer it is attributed to, if any.
func (j *Judge) Dispose(namespace, name, policyType string) (Disposition, string) {
	switch policyType {
	case names.PolicyTypeDenyAll:
		return Kept, ""
	case names.PolicyTypeInfrastructure:
		return j.disposeInfrastructure(namespace, name), ""
	case names.PolicyTypeContextAllow:
		// ctx-CONTEXTID-SERVER in the MCP server namespace, with -egress in
		// the host namespace (both, should the two namespaces be one).
		x := strings.TrimPrefix(name, "ctx-")
		if y, ok := strings.CutSuffix(x, "-egress"); ok && namespace == j.opts.HostNamespace {
			if d, s := j.disposeContextAllow(y); d == Disowned || namespace != j.opts.McpServerNamespace {
				return d, s
			}
		}
		return j.disposeContextAllow(x)
	case names.PolicyTypeRPCProxyEgress:
		return j.disposeContextAllow(strings.TrimPrefix(name, "rpc-egress-"))
	case names.PolicyTypeExternalEgress:
		// ext-egress-SERVER-BINDING: any split naming a known server.
		rest := strings.TrimPrefix(name, "ext-egress-")
		for i := range dashes(rest) {
			if s := rest[:i]; j.knownServer(s) {
				return Disowned, s
			}
		}
		return Orphan, ""
	case names.PolicyTypeRecipeBinding:
		// bind-RECIPE-FROM-TO-{egress,ingress}: any split whose FROM is a
		// known server.
		rest := strings.TrimPrefix(name, "bind-")
		if r, ok := strings.CutSuffix(rest, "-egress"); ok {
			rest = r
		} else {
			rest = strings.TrimSuffix(rest, "-ingress")
		}
		for i := range dashes(rest) {
			for k := range dashes(rest[i+1:]) {
				if s := rest[i+1 : i+1+k]; j.knownServer(s) {
					return Disowned, s
				}
			}
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

// disposeContextAllow explains an L2 policy whose name carries
// CONTEXTID-SERVER as x. Both are DNS labels and may hold dashes, so every
// split is tried; the policy is disowned when one of them is explained.
func (j *Judge) disposeContextAllow(x string) (Disposition, string) {
	for i := range dashes(x) {
		id, server := x[:i], x[i+1:]
		if j.observed.RetiredContextIDs[id] || j.observed.DeletedServers[server] {
			return Disowned, server
		}
		if s, ok := j.servers[server]; ok && !j.opts.ServerActive(s) {
			return Disowned, server
		}
		if holder, ok := j.holders[id]; ok && !slices.Contains(holder.Spec.McpServers, server) {
			return Disowned, server
		}
	}
	return Orphan, ""
}

// knownServer reports whether server is in the inventory or was seen
// deleted: then an unplanned allow derived from it is disowned (disabled,
// binding or recipe entry gone, or the server itself gone).
func (j *Judge) knownServer(server string) bool {
	_, live := j.servers[server]
	return live || j.observed.DeletedServers[server]
}

// dashes yields the index of every '-' in s that splits it into two
// non-empty parts.
func dashes(s string) func(func(int) bool) {
	return func(yield func(int) bool) {
		for i := 1; i < len(s)-1; i++ {
			if s[i] == '-' && !yield(i) {
				return
			}
		}
	}
}
