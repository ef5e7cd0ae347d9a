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

// buildContextAllows returns the three policies of one Context's allow of
// server, which share their labels and, through opts, their selectors,
// peers, ports and rules with the plan's other policies (planCache).
func buildContextAllows(contextID, server string, serverPort int32, opts Options) (ingress, egress, rpcProxy *networkingv1.NetworkPolicy) {
	allow := ownerLabels(names.PolicyTypeContextAllow, names.LabelContext, contextID, names.LabelMcpServer, server)
	toServer := opts.egressToServer(server, serverPort)
	// The ingress half admits, to server's pods on its transport port, the
	// Host pods of the Context, rpc-proxy and mcp-proxy. Its labels are
	// metadata only: the policy still selects the server's pods.
	ingress = newLabelledPolicy(opts.McpServerNamespace, names.ContextIngressPolicy(contextID, server), allow,
		opts.match(names.LabelMcpServer, server), opts.policyTypes(networkingv1.PolicyTypeIngress))
	ingress.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: opts.ingressFromContext(contextID), Ports: opts.tcp(serverPort)}}
	// The egress half lets the Host pods of the Context reach server.
	egress = newLabelledPolicy(opts.HostNamespace, names.ContextEgressPolicy(contextID, server), allow,
		contextHostPods(contextID, opts), opts.policyTypes(networkingv1.PolicyTypeEgress))
	egress.Spec.Egress = toServer
	// rpc-proxy reaches server on behalf of the Context.
	rpcProxy = newLabelledPolicy(opts.RPCProxyNamespace, names.RPCProxyEgressPolicy(contextID, server),
		ownerLabels(names.PolicyTypeRPCProxyEgress, names.LabelContext, contextID, names.LabelMcpServer, server),
		opts.match(names.LabelApp, names.AppRPCProxy), opts.policyTypes(networkingv1.PolicyTypeEgress))
	rpcProxy.Spec.Egress = toServer
	return ingress, egress, rpcProxy
}

// ingressFromContext is the peers the ingress half of the Context's allows
// admits, from the plan's cache.
func (o Options) ingressFromContext(contextID string) []networkingv1.NetworkPolicyPeer {
	var from []networkingv1.NetworkPolicyPeer
	if o.shared != nil {
		from = o.shared.fromContext[contextID]
	}
	if from == nil {
		from = []networkingv1.NetworkPolicyPeer{
			o.inNamespace(o.HostNamespace, contextHostPods(contextID, o)),
			o.inNamespace(o.RPCProxyNamespace, o.match(names.LabelApp, names.AppRPCProxy)),
			o.inNamespace(o.ControlPlaneNamespace, o.match(names.LabelApp, names.AppMcpProxy)),
		}
		if o.shared != nil {
			o.shared.fromContext[contextID] = from
		}
	}
	return from
}

// egressToServer is the egress rules to server's pods on serverPort, from the
// plan's cache.
func (o Options) egressToServer(server string, serverPort int32) []networkingv1.NetworkPolicyEgressRule {
	var to []networkingv1.NetworkPolicyEgressRule
	if o.shared != nil {
		to = o.shared.toServer[serverPortKey{server, serverPort}]
	}
	if to == nil {
		to = egressTo(o.tcp(serverPort), o.inNamespace(o.McpServerNamespace, o.match(names.LabelMcpServer, server)))
		if o.shared != nil {
			o.shared.toServer[serverPortKey{server, serverPort}] = to
		}
	}
	return to
}

// contextHostPods selects the Host pods HCC runs for one Context.
func contextHostPods(contextID string, opts Options) metav1.LabelSelector {
	return opts.match(names.LabelManagedBy, names.ManagedByValue, names.LabelContext, contextID)
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
