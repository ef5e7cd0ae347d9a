package netpol

import (
	"net/netip"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// The semantic test hands the planned set to cyclonus's matcher, an
// independent implementation of NetworkPolicy semantics, and asserts which
// flows it admits. The shape tests say what the policies look like; this one
// says what they mean.

// pod is a traffic endpoint inside the cluster. cyclonus matches ipBlocks
// against the peer IP even for pods, so every pod has one.
func pod(namespace, ip string, labels map[string]string) *matcher.TrafficPeer {
	return &matcher.TrafficPeer{
		IP: ip,
		Internal: &matcher.InternalPeer{
			Namespace:       namespace,
			NamespaceLabels: map[string]string{names.NamespaceNameKey: namespace},
			PodLabels:       labels,
		},
	}
}

func external(ip string) *matcher.TrafficPeer { return &matcher.TrafficPeer{IP: ip} }

func hostPod(contextID, ip string) *matcher.TrafficPeer {
	return pod("mcp-host", ip, map[string]string{
		names.LabelManagedBy: names.ManagedByValue,
		names.LabelHost:      "host-" + contextID,
		names.LabelContext:   contextID,
	})
}

func serverPod(server, ip string) *matcher.TrafficPeer {
	return pod("mcp-server", ip, map[string]string{
		names.LabelApp:       server,
		names.LabelManagedBy: names.ManagedByValue,
		names.LabelMcpServer: server,
	})
}

func TestPlannedPoliciesAdmitExactlyTheIntendedFlows(t *testing.T) {
	inv := Inventory{
		Contexts: []*clerumv1alpha1.Context{
			newContext("alpha", "alpha", 0, "search", "retired"),
			newContext("beta", "beta", 1, "files"),
		},
		Servers: []*clerumv1alpha1.McpServer{
			newServer("search",
				withBindings(publicWebBinding("www")),
				withRecipeBindings(`[{"recipe":"nightly","from":"search","to":"runner","port":9000}]`)),
			newServer("files", withPort(8080), withBindings(hostBinding("api", "api.example.com", 443))),
			newServer("retired", disabled),
		},
	}
	inv.Resolved = answers(inv.Servers, map[string]map[string][]netip.Addr{"files": {"api": addrs("93.184.216.34")}})
	plan := Compute(inv, defaultOptions(t))
	require.Empty(t, plan.Rejections)
	policy := matcher.BuildNetworkPolicies(false, plan.Policies)

	var (
		alphaHost = hostPod("alpha", "10.1.0.10")
		betaHost  = hostPod("beta", "10.1.0.11")
		strayHost = pod("mcp-host", "10.1.0.12", map[string]string{names.LabelApp: "debug"})
		// A pod copying the context label without being managed by HCC.
		impostor = pod("mcp-host", "10.1.0.13", map[string]string{names.LabelContext: "alpha", names.LabelHost: "x"})

		search  = serverPod("search", "10.2.0.10")
		files   = serverPod("files", "10.2.0.11")
		retired = serverPod("retired", "10.2.0.12")

		rpcProxy    = pod("rpc-proxy", "10.3.0.10", map[string]string{names.LabelApp: names.AppRPCProxy})
		rpcOptIn    = pod("rpc-proxy", "10.3.0.11", map[string]string{names.LabelApp: "sidecar", names.LabelK8sAPIEgress: "true"})
		rpcOther    = pod("rpc-proxy", "10.3.0.12", map[string]string{names.LabelApp: "sidecar"})
		mcpProxy    = pod("control-plane", "10.4.0.10", map[string]string{names.LabelApp: names.AppMcpProxy})
		apiGateway  = pod("control-plane", "10.4.0.11", map[string]string{names.LabelApp: names.AppAPIGateway})
		kubeDNS     = pod("kube-system", "10.5.0.10", map[string]string{names.KubeDNSLabelKey: names.KubeDNSLabelVal})
		fakeDNS     = pod("default", "10.6.0.10", map[string]string{names.KubeDNSLabelKey: names.KubeDNSLabelVal})
		otherSystem = pod("kube-system", "10.5.0.11", map[string]string{"app": "metrics-server"})
		runner      = pod("sandbox-recipes", "10.7.0.10", map[string]string{names.LabelApp: "runner"})
		otherRecipe = pod("sandbox-recipes", "10.7.0.11", map[string]string{names.LabelApp: "indexer"})
		workflow    = pod("sandbox-recipes", "10.7.0.12", map[string]string{names.LabelWorkflowMcpHost: "true"})

		apiServer = external("10.96.0.1")
	)

	tests := []struct {
		name     string
		from, to *matcher.TrafficPeer
		port     int
		protocol corev1.Protocol
		allowed  bool
	}{
		{name: "a Context's Host pod reaches its server on the transport port", from: alphaHost, to: search, port: 3000, allowed: true},
		{name: "a Context's Host pod does not reach its server on another port", from: alphaHost, to: search, port: 3001},
		{name: "another Context's Host pod does not reach the server", from: betaHost, to: search, port: 3000},
		{name: "the other Context reaches its own server on its port", from: betaHost, to: files, port: 8080, allowed: true},
		{name: "a Context's Host pod does not reach a server the Context does not grant", from: alphaHost, to: files, port: 8080},
		{name: "a Context's Host pod does not reach a disabled server it names", from: alphaHost, to: retired, port: 3000},
		{name: "a random pod in the host namespace does not reach the server", from: strayHost, to: search, port: 3000},
		{name: "a pod with the context label but not managed by HCC does not reach the server", from: impostor, to: search, port: 3000},
		{name: "rpc-proxy reaches a granted server", from: rpcProxy, to: search, port: 3000, allowed: true},
		{name: "rpc-proxy does not reach a granted server on another port", from: rpcProxy, to: search, port: 22},
		{name: "another rpc-proxy namespace pod does not reach the server", from: rpcOther, to: search, port: 3000},
		{name: "mcp-proxy reaches a granted server", from: mcpProxy, to: files, port: 8080, allowed: true},
		{name: "one server does not reach another", from: search, to: files, port: 8080},

		{name: "DNS over UDP reaches kube-dns in kube-system", from: alphaHost, to: kubeDNS, port: 53, protocol: corev1.ProtocolUDP, allowed: true},
		{name: "DNS over TCP reaches kube-dns in kube-system", from: search, to: kubeDNS, port: 53, allowed: true},
		{name: "DNS does not reach a kube-dns look-alike in another namespace", from: alphaHost, to: fakeDNS, port: 53, protocol: corev1.ProtocolUDP},
		{name: "DNS does not reach another kube-system pod", from: alphaHost, to: otherSystem, port: 53, protocol: corev1.ProtocolUDP},
		{name: "DNS egress opens no other port on kube-dns", from: alphaHost, to: kubeDNS, port: 80},
		{name: "DNS does not reach an external resolver", from: search, to: external("8.8.8.8"), port: 53, protocol: corev1.ProtocolUDP},

		{name: "public-web reaches a public IPv4 address on 443", from: search, to: external("8.8.8.8"), port: 443, allowed: true},
		{name: "public-web reaches a public IPv4 address on 80", from: search, to: external("1.1.1.1"), port: 80, allowed: true},
		{name: "public-web is IPv4 only: no IPv6 address is reached", from: search, to: external("2606:4700::1111"), port: 443},
		{name: "public-web opens no other port", from: search, to: external("8.8.8.8"), port: 22},
		{name: "public-web does not reach a private address", from: search, to: external("10.20.30.40"), port: 443},
		{name: "public-web does not reach a 172.16/12 address", from: search, to: external("172.16.0.1"), port: 443},
		{name: "public-web does not reach the cloud metadata service", from: search, to: external("169.254.169.254"), port: 80},
		{name: "public-web does not reach a unique-local IPv6 address", from: search, to: external("fd00::1"), port: 443},
		{name: "public-web does not reach an IPv6 link-local address", from: search, to: external("fe80::1"), port: 443},
		{name: "a server without public-web does not reach the internet", from: files, to: external("8.8.8.8"), port: 443},

		{name: "exact-host reaches the resolved address on its port", from: files, to: external("93.184.216.34"), port: 443, allowed: true},
		{name: "exact-host does not reach a neighbouring address", from: files, to: external("93.184.216.35"), port: 443},
		{name: "exact-host does not reach the resolved address on another port", from: files, to: external("93.184.216.34"), port: 80},

		{name: "a Host pod reaches the API server", from: alphaHost, to: apiServer, port: 443, allowed: true},
		{name: "an opted-in pod outside the host namespace reaches the API server", from: rpcOptIn, to: apiServer, port: 443, allowed: true},
		{name: "a pod outside the host namespace without the opt-in does not reach the API server", from: rpcOther, to: apiServer, port: 443},
		{name: "rpc-proxy itself has no API-server egress", from: rpcProxy, to: apiServer, port: 443},
		{name: "API-server egress is for 443 only", from: alphaHost, to: apiServer, port: 80},

		{name: "a Host pod reaches the hcc-api gateway", from: alphaHost, to: apiGateway, port: 8081, allowed: true},
		{name: "rpc-proxy reaches the hcc-api gateway", from: rpcProxy, to: apiGateway, port: 8081, allowed: true},
		{name: "a workflow MCP host reaches the hcc-api gateway", from: workflow, to: apiGateway, port: 8081, allowed: true},
		{name: "a stray host-namespace pod does not reach the hcc-api gateway", from: strayHost, to: apiGateway, port: 8081},
		{name: "an McpServer does not reach the hcc-api gateway", from: search, to: apiGateway, port: 8081},

		{name: "a recipe binding lets the server reach its workload", from: search, to: runner, port: 9000, allowed: true},
		{name: "a recipe binding opens no other workload", from: search, to: otherRecipe, port: 9000},
		{name: "a recipe binding opens no other port", from: search, to: runner, port: 9001},
		{name: "a recipe binding is one-way", from: runner, to: search, port: 3000},
		{name: "another server does not use the recipe binding", from: files, to: runner, port: 9000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			protocol := tc.protocol
			if protocol == "" {
				protocol = corev1.ProtocolTCP
			}
			result := policy.IsTrafficAllowed(&matcher.Traffic{
				Source:       tc.from,
				Destination:  tc.to,
				ResolvedPort: tc.port,
				Protocol:     protocol,
			})
			assert.Equal(t, tc.allowed, result.IsAllowed(), "\n%s", result.Table())
		})
	}
}
