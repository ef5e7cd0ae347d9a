package netpol

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/pkg/names"
)

// L0 and L1: the policies every runtime namespace gets whatever the Contexts
// and McpServers say.

const (
	dnsPort    int32 = 53
	k8sAPIPort int32 = 443
)

// Defaults returns the L0/L1 policies and allow-host-context-controller-api,
// sorted by namespace and name: what the defaults-only tick ensures.
func Defaults(opts Options) []*networkingv1.NetworkPolicy {
	// A namespace listed twice yields its policies twice.
	return sortPolicies(appendDefaults(make([]*networkingv1.NetworkPolicy, 0, 4*len(opts.RuntimeNamespaces)+1), opts))
}

// appendDefaults appends the L0/L1 policies of every runtime namespace and
// the controller API ingress to policies.
func appendDefaults(policies []*networkingv1.NetworkPolicy, opts Options) []*networkingv1.NetworkPolicy {
	for _, ns := range opts.RuntimeNamespaces {
		policies = append(policies, buildDenyAll(ns), buildDNSEgress(ns, opts.NodeLocalDNSCIDR))
		if slices.Contains(opts.MinimalInfraNamespaces, ns) {
			continue
		}
		if pods, ok := discoveryPods(ns, opts); ok {
			policies = append(policies, buildHCCAPIEgress(ns, pods, opts))
		}
		// An egress rule without peers allows every destination, so no CIDRs
		// means no policy (the configuration always supplies a fallback).
		if len(opts.K8sAPICIDRs) > 0 {
			policies = append(policies, buildK8sAPIEgress(ns, opts))
		}
	}
	return append(policies, buildHCCAPIIngress(opts))
}

// buildDenyAll is L0: with no rules, every pod of ns is isolated in both
// directions until a higher layer allows a route.
func buildDenyAll(ns string) *networkingv1.NetworkPolicy {
	return newPolicy(ns, names.DenyAllPolicy(ns), names.PolicyTypeDenyAll, nil, allPods(),
		networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)
}

// NotADefaultDeny says why spec is not a default deny of its namespace, or
// returns "" when it is one: it selects every pod (an empty pod selector),
// isolates both directions and allows nothing. A policy HCC does not manage
// that holds a runtime namespace's deny-all name counts as that namespace's
// default deny only then (docs/networkpolicy.md).
func NotADefaultDeny(spec *networkingv1.NetworkPolicySpec) string {
	var why []string
	if len(spec.PodSelector.MatchLabels) > 0 || len(spec.PodSelector.MatchExpressions) > 0 {
		why = append(why, "its pod selector is not empty, so some pods are not isolated")
	}
	if !slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		why = append(why, "its policyTypes lack Ingress")
	}
	if !slices.Contains(spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		why = append(why, "its policyTypes lack Egress")
	}
	if n := len(spec.Ingress); n > 0 {
		why = append(why, fmt.Sprintf("it has %d ingress rule(s)", n))
	}
	if n := len(spec.Egress); n > 0 {
		why = append(why, fmt.Sprintf("it has %d egress rule(s)", n))
	}
	return strings.Join(why, "; ")
}

// buildDNSEgress lets every pod of ns query kube-dns, and NodeLocal DNSCache
// when it is configured (its link-local address is not a pod kube-dns selects).
func buildDNSEgress(ns string, nodeLocalDNS netip.Prefix) *networkingv1.NetworkPolicy {
	p := newPolicy(ns, names.DNSEgressPolicy(ns), names.PolicyTypeInfrastructure, nil, allPods(), networkingv1.PolicyTypeEgress)
	p.Spec.Egress = egressTo(dnsPorts(),
		podsInNamespace(names.KubeSystem, matchLabels(names.KubeDNSLabelKey, names.KubeDNSLabelVal)))
	if nodeLocalDNS.IsValid() {
		p.Spec.Egress = append(p.Spec.Egress, egressTo(dnsPorts(), ipBlock(nodeLocalDNS.String(), nil))...)
	}
	return p
}

func dnsPorts() []networkingv1.NetworkPolicyPort {
	return []networkingv1.NetworkPolicyPort{port(corev1.ProtocolUDP, dnsPort), port(corev1.ProtocolTCP, dnsPort)}
}

// discoveryPods returns the pods of ns that discover servers through hcc-api
// (docs/names.md), and false when ns holds no discovery class. A policy has one
// pod selector and label selectors cannot express "either class", so when a
// misconfiguration makes ns several classes the first of host, rpc-proxy,
// sandbox wins and the others get no discovery egress: failing closed is
// preferred over widening the selector to every pod of ns.
func discoveryPods(ns string, opts Options) (metav1.LabelSelector, bool) {
	switch ns {
	case opts.HostNamespace:
		// Only Host pods carry clerum.io/host, whatever its value.
		return metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key:      names.LabelHost,
			Operator: metav1.LabelSelectorOpExists,
		}}}, true
	case opts.RPCProxyNamespace:
		return matchLabels(names.LabelApp, names.AppRPCProxy), true
	case opts.SandboxNamespace:
		return matchLabels(names.LabelWorkflowMcpHost, "true"), true
	}
	return metav1.LabelSelector{}, false
}

// buildHCCAPIEgress lets the discovery pods of ns reach the hcc-api gateway.
func buildHCCAPIEgress(ns string, pods metav1.LabelSelector, opts Options) *networkingv1.NetworkPolicy {
	p := newPolicy(ns, names.HCCAPIEgressPolicy(ns), names.PolicyTypeInfrastructure, nil, pods, networkingv1.PolicyTypeEgress)
	p.Spec.Egress = egressTo(tcp(opts.APIPort),
		podsInNamespace(opts.ControlPlaneNamespace, matchLabels(names.LabelApp, names.AppAPIGateway)))
	return p
}

// buildK8sAPIEgress opens the API server to every pod of the host namespace,
// whose Host pods need it, and elsewhere only to pods the platform opted in.
func buildK8sAPIEgress(ns string, opts Options) *networkingv1.NetworkPolicy {
	pods := matchLabels(names.LabelK8sAPIEgress, "true")
	if ns == opts.HostNamespace {
		pods = allPods()
	}
	p := newPolicy(ns, names.K8sAPIEgressPolicy(ns), names.PolicyTypeInfrastructure, nil, pods, networkingv1.PolicyTypeEgress)
	to := make([]networkingv1.NetworkPolicyPeer, 0, len(opts.K8sAPICIDRs))
	for _, cidr := range opts.K8sAPICIDRs {
		to = append(to, ipBlock(cidr.String(), nil))
	}
	p.Spec.Egress = egressTo(tcp(k8sAPIPort), to...)
	return p
}

// buildHCCAPIIngress admits the host namespace to the controller's API port.
// As shipped the controller runs in the control-plane namespace, so this
// selects no pod; it is kept because the platform's existing deployments
// hold it and its absence would read as drift (docs/networkpolicy.md).
func buildHCCAPIIngress(opts Options) *networkingv1.NetworkPolicy {
	p := newPolicy(opts.McpServerNamespace, names.HCCAPIIngressPolicy, names.PolicyTypeInfrastructure, nil,
		matchLabels(names.LabelApp, names.AppController), networkingv1.PolicyTypeIngress)
	p.Spec.Ingress = ingressFrom(tcp(opts.APIPort),
		networkingv1.NetworkPolicyPeer{NamespaceSelector: namespaceSelector(opts.HostNamespace)})
	return p
}
