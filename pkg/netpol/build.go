package netpol

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/clerum/hcc/pkg/names"
)

// Shared building blocks of every policy. Each call returns freshly allocated
// metadata, slices and pointers, with two exceptions. The policies of one
// plan share what they have in common from the plan's cache (planCache):
// label selectors, ports, policy types and the rules and peers of the
// per-Context allows; no two plans share anything. And the ingress and
// egress halves of one Context's allow of a server share one label map,
// their labels being the same. Whoever receives a plan may change a
// policy's own fields (the applier sets resource versions) but copies a
// policy before changing its labels or spec, as every writer in this
// repository does (DeepCopy). share_test.go holds the planner to sharing
// nothing between plans, and the controller's
// TestIncrementalPassesKeepTheClusterAsAFullPassWould holds its writers to
// leaving the policies of the planner it keeps alone.

var policyTypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}

// newPolicy returns a policy carrying HCC's ownership labels (ownerLabels).
// The policy keeps types, so callers list them inline rather than passing
// a shared slice.
func newPolicy(namespace, name, policyType string, owner []string, podSelector metav1.LabelSelector, types ...networkingv1.PolicyType) *networkingv1.NetworkPolicy {
	return newLabelledPolicy(namespace, name, ownerLabels(policyType, owner...), podSelector, types)
}

// newLabelledPolicy returns a policy with the labels, pod selector and
// types given, which it keeps. The labels are metadata only: the pod
// selector is podSelector.
func newLabelledPolicy(namespace, name string, labels map[string]string, podSelector metav1.LabelSelector, types []networkingv1.PolicyType) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: policyTypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			Labels:    labels,
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: podSelector,
			PolicyTypes: types,
		},
	}
}

// ownerLabels returns HCC's ownership labels of a policy of policyType.
// owner holds alternating owner label keys and owner names
// (clerum.io/mcpserver and the server, clerum.io/context and the contextId,
// ...): revocation attributes an unplanned policy by them, never by parsing
// its name (docs/names.md). Values go through names.Label, like every label
// value HCC derives.
func ownerLabels(policyType string, owner ...string) map[string]string {
	labels := make(map[string]string, 2+len(owner)/2)
	labels[names.LabelManagedBy] = names.ManagedByValue
	labels[names.LabelPolicyType] = policyType
	for i := 0; i+1 < len(owner); i += 2 {
		labels[owner[i]] = names.Label(owner[i+1])
	}
	return labels
}

// matchLabels selects the pods carrying every given key/value pair; kv holds
// alternating keys and values.
func matchLabels(kv ...string) metav1.LabelSelector {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return metav1.LabelSelector{MatchLabels: m}
}

// planCache hands out one copy of each part the policies of a plan have in
// common. A grant of a server to a Context is three policies with seven
// label selectors, three ports and three rules, and a large fleet's 300,000
// policies share a few thousand distinct selectors, peers and rules: a copy
// each was most of a full plan's allocations and of the memory it keeps
// (BenchmarkFullPlan10000x10). An Incremental's cache lives as long as it
// does, until the next full pass builds a new one, so the parts of servers
// and Contexts deleted since do not accumulate.
type planCache struct {
	labels     map[[4]string]map[string]string
	namespaces map[string]*metav1.LabelSelector
	ports      map[int32][]networkingv1.NetworkPolicyPort
	// toServer are the egress rules to a server's pods on its port, of its
	// Context allows' egress halves; fromContext the peers of a Context's
	// allows' ingress halves.
	toServer    map[serverPortKey][]networkingv1.NetworkPolicyEgressRule
	fromContext map[string][]networkingv1.NetworkPolicyPeer
	ingress     []networkingv1.PolicyType
	egress      []networkingv1.PolicyType
}

type serverPortKey struct {
	server string
	port   int32
}

// withCache returns o with a cache of its own: each plan (a Compute
// call, an Incremental) shares parts only among its policies.
func (o Options) withCache() Options {
	o.shared = &planCache{
		labels: map[[4]string]map[string]string{}, namespaces: map[string]*metav1.LabelSelector{},
		ports: map[int32][]networkingv1.NetworkPolicyPort{}, toServer: map[serverPortKey][]networkingv1.NetworkPolicyEgressRule{},
		fromContext: map[string][]networkingv1.NetworkPolicyPeer{},
		ingress:     []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		egress:      []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
	}
	return o
}

// match is matchLabels from the plan's cache; kv holds at most two pairs.
// Options without a cache (a single policy built in a test) allocate.
func (o Options) match(kv ...string) metav1.LabelSelector {
	if o.shared == nil || len(kv) > 4 {
		return matchLabels(kv...)
	}
	var key [4]string
	copy(key[:], kv)
	m, ok := o.shared.labels[key]
	if !ok {
		m = matchLabels(kv...).MatchLabels
		o.shared.labels[key] = m
	}
	return metav1.LabelSelector{MatchLabels: m}
}

// inNamespace is podsInNamespace with both selectors from the plan's cache.
func (o Options) inNamespace(namespace string, pods metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	if o.shared == nil {
		return podsInNamespace(namespace, pods)
	}
	ns, ok := o.shared.namespaces[namespace]
	if !ok {
		ns = namespaceSelector(namespace)
		o.shared.namespaces[namespace] = ns
	}
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: ns, PodSelector: &pods}
}

// tcp is tcp from the plan's cache.
func (o Options) tcp(number int32) []networkingv1.NetworkPolicyPort {
	if o.shared == nil {
		return tcp(number)
	}
	ports, ok := o.shared.ports[number]
	if !ok {
		ports = tcp(number)
		o.shared.ports[number] = ports
	}
	return ports
}

// policyTypes returns the policy types ingress or egress, from the plan's
// cache.
func (o Options) policyTypes(t networkingv1.PolicyType) []networkingv1.PolicyType {
	if o.shared != nil {
		switch t {
		case networkingv1.PolicyTypeIngress:
			return o.shared.ingress
		case networkingv1.PolicyTypeEgress:
			return o.shared.egress
		}
	}
	return []networkingv1.PolicyType{t}
}

// allPods selects every pod of the policy's namespace.
func allPods() metav1.LabelSelector { return metav1.LabelSelector{} }

// namespaceSelector selects one namespace by its immutable name label, which
// the API server sets on every namespace.
func namespaceSelector(namespace string) *metav1.LabelSelector {
	sel := matchLabels(names.NamespaceNameKey, namespace)
	return &sel
}

// podsInNamespace is a peer of the pods selected by pods in namespace.
func podsInNamespace(namespace string, pods metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: namespaceSelector(namespace),
		PodSelector:       &pods,
	}
}

// ipBlock is a peer of the addresses in cidr minus those in except.
func ipBlock(cidr string, except []string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

// port is one destination port.
func port(protocol corev1.Protocol, number int32) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(number)
	return networkingv1.NetworkPolicyPort{Protocol: &protocol, Port: &p}
}

// tcp is the single-port list used by most rules.
func tcp(number int32) []networkingv1.NetworkPolicyPort {
	return []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, number)}
}

func ingressFrom(ports []networkingv1.NetworkPolicyPort, from ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{From: from, Ports: ports}}
}

func egressTo(ports []networkingv1.NetworkPolicyPort, to ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{{To: to, Ports: ports}}
}
