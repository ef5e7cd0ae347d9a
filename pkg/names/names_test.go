package names

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestFit(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }

	tests := []struct {
		name      string
		in        string
		max       int
		unchanged bool
	}{
		{name: "a short name is unchanged", in: "ctx-a-b", max: MaxObjectName, unchanged: true},
		{name: "a name exactly at the object limit is unchanged", in: long(253), max: MaxObjectName, unchanged: true},
		{name: "a name one over the object limit is shortened", in: long(254), max: MaxObjectName},
		{name: "a name exactly at the label limit is unchanged", in: long(63), max: MaxLabel, unchanged: true},
		{name: "a name one over the label limit is shortened", in: long(64), max: MaxLabel},
		{name: "a far longer name is shortened", in: long(1000), max: MaxLabel},
		{name: "a prefix ending in dashes is trimmed", in: long(50) + strings.Repeat("-", 20) + "z", max: MaxLabel},
		{name: "a prefix ending in a dot is trimmed", in: long(51) + ".b" + long(30), max: MaxLabel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Fit(tc.in, tc.max)
			if tc.unchanged {
				assert.Equal(t, tc.in, got)
				return
			}
			assert.LessOrEqual(t, len(got), tc.max)
			assert.Equal(t, got, Fit(tc.in, tc.max), "shortening must be deterministic")
			assert.Regexp(t, `-[0-9a-f]{10}$`, got, "a shortened name ends in the hash")
			assert.True(t, strings.HasPrefix(tc.in, strings.TrimSuffix(got, got[len(got)-11:])),
				"a shortened name keeps a prefix of the full name")
			if tc.max == MaxLabel {
				assert.Empty(t, validation.IsDNS1123Label(got))
			} else {
				assert.Empty(t, validation.IsDNS1123Subdomain(got))
			}
		})
	}
}

func TestFitKeepsLongNamesApart(t *testing.T) {
	// Two names that share the whole kept prefix must still differ.
	prefix := strings.Repeat("x", 80)
	a, b := Label(prefix+"-one"), Label(prefix+"-two")
	require.NotEqual(t, a, b)
	assert.Len(t, a, MaxLabel)
	assert.Len(t, b, MaxLabel)
}

func TestDerivedNames(t *testing.T) {
	label63 := strings.Repeat("h", 63)
	tests := []struct {
		name string
		got  string
		want string
	}{
		{name: "workspace claim", got: HostWorkspace("h1"), want: "h1-workspace"},
		{name: "runtime token secret", got: HostRuntimeTokens("h1"), want: "host-h1-mcp-host-runtime-tokens"},
		{name: "host identity", got: HostIdentity("h1"), want: "host-h1"},
		{name: "desktop policy", got: HostDesktopPolicy("h1"), want: "allow-rpc-proxy-desktop-h1"},
		{name: "channel reader", got: ChannelReader("h1"), want: "channel-reader-h1"},
		{name: "channel reader egress", got: ChannelReaderEgressPolicy("h1"), want: "channel-reader-h1-egress"},
		{name: "deny all", got: DenyAllPolicy("mcp-server"), want: "deny-all-mcp-server"},
		{name: "dns egress", got: DNSEgressPolicy("rpc-proxy"), want: "allow-dns-egress-rpc-proxy"},
		{name: "hcc api egress", got: HCCAPIEgressPolicy("mcp-host"), want: "allow-hcc-api-egress-mcp-host"},
		{name: "k8s api egress", got: K8sAPIEgressPolicy("mcp-host"), want: "allow-k8s-api-egress-mcp-host"},
		{name: "context ingress", got: ContextIngressPolicy("c1", "s1"), want: "ctx-c1-s1"},
		{name: "context egress", got: ContextEgressPolicy("c1", "s1"), want: "ctx-c1-s1-egress"},
		{name: "rpc-proxy egress", got: RPCProxyEgressPolicy("c1", "s1"), want: "rpc-egress-c1-s1"},
		{name: "external egress", got: ExternalEgressPolicy("s1", "api"), want: "ext-egress-s1-api"},
		{name: "recipe egress", got: RecipeBindingEgressPolicy("r", "s1", "w"), want: "bind-r-s1-w-egress"},
		{name: "recipe ingress", got: RecipeBindingIngressPolicy("r", "s1", "w"), want: "bind-r-s1-w-ingress"},
		{name: "a 63-character host keeps its Service name", got: HostWorkload(label63), want: label63},
		{name: "the channel reader of a 63-character host is shortened to a label",
			got: ChannelReader(label63), want: Fit("channel-reader-"+label63, MaxLabel)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.got)
		})
	}
	assert.Len(t, ChannelReader(label63), MaxLabel)
	// A Context and server pair at the label limits still fits a subdomain.
	assert.Equal(t, "ctx-"+label63+"-"+label63+"-egress", ContextEgressPolicy(label63, label63))
}
