package netpol

import (
	"net/netip"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// clusterOptions are the defaults of a cluster whose API server, pods and
// Services sit in public-looking ranges, as many clusters' do.
func clusterOptions(t *testing.T) Options {
	o := defaultOptions(t)
	o.K8sAPICIDRs = []netip.Prefix{netip.MustParsePrefix("34.118.224.1/32")}
	o.EgressDenyCIDRs = []netip.Prefix{
		netip.MustParsePrefix("35.192.0.0/14"),  // pods
		netip.MustParsePrefix("35.193.0.0/16"),  // inside the pod range: absorbed
		netip.MustParsePrefix("2600:1900::/28"), // IPv6 pods
		netip.MustParsePrefix("10.100.0.0/16"),  // already inside 10/8
	}
	o.ClusterDomain = "corp.example"
	return o
}

func TestPublicWebCarvesOutTheAPIServerAndTheDenyRanges(t *testing.T) {
	o := clusterOptions(t)
	plan := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{newServer("s1", withBindings(publicWebBinding("web")))}}, o)
	policies := externalEgress(plan)
	require.Len(t, policies, 1)
	to := policies[0].Spec.Egress[0].To
	require.Len(t, to, 1, "public-web is IPv4 only")
	except := to[0].IPBlock.Except
	assert.Contains(t, except, "34.118.224.1/32")
	assert.Contains(t, except, "35.192.0.0/14")
	assert.NotContains(t, except, "35.193.0.0/16", "a range inside another is not repeated")
	assert.NotContains(t, except, "10.100.0.0/16", "a range inside a built-in exception is not repeated")
	for _, e := range except {
		assert.True(t, netip.MustParsePrefix(e).Addr().Is4(), "no IPv6 in an IPv4 except list: %s", e)
	}

	// What the policy means, judged by an independent evaluator.
	policy := matcher.BuildNetworkPolicies(true, plan.Policies)
	server := serverPod("s1", "10.1.0.5")
	for _, tc := range []struct {
		to      string
		allowed bool
	}{
		{"8.8.8.8", true},
		{"34.118.224.1", false}, // the API server
		{"35.193.12.7", false},  // a pod
		{"2600:1900::1", false}, // IPv6 is not public-web
	} {
		result := policy.IsTrafficAllowed(&matcher.Traffic{Source: server, Destination: external(tc.to), ResolvedPort: 443, Protocol: corev1.ProtocolTCP})
		assert.Equal(t, tc.allowed, result.IsAllowed(), "public-web to %s", tc.to)
	}
}

func TestExactHostRefusesTheAPIServerAndTheDenyRanges(t *testing.T) {
	rules := NewEgressRules(clusterOptions(t))
	tests := []struct {
		name string
		err  error
	}{
		{"a CIDR binding to the API server", rules.CheckPrefix(netip.MustParsePrefix("34.118.224.0/24"))},
		{"a CIDR binding inside the pod range", rules.CheckPrefix(netip.MustParsePrefix("35.192.7.0/24"))},
		{"a CIDR binding around the pod range", rules.CheckPrefix(netip.MustParsePrefix("35.0.0.0/8"))},
		{"an IPv6 CIDR binding overlapping the IPv6 pod range", rules.CheckPrefix(netip.MustParsePrefix("2600:1900:4::/48"))},
		{"an answer that is the API server", rules.CheckAddr(netip.MustParseAddr("34.118.224.1"))},
		{"an IPv4-mapped answer in the pod range", rules.CheckAddr(netip.MustParseAddr("::ffff:35.192.0.9"))},
		{"an IPv6 answer in the pod range", rules.CheckAddr(netip.MustParseAddr("2600:1900::5"))},
		{"a hostname under the cluster domain", rules.ValidateHostname("api.default.svc.corp.example")},
		{"the cluster domain itself", rules.ValidateHostname("CORP.example.")},
	}
	for _, tc := range tests {
		t.Run(tc.name+" is refused", func(t *testing.T) { assert.Error(t, tc.err) })
	}
	assert.NoError(t, rules.CheckPrefix(netip.MustParsePrefix("8.8.8.0/24")))
	assert.NoError(t, rules.ValidateHostname("api.example.com"))
	assert.NoError(t, NewEgressRules(defaultOptions(t)).CheckAddr(netip.MustParseAddr("34.118.224.1")),
		"without those settings the same address is public")
}

func TestADenyRangeCoveringIPv4LeavesPublicWebNothing(t *testing.T) {
	o := defaultOptions(t)
	o.EgressDenyCIDRs = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	plan := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{newServer("s1", withBindings(publicWebBinding("web")))}}, o)
	assert.Empty(t, externalEgress(plan))
	require.Len(t, plan.Rejections, 1)
	assert.Contains(t, plan.Rejections[0].Reason, "public-web allows nothing")
}

func TestLookupsAreRooted(t *testing.T) {
	assert.Equal(t, "api.example.com.", RootedName("api.example.com"))
	assert.Equal(t, "api.example.com.", RootedName("api.example.com."))
}

func TestAStaleAnswerAllowsNothing(t *testing.T) {
	b := hostBinding("api", "new.example.com", 22)
	server := newServer("s1", withBindings(b))
	server.UID = "uid-2"
	current := ResolutionFor(server, &server.Spec.EgressBindings[0], addrs("93.184.216.34"))
	tests := []struct {
		name  string
		stale func(*Resolution)
	}{
		{"an answer for another host", func(r *Resolution) { r.Host = "old.example.com" }},
		{"an answer for another port", func(r *Resolution) { r.Port = 443 }},
		{"an answer for another protocol", func(r *Resolution) { r.Protocol = "UDP" }},
		{"an answer for a deleted server of the same name", func(r *Resolution) { r.ServerUID = "uid-1" }},
	}
	for _, tc := range tests {
		t.Run(tc.name+" allows nothing", func(t *testing.T) {
			r := current
			tc.stale(&r)
			plan := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{server},
				Resolved: map[string]map[string]Resolution{"s1": {"api": r}}}, defaultOptions(t))
			assert.Empty(t, externalEgress(plan))
		})
	}
	plan := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{server},
		Resolved: map[string]map[string]Resolution{"s1": {"api": current}}}, defaultOptions(t))
	assert.Len(t, externalEgress(plan), 1, "the current answer allows")
}
