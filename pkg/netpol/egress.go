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

// The public-web except lists, rendered once; each policy gets its own copy.
var publicWebExceptV4, publicWebExceptV6 = exceptStrings()

// exceptStrings renders the exception ranges per family. The IPv4-mapped
// range is left out: the API server refuses IPv4-mapped CIDRs in an ipBlock,
// and it needs no carving, since traffic to a mapped address leaves the pod
// as IPv4 and meets the IPv4 block's except list.
func exceptStrings() (v4, v6 []string) {
	for _, e := range publicEgressExceptions {
		switch a := e.prefix.Addr(); {
		case a.Is4():
			v4 = append(v4, e.prefix.String())
		case !a.Is4In6():
			v6 = append(v6, e.prefix.String())
		}
	}
	return v4, v6
}

// PublicEgressExceptions returns the ranges no egress binding may reach,
// IPv4 first, each family in address order. The slice is a copy.
func PublicEgressExceptions() []netip.Prefix {
	out := make([]netip.Prefix, len(publicEgressExceptions))
	for i, e := range publicEgressExceptions {
		out[i] = e.prefix
	}
	return out
}

// CheckEgressPrefix reports why p may not be the destination of an egress
// binding: it is not canonical (host bits set, so the author's intent is
// ambiguous) or it overlaps an exception range in either direction, so
// 0.0.0.0/0 is refused as surely as 10.1.2.0/24.
func CheckEgressPrefix(p netip.Prefix) error {
	if !p.IsValid() {
		return errors.New("invalid CIDR")
	}
	if p != p.Masked() {
		return fmt.Errorf("CIDR %s has host bits set (the network is %s)", p, p.Masked())
	}
	for _, e := range publicEgressExceptions {
		if p.Overlaps(e.prefix) {
			return fmt.Errorf("CIDR %s overlaps %s (%s)", p, e.prefix, e.what)
		}
	}
	return nil
}

// CheckEgressAddr reports why addr may not be the destination of an egress
// binding. An IPv4-mapped IPv6 address is checked as the IPv4 address it
// maps, the form Go's resolver may return A records in; build the ipBlock
// from addr.Unmap(). A zoned address is link-scoped and always refused.
func CheckEgressAddr(addr netip.Addr) error {
	if !addr.IsValid() {
		return errors.New("invalid address")
	}
	if addr.Zone() != "" {
		return fmt.Errorf("address %s is scoped to an interface", addr)
	}
	a := addr.Unmap()
	for _, e := range publicEgressExceptions {
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

// ValidateEgressHostname reports why host may not be the destination of an
// exact-host binding. The check is case-insensitive and tolerates one
// trailing dot. It refuses IP literals (they belong in cidr, where they are
// range-checked), names that are not valid DNS names, local and
// cluster-internal names, single-label names (the resolver completes them
// through search domains, which in a pod are cluster-internal) and names
// ending in a numeric label, which some resolvers parse as an IPv4 address.
func ValidateEgressHostname(host string) error {
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
	for _, s := range blockedHostSuffixes {
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

// isNumericLabel reports whether l is a decimal or 0x-hexadecimal number,
// the forms inet_aton accepts for an IPv4 address part.
func isNumericLabel(l string) bool {
	digits := "0123456789"
	if rest, ok := strings.CutPrefix(l, "0x"); ok {
		l, digits = rest, "0123456789abcdef"
	}
	return strings.Trim(l, digits) == ""
}

// externalEgressRule returns the egress rule binding b allows, given addrs,
// the current answer for a hostname binding (nil when there is none). It
// returns a nil rule and a nil error for a hostname with no current answer:
// the coordinator reports that, and DNS-derived allows are never kept
// without one. Any invalid or unsafe part rejects the whole binding.
func externalEgressRule(b *clerumv1alpha1.EgressBinding, addrs []netip.Addr) (*networkingv1.NetworkPolicyEgressRule, error) {
	if len(validation.IsDNS1123Label(b.Name)) > 0 {
		return nil, fmt.Errorf("binding name %q is not a DNS label", b.Name)
	}
	switch mode := b.EffectiveMode(); mode {
	case clerumv1alpha1.EgressModePublicWeb:
		return publicWebRule(), nil
	case clerumv1alpha1.EgressModeExactHost:
		return exactHostRule(b, addrs)
	default:
		return nil, fmt.Errorf("mode %q is neither %s nor %s", mode,
			clerumv1alpha1.EgressModeExactHost, clerumv1alpha1.EgressModePublicWeb)
	}
}

// publicWebRule allows HTTP and HTTPS to the whole internet of both families
// with every exception range carved out.
func publicWebRule() *networkingv1.NetworkPolicyEgressRule {
	return &networkingv1.NetworkPolicyEgressRule{
		Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 80), port(corev1.ProtocolTCP, 443)},
		To: []networkingv1.NetworkPolicyPeer{
			ipBlock("0.0.0.0/0", slices.Clone(publicWebExceptV4)),
			ipBlock("::/0", slices.Clone(publicWebExceptV6)),
		},
	}
}

func exactHostRule(b *clerumv1alpha1.EgressBinding, addrs []netip.Addr) (*networkingv1.NetworkPolicyEgressRule, error) {
	if b.Port == nil {
		return nil, errors.New("an exact-host binding needs a port")
	}
	if *b.Port < 1 || *b.Port > 65535 {
		return nil, fmt.Errorf("port %d is outside 1-65535", *b.Port)
	}
	protocol := corev1.Protocol(b.EffectiveProtocol())
	if protocol != corev1.ProtocolTCP && protocol != corev1.ProtocolUDP {
		return nil, fmt.Errorf("protocol %q is neither TCP nor UDP", protocol)
	}

	var to []networkingv1.NetworkPolicyPeer
	switch {
	case b.Host != "" && b.CIDR != "":
		return nil, errors.New("an exact-host binding needs exactly one of host and cidr, not both")
	case b.CIDR != "":
		prefix, err := netip.ParsePrefix(b.CIDR)
		if err != nil {
			return nil, fmt.Errorf("cidr %q is not a CIDR", b.CIDR)
		}
		if err := CheckEgressPrefix(prefix); err != nil {
			return nil, err
		}
		to = []networkingv1.NetworkPolicyPeer{ipBlock(prefix.String(), nil)}
	case b.Host != "":
		if err := ValidateEgressHostname(b.Host); err != nil {
			return nil, err
		}
		// An egress rule without peers allows every destination.
		if len(addrs) == 0 {
			return nil, nil
		}
		var err error
		if to, err = addressBlocks(b.Host, addrs); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("an exact-host binding needs one of host and cidr")
	}
	return &networkingv1.NetworkPolicyEgressRule{
		Ports: []networkingv1.NetworkPolicyPort{port(protocol, *b.Port)},
		To:    to,
	}, nil
}

// addressBlocks turns the answer for host into one /32 or /128 block per
// distinct address, in address order so a reordered answer is no change. A
// single excluded address fails the binding: an answer that points anywhere
// private is not trusted for its other addresses either.
func addressBlocks(host string, addrs []netip.Addr) ([]networkingv1.NetworkPolicyPeer, error) {
	unmapped := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if err := CheckEgressAddr(a); err != nil {
			return nil, fmt.Errorf("host %q resolved to an excluded address: %w", host, err)
		}
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
	p := newPolicy(opts.McpServerNamespace, names.ExternalEgressPolicy(server, binding), names.PolicyTypeExternalEgress, server,
		matchLabels(names.LabelMcpServer, server), networkingv1.PolicyTypeEgress)
	p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{*rule}
	return p
}
