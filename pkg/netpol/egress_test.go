package netpol

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// planBinding plans one server holding binding b, with answer as the current
// resolution of a hostname binding.
func planBinding(t *testing.T, b clerumv1alpha1.EgressBinding, answer ...netip.Addr) *Plan {
	t.Helper()
	inv := Inventory{Servers: []*clerumv1alpha1.McpServer{newServer("s1", withBindings(b))}}
	if answer != nil {
		inv.Resolved = answers(inv.Servers, map[string]map[string][]netip.Addr{"s1": {b.Name: answer}})
	}
	return Compute(inv, defaultOptions(t))
}

func externalEgress(plan *Plan) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, p := range plan.Policies {
		if p.Labels[names.LabelPolicyType] == names.PolicyTypeExternalEgress {
			out = append(out, p)
		}
	}
	return out
}

func blocks(p *networkingv1.NetworkPolicy) []string {
	var out []string
	for _, peer := range p.Spec.Egress[0].To {
		out = append(out, peer.IPBlock.CIDR)
	}
	return out
}

func TestEveryExceptionRangeRejectsACIDRBinding(t *testing.T) {
	for _, e := range PublicEgressExceptions() {
		inside := netip.PrefixFrom(e.Addr(), e.Addr().BitLen())
		for _, cidr := range []netip.Prefix{e, inside} {
			t.Run("a CIDR binding to "+cidr.String()+" is rejected", func(t *testing.T) {
				plan := planBinding(t, cidrBinding("b", cidr.String(), 443))
				assert.Empty(t, externalEgress(plan))
				require.Len(t, plan.Rejections, 1)
				assert.Equal(t, Rejection{Kind: RejectedEgressBinding, Server: "s1", Binding: "b", Reason: plan.Rejections[0].Reason}, plan.Rejections[0])
				assert.Contains(t, plan.Rejections[0].Reason, cidr.String())
				assert.Contains(t, plan.Rejections[0].Reason, e.String())
			})
		}
	}
}

func TestCIDRBindings(t *testing.T) {
	tests := []struct {
		name       string
		cidr       string
		wantBlock  string
		wantReason string
	}{
		{name: "a public IPv4 network is allowed", cidr: "8.8.8.0/24", wantBlock: "8.8.8.0/24"},
		{name: "a public IPv6 network is allowed", cidr: "2606:4700::/32", wantBlock: "2606:4700::/32"},
		{name: "a single public address is allowed", cidr: "1.1.1.1/32", wantBlock: "1.1.1.1/32"},
		{name: "the whole IPv4 internet overlaps every exception and is rejected", cidr: "0.0.0.0/0", wantReason: "CIDR 0.0.0.0/0 overlaps 0.0.0.0/8"},
		{name: "the whole IPv6 internet is rejected", cidr: "::/0", wantReason: "CIDR ::/0 overlaps ::/128"},
		{name: "a supernet of a private range is rejected", cidr: "8.0.0.0/6", wantReason: "overlaps 10.0.0.0/8"},
		{name: "a subnet of a private range is rejected", cidr: "10.20.30.0/24", wantReason: "overlaps 10.0.0.0/8"},
		{name: "the cloud metadata address is rejected", cidr: "169.254.169.254/32", wantReason: "link-local, cloud metadata"},
		{name: "the broadcast address is rejected", cidr: "255.255.255.255/32", wantReason: "overlaps 240.0.0.0/4"},
		{name: "an IPv4-mapped IPv6 CIDR is rejected", cidr: "::ffff:8.8.8.0/120", wantReason: "IPv4-mapped"},
		{name: "a CIDR with host bits set is rejected as ambiguous", cidr: "203.0.114.1/24", wantReason: "CIDR 203.0.114.1/24 has host bits set (the network is 203.0.114.0/24)"},
		{name: "an address without a prefix length is rejected", cidr: "8.8.8.8", wantReason: `cidr "8.8.8.8" is not a CIDR`},
		{name: "garbage is rejected", cidr: "not-a-cidr", wantReason: `cidr "not-a-cidr" is not a CIDR`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := planBinding(t, cidrBinding("b", tc.cidr, 443))
			if tc.wantReason != "" {
				assert.Empty(t, externalEgress(plan))
				require.Len(t, plan.Rejections, 1)
				assert.Contains(t, plan.Rejections[0].Reason, tc.wantReason)
				return
			}
			require.Empty(t, plan.Rejections)
			policies := externalEgress(plan)
			require.Len(t, policies, 1)
			assert.Equal(t, []string{tc.wantBlock}, blocks(policies[0]))
		})
	}
}

func TestValidateEgressHostname(t *testing.T) {
	tests := []struct {
		name       string
		host       string
		wantReason string // empty: accepted
	}{
		{name: "a public name is accepted", host: "api.example.com"},
		{name: "case and one trailing dot are tolerated", host: "API.Example.COM."},
		{name: "an IDNA name is accepted", host: "xn--bcher-kva.example"},
		{name: "localhost is refused", host: "localhost", wantReason: "(localhost)"},
		{name: "localhost in capitals with a trailing dot is refused", host: "LOCALHOST.", wantReason: "(localhost)"},
		{name: "a name under localhost is refused", host: "app.localhost", wantReason: "(localhost)"},
		{name: "the GCE metadata name is refused", host: "metadata.google.internal", wantReason: "(internal)"},
		{name: "metadata.goog is refused", host: "metadata.goog", wantReason: "(metadata.goog)"},
		{name: "an .internal name is refused", host: "db.corp.internal", wantReason: "(internal)"},
		{name: "a Service name is refused", host: "kubernetes.default.svc", wantReason: "(svc)"},
		{name: "a Service name under another cluster domain is left to the address check", host: "api.default.svc.corp.example"},
		{name: "a cluster.local name is refused", host: "api.default.svc.cluster.local", wantReason: "(cluster.local)"},
		{name: "an mDNS name is refused", host: "printer.local", wantReason: "(local)"},
		{name: "a .localdomain name is refused", host: "box.localdomain", wantReason: "(localdomain)"},
		{name: "a home.arpa name is refused", host: "nas.home.arpa", wantReason: "(home.arpa)"},
		{name: "an IPv4 reverse name is refused", host: "1.0.0.10.in-addr.arpa", wantReason: "(in-addr.arpa)"},
		{name: "an IPv6 reverse name is refused", host: "b.a.9.8.ip6.arpa", wantReason: "(ip6.arpa)"},
		{name: "an IPv4 literal is refused", host: "93.184.216.34", wantReason: "is an IP address"},
		{name: "an IPv6 literal is refused", host: "2606:2800:220:1::1", wantReason: "is an IP address"},
		{name: "a zoned IPv6 literal is refused", host: "fe80::1%eth0", wantReason: "is an IP address"},
		{name: "a bracketed IPv6 literal is not a DNS name", host: "[::1]", wantReason: "not a valid DNS name"},
		{name: "a shortened IPv4 literal is refused", host: "127.1", wantReason: "ends in a numeric label"},
		{name: "a hexadecimal IPv4 literal is refused", host: "0x7f.0x1", wantReason: "ends in a numeric label"},
		{name: "a single-label name is refused", host: "intranet", wantReason: "not fully qualified"},
		{name: "an underscore is not a hostname", host: "_dmarc.example.com", wantReason: "not a valid DNS name"},
		{name: "an empty label is not a DNS name", host: "a..example.com", wantReason: "not a valid DNS name"},
		{name: "a leading hyphen is not a DNS name", host: "-a.example.com", wantReason: "not a valid DNS name"},
		{name: "a label over 63 characters is not a DNS name", host: strings.Repeat("a", 64) + ".example.com", wantReason: "not a valid DNS name"},
		{name: "a name over 253 characters is not a DNS name", host: strings.Repeat("abcdefghi.", 26) + "com", wantReason: "not a valid DNS name"},
		{name: "an empty name is not a DNS name", host: "", wantReason: "not a valid DNS name"},
		{name: "a lone dot is not a DNS name", host: ".", wantReason: "not a valid DNS name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := NewEgressRules(Options{}).ValidateHostname(tc.host)
			if tc.wantReason == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantReason)
			assert.Contains(t, err.Error(), tc.host, "the reason names the value")
		})
	}
}

func TestCheckEgressAddr(t *testing.T) {
	tests := []struct {
		name       string
		addr       netip.Addr
		wantReason string
	}{
		{name: "a public IPv4 address is allowed", addr: netip.MustParseAddr("8.8.8.8")},
		{name: "a public IPv6 address is allowed", addr: netip.MustParseAddr("2606:4700::1111")},
		{name: "a public IPv4 address in mapped form is checked as IPv4 and allowed", addr: netip.MustParseAddr("::ffff:8.8.8.8")},
		{name: "a private IPv4 address in mapped form is refused", addr: netip.MustParseAddr("::ffff:10.1.2.3"), wantReason: "10.0.0.0/8"},
		{name: "the metadata address is refused", addr: netip.MustParseAddr("169.254.169.254"), wantReason: "169.254.0.0/16"},
		{name: "the broadcast address is refused", addr: netip.MustParseAddr("255.255.255.255"), wantReason: "240.0.0.0/4"},
		{name: "a unique-local address is refused", addr: netip.MustParseAddr("fd12::1"), wantReason: "fc00::/7"},
		{name: "a zoned address is refused", addr: netip.MustParseAddr("2606:4700::1%eth0"), wantReason: "scoped to an interface"},
		{name: "the zero Addr is refused", addr: netip.Addr{}, wantReason: "invalid address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := NewEgressRules(Options{}).CheckAddr(tc.addr)
			if tc.wantReason == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantReason)
		})
	}
}

func TestEveryExceptionRangeRejectsAResolvedAddress(t *testing.T) {
	for _, e := range PublicEgressExceptions() {
		if e.Addr().Is4In6() {
			continue // a mapped answer is checked as the IPv4 address it maps (TestCheckEgressAddr)
		}
		addr := e.Addr()
		if e.Bits() < addr.BitLen() {
			addr = addr.Next()
		}
		t.Run("a hostname resolving to "+addr.String()+" is rejected", func(t *testing.T) {
			plan := planBinding(t, hostBinding("b", "api.example.com", 443), netip.MustParseAddr("93.184.216.34"), addr)
			assert.Empty(t, externalEgress(plan), "one excluded address rejects the whole binding")
			require.Len(t, plan.Rejections, 1)
			assert.Contains(t, plan.Rejections[0].Reason, `host "api.example.com" resolved to an excluded address`)
			assert.Contains(t, plan.Rejections[0].Reason, e.String())
		})
	}
}

func TestHostnameBindings(t *testing.T) {
	tests := []struct {
		name        string
		binding     clerumv1alpha1.EgressBinding
		answer      []netip.Addr
		wantBlocks  []string
		wantPort    networkingv1.NetworkPolicyPort
		wantReason  string
		wantNothing bool
	}{
		{
			name:       "IPv4 answers become /32 blocks in address order without repeats",
			binding:    hostBinding("b", "api.example.com", 443),
			answer:     addrs("93.184.216.35", "93.184.216.34", "93.184.216.35"),
			wantBlocks: []string{"93.184.216.34/32", "93.184.216.35/32"},
			wantPort:   port(corev1.ProtocolTCP, 443),
		},
		{
			name:       "IPv6 answers become /128 blocks",
			binding:    hostBinding("b", "api.example.com", 443),
			answer:     addrs("2606:2800:220:1::1"),
			wantBlocks: []string{"2606:2800:220:1::1/128"},
			wantPort:   port(corev1.ProtocolTCP, 443),
		},
		{
			name:       "IPv4-mapped answers become IPv4 /32 blocks",
			binding:    hostBinding("b", "api.example.com", 443),
			answer:     addrs("::ffff:93.184.216.34", "93.184.216.34"),
			wantBlocks: []string{"93.184.216.34/32"},
			wantPort:   port(corev1.ProtocolTCP, 443),
		},
		{
			name: "the declared protocol is used",
			binding: clerumv1alpha1.EgressBinding{
				Name: "b", Host: "ntp.example.com", Port: ptr.To[int32](123), Protocol: corev1.ProtocolUDP,
			},
			answer:     addrs("162.159.200.1"),
			wantBlocks: []string{"162.159.200.1/32"},
			wantPort:   port(corev1.ProtocolUDP, 123),
		},
		{
			name:        "a hostname without a current answer produces no policy and no rejection",
			binding:     hostBinding("b", "api.example.com", 443),
			wantNothing: true,
		},
		{
			name:        "an empty answer produces no policy, never a rule open to every address",
			binding:     hostBinding("b", "api.example.com", 443),
			answer:      []netip.Addr{},
			wantNothing: true,
		},
		{
			name:       "a refused hostname is rejected even when it resolved",
			binding:    hostBinding("b", "metadata.google.internal", 80),
			answer:     addrs("8.8.8.8"),
			wantReason: `host "metadata.google.internal" is a local or cluster-internal name (internal)`,
		},
		{
			name:       "a private answer rejects the binding",
			binding:    hostBinding("b", "evil.example.com", 443),
			answer:     addrs("10.0.0.5"),
			wantReason: `host "evil.example.com" resolved to an excluded address: address 10.0.0.5 is in 10.0.0.0/8 (private, RFC 1918)`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := planBinding(t, tc.binding, tc.answer...)
			policies := externalEgress(plan)
			switch {
			case tc.wantNothing:
				assert.Empty(t, policies)
				assert.Empty(t, plan.Rejections)
			case tc.wantReason != "":
				assert.Empty(t, policies)
				require.Len(t, plan.Rejections, 1)
				assert.Equal(t, tc.wantReason, plan.Rejections[0].Reason)
			default:
				require.Empty(t, plan.Rejections)
				require.Len(t, policies, 1)
				assert.Equal(t, tc.wantBlocks, blocks(policies[0]))
				assert.Equal(t, []networkingv1.NetworkPolicyPort{tc.wantPort}, policies[0].Spec.Egress[0].Ports)
			}
		})
	}
}

func TestMalformedBindingsAreRejected(t *testing.T) {
	tests := []struct {
		name       string
		binding    clerumv1alpha1.EgressBinding
		wantReason string
	}{
		{
			name:       "an exact-host binding without a port",
			binding:    clerumv1alpha1.EgressBinding{Name: "b", CIDR: "8.8.8.0/24"},
			wantReason: "an exact-host binding needs a port",
		},
		{
			name:       "a port out of range",
			binding:    cidrBinding("b", "8.8.8.0/24", 70000),
			wantReason: "port 70000 is outside 1-65535",
		},
		{
			name:       "a protocol other than TCP or UDP",
			binding:    clerumv1alpha1.EgressBinding{Name: "b", CIDR: "8.8.8.0/24", Port: ptr.To[int32](443), Protocol: corev1.ProtocolSCTP},
			wantReason: `protocol "SCTP" is neither TCP nor UDP`,
		},
		{
			name:       "both host and cidr",
			binding:    clerumv1alpha1.EgressBinding{Name: "b", Host: "api.example.com", CIDR: "8.8.8.0/24", Port: ptr.To[int32](443)},
			wantReason: "an exact-host binding needs exactly one of host and cidr, not both",
		},
		{
			name:       "neither host nor cidr",
			binding:    clerumv1alpha1.EgressBinding{Name: "b", Port: ptr.To[int32](443)},
			wantReason: "an exact-host binding needs one of host and cidr",
		},
		{
			name:       "an unknown mode",
			binding:    clerumv1alpha1.EgressBinding{Name: "b", Mode: "anywhere"},
			wantReason: `mode "anywhere" is neither exact-host nor public-web`,
		},
		{
			name:       "a binding name that is not a DNS label",
			binding:    publicWebBinding("Web_Access"),
			wantReason: `binding name "Web_Access" is not a DNS label`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := planBinding(t, tc.binding)
			assert.Empty(t, externalEgress(plan))
			assert.Equal(t, []Rejection{{Kind: RejectedEgressBinding, Server: "s1", Binding: tc.binding.Name, Reason: tc.wantReason}}, plan.Rejections)
		})
	}
}

func TestExternalEgressPerServer(t *testing.T) {
	t.Run("a public-web binding ignores host, cidr and port", func(t *testing.T) {
		b := publicWebBinding("web")
		b.CIDR, b.Port = "10.0.0.0/8", ptr.To[int32](22)
		plan := planBinding(t, b)
		require.Empty(t, plan.Rejections)
		policies := externalEgress(plan)
		require.Len(t, policies, 1)
		assert.Equal(t, []string{"0.0.0.0/0"}, blocks(policies[0]), "public-web is IPv4 only")
	})
	t.Run("a disabled server gets no egress and no rejection", func(t *testing.T) {
		s := newServer("s1", disabled, withBindings(publicWebBinding("web"), cidrBinding("bad", "10.0.0.0/8", 443)))
		plan := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{s}}, defaultOptions(t))
		assert.Empty(t, externalEgress(plan))
		assert.Empty(t, plan.Rejections)
	})
	t.Run("a binding name used twice keeps the first and rejects the repeat", func(t *testing.T) {
		s := newServer("s1", withBindings(cidrBinding("api", "8.8.8.0/24", 443), cidrBinding("api", "1.1.1.0/24", 443)))
		plan := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{s}}, defaultOptions(t))
		policies := externalEgress(plan)
		require.Len(t, policies, 1)
		assert.Equal(t, []string{"8.8.8.0/24"}, blocks(policies[0]))
		assert.Equal(t, []Rejection{{Kind: RejectedEgressBinding, Server: "s1", Binding: "api", Reason: `binding name "api" is used more than once; the first one counts`}}, plan.Rejections)
	})
	t.Run("one rejected binding leaves the server's other bindings in place", func(t *testing.T) {
		s := newServer("s1", withBindings(cidrBinding("bad", "192.168.1.0/24", 443), cidrBinding("good", "8.8.8.0/24", 443)))
		plan := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{s}}, defaultOptions(t))
		assert.Equal(t, []string{"mcp-server/ext-egress-s1-good"}, keys(externalEgress(plan)))
		require.Len(t, plan.Rejections, 1)
		assert.Equal(t, "bad", plan.Rejections[0].Binding)
	})
	t.Run("rejections are sorted by server and binding", func(t *testing.T) {
		plan := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{
			newServer("s2", withBindings(cidrBinding("b", "10.0.0.0/8", 443), cidrBinding("a", "10.0.0.0/8", 443))),
			newServer("s1", withBindings(cidrBinding("z", "10.0.0.0/8", 443))),
		}}, defaultOptions(t))
		var got []string
		for _, r := range plan.Rejections {
			got = append(got, r.Server+"/"+r.Binding)
		}
		assert.Equal(t, []string{"s1/z", "s2/a", "s2/b"}, got)
	})
}

func TestPublicEgressExceptionsIsACopy(t *testing.T) {
	got := PublicEgressExceptions()
	want := PublicEgressExceptions()
	got[0] = netip.MustParsePrefix("8.8.8.0/24")
	assert.Equal(t, want, PublicEgressExceptions())
	for _, p := range want {
		assert.Equal(t, p, p.Masked(), "exception ranges are canonical")
	}
}
