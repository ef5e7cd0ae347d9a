package netpol

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// richInventory exercises every layer: one Context granting two servers, one
// of which has every kind of egress binding and a recipe binding.
func richInventory() Inventory {
	inv := Inventory{
		Contexts: []*clerumv1alpha1.Context{newContext("alpha", "alpha", 0, "search", "files")},
		Servers: []*clerumv1alpha1.McpServer{
			newServer("search",
				withBindings(publicWebBinding("www"), cidrBinding("api", "8.8.8.0/24", 443), hostBinding("docs", "Docs.Example.com.", 8443)),
				withRecipeBindings(`[{"recipe":"nightly","from":"search","to":"runner","port":9000}]`)),
			newServer("files", withPort(8080)),
		},
	}
	inv.Resolved = answers(inv.Servers, map[string]map[string][]netip.Addr{
		"search": {"docs": addrs("2606:2800:220:1::1", "93.184.216.34")},
	})
	return inv
}

func TestComputePolicyShapes(t *testing.T) {
	plan := Compute(richInventory(), defaultOptions(t))
	require.Empty(t, plan.Rejections)

	tests := []struct {
		name      string
		namespace string
		policy    string
		want      string
	}{
		{
			name:      "deny-all isolates every pod of a runtime namespace in both directions",
			namespace: "mcp-server", policy: "deny-all-mcp-server",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/managed-by: host-context-controller
				    clerum.io/policy-type: deny-all
				  name: deny-all-mcp-server
				  namespace: mcp-server
				spec:
				  podSelector: {}
				  policyTypes:
				  - Ingress
				  - Egress
				`,
		},
		{
			name:      "DNS egress reaches kube-dns in kube-system on UDP and TCP 53",
			namespace: "rpc-proxy", policy: "allow-dns-egress-rpc-proxy",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/managed-by: host-context-controller
				    clerum.io/policy-type: infrastructure
				  name: allow-dns-egress-rpc-proxy
				  namespace: rpc-proxy
				spec:
				  egress:
				  - ports:
				    - port: 53
				      protocol: UDP
				    - port: 53
				      protocol: TCP
				    to:
				    - namespaceSelector:
				        matchLabels:
				          kubernetes.io/metadata.name: kube-system
				      podSelector:
				        matchLabels:
				          k8s-app: kube-dns
				  podSelector: {}
				  policyTypes:
				  - Egress
				`,
		},
		{
			name:      "hcc-api egress in the host namespace is for Host pods only",
			namespace: "mcp-host", policy: "allow-hcc-api-egress-mcp-host",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/managed-by: host-context-controller
				    clerum.io/policy-type: infrastructure
				  name: allow-hcc-api-egress-mcp-host
				  namespace: mcp-host
				spec:
				  egress:
				  - ports:
				    - port: 8081
				      protocol: TCP
				    to:
				    - namespaceSelector:
				        matchLabels:
				          kubernetes.io/metadata.name: control-plane
				      podSelector:
				        matchLabels:
				          app: host-context-controller-api-gateway
				  podSelector:
				    matchExpressions:
				    - key: clerum.io/host
				      operator: Exists
				  policyTypes:
				  - Egress
				`,
		},
		{
			name:      "API-server egress is open to every pod of the host namespace",
			namespace: "mcp-host", policy: "allow-k8s-api-egress-mcp-host",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/managed-by: host-context-controller
				    clerum.io/policy-type: infrastructure
				  name: allow-k8s-api-egress-mcp-host
				  namespace: mcp-host
				spec:
				  egress:
				  - ports:
				    - port: 443
				      protocol: TCP
				    to:
				    - ipBlock:
				        cidr: 10.96.0.1/32
				  podSelector: {}
				  policyTypes:
				  - Egress
				`,
		},
		{
			name:      "API-server egress elsewhere needs the platform's opt-in label",
			namespace: "sandbox-recipes", policy: "allow-k8s-api-egress-sandbox-recipes",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/managed-by: host-context-controller
				    clerum.io/policy-type: infrastructure
				  name: allow-k8s-api-egress-sandbox-recipes
				  namespace: sandbox-recipes
				spec:
				  egress:
				  - ports:
				    - port: 443
				      protocol: TCP
				    to:
				    - ipBlock:
				        cidr: 10.96.0.1/32
				  podSelector:
				    matchLabels:
				      clerum.io/k8s-api-egress: "true"
				  policyTypes:
				  - Egress
				`,
		},
		{
			name:      "the controller API admits the host namespace",
			namespace: "mcp-server", policy: "allow-host-context-controller-api",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/managed-by: host-context-controller
				    clerum.io/policy-type: infrastructure
				  name: allow-host-context-controller-api
				  namespace: mcp-server
				spec:
				  ingress:
				  - from:
				    - namespaceSelector:
				        matchLabels:
				          kubernetes.io/metadata.name: mcp-host
				    ports:
				    - port: 8081
				      protocol: TCP
				  podSelector:
				    matchLabels:
				      app: host-context-controller
				  policyTypes:
				  - Ingress
				`,
		},
		{
			name:      "a Context's server admits its Host pods, rpc-proxy and mcp-proxy on the transport port",
			namespace: "mcp-server", policy: "ctx-alpha-files",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/context: alpha
				    clerum.io/managed-by: host-context-controller
				    clerum.io/mcpserver: files
				    clerum.io/policy-type: context-allow
				  name: ctx-alpha-files
				  namespace: mcp-server
				spec:
				  ingress:
				  - from:
				    - namespaceSelector:
				        matchLabels:
				          kubernetes.io/metadata.name: mcp-host
				      podSelector:
				        matchLabels:
				          clerum.io/context: alpha
				          clerum.io/managed-by: host-context-controller
				    - namespaceSelector:
				        matchLabels:
				          kubernetes.io/metadata.name: rpc-proxy
				      podSelector:
				        matchLabels:
				          app: rpc-proxy
				    - namespaceSelector:
				        matchLabels:
				          kubernetes.io/metadata.name: control-plane
				      podSelector:
				        matchLabels:
				          app: mcp-proxy
				    ports:
				    - port: 8080
				      protocol: TCP
				  podSelector:
				    matchLabels:
				      clerum.io/mcpserver: files
				  policyTypes:
				  - Ingress
				`,
		},
		{
			name:      "a Context's Host pods may reach its server, on the default port 3000",
			namespace: "mcp-host", policy: "ctx-alpha-search-egress",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/context: alpha
				    clerum.io/managed-by: host-context-controller
				    clerum.io/mcpserver: search
				    clerum.io/policy-type: context-allow
				  name: ctx-alpha-search-egress
				  namespace: mcp-host
				spec:
				  egress:
				  - ports:
				    - port: 3000
				      protocol: TCP
				    to:
				    - namespaceSelector:
				        matchLabels:
				          kubernetes.io/metadata.name: mcp-server
				      podSelector:
				        matchLabels:
				          clerum.io/mcpserver: search
				  podSelector:
				    matchLabels:
				      clerum.io/context: alpha
				      clerum.io/managed-by: host-context-controller
				  policyTypes:
				  - Egress
				`,
		},
		{
			name:      "rpc-proxy may reach a server a Context grants",
			namespace: "rpc-proxy", policy: "rpc-egress-alpha-files",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/context: alpha
				    clerum.io/managed-by: host-context-controller
				    clerum.io/mcpserver: files
				    clerum.io/policy-type: rpc-proxy-egress
				  name: rpc-egress-alpha-files
				  namespace: rpc-proxy
				spec:
				  egress:
				  - ports:
				    - port: 8080
				      protocol: TCP
				    to:
				    - namespaceSelector:
				        matchLabels:
				          kubernetes.io/metadata.name: mcp-server
				      podSelector:
				        matchLabels:
				          clerum.io/mcpserver: files
				  podSelector:
				    matchLabels:
				      app: rpc-proxy
				  policyTypes:
				  - Egress
				`,
		},
		{
			name:      "an exact-host CIDR binding allows that block on its port",
			namespace: "mcp-server", policy: "ext-egress-search-api",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/egress-binding: api
				    clerum.io/managed-by: host-context-controller
				    clerum.io/mcpserver: search
				    clerum.io/policy-type: external-egress
				  name: ext-egress-search-api
				  namespace: mcp-server
				spec:
				  egress:
				  - ports:
				    - port: 443
				      protocol: TCP
				    to:
				    - ipBlock:
				        cidr: 8.8.8.0/24
				  podSelector:
				    matchLabels:
				      clerum.io/mcpserver: search
				  policyTypes:
				  - Egress
				`,
		},
		{
			name:      "an exact-host hostname binding allows each resolved address as a /32 or /128",
			namespace: "mcp-server", policy: "ext-egress-search-docs",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/egress-binding: docs
				    clerum.io/managed-by: host-context-controller
				    clerum.io/mcpserver: search
				    clerum.io/policy-type: external-egress
				  name: ext-egress-search-docs
				  namespace: mcp-server
				spec:
				  egress:
				  - ports:
				    - port: 8443
				      protocol: TCP
				    to:
				    - ipBlock:
				        cidr: 93.184.216.34/32
				    - ipBlock:
				        cidr: 2606:2800:220:1::1/128
				  podSelector:
				    matchLabels:
				      clerum.io/mcpserver: search
				  policyTypes:
				  - Egress
				`,
		},
		{
			name:      "a public-web binding allows HTTP and HTTPS to the internet minus every exception range",
			namespace: "mcp-server", policy: "ext-egress-search-www",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/egress-binding: www
				    clerum.io/managed-by: host-context-controller
				    clerum.io/mcpserver: search
				    clerum.io/policy-type: external-egress
				  name: ext-egress-search-www
				  namespace: mcp-server
				spec:
				  egress:
				  - ports:
				    - port: 80
				      protocol: TCP
				    - port: 443
				      protocol: TCP
				    to:
				    - ipBlock:
				        cidr: 0.0.0.0/0
				        except:
				        - 0.0.0.0/8
				        - 10.0.0.0/8
				        - 100.64.0.0/10
				        - 127.0.0.0/8
				        - 169.254.0.0/16
				        - 172.16.0.0/12
				        - 192.0.0.0/24
				        - 192.0.2.0/24
				        - 192.88.99.0/24
				        - 192.168.0.0/16
				        - 198.18.0.0/15
				        - 198.51.100.0/24
				        - 203.0.113.0/24
				        - 224.0.0.0/4
				        - 240.0.0.0/4
				  podSelector:
				    matchLabels:
				      clerum.io/mcpserver: search
				  policyTypes:
				  - Egress
				`,
		},
		{
			name:      "a recipe binding's egress half lets the server reach the recipe workload",
			namespace: "mcp-server", policy: "bind-nightly-search-runner-egress",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/managed-by: host-context-controller
				    clerum.io/mcpserver: search
				    clerum.io/policy-type: recipe-binding
				    clerum.io/recipe: nightly
				  name: bind-nightly-search-runner-egress
				  namespace: mcp-server
				spec:
				  egress:
				  - ports:
				    - port: 9000
				      protocol: TCP
				    to:
				    - namespaceSelector:
				        matchLabels:
				          kubernetes.io/metadata.name: sandbox-recipes
				      podSelector:
				        matchLabels:
				          app: runner
				  podSelector:
				    matchLabels:
				      clerum.io/mcpserver: search
				  policyTypes:
				  - Egress
				`,
		},
		{
			name:      "a recipe binding's ingress half lets the recipe workload admit the server",
			namespace: "sandbox-recipes", policy: "bind-nightly-search-runner-ingress",
			want: `
				apiVersion: networking.k8s.io/v1
				kind: NetworkPolicy
				metadata:
				  labels:
				    clerum.io/managed-by: host-context-controller
				    clerum.io/mcpserver: search
				    clerum.io/policy-type: recipe-binding
				    clerum.io/recipe: nightly
				  name: bind-nightly-search-runner-ingress
				  namespace: sandbox-recipes
				spec:
				  ingress:
				  - from:
				    - namespaceSelector:
				        matchLabels:
				          kubernetes.io/metadata.name: mcp-server
				      podSelector:
				        matchLabels:
				          clerum.io/mcpserver: search
				    ports:
				    - port: 9000
				      protocol: TCP
				  podSelector:
				    matchLabels:
				      app: runner
				  policyTypes:
				  - Ingress
				`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, dedent(tc.want), toYAML(t, findPolicy(t, plan.Policies, tc.namespace, tc.policy)))
		})
	}
}

func TestComputePlansEveryLayerSorted(t *testing.T) {
	plan := Compute(richInventory(), defaultOptions(t))
	assert.Equal(t, []string{
		"mcp-host/allow-dns-egress-mcp-host",
		"mcp-host/allow-hcc-api-egress-mcp-host",
		"mcp-host/allow-k8s-api-egress-mcp-host",
		"mcp-host/ctx-alpha-files-egress",
		"mcp-host/ctx-alpha-search-egress",
		"mcp-host/deny-all-mcp-host",
		"mcp-server/allow-dns-egress-mcp-server",
		"mcp-server/allow-host-context-controller-api",
		"mcp-server/allow-k8s-api-egress-mcp-server",
		"mcp-server/bind-nightly-search-runner-egress",
		"mcp-server/ctx-alpha-files",
		"mcp-server/ctx-alpha-search",
		"mcp-server/deny-all-mcp-server",
		"mcp-server/ext-egress-search-api",
		"mcp-server/ext-egress-search-docs",
		"mcp-server/ext-egress-search-www",
		"rpc-proxy/allow-dns-egress-rpc-proxy",
		"rpc-proxy/allow-hcc-api-egress-rpc-proxy",
		"rpc-proxy/allow-k8s-api-egress-rpc-proxy",
		"rpc-proxy/deny-all-rpc-proxy",
		"rpc-proxy/rpc-egress-alpha-files",
		"rpc-proxy/rpc-egress-alpha-search",
		"sandbox-recipes/allow-dns-egress-sandbox-recipes",
		"sandbox-recipes/allow-hcc-api-egress-sandbox-recipes",
		"sandbox-recipes/allow-k8s-api-egress-sandbox-recipes",
		"sandbox-recipes/bind-nightly-search-runner-ingress",
		"sandbox-recipes/deny-all-sandbox-recipes",
	}, keys(plan.Policies))

	wantTypes := map[string]string{
		"deny-all-": names.PolicyTypeDenyAll, "allow-": names.PolicyTypeInfrastructure,
		"ctx-": names.PolicyTypeContextAllow, "rpc-egress-": names.PolicyTypeRPCProxyEgress,
		"ext-egress-": names.PolicyTypeExternalEgress, "bind-": names.PolicyTypeRecipeBinding,
	}
	for _, p := range plan.Policies {
		assert.Equal(t, names.ManagedByValue, p.Labels[names.LabelManagedBy], p.Name)
		assert.NotEmpty(t, p.Spec.PolicyTypes, "%s must list its policy types", p.Name)
		assert.Equal(t, "networking.k8s.io/v1", p.APIVersion)
		assert.Equal(t, "NetworkPolicy", p.Kind)
		for prefix, policyType := range wantTypes {
			if strings.HasPrefix(p.Name, prefix) {
				assert.Equal(t, policyType, p.Labels[names.LabelPolicyType], p.Name)
			}
		}
	}
}

func TestDefaultsAreTheConfigurationOnlyPartOfThePlan(t *testing.T) {
	opts := defaultOptions(t)
	assert.Equal(t, Compute(Inventory{}, opts).Policies, Defaults(opts))

	opts.RuntimeNamespaces = append(opts.RuntimeNamespaces, "mcp-server")
	assert.Equal(t, Compute(Inventory{}, opts).Policies, Defaults(opts), "a namespace listed twice is planned once")
}

func TestInfrastructureVariants(t *testing.T) {
	tests := []struct {
		name      string
		configure func(*Options)
		namespace string
		want      []string // policy names in namespace
		check     func(t *testing.T, policies []*networkingv1.NetworkPolicy)
	}{
		{
			name:      "a minimal-infra namespace gets only deny-all and DNS egress",
			configure: func(o *Options) { o.MinimalInfraNamespaces = []string{"rpc-proxy"} },
			namespace: "rpc-proxy",
			want:      []string{"allow-dns-egress-rpc-proxy", "deny-all-rpc-proxy"},
		},
		{
			name:      "a minimal-infra namespace that is not a runtime namespace gets nothing",
			configure: func(o *Options) { o.MinimalInfraNamespaces = []string{"sandbox-ui"} },
			namespace: "sandbox-ui",
		},
		{
			name: "the shipped manifest's namespaces leave the host namespace to static manifests",
			configure: func(o *Options) {
				o.RuntimeNamespaces = []string{"mcp-server", "sandbox-recipes", "rpc-proxy", "sandbox-ui"}
				o.MinimalInfraNamespaces = []string{"sandbox-ui"}
			},
			namespace: "mcp-host",
			want:      nil,
			check: func(t *testing.T, policies []*networkingv1.NetworkPolicy) {
				assert.Equal(t, []string{"allow-dns-egress-sandbox-ui", "deny-all-sandbox-ui"}, keysIn(policies, "sandbox-ui"))
				findPolicy(t, policies, "mcp-server", names.HCCAPIIngressPolicy)
			},
		},
		{
			name:      "a runtime namespace with no discovery class gets no hcc-api egress",
			namespace: "mcp-server",
			want: []string{
				"allow-dns-egress-mcp-server", "allow-host-context-controller-api",
				"allow-k8s-api-egress-mcp-server", "deny-all-mcp-server",
			},
		},
		{
			name:      "an extra runtime namespace with no discovery class gets the opt-in API-server egress only",
			configure: func(o *Options) { o.RuntimeNamespaces = append(o.RuntimeNamespaces, "batch") },
			namespace: "batch",
			want:      []string{"allow-dns-egress-batch", "allow-k8s-api-egress-batch", "deny-all-batch"},
			check: func(t *testing.T, policies []*networkingv1.NetworkPolicy) {
				p := findPolicy(t, policies, "batch", "allow-k8s-api-egress-batch")
				assert.Equal(t, map[string]string{names.LabelK8sAPIEgress: "true"}, p.Spec.PodSelector.MatchLabels)
			},
		},
		{
			name: "a namespace configured as both host and rpc-proxy namespace uses the host discovery class",
			configure: func(o *Options) {
				o.RPCProxyNamespace = "mcp-host"
			},
			namespace: "mcp-host",
			want: []string{
				"allow-dns-egress-mcp-host", "allow-hcc-api-egress-mcp-host",
				"allow-k8s-api-egress-mcp-host", "deny-all-mcp-host",
			},
			check: func(t *testing.T, policies []*networkingv1.NetworkPolicy) {
				p := findPolicy(t, policies, "mcp-host", "allow-hcc-api-egress-mcp-host")
				require.Len(t, p.Spec.PodSelector.MatchExpressions, 1)
				assert.Equal(t, names.LabelHost, p.Spec.PodSelector.MatchExpressions[0].Key)
			},
		},
		{
			name:      "NodeLocal DNS adds a second DNS rule to its address",
			configure: func(o *Options) { o.NodeLocalDNSCIDR = netip.MustParsePrefix("169.254.20.10/32") },
			namespace: "mcp-host",
			want: []string{
				"allow-dns-egress-mcp-host", "allow-hcc-api-egress-mcp-host",
				"allow-k8s-api-egress-mcp-host", "deny-all-mcp-host",
			},
			check: func(t *testing.T, policies []*networkingv1.NetworkPolicy) {
				p := findPolicy(t, policies, "mcp-host", "allow-dns-egress-mcp-host")
				require.Len(t, p.Spec.Egress, 2)
				assert.Equal(t, &networkingv1.IPBlock{CIDR: "169.254.20.10/32"}, p.Spec.Egress[1].To[0].IPBlock)
				assert.Equal(t, dnsPorts(), p.Spec.Egress[1].Ports)
			},
		},
		{
			name:      "without NodeLocal DNS there is one DNS rule",
			namespace: "mcp-host",
			want: []string{
				"allow-dns-egress-mcp-host", "allow-hcc-api-egress-mcp-host",
				"allow-k8s-api-egress-mcp-host", "deny-all-mcp-host",
			},
			check: func(t *testing.T, policies []*networkingv1.NetworkPolicy) {
				assert.Len(t, findPolicy(t, policies, "mcp-host", "allow-dns-egress-mcp-host").Spec.Egress, 1)
			},
		},
		{
			name: "every API-server CIDR of either family is one ipBlock",
			configure: func(o *Options) {
				o.K8sAPICIDRs = []netip.Prefix{netip.MustParsePrefix("172.20.0.1/32"), netip.MustParsePrefix("fd00:10:96::1/128"), netip.MustParsePrefix("10.0.0.0/24")}
			},
			namespace: "mcp-host",
			want: []string{
				"allow-dns-egress-mcp-host", "allow-hcc-api-egress-mcp-host",
				"allow-k8s-api-egress-mcp-host", "deny-all-mcp-host",
			},
			check: func(t *testing.T, policies []*networkingv1.NetworkPolicy) {
				p := findPolicy(t, policies, "mcp-host", "allow-k8s-api-egress-mcp-host")
				require.Len(t, p.Spec.Egress, 1)
				var cidrs []string
				for _, peer := range p.Spec.Egress[0].To {
					cidrs = append(cidrs, peer.IPBlock.CIDR)
				}
				assert.Equal(t, []string{"172.20.0.1/32", "fd00:10:96::1/128", "10.0.0.0/24"}, cidrs)
			},
		},
		{
			name:      "no API-server CIDR means no API-server egress rather than a rule open to every address",
			configure: func(o *Options) { o.K8sAPICIDRs = nil },
			namespace: "mcp-host",
			want:      []string{"allow-dns-egress-mcp-host", "allow-hcc-api-egress-mcp-host", "deny-all-mcp-host"},
		},
		{
			name:      "the API port follows the configuration",
			configure: func(o *Options) { o.APIPort = 9443 },
			namespace: "rpc-proxy",
			want: []string{
				"allow-dns-egress-rpc-proxy", "allow-hcc-api-egress-rpc-proxy",
				"allow-k8s-api-egress-rpc-proxy", "deny-all-rpc-proxy",
			},
			check: func(t *testing.T, policies []*networkingv1.NetworkPolicy) {
				p := findPolicy(t, policies, "rpc-proxy", "allow-hcc-api-egress-rpc-proxy")
				assert.Equal(t, int32(9443), p.Spec.Egress[0].Ports[0].Port.IntVal)
				p = findPolicy(t, policies, "mcp-server", names.HCCAPIIngressPolicy)
				assert.Equal(t, int32(9443), p.Spec.Ingress[0].Ports[0].Port.IntVal)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opts := defaultOptions(t)
			if tc.configure != nil {
				tc.configure(&opts)
			}
			policies := Compute(Inventory{}, opts).Policies
			assert.Equal(t, tc.want, keysIn(policies, tc.namespace))
			if tc.check != nil {
				tc.check(t, policies)
			}
		})
	}
}

func TestContextPolicies(t *testing.T) {
	servers := []*clerumv1alpha1.McpServer{
		newServer("search"),
		newServer("files", withPort(8080)),
		newServer("retired", disabled),
		newServer("rpc-proxy"), // a name reserved for a platform workload
	}
	tests := []struct {
		name     string
		contexts []*clerumv1alpha1.Context
		want     []string
	}{
		{
			name:     "each existing enabled server of a Context gets its ingress, Host egress and rpc-proxy egress",
			contexts: []*clerumv1alpha1.Context{newContext("alpha", "alpha", 0, "search", "files")},
			want: []string{
				"mcp-host/ctx-alpha-files-egress", "mcp-host/ctx-alpha-search-egress",
				"mcp-server/ctx-alpha-files", "mcp-server/ctx-alpha-search",
				"rpc-proxy/rpc-egress-alpha-files", "rpc-proxy/rpc-egress-alpha-search",
			},
		},
		{
			name:     "a server that does not exist produces nothing",
			contexts: []*clerumv1alpha1.Context{newContext("alpha", "alpha", 0, "search", "ghost")},
			want:     []string{"mcp-host/ctx-alpha-search-egress", "mcp-server/ctx-alpha-search", "rpc-proxy/rpc-egress-alpha-search"},
		},
		{
			name:     "a disabled server produces nothing",
			contexts: []*clerumv1alpha1.Context{newContext("alpha", "alpha", 0, "retired")},
		},
		{
			name:     "a server named like a platform workload produces nothing: its pods would be selected as that workload's",
			contexts: []*clerumv1alpha1.Context{newContext("alpha", "alpha", 0, "rpc-proxy")},
		},
		{
			name:     "a server listed twice is planned once",
			contexts: []*clerumv1alpha1.Context{newContext("alpha", "alpha", 0, "search", "search")},
			want:     []string{"mcp-host/ctx-alpha-search-egress", "mcp-server/ctx-alpha-search", "rpc-proxy/rpc-egress-alpha-search"},
		},
		{
			name: "two Contexts granting one server get separate routes",
			contexts: []*clerumv1alpha1.Context{
				newContext("alpha", "alpha", 0, "search"),
				newContext("beta", "beta", 1, "search"),
			},
			want: []string{
				"mcp-host/ctx-alpha-search-egress", "mcp-host/ctx-beta-search-egress",
				"mcp-server/ctx-alpha-search", "mcp-server/ctx-beta-search",
				"rpc-proxy/rpc-egress-alpha-search", "rpc-proxy/rpc-egress-beta-search",
			},
		},
		{
			name:     "a Context whose contextId is not a DNS label selects no pod and is skipped",
			contexts: []*clerumv1alpha1.Context{newContext("alpha", "Not_A_Label", 0, "search")},
		},
		{
			name:     "a Context with no servers produces nothing",
			contexts: []*clerumv1alpha1.Context{newContext("alpha", "alpha", 0)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := Compute(Inventory{Contexts: tc.contexts, Servers: servers}, defaultOptions(t))
			assert.Equal(t, tc.want, keys(contextPolicies(plan.Policies)))
			assert.Empty(t, plan.Rejections)
		})
	}
}

// contextPolicies keeps the L2 policies.
func contextPolicies(policies []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, p := range policies {
		switch p.Labels[names.LabelPolicyType] {
		case names.PolicyTypeContextAllow, names.PolicyTypeRPCProxyEgress:
			out = append(out, p)
		}
	}
	return out
}

func TestRemovingAServerFromAContextRemovesOnlyItsPolicies(t *testing.T) {
	servers := []*clerumv1alpha1.McpServer{newServer("search"), newServer("files")}
	opts := defaultOptions(t)
	before := Compute(Inventory{Contexts: []*clerumv1alpha1.Context{newContext("alpha", "alpha", 0, "search", "files")}, Servers: servers}, opts)
	after := Compute(Inventory{Contexts: []*clerumv1alpha1.Context{newContext("alpha", "alpha", 0, "search")}, Servers: servers}, opts)

	var gone []string
	for _, k := range keys(before.Policies) {
		if !slices.Contains(keys(after.Policies), k) {
			gone = append(gone, k)
		}
	}
	assert.Equal(t, []string{"mcp-host/ctx-alpha-files-egress", "mcp-server/ctx-alpha-files", "rpc-proxy/rpc-egress-alpha-files"}, gone)
	assert.Len(t, after.Policies, len(before.Policies)-3)
	for _, p := range after.Policies {
		assert.Equal(t, p, findPolicy(t, before.Policies, p.Namespace, p.Name), "unchanged policies are identical")
	}
}

func TestDuplicateContextIDs(t *testing.T) {
	servers := []*clerumv1alpha1.McpServer{newServer("search"), newServer("files")}
	tests := []struct {
		name          string
		contexts      []*clerumv1alpha1.Context
		wantConflicts []ContextConflict
		wantServer    string // the server whose route the contextId carries
	}{
		{
			name: "the oldest Context keeps the contextId",
			contexts: []*clerumv1alpha1.Context{
				newContext("newer", "shared", 5, "files"),
				newContext("older", "shared", 1, "search"),
			},
			wantConflicts: []ContextConflict{{Context: "newer", ContextID: "shared", HeldBy: "older"}},
			wantServer:    "search",
		},
		{
			name: "between Contexts created at once the smallest name keeps it",
			contexts: []*clerumv1alpha1.Context{
				newContext("b", "shared", 1, "files"),
				newContext("a", "shared", 1, "search"),
				newContext("c", "shared", 1, "files"),
			},
			wantConflicts: []ContextConflict{
				{Context: "b", ContextID: "shared", HeldBy: "a"},
				{Context: "c", ContextID: "shared", HeldBy: "a"},
			},
			wantServer: "search",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 5 {
				contexts := slices.Clone(tc.contexts)
				rand.New(rand.NewPCG(uint64(i), 0)).Shuffle(len(contexts), func(a, b int) { contexts[a], contexts[b] = contexts[b], contexts[a] })

				plan := Compute(Inventory{Contexts: contexts, Servers: servers}, defaultOptions(t))
				assert.Equal(t, tc.wantConflicts, plan.Conflicts)
				assert.Equal(t, []string{
					"mcp-host/ctx-shared-" + tc.wantServer + "-egress",
					"mcp-server/ctx-shared-" + tc.wantServer,
					"rpc-proxy/rpc-egress-shared-" + tc.wantServer,
				}, keys(contextPolicies(plan.Policies)))
			}
		})
	}
}

func TestCollidingNamesKeepOnePolicyAndReportTheOther(t *testing.T) {
	// "ctx-" + "a-b" + "-" + "c" and "ctx-" + "a" + "-" + "b-c" are one name.
	inv := Inventory{
		Contexts: []*clerumv1alpha1.Context{
			newContext("first", "a-b", 0, "c"),
			newContext("second", "a", 1, "b-c"),
		},
		Servers: []*clerumv1alpha1.McpServer{newServer("c"), newServer("b-c")},
	}
	plan := Compute(inv, defaultOptions(t))

	assert.Equal(t, []string{"mcp-host/ctx-a-b-c-egress", "mcp-server/ctx-a-b-c", "rpc-proxy/rpc-egress-a-b-c"}, keys(contextPolicies(plan.Policies)))
	ingress := findPolicy(t, plan.Policies, "mcp-server", "ctx-a-b-c")
	assert.Equal(t, "b-c", ingress.Spec.PodSelector.MatchLabels[names.LabelMcpServer], "the smaller owner (server b-c) keeps the name")

	require.Len(t, plan.Rejections, 3)
	for _, r := range plan.Rejections {
		assert.Equal(t, "c", r.Server)
		assert.Equal(t, "context:a-b", r.Binding)
		assert.Contains(t, r.Reason, "already planned for server b-c, context:a")
	}
}

func TestLongNamesStayValidAndDistinct(t *testing.T) {
	label := func(c byte) string { return strings.Repeat(string(c), validation.DNS1123LabelMaxLength) }
	id, s1, s2 := label('c'), label('s'), label('t')
	inv := Inventory{
		Contexts: []*clerumv1alpha1.Context{newContext("long", id, 0, s1, s2)},
		Servers: []*clerumv1alpha1.McpServer{
			newServer(s1,
				withBindings(publicWebBinding(label('b'))),
				withRecipeBindings(fmt.Sprintf(`[{"recipe":%q,"from":%q,"to":%q,"port":1}]`, label('r'), s1, label('w')))),
			newServer(s2),
		},
	}
	plan := Compute(inv, defaultOptions(t))
	require.Empty(t, plan.Rejections)
	assert.Len(t, plan.Policies, len(Defaults(defaultOptions(t)))+2*3+1+2)
	seen := map[string]bool{}
	for _, p := range plan.Policies {
		assert.LessOrEqual(t, len(p.Name), names.MaxObjectName)
		assert.Empty(t, validation.IsDNS1123Subdomain(p.Name), p.Name)
		assert.False(t, seen[p.Namespace+"/"+p.Name], "%s is planned twice", p.Name)
		seen[p.Namespace+"/"+p.Name] = true
	}

	// Names built from labels always fit; a name that would not is shortened
	// by pkg/names rather than rejected.
	long := strings.Repeat("x", 300)
	_, p, _ := buildContextAllows(long, s1, 3000, defaultOptions(t))
	assert.Len(t, p.Name, names.MaxObjectName)
	assert.Equal(t, names.ContextEgressPolicy(long, s1), p.Name)
	assert.Empty(t, validation.IsDNS1123Subdomain(p.Name))
}

// largeInventory is n Contexts each granting perContext of servers shared
// servers, every server with a public-web and a CIDR binding, every tenth
// with a hostname binding and a recipe binding.
func largeInventory(n, perContext, servers int) Inventory {
	inv := Inventory{}
	raw := map[string]map[string][]netip.Addr{}
	for i := range servers {
		name := fmt.Sprintf("server-%03d", i)
		opts := []func(*clerumv1alpha1.McpServer){
			withPort(int32(3000 + i)),
			withBindings(publicWebBinding("www"), cidrBinding("api", fmt.Sprintf("8.8.%d.0/24", i%256), 443)),
		}
		if i%10 == 0 {
			opts = append(opts,
				withBindings(hostBinding("docs", "docs.example.com", 443)),
				withRecipeBindings(fmt.Sprintf(`[{"recipe":"r","from":%q,"to":"w","port":9000},{"recipe":"r","from":%q,"to":"w","port":9001,"protocol":"UDP"}]`, name, name)))
			raw[name] = map[string][]netip.Addr{"docs": addrs("93.184.216.34", "2606:2800:220:1::1", "93.184.216.35")}
		}
		inv.Servers = append(inv.Servers, newServer(name, opts...))
	}
	for i := range n {
		granted := make([]string, perContext)
		for j := range granted {
			granted[j] = fmt.Sprintf("server-%03d", (i+j*7)%servers)
		}
		inv.Contexts = append(inv.Contexts, newContext(fmt.Sprintf("context-%04d", i), fmt.Sprintf("ctx%04d", i), i%17, granted...))
	}
	inv.Resolved = answers(inv.Servers, raw)
	return inv
}

func TestComputeIsDeterministic(t *testing.T) {
	opts := defaultOptions(t)
	inv := largeInventory(50, 5, 20)
	inv.Contexts = append(inv.Contexts, newContext("dup", "ctx0001", 0, "server-001"))
	want := Compute(inv, opts)

	rng := rand.New(rand.NewPCG(1, 2))
	for range 10 {
		shuffled := Inventory{
			Contexts: slices.Clone(inv.Contexts),
			Servers:  slices.Clone(inv.Servers),
			Resolved: map[string]map[string]Resolution{},
		}
		rng.Shuffle(len(shuffled.Contexts), func(a, b int) {
			shuffled.Contexts[a], shuffled.Contexts[b] = shuffled.Contexts[b], shuffled.Contexts[a]
		})
		rng.Shuffle(len(shuffled.Servers), func(a, b int) {
			shuffled.Servers[a], shuffled.Servers[b] = shuffled.Servers[b], shuffled.Servers[a]
		})
		for server, bindings := range inv.Resolved {
			shuffled.Resolved[server] = map[string]Resolution{}
			for binding, answer := range bindings {
				answer.Addrs = slices.Clone(answer.Addrs)
				rng.Shuffle(len(answer.Addrs), func(a, b int) { answer.Addrs[a], answer.Addrs[b] = answer.Addrs[b], answer.Addrs[a] })
				shuffled.Resolved[server][binding] = answer
			}
		}
		require.Equal(t, want, Compute(shuffled, opts))
	}
}

func TestComputeDoesNotMutateItsInput(t *testing.T) {
	inv := largeInventory(10, 3, 10)
	before := toYAML(t, inv)
	Compute(inv, defaultOptions(t))
	assert.Equal(t, before, toYAML(t, inv))
}

func TestPlannedPoliciesShareNoMemory(t *testing.T) {
	// Clients may mutate what they are handed; one policy's edit must not
	// leak into another.
	plan := Compute(richInventory(), defaultOptions(t))
	for _, p := range plan.Policies {
		p.Labels["edited"] = "yes"
		if p.Spec.PodSelector.MatchLabels != nil {
			p.Spec.PodSelector.MatchLabels["edited"] = "yes"
		}
		for i := range p.Spec.Egress {
			for j := range p.Spec.Egress[i].To {
				if b := p.Spec.Egress[i].To[j].IPBlock; b != nil && len(b.Except) > 0 {
					b.Except[0] = "edited"
				}
			}
		}
	}
	fresh := Compute(richInventory(), defaultOptions(t))
	for _, p := range fresh.Policies {
		assert.NotContains(t, toYAML(t, p), "edited")
	}
}
