package netpol

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// defaultOptions are the planner options of an environment that sets no
// variable: the compiled defaults.
// defaultOptions are the planner options of the default configuration
// (pkg/controllers/netpol/planopts TestPlanOptionsOfTheDefaultConfiguration
// pins the same values).
func defaultOptions(testing.TB) Options {
	return Options{
		McpServerNamespace:    "mcp-server",
		HostNamespace:         "mcp-host",
		RPCProxyNamespace:     "rpc-proxy",
		ControlPlaneNamespace: "control-plane",
		SandboxNamespace:      "sandbox-recipes",
		RuntimeNamespaces:     []string{"mcp-server", "mcp-host", "sandbox-recipes", "rpc-proxy"},
		K8sAPICIDRs:           []netip.Prefix{netip.MustParsePrefix("10.96.0.1/32")},
		APIPort:               8081,
		ClusterDomain:         "cluster.local",
	}
}

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func newServer(name string, opts ...func(*clerumv1alpha1.McpServer)) *clerumv1alpha1.McpServer {
	s := &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name},
		Spec: clerumv1alpha1.McpServerSpec{
			Image:     "example.com/" + name,
			Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportStreamableHTTP},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func withPort(port int32) func(*clerumv1alpha1.McpServer) {
	return func(s *clerumv1alpha1.McpServer) { s.Spec.Transport.Port = ptr.To(port) }
}

func disabled(s *clerumv1alpha1.McpServer) { s.Spec.Enabled = ptr.To(false) }

func withBindings(bindings ...clerumv1alpha1.EgressBinding) func(*clerumv1alpha1.McpServer) {
	return func(s *clerumv1alpha1.McpServer) { s.Spec.EgressBindings = append(s.Spec.EgressBindings, bindings...) }
}

func withRecipeBindings(annotation string) func(*clerumv1alpha1.McpServer) {
	return func(s *clerumv1alpha1.McpServer) {
		s.Annotations = map[string]string{names.AnnotationRecipeBindings: annotation}
	}
}

func cidrBinding(name, cidr string, port int32) clerumv1alpha1.EgressBinding {
	return clerumv1alpha1.EgressBinding{Name: name, CIDR: cidr, Port: ptr.To(port)}
}

func hostBinding(name, host string, port int32) clerumv1alpha1.EgressBinding {
	return clerumv1alpha1.EgressBinding{Name: name, Host: host, Port: ptr.To(port)}
}

func publicWebBinding(name string) clerumv1alpha1.EgressBinding {
	return clerumv1alpha1.EgressBinding{Name: name, Mode: clerumv1alpha1.EgressModePublicWeb}
}

// newContext returns a Context created age minutes after epoch.
func newContext(name, contextID string, age int, servers ...string) *clerumv1alpha1.Context {
	return &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         "mcp-server",
			Name:              name,
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Minute)),
		},
		Spec: clerumv1alpha1.ContextSpec{ContextID: contextID, McpServers: servers},
	}
}

// answers turns addresses per server and binding name into the
// Resolutions the coordinator publishes for those servers' bindings.
func answers(servers []*clerumv1alpha1.McpServer, raw map[string]map[string][]netip.Addr) map[string]map[string]Resolution {
	out := map[string]map[string]Resolution{}
	for _, s := range servers {
		for i := range s.Spec.EgressBindings {
			b := &s.Spec.EgressBindings[i]
			if a, ok := raw[s.Name][b.Name]; ok {
				if out[s.Name] == nil {
					out[s.Name] = map[string]Resolution{}
				}
				out[s.Name][b.Name] = ResolutionFor(s, b, a)
			}
		}
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// keys lists policies as namespace/name.
func keys(policies []*networkingv1.NetworkPolicy) []string {
	var out []string
	for _, p := range policies {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// keysIn lists the names of the policies in namespace ns.
func keysIn(policies []*networkingv1.NetworkPolicy, ns string) []string {
	var out []string
	for _, p := range policies {
		if p.Namespace == ns {
			out = append(out, p.Name)
		}
	}
	return out
}

func findPolicy(t testing.TB, policies []*networkingv1.NetworkPolicy, ns, name string) *networkingv1.NetworkPolicy {
	t.Helper()
	for _, p := range policies {
		if p.Namespace == ns && p.Name == name {
			return p
		}
	}
	require.Failf(t, "policy not planned", "%s/%s not in %v", ns, name, keys(policies))
	return nil
}

func toYAML(t testing.TB, obj any) string {
	t.Helper()
	b, err := yaml.Marshal(obj)
	require.NoError(t, err)
	return string(b)
}

// dedent strips the common leading tabs of a raw-string YAML literal.
func dedent(s string) string {
	lines := strings.Split(strings.TrimPrefix(s, "\n"), "\n")
	indent := len(lines[0]) - len(strings.TrimLeft(lines[0], "\t"))
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, strings.Repeat("\t", indent))
	}
	return strings.Join(lines, "\n")
}
