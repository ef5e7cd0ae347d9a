package planopts

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/netpol"
)

func TestPlanOptionsOfTheDefaultConfiguration(t *testing.T) {
	cfg, err := config.LoadFrom(config.Render, func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	assert.Equal(t, netpol.Options{
		McpServerNamespace:    "mcp-server",
		HostNamespace:         "mcp-host",
		RPCProxyNamespace:     "rpc-proxy",
		ControlPlaneNamespace: "control-plane",
		SandboxNamespace:      "sandbox-recipes",
		RuntimeNamespaces:     []string{"mcp-server", "mcp-host", "sandbox-recipes", "rpc-proxy"},
		K8sAPICIDRs:           []netip.Prefix{netip.MustParsePrefix("10.96.0.1/32")},
		APIPort:               8081,
		ClusterDomain:         "cluster.local",
	}, FromConfig(cfg), "pkg/netpol's defaultOptions test fixture holds the same values")
}

func TestPlanOptionsCarryEveryPlannerSetting(t *testing.T) {
	env := map[string]string{
		"HCC_EGRESS_DENY_CIDRS":                   "35.192.0.0/14",
		"CONTEXT_MAPPER_CLUSTER_DOMAIN":           "corp.example",
		"CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES": "rpc-proxy",
		"CONTEXT_MAPPER_NODELOCAL_DNS_CIDR":       "169.254.20.10/32",
	}
	cfg, err := config.LoadFrom(config.Render, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	o := FromConfig(cfg)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("35.192.0.0/14")}, o.EgressDenyCIDRs)
	assert.Equal(t, "corp.example", o.ClusterDomain)
	assert.Equal(t, []string{"rpc-proxy"}, o.MinimalInfraNamespaces)
	assert.Equal(t, netip.MustParsePrefix("169.254.20.10/32"), o.NodeLocalDNSCIDR)
}

// In enforce mode the planner refuses what the allowlist refuses; in audit
// mode it refuses nothing (ImageRefused nil).
func TestPlanOptionsRefuseImagesInEnforceModeOnly(t *testing.T) {
	load := func(enforce string) netpol.Options {
		env := map[string]string{"CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST": enforce, "CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES": "mongodb/"}
		cfg, err := config.LoadFrom(config.Render, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		require.NoError(t, err)
		return FromConfig(cfg)
	}
	server := func(image string) *clerumv1alpha1.McpServer {
		return &clerumv1alpha1.McpServer{Spec: clerumv1alpha1.McpServerSpec{Image: image}}
	}
	assert.Nil(t, load("false").ImageRefused, "audit mode refuses nothing")
	o := load("true")
	require.NotNil(t, o.ImageRefused)
	assert.True(t, o.ImageRefused(server("evil.io/x:1")))
	assert.False(t, o.ServerActive(server("evil.io/x:1")))
	assert.False(t, o.ImageRefused(server("mongodb/x:1")))
	assert.True(t, o.ServerActive(server("mongodb/x:1")))
}
