package netpol

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// L3: the only destinations outside the cluster an McpServer may reach.
//
// Every allow is checked against the public-egress exception ranges
// (PUBLIC_EGRESS_EXCEPT_CIDRS): an McpServer author chooses its bindings, and
// none of them may turn into a route to the cluster's own networks, the node,
// the cloud metadata service or any other address that is not the public
// internet.

type exceptionRange struct {
	prefix netip.Prefix
	what   string
}

var publicEgressExceptions = []exceptionRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private, RFC 1918"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local, cloud metadata"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private, RFC 1918"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private, RFC 1918"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved, broadcast"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::ffff:0:0/96"), "IPv4-mapped"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking"},
	{netip.MustParsePrefix("2001:10::/28"), "ORCHID"},
	{netip.MustParsePrefix("2001:20::/28"), "ORCHIDv2"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "unique local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// PublicEgressExceptions returns the built-in ranges no egress binding may
// reach, IPv4 first, each family in address order. The slice is a copy.
func PublicEgressExceptions() []netip.Prefix {
	out := make([]netip.Prefix, len(publicEgressExceptions))
	for i, e := range publicEgressExceptions {
		out[i] = e.prefix
	}
	return out
}

// EgressRules judges the destinations of external egress: the built-in
// exception ranges, the API-server ranges (so the clerum.io/k8s-api-egress
// opt-in cannot be bypassed through an egress binding), the operator's
// HCC_EGRESS_DENY_CIDRS (the cluster's pod, Service and node ranges) and the
// cluster domain. The planner, the external-egress coordinator and render
// share one set of rules built from the same Options, so all three judge a
// binding alike. An EgressRules is immutable and safe for concurrent use.
type EgressRules struct {
	deny []exceptionRange
	// exceptV4 is the public-web except list: every IPv4 deny range not
	// already inside another, in address order.
	exceptV4 []string
	// wholeV4 is set when a deny range covers all of IPv4, so public-web
	// can allow nothing.
	wholeV4       bool
	clusterDomain string
}

// NewEgressRules returns the rules of opts.
func NewEgressRules(opts Options) *EgressRules {
	r := &EgressRules{
		deny:          slices.Clone(publicEgressExceptions),
		clusterDomain: strings.ToLower(strings.TrimSuffix(opts.ClusterDomain, ".")),
	}
	extra := func(prefixes []netip.Prefix, what string) {
		for _, p := range prefixes {
			if p.IsValid() {
				r.deny = append(r.deny, exceptionRange{p.Masked(), what})
			}
		}
	}
	extra(opts.K8sAPICIDRs, "Kubernetes API server, CONTEXT_MAPPER_K8S_API_CIDRS")
	extra(opts.EgressDenyCIDRs, "cluster range, HCC_EGRESS_DENY_CIDRS")

	var v4 []netip.Prefix
	for _, e := range r.deny {
		if e.prefix.Addr().Is4() {
			v4 = append(v4, e.prefix)
		}
	}
	slices.SortFunc(v4, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits() // the wider first, so it absorbs the narrower
	})
	for _, p := range v4 {
		if p.Bits() == 0 {
			r.wholeV4 = true
		}
		if n := len(r.exceptV4); n > 0 && netip.MustParsePrefix(r.exceptV4[n-1]).Contains(p.Addr()) {
			continue // inside the previous range, which is at least as wide
		}
		r.exceptV4 = append(r.exceptV4, p.String())
	}
	return r
}

// CheckPrefix reports why p may not be the destination of an egress
// binding: it is not canonical (host bits set, so the author's intent is
// ambiguous) or it overlaps a deny range in either direction, so 0.0.0.0/0
// is refused as surely as 10.1.2.0/24.
func (r *EgressRules) CheckPrefix(p netip.Prefix) error {
	if !p.IsValid() {
		return errors.New("invalid CIDR")
	}
	if p != p.Masked() {
		return fmt.Errorf("CIDR %s has host bits set (the network is %s)", p, p.Masked())
	}
	for _, e := range r.deny {
		if p.Overlaps(e.prefix) {
			return fmt.Errorf("CIDR %s overlaps %s (%s)", p, e.prefix, e.what)
		}
	}
	return nil
}

// CheckAddr reports why addr may not be the destination of an egress
// binding. An IPv4-mapped IPv6 address is checked as the IPv4 address it
// maps, the form Go's resolver may return A records in; build the ipBlock
// from addr.Unmap(). A zoned address is link-scoped and always refused.
func (r *EgressRules) CheckAddr(addr netip.Addr) error {
	if !addr.IsValid() {
		return errors.New("invalid address")
	}
	if addr.Zone() != "" {
		return fmt.Errorf("address %s is scoped to an interface", addr)
	}
	a := addr.Unmap()
	for _, e := range r.deny {
		if e.prefix.Contains(a) {
			return fmt.Errorf("address %s is in %s (%s)", addr, e.prefix, e.what)
		}
	}
	return nil
}

// blockedHostSuffixes are names that resolve, by standard or by convention,
// to the node, the cluster or a private network; a hostname equal to one of
// them or ending in "."+suffix is refused before it is ever resolved. The
// more specific suffix comes first so the reason names it.
var blockedHostSuffixes = []string{
	"localhost",     // RFC 6761
	"cluster.local", // Kubernetes Services and pods
	"svc",           // Kubernetes Services under any cluster domain
	"local",         // mDNS, RFC 6762
	"localdomain",
	"internal", // cloud-internal names, metadata.google.internal among them
	"metadata.goog",
	"home.arpa",    // RFC 8375
	"in-addr.arpa", // reverse zones name addresses, not hosts
	"ip6.arpa",
}

// ValidateHostname reports why host may not be the destination of an
// exact-host binding. The check is case-insensitive and tolerates one
// trailing dot. It refuses IP literals (they belong in cidr, where they are
// range-checked), names that are not valid DNS names, local and
// cluster-internal names (the configured cluster domain among them),
// single-label names and names ending in a numeric label, which some
// resolvers parse as an IPv4 address. Lookups are rooted (Lookup), so search
// domains never complete a name that passes.
func (r *EgressRules) ValidateHostname(host string) error {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if _, err := netip.ParseAddr(h); err == nil {
		return fmt.Errorf("host %q is an IP address; use cidr", host)
	}
	if h == "" || len(h) > validation.DNS1123SubdomainMaxLength {
		return fmt.Errorf("host %q is not a valid DNS name", host)
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if len(validation.IsDNS1123Label(l)) > 0 {
			return fmt.Errorf("host %q is not a valid DNS name", host)
		}
	}
	blocked := blockedHostSuffixes
	if r.clusterDomain != "" {
		blocked = append([]string{r.clusterDomain}, blocked...)
	}
	for _, s := range blocked {
		if h == s || strings.HasSuffix(h, "."+s) {
			return fmt.Errorf("host %q is a local or cluster-internal name (%s)", host, s)
		}
	}
	if len(labels) < 2 {
		return fmt.Errorf("host %q is not fully qualified", host)
	}
	if isNumericLabel(labels[len(labels)-1]) {
		return fmt.Errorf("host %q ends in a numeric label", host)
	}
	return nil
}

// RootedName returns host as an absolute DNS name (one trailing dot), so a
// resolver never completes it through the pod's search domains, which are
// cluster-internal.
func RootedName(host string) string {
	return strings.TrimSuffix(host, ".") + "."
}

// isNumericLabel reports whether l is a decimal or 0x-hexadecimal number,
// the forms inet_aton accepts for an IPv4 address part.
func isNumericLabel(l string) bool {
	digits := "0123456789"
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		l, digits = rest, "0123456789abcdef"
	}
	return strings.Trim(l, digits) == ""
}

// CheckBinding reports why binding b can never be allowed as written,
// without looking anything up: a bad name, mode, port or protocol, both or
// neither of host and cidr, a cidr that overlaps a deny range, or a hostname
// ValidateHostname refuses. The planner and the external-egress coordinator
// both judge bindings with it.
func (r *EgressRules) CheckBinding(b *clerumv1alpha1.EgressBinding) error {
	if len(validation.IsDNS1123Label(b.Name)) > 0 {
		return fmt.Errorf("binding name %q is not a DNS label", b.Name)
	}
	switch mode := b.EffectiveMode(); mode {
	case clerumv1alpha1.EgressModePublicWeb:
		if r.wholeV4 {
			return errors.New("public-web allows nothing: a deny range covers all of IPv4")
		}
		return nil
	case clerumv1alpha1.EgressModeExactHost:
	default:
		return fmt.Errorf("mode %q is neither %s nor %s", mode,
			clerumv1alpha1.EgressModeExactHost, clerumv1alpha1.EgressModePublicWeb)
	}
	if b.Port == nil {
		return errors.New("an exact-host binding needs a port")
	}
	if *b.Port < 1 || *b.Port > 65535 {
		return fmt.Errorf("port %d is outside 1-65535", *b.Port)
	}
	if p := corev1.Protocol(b.EffectiveProtocol()); p != corev1.ProtocolTCP && p != corev1.ProtocolUDP {
		return fmt.Errorf("protocol %q is neither TCP nor UDP", p)
	}
	switch {
	case b.Host != "" && b.CIDR != "":
		return errors.New("an exact-host binding needs exactly one of host and cidr, not both")
	case b.CIDR != "":
		prefix, err := netip.ParsePrefix(b.CIDR)
		if err != nil {
			return fmt.Errorf("cidr %q is not a CIDR", b.CIDR)
		}
		return r.CheckPrefix(prefix)
	case b.Host != "":
		return r.ValidateHostname(b.Host)
	}
	return errors.New("an exact-host binding needs one of host and cidr")
}

// CheckAnswer reports why an answer for a hostname binding cannot be
// allowed: one address in a deny range makes the whole name suspect (DNS
// rebinding), so none of its addresses is trusted.
func (r *EgressRules) CheckAnswer(addrs []netip.Addr) error {
	for _, a := range addrs {
		if err := r.CheckAddr(a); err != nil {
			return err
		}
	}
	return nil
}

// externalEgressRule returns the egress rule binding b allows, given addrs,
// the current answer for a hostname binding (nil when there is none). It
// returns a nil rule and a nil error for a hostname with no current answer:
// the coordinator reports that, and DNS-derived allows are never kept
// without one. Any invalid or unsafe part rejects the whole binding.
func (r *EgressRules) externalEgressRule(b *clerumv1alpha1.EgressBinding, addrs []netip.Addr) (*networkingv1.NetworkPolicyEgressRule, error) {
	if err := r.CheckBinding(b); err != nil {
		return nil, err
	}
	if b.EffectiveMode() == clerumv1alpha1.EgressModePublicWeb {
		return r.publicWebRule(), nil
	}
	var to []networkingv1.NetworkPolicyPeer
	if b.CIDR != "" {
		// CheckBinding parsed it; the block carries the canonical spelling.
		to = []networkingv1.NetworkPolicyPeer{ipBlock(netip.MustParsePrefix(b.CIDR).String(), nil)}
	} else {
		// An egress rule without peers allows every destination.
		if len(addrs) == 0 {
			return nil, nil
		}
		var err error
		if to, err = r.addressBlocks(b.Host, addrs); err != nil {
			return nil, err
		}
	}
	return &networkingv1.NetworkPolicyEgressRule{
		Ports: []networkingv1.NetworkPolicyPort{port(corev1.Protocol(b.EffectiveProtocol()), *b.Port)},
		To:    to,
	}, nil
}

// publicWebRule allows HTTP and HTTPS to the IPv4 internet with every IPv4
// deny range carved out. It allows no IPv6: the except list cannot carve
// every cluster range out of ::/0 on every network plugin, and public-web
// is IPv4 by definition (docs/networkpolicy.md).
func (r *EgressRules) publicWebRule() *networkingv1.NetworkPolicyEgressRule {
	return &networkingv1.NetworkPolicyEgressRule{
		Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 80), port(corev1.ProtocolTCP, 443)},
		To:    []networkingv1.NetworkPolicyPeer{ipBlock("0.0.0.0/0", slices.Clone(r.exceptV4))},
	}
}

// addressBlocks turns the answer for host into one /32 or /128 block per
// distinct address, in address order so a reordered answer is no change. A
// single excluded address fails the binding: an answer that points anywhere
// private is not trusted for its other addresses either.
func (r *EgressRules) addressBlocks(host string, addrs []netip.Addr) ([]networkingv1.NetworkPolicyPeer, error) {
	if err := r.CheckAnswer(addrs); err != nil {
		return nil, fmt.Errorf("host %q resolved to an excluded address: %w", host, err)
	}
	unmapped := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		unmapped = append(unmapped, a.Unmap())
	}
	slices.SortFunc(unmapped, netip.Addr.Compare)
	unmapped = slices.Compact(unmapped)
	to := make([]networkingv1.NetworkPolicyPeer, len(unmapped))
	for i, a := range unmapped {
		to[i] = ipBlock(netip.PrefixFrom(a, a.BitLen()).String(), nil)
	}
	return to, nil
}

// buildExternalEgress is the ext-egress policy of one binding of server.
func buildExternalEgress(server, binding string, rule *networkingv1.NetworkPolicyEgressRule, opts Options) *networkingv1.NetworkPolicy {
	p := newPolicy(opts.McpServerNamespace, names.ExternalEgressPolicy(server, binding), names.PolicyTypeExternalEgress,
		[]string{names.LabelMcpServer, server, names.LabelEgressBinding, binding},
		matchLabels(names.LabelMcpServer, server), networkingv1.PolicyTypeEgress)
	p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{*rule}
	return p
}
