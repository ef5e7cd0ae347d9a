package netpol

import (
	"cmp"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// L2: one route per (Context, server) pair, opened on both ends because L0
// denies ingress in the server namespace and egress in the client namespaces.

// claimContextIDs returns the Contexts that hold their contextId, oldest
// first, and the Contexts ignored because an older one holds theirs. The
// oldest creationTimestamp wins, then the smallest name, so the outcome does
// not depend on list order and a newcomer can never take over an existing
// Context's pods. A Context whose contextId is not a DNS label cannot match
// any pod label and is skipped (the CRD rejects it; render input may not).
func claimContextIDs(contexts []*clerumv1alpha1.Context) ([]*clerumv1alpha1.Context, []ContextConflict) {
	byAge := slices.Clone(contexts)
	slices.SortFunc(byAge, func(a, b *clerumv1alpha1.Context) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Namespace, b.Namespace))
	})

	holders := make(map[string]*clerumv1alpha1.Context, len(byAge))
	claimed := make([]*clerumv1alpha1.Context, 0, len(byAge))
	var conflicts []ContextConflict
	for _, c := range byAge {
		id := c.Spec.ContextID
		if len(validation.IsDNS1123Label(id)) > 0 {
			continue
		}
		if holder, taken := holders[id]; taken {
			conflicts = append(conflicts, ContextConflict{Context: c.Name, ContextID: id, HeldBy: holder.Name})
			continue
		}
		holders[id] = c
		claimed = append(claimed, c)
	}
	slices.SortFunc(conflicts, func(a, b ContextConflict) int {
		return cmp.Or(cmp.Compare(a.Context, b.Context), cmp.Compare(a.ContextID, b.ContextID))
	})
	return claimed, conflicts
}

// buildContextIngress admits, to server's pods on its transport port, the
// Host pods of the Context, rpc-proxy and mcp-proxy.
func buildContextIngress(contextID, server string, serverPort int32, opts Options) *networkingv1.NetworkPolicy {
	p := newPolicy(opts.McpServerNamespace, names.ContextIngressPolicy(contextID, server), names.PolicyTypeContextAllow, contextOwner(contextID, server),
		opts.match(names.LabelMcpServer, server), networkingv1.PolicyTypeIngress)
	p.Spec.Ingress = ingressFrom(tcp(serverPort),
		opts.inNamespace(opts.HostNamespace, contextHostPods(contextID, opts)),
		opts.inNamespace(opts.RPCProxyNamespace, opts.match(names.LabelApp, names.AppRPCProxy)),
		opts.inNamespace(opts.ControlPlaneNamespace, opts.match(names.LabelApp, names.AppMcpProxy)),
	)
	return p
}

// buildContextEgress lets the Host pods of the Context reach server.
func buildContextEgress(contextID, server string, serverPort int32, opts Options) *networkingv1.NetworkPolicy {
	p := newPolicy(opts.HostNamespace, names.ContextEgressPolicy(contextID, server), names.PolicyTypeContextAllow, contextOwner(contextID, server),
		contextHostPods(contextID, opts), networkingv1.PolicyTypeEgress)
	p.Spec.Egress = egressTo(tcp(serverPort), serverPods(server, opts))
	return p
}

// buildRPCProxyEgress lets rpc-proxy reach server on behalf of the Context.
func buildRPCProxyEgress(contextID, server string, serverPort int32, opts Options) *networkingv1.NetworkPolicy {
	p := newPolicy(opts.RPCProxyNamespace, names.RPCProxyEgressPolicy(contextID, server), names.PolicyTypeRPCProxyEgress, contextOwner(contextID, server),
		opts.match(names.LabelApp, names.AppRPCProxy), networkingv1.PolicyTypeEgress)
	p.Spec.Egress = egressTo(tcp(serverPort), serverPods(server, opts))
	return p
}

// contextOwner is the owner labels of a Context's allow of server. On the
// ingress half they are metadata only: the policy still selects the server's
// pods.
func contextOwner(contextID, server string) []string {
	return []string{names.LabelContext, contextID, names.LabelMcpServer, server}
}

// contextHostPods selects the Host pods HCC runs for one Context.
func contextHostPods(contextID string, opts Options) metav1.LabelSelector {
	return opts.match(names.LabelManagedBy, names.ManagedByValue, names.LabelContext, contextID)
}

// serverPods is the peer of one McpServer's pods.
func serverPods(server string, opts Options) networkingv1.NetworkPolicyPeer {
	return opts.inNamespace(opts.McpServerNamespace, opts.match(names.LabelMcpServer, server))
}

// ContextIDHolder returns the Context among contexts that holds contextID by
// the planner's own rule (claimContextIDs: the oldest wins), or nil when
// none does. The Host operator calls it at every sync, so a Host's pods
// never carry a contextId its Context does not hold, whatever the planner
// has or has not written yet. contexts may be only those with contextID.
func ContextIDHolder(contexts []*clerumv1alpha1.Context, contextID string) *clerumv1alpha1.Context {
	return ContextIDHolders(contexts)[contextID]
}

// ContextIDHolders maps every contextId held among contexts to the Context
// that holds it, by the rule of ContextIDHolder, for a caller asking about
// many contextIds at once.
func ContextIDHolders(contexts []*clerumv1alpha1.Context) map[string]*clerumv1alpha1.Context {
	claimed, _ := claimContextIDs(contexts)
	holders := make(map[string]*clerumv1alpha1.Context, len(claimed))
	for _, c := range claimed {
		holders[c.Spec.ContextID] = c
	}
	return holders
}
