// Package deploy tests the kustomize trees under deploy/: what
// `kubectl apply -k deploy/` (production) and
// `kubectl apply -k deploy/overlays/minikube` install, built with the same
// kustomize library kubectl embeds (docs/deploy.md).
package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/names"
)

// The names every build must hold.
const (
	controller = "hcc-controller"
	api        = "hcc-api"
)

// staticPolicies are the NetworkPolicies base ships, by namespace.
var staticPolicies = map[string][]string{
	"control-plane": {"hcc-api-egress", "hcc-api-ingress", "hcc-controller-egress", "hcc-controller-ingress"},
	"mcp-host": {
		"mcp-host-channel-reader-ingress", "mcp-host-default-deny", "mcp-host-dns-egress",
		"mcp-host-gateway-egress", "mcp-host-hcc-api-egress", "mcp-host-internet-egress",
		"mcp-host-k8s-api-egress",
	},
}

// platformNamespaces are the namespaces the minikube overlay creates: the
// defaults of the namespace variables (pkg/config) and the runtime list
// controller/deployment.yaml sets.
var platformNamespaces = []string{
	"channels", "control-plane", "gfs", "mcp-host", "mcp-server", "rpc-proxy", "sandbox-recipes", "sandbox-ui",
}

func TestProductionInstallCreatesNoNamespace(t *testing.T) {
	for _, tree := range []string{productionTree, baseTree} {
		assert.Empty(t, ofKind(build(t, tree), "Namespace"),
			"%s must create no Namespace: `kubectl delete -k` would delete it and all in it", tree)
	}
}

func TestProductionInstallIsBase(t *testing.T) {
	assert.Equal(t, build(t, baseTree), build(t, productionTree), "deploy/ installs exactly deploy/base")
}

func TestProductionWorkloads(t *testing.T) {
	objs := build(t, productionTree)

	for _, name := range []string{controller, api} {
		var d appsv1.Deployment
		typed(t, find(t, objs, "Deployment", name), &d)
		assert.Equal(t, "control-plane", d.Namespace)
		require.NotNil(t, d.Spec.Replicas)
		assert.EqualValues(t, 2, *d.Spec.Replicas, "%s runs two replicas", name)

		var pdb policyv1.PodDisruptionBudget
		typed(t, find(t, objs, "PodDisruptionBudget", name), &pdb)
		assert.Equal(t, d.Spec.Selector, pdb.Spec.Selector, "the %s budget covers its pods", name)
		budget := pdb.Spec.MaxUnavailable
		if budget == nil {
			budget = pdb.Spec.MinAvailable
		}
		assert.Equal(t, ptrTo(intstr.FromInt32(1)), budget, "%s: one pod may be disrupted, one stays", name)
	}

	require.Len(t, ofKind(objs, "HorizontalPodAutoscaler"), 1)
	hpa := find(t, objs, "HorizontalPodAutoscaler", api)
	assert.Equal(t, "autoscaling/v2", hpa.GetAPIVersion())
	var h autoscalingv2.HorizontalPodAutoscaler
	typed(t, hpa, &h)
	assert.Equal(t, autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: api}, h.Spec.ScaleTargetRef)
	require.NotNil(t, h.Spec.MinReplicas)
	assert.EqualValues(t, 2, *h.Spec.MinReplicas, "the autoscaler never goes below the budget's two")
	assert.Greater(t, h.Spec.MaxReplicas, int32(2))
	require.Len(t, h.Spec.Metrics, 1)
	assert.Equal(t, corev1.ResourceCPU, h.Spec.Metrics[0].Resource.Name)
	assert.Equal(t, autoscalingv2.UtilizationMetricType, h.Spec.Metrics[0].Resource.Target.Type)

	got := map[string][]string{}
	for _, p := range ofKind(objs, "NetworkPolicy") {
		got[p.GetNamespace()] = append(got[p.GetNamespace()], p.GetName())
	}
	for ns := range got {
		slices.Sort(got[ns])
	}
	assert.Equal(t, staticPolicies, got)
}

// TestContainersAreHardened: every container of every build has requests,
// both probes, and runs non-root as 65532 on a read-only root file system
// with no capability.
func TestContainersAreHardened(t *testing.T) {
	for _, tree := range []string{productionTree, minikubeTree} {
		for name, pod := range podSpecs(t, build(t, tree)) {
			at := tree + ": " + name
			require.NotNil(t, pod.SecurityContext, at)
			assert.Equal(t, ptrTo(true), pod.SecurityContext.RunAsNonRoot, at)
			assert.Equal(t, ptrTo(int64(65532)), pod.SecurityContext.RunAsUser, at)
			require.NotNil(t, pod.SecurityContext.SeccompProfile, at)
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type, at)
			// Both binaries read the API server with their own account.
			assert.Equal(t, ptrTo(true), pod.AutomountServiceAccountToken, at)
			assert.Empty(t, pod.InitContainers, at)
			require.NotEmpty(t, pod.Containers, at)
			for _, c := range pod.Containers {
				at := at + "/" + c.Name
				assert.False(t, c.Resources.Requests.Cpu().IsZero(), "%s: no CPU request", at)
				assert.False(t, c.Resources.Requests.Memory().IsZero(), "%s: no memory request", at)
				assert.NotNil(t, c.LivenessProbe, "%s: no liveness probe", at)
				assert.NotNil(t, c.ReadinessProbe, "%s: no readiness probe", at)
				sc := c.SecurityContext
				require.NotNil(t, sc, at)
				assert.Equal(t, ptrTo(true), sc.RunAsNonRoot, at)
				assert.Equal(t, ptrTo(true), sc.ReadOnlyRootFilesystem, at)
				assert.Equal(t, ptrTo(false), sc.AllowPrivilegeEscalation, at)
				assert.Nil(t, sc.Privileged, at)
				require.NotNil(t, sc.Capabilities, at)
				assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, at)
				assert.Empty(t, sc.Capabilities.Add, at)
			}
		}
	}
}

// TestConfigurationIsLiteralEnv: configuration values are literal env
// entries of the Deployments (pkg/config/deploy_test.go reads them), never
// envFrom a ConfigMap. Only identity, secrets and the Control API's public
// key are references.
func TestConfigurationIsLiteralEnv(t *testing.T) {
	references := []string{"POD_NAME", "INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "HCC_MCP_HOST_JWT_PUBLIC_KEY", "CONTEXT_MAPPER_DESKTOP_API_TOKEN"}
	for _, tree := range []string{productionTree, minikubeTree} {
		for name, pod := range podSpecs(t, build(t, tree)) {
			for _, c := range pod.Containers {
				at := tree + ": " + name + "/" + c.Name
				assert.Empty(t, c.EnvFrom, "%s: envFrom", at)
				for _, e := range c.Env {
					if e.ValueFrom != nil {
						assert.Contains(t, references, e.Name, "%s: %s is not a literal value", at, e.Name)
					}
				}
			}
		}
	}
}

func TestControllerLeaderElectionEnvironment(t *testing.T) {
	for _, tree := range []string{productionTree, minikubeTree} {
		env := literalEnv(t, podSpecs(t, build(t, tree))[controller], controller)
		// The defaults of docs/configuration.md, written out.
		assert.Equal(t, "15", env["HCC_LEADER_LEASE_SEC"], tree)
		assert.Equal(t, "10", env["HCC_LEADER_RENEW_SEC"], tree)
		assert.Equal(t, "2", env["HCC_LEADER_RETRY_SEC"], tree)
		_, off := env["HCC_LEADER_ELECT"]
		assert.False(t, off, "%s: two replicas need leader election", tree)
	}
}

// TestNetworkPoliciesAreOutsideHCCsNames: the static policies are the
// platform's. HCC writes and sweeps only policies labelled as its own, and
// relabels or sweeps unlabelled ones only under a name it reserves
// (docs/ownership.md): these must be neither.
func TestNetworkPoliciesAreOutsideHCCsNames(t *testing.T) {
	for _, tree := range []string{productionTree, minikubeTree} {
		for _, p := range ofKind(build(t, tree), "NetworkPolicy") {
			at := tree + ": " + p.GetNamespace() + "/" + p.GetName()
			assert.NotContains(t, p.GetLabels(), names.LabelManagedBy, at)
			assert.NotContains(t, p.GetLabels(), names.LabelPolicyType, at)
			for _, w := range names.PolicyWriters() {
				typ, reserved := names.ReservedPolicyType(w, p.GetName())
				assert.False(t, reserved, "%s: a name the %s writer reserves (type %s)", at, w, typ)
			}
		}
	}
}

// TestNetworkPolicyRulesNamePortsAndPeers: a rule without ports allows
// every port, one without peers every address. Each rule names its ports;
// only the API-server rules of HCC's own pods name no peer (see
// base/controller/networkpolicy.yaml for why).
func TestNetworkPolicyRulesNamePortsAndPeers(t *testing.T) {
	anyPeer := map[string]bool{"control-plane/hcc-api-egress": true, "control-plane/hcc-controller-egress": true}
	for _, tree := range []string{productionTree, minikubeTree} {
		for _, o := range ofKind(build(t, tree), "NetworkPolicy") {
			var p networkingv1.NetworkPolicy
			typed(t, o, &p)
			at := tree + ": " + p.Namespace + "/" + p.Name
			assert.NotEmpty(t, p.Spec.PolicyTypes, "%s: policyTypes must be explicit", at)
			for _, r := range p.Spec.Ingress {
				assert.NotEmpty(t, r.Ports, at)
				assert.NotEmpty(t, r.From, at)
			}
			for _, r := range p.Spec.Egress {
				assert.NotEmpty(t, r.Ports, at)
				if len(r.To) == 0 {
					assert.True(t, anyPeer[p.Namespace+"/"+p.Name], "%s: an egress rule to every address", at)
					for _, port := range r.Ports {
						assert.Contains(t, []int32{443, 6443, 8443}, port.Port.IntVal, "%s: only the API server's ports go anywhere", at)
					}
				}
			}
		}
	}
}

func TestMcpHostIsDeniedByDefault(t *testing.T) {
	objs := build(t, productionTree)

	var deny networkingv1.NetworkPolicy
	typed(t, find(t, objs, "NetworkPolicy", "mcp-host-default-deny"), &deny)
	assert.Equal(t, "mcp-host", deny.Namespace)
	assert.Empty(t, deny.Spec.PodSelector.MatchLabels)
	assert.Empty(t, deny.Spec.PodSelector.MatchExpressions)
	assert.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, deny.Spec.PolicyTypes)
	assert.Empty(t, deny.Spec.Ingress)
	assert.Empty(t, deny.Spec.Egress)

	// Base's except list is every IPv4 range HCC's own public-web egress
	// never opens: the same safe default, with no cluster range (only an
	// overlay knows those).
	except := internetExcept(t, objs)
	assert.ElementsMatch(t, publicEgressExceptionsV4(), except)
	for _, must := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8", "0.0.0.0/8", "198.18.0.0/15"} {
		assert.Contains(t, except, must)
	}

	// The API-server rule of mcp-host is an ipBlock: a rule to every address
	// on 443 would void the carve-outs above, since allows add up.
	var k8s networkingv1.NetworkPolicy
	typed(t, find(t, objs, "NetworkPolicy", "mcp-host-k8s-api-egress"), &k8s)
	for _, r := range k8s.Spec.Egress {
		require.NotEmpty(t, r.To)
		for _, peer := range r.To {
			require.NotNil(t, peer.IPBlock)
			assert.NotEqual(t, "0.0.0.0/0", peer.IPBlock.CIDR)
		}
	}
}

func TestMinikubeOverlayCreatesThePlatformNamespaces(t *testing.T) {
	restricted := []string{"channels", "gfs", "mcp-host", "mcp-server"}
	var got []string
	for _, o := range ofKind(build(t, minikubeTree), "Namespace") {
		got = append(got, o.GetName())
		enforce := o.GetLabels()["pod-security.kubernetes.io/enforce"]
		want := "baseline"
		if slices.Contains(restricted, o.GetName()) {
			want = "restricted"
		}
		assert.Equal(t, want, enforce, "Pod Security of %s", o.GetName())
		assert.Equal(t, "restricted", o.GetLabels()["pod-security.kubernetes.io/warn"], o.GetName())
	}
	assert.ElementsMatch(t, platformNamespaces, got)
}

func TestMinikubeOverlayHoldsBase(t *testing.T) {
	overlay := map[string]bool{}
	for _, o := range build(t, minikubeTree) {
		overlay[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = true
	}
	for _, o := range build(t, productionTree) {
		assert.True(t, overlay[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()], "%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	var configMaps []string
	for _, o := range ofKind(build(t, minikubeTree), "ConfigMap") {
		configMaps = append(configMaps, o.GetNamespace()+"/"+o.GetName())
	}
	assert.Equal(t, []string{"mcp-host/mcp-host-config"}, configMaps, "base's one ConfigMap; the overlay's variables are local-config: never applied")
}

func TestMinikubeOverlayValues(t *testing.T) {
	objs := build(t, minikubeTree)
	pods := podSpecs(t, objs)
	for name, pod := range pods {
		for _, c := range pod.Containers {
			assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy, "%s/%s", name, c.Name)
		}
	}

	// The controller's configuration, read the way the controller reads it.
	cfg, err := config.LoadFrom(config.Render, lookup(literalEnv(t, pods[controller], controller)))
	require.NoError(t, err)
	assert.Equal(t, "standard", cfg.Host.WorkspaceStorageClass)
	assert.Empty(t, cfg.Host.ImagePullSecret)
	assert.Empty(t, cfg.WFC.ImagePullSecret)
	assert.Empty(t, cfg.GFS.ImagePullSecret)
	for what, policy := range map[string]corev1.PullPolicy{
		"Host": cfg.Host.ImagePullPolicy, "channel-reader": cfg.ChannelReader.ImagePullPolicy,
		"McpServer": cfg.McpServer.ImagePullPolicy, "WFC": cfg.WFC.ImagePullPolicy, "gfsc": cfg.GFS.ImagePullPolicy,
	} {
		assert.Equal(t, corev1.PullIfNotPresent, policy, what)
	}
	// The base's shipped values survive the patch (entries merge by name).
	assert.Equal(t, []string{"mcp-server", "sandbox-recipes", "rpc-proxy", "sandbox-ui"}, cfg.NetPol.RuntimeNamespaces)

	var k8s networkingv1.NetworkPolicy
	typed(t, find(t, objs, "NetworkPolicy", "mcp-host-k8s-api-egress"), &k8s)
	assert.Equal(t, "192.168.49.2/32", k8s.Spec.Egress[0].To[0].IPBlock.CIDR, "the overlay's apiServerCIDR")

	// The cluster's ranges: the controller's HCC_EGRESS_DENY_CIDRS
	// (egressDenyCIDRs), and the same ranges on top of base's list in the
	// except list of mcp-host-internet-egress (internetEgressExcept).
	var deny []string
	for _, p := range cfg.NetPol.EgressDenyCIDRs {
		deny = append(deny, p.String())
	}
	assert.Equal(t, []string{"10.244.0.0/16", "10.96.0.0/12", "192.168.49.0/24"}, deny, "the overlay's egressDenyCIDRs")
	assert.ElementsMatch(t, append(publicEgressExceptionsV4(), deny...), internetExcept(t, objs), "the overlay's internetEgressExcept")
}

// TestMonitoringNamespaceIsAnOverlayVariable changes the overlay's
// monitoringNamespace in a copy of deploy/ and checks that both scrape
// rules follow it.
func TestMonitoringNamespaceIsAnOverlayVariable(t *testing.T) {
	objs := buildWithVariables(t, "monitoringNamespace: monitoring", "monitoringNamespace: prometheus")
	scrapers := func(name string) []string {
		var p networkingv1.NetworkPolicy
		typed(t, find(t, objs, "NetworkPolicy", name), &p)
		var out []string
		for _, r := range p.Spec.Ingress {
			for _, peer := range r.From {
				if peer.PodSelector == nil && peer.NamespaceSelector != nil {
					out = append(out, peer.NamespaceSelector.MatchLabels[names.NamespaceNameKey])
				}
			}
		}
		return out
	}
	assert.Equal(t, []string{"prometheus"}, scrapers("hcc-api-ingress"))
	assert.Equal(t, []string{"prometheus"}, scrapers("hcc-controller-ingress"))
	// Base, which no overlay variable reaches, keeps the default.
	objs = build(t, productionTree)
	assert.Equal(t, []string{"monitoring"}, scrapers("hcc-controller-ingress"))
}

// buildWithVariables builds the minikube overlay from an in-memory copy of
// deploy/ whose variables.yaml has old replaced by new.
func buildWithVariables(t *testing.T, old, new string) []*unstructured.Unstructured {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	root := repoRoot(t)
	require.NoError(t, filepath.WalkDir(filepath.Join(root, "deploy"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return mem.WriteFile(path, raw)
	}))
	vars := filepath.Join(root, minikubeTree, "variables.yaml")
	raw, err := mem.ReadFile(vars)
	require.NoError(t, err)
	changed := strings.Replace(string(raw), old, new, 1)
	require.NotEqual(t, string(raw), changed, "variables.yaml holds no %q", old)
	require.NoError(t, mem.WriteFile(vars, []byte(changed)))
	return buildIn(t, mem, filepath.Join(root, minikubeTree))
}

// literalEnv is the literal env of the named container.
func literalEnv(t *testing.T, pod corev1.PodSpec, container string) map[string]string {
	t.Helper()
	for _, c := range pod.Containers {
		if c.Name != container {
			continue
		}
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env[e.Name] = e.Value
			}
		}
		return env
	}
	require.Failf(t, "no container", "%s", container)
	return nil
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

func ptrTo[T any](v T) *T { return &v }
