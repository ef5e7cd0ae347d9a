package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/clerum/hcc/pkg/config"
	hostresources "github.com/clerum/hcc/pkg/controllers/host/resources"
	sfsresources "github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
	"github.com/clerum/hcc/pkg/reasons"
)

// controllerConfig is the controller's configuration in tree, read from its
// shipped env the way the controller reads it.
func controllerConfig(t *testing.T, objs []*unstructured.Unstructured) *config.Config {
	t.Helper()
	cfg, err := config.LoadFrom(config.Render, lookup(literalEnv(t, podSpecs(t, objs)[controller], controller)))
	require.NoError(t, err)
	return cfg
}

// TestMcpHostConfigIsShipped: the ConfigMap every mcp-host container loads
// and every WFC takes its trust anchor from is part of the install, so
// nobody else can create it first, and its shipped key fails closed.
func TestMcpHostConfigIsShipped(t *testing.T) {
	for _, tree := range []string{productionTree, minikubeTree} {
		objs := build(t, tree)
		cfg := controllerConfig(t, objs)
		hostOpts, sfsOpts := hostresources.OptionsFrom(cfg), sfsresources.OptionsFrom(cfg)
		require.NotEmpty(t, hostOpts.ConfigMapName, tree)
		assert.Equal(t, hostOpts.ConfigMapName, sfsOpts.JWTConfigMap, "%s: the Hosts' ConfigMap is the WFCs' trust anchor", tree)

		var cm corev1.ConfigMap
		o := find(t, objs, "ConfigMap", hostOpts.ConfigMapName)
		typed(t, o, &cm)
		assert.Equal(t, cfg.Namespaces.Host, cm.Namespace, tree)
		// The platform's, never HCC's: HCC neither rewrites nor deletes it.
		assert.NotContains(t, cm.Labels, names.LabelManagedBy, tree)
		assert.Equal(t, "platform", cm.Labels["app.kubernetes.io/managed-by"], tree)
		assert.Equal(t, "clerum-platform", cm.Labels["app.kubernetes.io/part-of"], tree)

		// Only the key the platform must fill, empty: no proxy or other
		// variable is chosen for every Host by the install.
		assert.Equal(t, map[string]string{sfsOpts.JWTConfigMapKey: ""}, cm.Data, tree)
		assert.Empty(t, cm.BinaryData, tree)

		// Empty means no WFC, never "trust any token".
		got := sfsresources.Admit(func(name string) *corev1.ConfigMap {
			if name == cm.Name {
				return &cm
			}
			return nil
		}, sfsOpts)
		assert.Equal(t, reasons.ConfigInvalid, got.Block, "%s: the shipped key must block every SharedFileSystem until filled: %s", tree, got.Message)
	}
}

// hostPods is the selector of the Host pods: only they carry clerum.io/host
// (docs/names.md).
var hostPods = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
	{Key: names.LabelHost, Operator: metav1.LabelSelectorOpExists},
}}

// TestMcpHostPoliciesSelectHostPods: every allow of mcp-host but DNS is
// for Host pods alone; the WFC pods get only what HCC's wfc-F-ingress
// opens.
func TestMcpHostPoliciesSelectHostPods(t *testing.T) {
	everyPod := map[string]bool{"mcp-host-default-deny": true, "mcp-host-dns-egress": true}
	for _, tree := range []string{productionTree, minikubeTree} {
		for _, o := range ofKind(build(t, tree), "NetworkPolicy") {
			if o.GetNamespace() != "mcp-host" {
				continue
			}
			var p networkingv1.NetworkPolicy
			typed(t, o, &p)
			want := hostPods
			if everyPod[p.Name] {
				want = metav1.LabelSelector{}
			}
			assert.Equal(t, want, p.Spec.PodSelector, "%s: %s", tree, p.Name)
		}
	}
}

// TestInternetEgressExceptCoversTheClusterRanges: in every tree, the static
// Internet allow of mcp-host carves out base's safe ranges and every IPv4
// range the controller's HCC_EGRESS_DENY_CIDRS names: the Host pods reach
// no address that HCC keeps every McpServer away from.
func TestInternetEgressExceptCoversTheClusterRanges(t *testing.T) {
	for _, tree := range []string{productionTree, minikubeTree} {
		objs := build(t, tree)
		except := internetExcept(t, objs)
		for _, want := range publicEgressExceptionsV4() {
			assert.Contains(t, except, want, tree)
		}
		for _, p := range controllerConfig(t, objs).NetPol.EgressDenyCIDRs {
			if p.Addr().Is4() {
				assert.Contains(t, except, p.String(), "%s: HCC_EGRESS_DENY_CIDRS", tree)
			}
		}
	}
}

// TestInternetEgressExceptIsAnOverlayVariable changes the overlay's
// internetEgressExcept in a copy of deploy/ and checks that the policy
// follows it, while base keeps its default.
func TestInternetEgressExceptIsAnOverlayVariable(t *testing.T) {
	objs := buildWithVariables(t, "  internetEgressExcept:\n", "  internetEgressExcept:\n    - 11.0.0.0/8\n")
	assert.Contains(t, internetExcept(t, objs), "11.0.0.0/8")
	assert.NotContains(t, internetExcept(t, build(t, productionTree)), "11.0.0.0/8")

	objs = buildWithVariables(t, "egressDenyCIDRs: 10.244.0.0/16,", "egressDenyCIDRs: 11.0.0.0/8,10.244.0.0/16,")
	assert.True(t, strings.HasPrefix(literalEnv(t, podSpecs(t, objs)[controller], controller)["HCC_EGRESS_DENY_CIDRS"], "11.0.0.0/8,"))
}

// internetExcept is the except list of mcp-host-internet-egress, checking
// the rest of the policy: one rule, 0.0.0.0/0 on TCP 443.
func internetExcept(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var p networkingv1.NetworkPolicy
	typed(t, find(t, objs, "NetworkPolicy", "mcp-host-internet-egress"), &p)
	require.Len(t, p.Spec.Egress, 1)
	require.Len(t, p.Spec.Egress[0].To, 1)
	block := p.Spec.Egress[0].To[0].IPBlock
	require.NotNil(t, block)
	assert.Equal(t, "0.0.0.0/0", block.CIDR)
	require.Len(t, p.Spec.Egress[0].Ports, 1)
	assert.EqualValues(t, 443, p.Spec.Egress[0].Ports[0].Port.IntVal)
	return block.Except
}

// publicEgressExceptionsV4 are the IPv4 ranges HCC's public-web egress
// never opens (pkg/netpol), as CIDR strings.
func publicEgressExceptionsV4() []string {
	var out []string
	for _, p := range netpol.PublicEgressExceptions() {
		if p.Addr().Is4() {
			out = append(out, p.String())
		}
	}
	return out
}
