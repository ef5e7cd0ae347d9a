package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// env is a process environment for LoadFrom.
type env map[string]string

func (e env) lookup(name string) (string, bool) {
	v, ok := e[name]
	return v, ok
}

const testHMACSecret = "a-real-hmac-secret-for-tests"

var (
	testKey     = sync.OnceValue(func() *rsa.PrivateKey { return generateRSAKey(2048) })
	testWeakKey = sync.OnceValue(func() *rsa.PrivateKey { return generateRSAKey(1024) })
	// testNextKey is the key a Control API key rotation moves to.
	testNextKey = sync.OnceValue(func() *rsa.PrivateKey { return generateRSAKey(2048) })
)

func generateRSAKey(bits int) *rsa.PrivateKey {
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		panic(err)
	}
	return key
}

func encodePEM(blockType string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}))
}

func pkixPEM(t *testing.T, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	return encodePEM("PUBLIC KEY", der)
}

// required returns the least component c needs to start, with overrides
// applied on top.
func required(t *testing.T, c Component, overrides env) env {
	t.Helper()
	e := env{}
	switch c {
	case Controller:
		e["INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET"] = testHMACSecret
	case API:
		e["HCC_MCP_HOST_JWT_PUBLIC_KEY"] = pkixPEM(t, &testKey().PublicKey)
	}
	for k, v := range overrides {
		e[k] = v
	}
	return e
}

func mustLoad(t *testing.T, c Component, overrides env) *Config {
	t.Helper()
	cfg, err := LoadFrom(c, required(t, c, overrides).lookup)
	require.NoError(t, err)
	return cfg
}

// failedVars returns the variables an *Error names, in order.
func failedVars(t *testing.T, err error) []string {
	t.Helper()
	var cfgErr *Error
	require.True(t, errors.As(err, &cfgErr), "want *config.Error, got %T: %v", err, err)
	var names []string
	for _, p := range cfgErr.Problems {
		names = append(names, p.Var)
	}
	return names
}

func warnedVars(cfg *Config) []string {
	var names []string
	for _, w := range cfg.Warnings {
		name, _, _ := strings.Cut(w, ":")
		names = append(names, name)
	}
	return names
}

func resources(reqMemory, reqCPU, limMemory, limCPU string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse(reqMemory),
			corev1.ResourceCPU:    resource.MustParse(reqCPU),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse(limMemory),
			corev1.ResourceCPU:    resource.MustParse(limCPU),
		},
	}
}

// controllerOnly clears what only hcc-controller reads: leader timings,
// worker counts and the Host sweep's caps.
func controllerOnly(c *Config) {
	c.Core.LeaderLease, c.Core.LeaderRenew, c.Core.LeaderRetry = 0, 0, 0
	c.Core.McpServerWorkers, c.Core.HostWorkers, c.Core.FileSystemWorkers = 0, 0, 0
	c.NetPol.HostOrphanDeleteCap, c.NetPol.HostOrphanDeleteCapPercent = 0, 0
}

// seedDefaults is the configuration the seed documents, with the defaults
// this project chose where the seed only points elsewhere.
func seedDefaults(t *testing.T) Config {
	t.Helper()
	hostname, err := os.Hostname()
	require.NoError(t, err)
	return Config{
		Core: Core{
			Port:           8081,
			ControllerPort: 8082,
			LogLevel:       "info",
			PodName:        hostname,
			LeaderElect:    true,
			KubeAPIQPS:     50,
			KubeAPIBurst:   100,
			ClusterDomain:  "cluster.local",
			LeaderLease:    15 * time.Second, LeaderRenew: 10 * time.Second, LeaderRetry: 2 * time.Second,
			McpServerWorkers: 4, HostWorkers: 2, FileSystemWorkers: 1,
		},
		Namespaces: Namespaces{
			McpServer:    "mcp-server",
			ControlPlane: "control-plane",
			Host:         "mcp-host",
			GFS:          "gfs",
			RPCProxy:     "rpc-proxy",
			Channels:     "channels",
			Sandbox:      "sandbox-recipes",
			Target:       "mcp-host",
		},
		McpServer: McpServer{
			ImagePullPolicy:          corev1.PullIfNotPresent,
			EgressProxyImage:         "clerum/nginx-egress-proxy:0.1.0",
			StdioBridgeImage:         "docker.io/clerum/stdio-bridge:0.9.5",
			StdioBridgeResources:     resources("32Mi", "50m", "128Mi", "200m"),
			ExternalEgressResync:     300 * time.Second,
			ExternalEgressDNSTimeout: 5 * time.Second,
		},
		Host: Host{
			Image:                  "docker.io/clerum/mcp-host:0.9.5",
			ImagePullPolicy:        corev1.PullAlways,
			ImagePullSecret:        "clerum",
			Port:                   8080,
			ConfigMapName:          "mcp-host-config",
			ServiceAccount:         "mcp-host",
			WorkspaceStorageClass:  "do-block-storage-retain",
			WorkspaceSize:          resource.MustParse("10Gi"),
			WorkspacePath:          "/workspace",
			Resources:              resources("128Mi", "100m", "512Mi", "500m"),
			Resync:                 300 * time.Second,
			BootstrapRefreshBefore: 900 * time.Second,
			CredentialMaxLifetime:  2592000 * time.Second,
		},
		HostAuth: HostAuth{
			Issuer:             "control-api",
			Audience:           "host-context-controller",
			MigrationAudience:  "workflow-controller",
			MaxTTL:             600 * time.Second,
			RateLimitPerMinute: 120,
		},
		Desktop: Desktop{
			Image:     "clerum/mcp-host-desktop:latest",
			Port:      3000,
			Resources: resources("256Mi", "250m", "4Gi", "1"),
		},
		ChannelReader: ChannelReader{
			Image:           "clerum/channel-reader:0.9.5",
			ImagePullPolicy: corev1.PullAlways,
			HandoffPort:     8099,
		},
		WFC: WFC{
			Image:                    "docker.io/clerum/workspace-files-controller:0.9.5",
			ImagePullPolicy:          corev1.PullIfNotPresent,
			ImagePullSecret:          "clerum",
			Port:                     8086,
			InitImage:                "busybox:1.36",
			Resources:                resources("64Mi", "50m", "128Mi", "200m"),
			JWTPublicKeyConfigMap:    "mcp-host-config",
			JWTPublicKeyConfigMapKey: "CLERUM_AUTH_JWT_PUBLIC_KEY",
			MaxUploadBytes:           100 << 20,
			MaxListEntries:           5000,
			MaxPathDepth:             32,
			SFSResync:                60 * time.Second,
			SFSMaxSize:               resource.MustParse("100Gi"),
		},
		GFS: GFS{
			Port:              8087,
			Image:             "clerum/gfs-controller:test",
			ImagePullPolicy:   corev1.PullIfNotPresent,
			InitImage:         "busybox:1.36",
			Resources:         resources("128Mi", "100m", "256Mi", "500m"),
			PostgresAppLabel:  "control-postgres",
			PostgresPort:      5432,
			JWTConfigMap:      "gfs-config",
			JWTConfigMapKey:   "jwt-public-key",
			PostgresSecret:    "gfs-controller-db",
			PostgresSecretKey: "connection-string",
			DriveName:         "main",
			TokenAudience:     "gfs-controller",
			Resync:            60 * time.Second,
		},
		NetPol: NetPol{
			RuntimeNamespaces:          []string{"mcp-server", "mcp-host", "sandbox-recipes", "rpc-proxy"},
			K8sAPICIDRs:                []netip.Prefix{netip.MustParsePrefix("10.96.0.1/32")},
			K8sAPICIDRSource:           "default",
			OrphanDeleteCap:            10,
			OrphanDeleteCapPercent:     20,
			HostOrphanDeleteCap:        10,
			HostOrphanDeleteCapPercent: 20,
		},
		ImagePolicy: ImagePolicy{
			AllowedPrefixes: []string{"ghcr.io/evenfire-ai/", "mongodb/", "mcr.microsoft.com/", "clerum/", "docker.io/clerum/"},
		},
		ControlAPI: ControlAPI{
			BaseURL:    "http://control-api.control-plane.svc.cluster.local:8090",
			GatewayURL: "http://nginx-workflow-approval-gateway.control-plane.svc:8092",
		},
		Dev: Dev{McpServersJSON: "[]", ContextsJSON: "[]", McpAuthJSON: "{}"},
	}
}

func TestLoadDefaults(t *testing.T) {
	tests := []struct {
		name      string
		component Component
		adjust    func(*Config)
	}{{
		name:      "the controller gets every seed default and holds the HMAC secret",
		component: Controller,
		adjust: func(c *Config) {
			c.ControlAPI.HMACSecret = testHMACSecret
			c.Warnings = []string{
				"CONTEXT_MAPPER_GFSC_IMAGE: uses a :test tag; set a release image",
				"CONTEXT_MAPPER_NETPOL_RESYNC_SEC: 0 disables the periodic resync; orphaned or drifted NetworkPolicies are repaired only by events and restarts",
				"CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST: false, so the image allowlist only logs images it would block",
			}
		},
	}, {
		name:      "the API gets every seed default and holds the public key",
		component: API,
		adjust: func(c *Config) {
			c.HostAuth.PublicKeys = []*rsa.PublicKey{&testKey().PublicKey}
			c.Warnings = []string{"CONTEXT_MAPPER_DESKTOP_API_TOKEN: empty, so GET /api/v1/desktop/{hostRef} is unauthenticated"}
			controllerOnly(c)
			c.WFC.SFSMaxSize = resource.Quantity{} // read by the controller and render only
		},
	}, {
		name:      "render gets every seed default with no secret at all",
		component: Render,
		adjust: func(c *Config) {
			c.Warnings = []string{"CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST: false, so the image allowlist only logs images it would block"}
			controllerOnly(c)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := seedDefaults(t)
			tt.adjust(&want)
			assert.Equal(t, &want, mustLoad(t, tt.component, nil))
		})
	}
}

// TestEveryVariableIsDeclaredOnce pins the table to the variables of
// docs/configuration.md.
func TestEveryVariableIsDeclaredOnce(t *testing.T) {
	want := []string{
		// Core / server, and docs/configuration.md.
		"CONTEXT_MAPPER_PORT", "CLERUM_DEV_MODE", "LOG_LEVEL",
		"HCC_CONTROLLER_PORT", "HCC_PPROF_PORT", "POD_NAME", "HCC_LEADER_ELECT", "HCC_KUBE_API_QPS", "HCC_KUBE_API_BURST", "CONTEXT_MAPPER_CLUSTER_DOMAIN",
		"HCC_LEADER_LEASE_SEC", "HCC_LEADER_RENEW_SEC", "HCC_LEADER_RETRY_SEC",
		"HCC_MCPSERVER_WORKERS", "HCC_HOST_WORKERS", "HCC_FILESYSTEM_WORKERS",
		// Namespaces.
		"CONTEXT_MAPPER_NAMESPACE", "CONTEXT_MAPPER_CONTROL_PLANE_NAMESPACE", "CONTEXT_MAPPER_HOST_NAMESPACE",
		"CONTEXT_MAPPER_GFS_NAMESPACE", "CONTEXT_MAPPER_RPC_PROXY_NAMESPACE", "CONTEXT_MAPPER_CHANNELS_NAMESPACE",
		"CONTEXT_MAPPER_SANDBOX_NAMESPACE", "HCC_TARGET_NAMESPACE",
		// MCP server provisioning.
		"CONTEXT_MAPPER_MCPSERVER_IMAGE_PULL_POLICY", "CONTEXT_MAPPER_EGRESS_PROXY_IMAGE", "CONTEXT_MAPPER_STDIO_BRIDGE_IMAGE",
		"CONTEXT_MAPPER_STDIO_BRIDGE_REQUEST_MEMORY", "CONTEXT_MAPPER_STDIO_BRIDGE_REQUEST_CPU",
		"CONTEXT_MAPPER_STDIO_BRIDGE_LIMIT_MEMORY", "CONTEXT_MAPPER_STDIO_BRIDGE_LIMIT_CPU",
		"HCC_EXTERNAL_EGRESS_RESYNC_SEC", "HCC_EXTERNAL_EGRESS_DNS_TIMEOUT_MS", "HCC_EXTERNAL_EGRESS_DNS_SERVER",
		// mcp-host provisioning.
		"CONTEXT_MAPPER_HOST_IMAGE", "CONTEXT_MAPPER_HOST_IMAGE_PULL_POLICY", "CONTEXT_MAPPER_HOST_IMAGE_PULL_SECRET",
		"CONTEXT_MAPPER_HOST_PORT", "CONTEXT_MAPPER_HOST_CONFIGMAP_NAME", "CONTEXT_MAPPER_HOST_SERVICE_ACCOUNT",
		"CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS", "CONTEXT_MAPPER_HOST_WORKSPACE_SIZE", "CONTEXT_MAPPER_HOST_WORKSPACE_PATH",
		"CONTEXT_MAPPER_HOST_RESOURCES_REQUEST_MEMORY", "CONTEXT_MAPPER_HOST_RESOURCES_REQUEST_CPU",
		"CONTEXT_MAPPER_HOST_RESOURCES_LIMIT_MEMORY", "CONTEXT_MAPPER_HOST_RESOURCES_LIMIT_CPU",
		"CONTEXT_MAPPER_HOST_RESYNC_SEC", "HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC",
		// mcp-host API authorization, and docs/http-api.md.
		"HCC_MCP_HOST_JWT_PUBLIC_KEY", "HCC_MCP_HOST_JWT_ISSUER", "HCC_MCP_HOST_JWT_MAX_TTL_SECONDS",
		"HCC_MCP_HOST_API_RATE_LIMIT_PER_MINUTE", "HCC_MCP_HOST_JWT_AUDIENCE", "HCC_MCP_HOST_JWT_MIGRATION_AUDIENCE",
		// Desktop.
		"CONTEXT_MAPPER_DESKTOP_IMAGE", "CONTEXT_MAPPER_DESKTOP_PORT",
		"CONTEXT_MAPPER_DESKTOP_RESOURCES_REQUEST_MEMORY", "CONTEXT_MAPPER_DESKTOP_RESOURCES_REQUEST_CPU",
		"CONTEXT_MAPPER_DESKTOP_RESOURCES_LIMIT_MEMORY", "CONTEXT_MAPPER_DESKTOP_RESOURCES_LIMIT_CPU",
		"CONTEXT_MAPPER_DESKTOP_API_TOKEN",
		// channel-reader.
		"CONTEXT_MAPPER_CHANNEL_READER_IMAGE", "CONTEXT_MAPPER_CHANNEL_READER_IMAGE_PULL_POLICY",
		"CONTEXT_MAPPER_CHANNEL_READER_HANDOFF_PORT",
		// WFC.
		"CONTEXT_MAPPER_WFC_IMAGE", "CONTEXT_MAPPER_WFC_IMAGE_PULL_POLICY", "CONTEXT_MAPPER_WFC_IMAGE_PULL_SECRET",
		"CONTEXT_MAPPER_WFC_PORT", "CONTEXT_MAPPER_WFC_INIT_IMAGE",
		"CONTEXT_MAPPER_WFC_RESOURCES_REQUEST_MEMORY", "CONTEXT_MAPPER_WFC_RESOURCES_REQUEST_CPU",
		"CONTEXT_MAPPER_WFC_RESOURCES_LIMIT_MEMORY", "CONTEXT_MAPPER_WFC_RESOURCES_LIMIT_CPU",
		"CONTEXT_MAPPER_WFC_JWT_PUBLIC_KEY_CM", "CONTEXT_MAPPER_WFC_JWT_PUBLIC_KEY_CM_KEY",
		"CONTEXT_MAPPER_WFC_MAX_UPLOAD_BYTES", "CONTEXT_MAPPER_WFC_MAX_LIST_ENTRIES", "CONTEXT_MAPPER_WFC_MAX_PATH_DEPTH",
		"CONTEXT_MAPPER_SFS_RESYNC_SEC", "HCC_SFS_MAX_SIZE",
		// GFS.
		"CONTEXT_MAPPER_GFSC_PORT", "CONTEXT_MAPPER_GFSC_IMAGE", "CONTEXT_MAPPER_GFSC_IMAGE_PULL_POLICY",
		"CONTEXT_MAPPER_GFSC_IMAGE_PULL_SECRET", "CONTEXT_MAPPER_GFSC_PRIORITY_CLASS", "CONTEXT_MAPPER_GFSC_INIT_IMAGE",
		"CONTEXT_MAPPER_GFSC_REQUEST_MEMORY", "CONTEXT_MAPPER_GFSC_REQUEST_CPU",
		"CONTEXT_MAPPER_GFSC_LIMIT_MEMORY", "CONTEXT_MAPPER_GFSC_LIMIT_CPU",
		"CONTEXT_MAPPER_GFS_POSTGRES_APP_LABEL", "CONTEXT_MAPPER_GFS_POSTGRES_PORT",
		"CONTEXT_MAPPER_GFS_JWT_CONFIGMAP", "CONTEXT_MAPPER_GFS_JWT_CONFIGMAP_KEY",
		"CONTEXT_MAPPER_GFS_PG_SECRET", "CONTEXT_MAPPER_GFS_PG_SECRET_KEY",
		"CONTEXT_MAPPER_GFS_DRIVE_NAME", "CONTEXT_MAPPER_GFS_TOKEN_AUDIENCE", "CONTEXT_MAPPER_GFS_RESYNC_SEC",
		// NetworkPolicy.
		"CONTEXT_MAPPER_RUNTIME_NAMESPACES", "CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES", "CONTEXT_MAPPER_K8S_API_CIDRS",
		"CONTEXT_MAPPER_NODELOCAL_DNS_CIDR", "CONTEXT_MAPPER_NETPOL_RESYNC_SEC", "CONTEXT_MAPPER_NETPOL_DEFAULTS_RESYNC_SEC",
		"CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP", "CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP_PERCENT", "KUBERNETES_SERVICE_HOST",
		"HCC_EGRESS_DENY_CIDRS", "HCC_HOST_ORPHAN_DELETE_CAP", "HCC_HOST_ORPHAN_DELETE_CAP_PERCENT",
		"HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC", "HCC_HOST_SECRET_REQUIRE_LABEL", "HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE",
		// Plugin image allowlist.
		"CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES", "CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST",
		// Control-API integration.
		"CONTROL_API_BASE_URL", "INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET", "MCP_HOST_GATEWAY_URL",
		// Dev mode.
		"CLERUM_MCP_SERVERS", "CLERUM_CONTEXTS", "CLERUM_MCP_AUTH",
	}
	var got []string
	for _, v := range variables {
		got = append(got, v.name)
		if v.cross != nil {
			for _, n := range v.cross.needs {
				assert.Contains(t, declared, n, "%s needs an undeclared variable", v.name)
			}
		}
	}
	assert.Len(t, declared, len(variables), "a variable is declared twice")
	assert.ElementsMatch(t, want, got)
}

// intVars is every integer variable, durations included.
var intVars = []string{
	"CONTEXT_MAPPER_PORT", "HCC_CONTROLLER_PORT", "HCC_KUBE_API_QPS", "HCC_KUBE_API_BURST",
	"HCC_EXTERNAL_EGRESS_RESYNC_SEC", "HCC_EXTERNAL_EGRESS_DNS_TIMEOUT_MS",
	"CONTEXT_MAPPER_HOST_PORT", "CONTEXT_MAPPER_HOST_RESYNC_SEC", "HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC",
	"HCC_MCP_HOST_JWT_MAX_TTL_SECONDS", "HCC_MCP_HOST_API_RATE_LIMIT_PER_MINUTE",
	"CONTEXT_MAPPER_DESKTOP_PORT", "CONTEXT_MAPPER_CHANNEL_READER_HANDOFF_PORT",
	"CONTEXT_MAPPER_WFC_PORT", "CONTEXT_MAPPER_WFC_MAX_UPLOAD_BYTES", "CONTEXT_MAPPER_WFC_MAX_LIST_ENTRIES",
	"CONTEXT_MAPPER_WFC_MAX_PATH_DEPTH", "CONTEXT_MAPPER_SFS_RESYNC_SEC",
	"CONTEXT_MAPPER_GFSC_PORT", "CONTEXT_MAPPER_GFS_POSTGRES_PORT", "CONTEXT_MAPPER_GFS_RESYNC_SEC",
	"CONTEXT_MAPPER_NETPOL_RESYNC_SEC", "CONTEXT_MAPPER_NETPOL_DEFAULTS_RESYNC_SEC",
	"CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP", "CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP_PERCENT",
	"HCC_MCPSERVER_WORKERS", "HCC_HOST_WORKERS", "HCC_FILESYSTEM_WORKERS",
	"HCC_HOST_ORPHAN_DELETE_CAP", "HCC_HOST_ORPHAN_DELETE_CAP_PERCENT", "HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC",
	// The leader timings are integers too, but judged together:
	// TestLeaderTimings.
}

// zeroDisables is the integer variables for which 0 is meaningful: resync
// intervals (0 disables the timer) and orphan caps (0 refuses every delete).
var zeroDisables = []string{
	"HCC_EXTERNAL_EGRESS_RESYNC_SEC", "CONTEXT_MAPPER_HOST_RESYNC_SEC", "CONTEXT_MAPPER_SFS_RESYNC_SEC",
	"CONTEXT_MAPPER_GFS_RESYNC_SEC", "CONTEXT_MAPPER_NETPOL_RESYNC_SEC", "CONTEXT_MAPPER_NETPOL_DEFAULTS_RESYNC_SEC",
	"CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP", "CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP_PERCENT",
	"HCC_HOST_ORPHAN_DELETE_CAP", "HCC_HOST_ORPHAN_DELETE_CAP_PERCENT",
}

func TestIntegersMustBeCanonical(t *testing.T) {
	bad := []struct {
		value  string
		reason string
	}{
		{"abc", "not a canonical decimal integer"},
		{"25m", "not a canonical decimal integer"},
		{"1e3", "not a canonical decimal integer"},
		{"10.9", "not a canonical decimal integer"},
		{"2e1", "not a canonical decimal integer"},
		{"+5", "not a canonical decimal integer"},
		{"010", "not a canonical decimal integer"},
		{" 5", "not a canonical decimal integer"},
		{"5 ", "not a canonical decimal integer"},
		{"-0", "not a canonical decimal integer"},
		{"0x10", "not a canonical decimal integer"},
		{"-1", "must not be negative"},
		{"99999999999999999999", "out of range"},
	}
	for _, name := range intVars {
		for _, b := range bad {
			t.Run(name+" rejects "+b.value, func(t *testing.T) {
				_, err := LoadFrom(Controller, required(t, Controller, env{name: b.value}).lookup)
				require.Error(t, err)
				assert.Equal(t, []string{name}, failedVars(t, err))
				assert.Contains(t, err.Error(), name+": ")
				assert.Contains(t, err.Error(), b.reason)
			})
		}
		t.Run(name+" accepts a canonical value", func(t *testing.T) {
			value := "7"
			if name == "HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC" {
				value = "7200" // it must exceed the refresh window and its margin
			}
			mustLoad(t, Controller, env{name: value})
		})
	}
}

// The maximum credential lifetime must leave room for a credential: more
// than the refresh window plus the 5-minute margin, or none would ever be
// accepted.
func TestCredentialMaxLifetime(t *testing.T) {
	const name = "HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC"
	assert.Equal(t, 30*24*time.Hour, mustLoad(t, Controller, env{}).Host.CredentialMaxLifetime)
	assert.Equal(t, 30*24*time.Hour, mustLoad(t, Controller, env{name: ""}).Host.CredentialMaxLifetime, "empty means the default")
	assert.Equal(t, 1201*time.Second, mustLoad(t, Controller, env{name: "1201"}).Host.CredentialMaxLifetime)
	for _, tc := range []env{
		{name: "1200"},
		{name: "3600", "HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC": "3300"},
	} {
		_, err := LoadFrom(Controller, required(t, Controller, tc).lookup)
		require.Error(t, err, "%v", tc)
		assert.Equal(t, []string{name}, failedVars(t, err))
		assert.Contains(t, err.Error(), "by more than 300 seconds")
	}
}

// The adoption cutoff (docs/host.md, "Adopting credentials across an
// upgrade"): empty is never, an RFC 3339 instant in the past is the cutoff,
// anything else — malformed, or in the future — fails closed, naming it.
func TestAdoptCredentialsCreatedBefore(t *testing.T) {
	const name = "HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE"
	assert.True(t, mustLoad(t, Controller, env{}).Host.AdoptCredentialsCreatedBefore.IsZero(), "unset: never")
	empty := mustLoad(t, Controller, env{name: ""})
	assert.True(t, empty.Host.AdoptCredentialsCreatedBefore.IsZero(), "empty: never")
	for _, w := range empty.Warnings {
		assert.NotContains(t, w, name)
	}

	set := mustLoad(t, Controller, env{name: "2026-01-31T12:00:00+01:00"})
	assert.True(t, time.Date(2026, 1, 31, 11, 0, 0, 0, time.UTC).Equal(set.Host.AdoptCredentialsCreatedBefore))
	assert.Contains(t, set.Warnings, name+": unmarked runtime-token Secrets created before 2026-01-31T11:00:00Z are adopted as they are, not re-issued; "+
		"unset it once every Host's credential is marked")

	for _, bad := range []string{"yesterday", "2026-01-31", "2026-01-31 12:00:00", "2026-01-31T12:00:00", "1769860800", " 2026-01-31T12:00:00Z"} {
		t.Run("rejects "+strconv.Quote(bad), func(t *testing.T) {
			_, err := LoadFrom(Controller, required(t, Controller, env{name: bad}).lookup)
			require.Error(t, err)
			assert.Equal(t, []string{name}, failedVars(t, err))
			assert.Contains(t, err.Error(), name+": "+strconv.Quote(bad)+" is not an RFC 3339 timestamp")
		})
	}
	t.Run("rejects a time in the future", func(t *testing.T) {
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		_, err := LoadFrom(Controller, required(t, Controller, env{name: future}).lookup)
		require.Error(t, err)
		assert.Equal(t, []string{name}, failedVars(t, err))
		assert.Contains(t, err.Error(), name+": "+strconv.Quote(future)+" lies in the future")
	})
	t.Run("read only by the controller", func(t *testing.T) {
		for _, c := range []Component{API, Render} {
			_, err := LoadFrom(c, required(t, c, env{name: "garbage"}).lookup)
			assert.NoError(t, err, c.String())
		}
	})
}

func TestZeroIsAcceptedOnlyWhereItMeansSomething(t *testing.T) {
	for _, name := range intVars {
		t.Run(name, func(t *testing.T) {
			_, err := LoadFrom(Controller, required(t, Controller, env{name: "0"}).lookup)
			if slices.Contains(zeroDisables, name) {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, []string{name}, failedVars(t, err))
		})
	}
}

func TestIntegerValues(t *testing.T) {
	tests := []struct {
		name  string
		env   env
		check func(t *testing.T, c *Config)
	}{{
		name:  "the highest port is accepted",
		env:   env{"CONTEXT_MAPPER_PORT": "65535"},
		check: func(t *testing.T, c *Config) { assert.EqualValues(t, 65535, c.Core.Port) },
	}, {
		name: "QPS becomes a float for client-go",
		env:  env{"HCC_KUBE_API_QPS": "75", "HCC_KUBE_API_BURST": "150"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, float32(75), c.Core.KubeAPIQPS)
			assert.Equal(t, 150, c.Core.KubeAPIBurst)
		},
	}, {
		name: "milliseconds and seconds keep their units",
		env:  env{"HCC_EXTERNAL_EGRESS_DNS_TIMEOUT_MS": "250", "HCC_MCP_HOST_JWT_MAX_TTL_SECONDS": "60", "CONTEXT_MAPPER_NETPOL_RESYNC_SEC": "1500"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, 250*time.Millisecond, c.McpServer.ExternalEgressDNSTimeout)
			assert.Equal(t, time.Minute, c.HostAuth.MaxTTL)
			assert.Equal(t, 1500*time.Second, c.NetPol.Resync)
		},
	}, {
		name: "orphan caps accept zero and percentages above 100",
		env:  env{"CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP": "0", "CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP_PERCENT": "150"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, 0, c.NetPol.OrphanDeleteCap)
			assert.Equal(t, 150, c.NetPol.OrphanDeleteCapPercent)
		},
	}, {
		name:  "a large upload cap fits int64",
		env:   env{"CONTEXT_MAPPER_WFC_MAX_UPLOAD_BYTES": "10737418240"},
		check: func(t *testing.T, c *Config) { assert.Equal(t, int64(10<<30), c.WFC.MaxUploadBytes) },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustLoad(t, Controller, tt.env))
		})
	}
}

// TestEmptyMeansDefault covers every variable that is not a getEnv string:
// set to "", it loads exactly as if it were unset.
func TestEmptyMeansDefault(t *testing.T) {
	want := mustLoad(t, Controller, nil)
	for _, v := range variables {
		if v.field.blank == nil || !v.readBy.has(Controller) {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			assert.Equal(t, want, mustLoad(t, Controller, env{v.name: ""}))
		})
	}
	t.Run("a list of blank items counts as empty", func(t *testing.T) {
		got := mustLoad(t, Controller, env{"CONTEXT_MAPPER_RUNTIME_NAMESPACES": " , ,", "CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES": ","})
		assert.Equal(t, want.NetPol.RuntimeNamespaces, got.NetPol.RuntimeNamespaces)
		assert.Equal(t, want.ImagePolicy.AllowedPrefixes, got.ImagePolicy.AllowedPrefixes)
	})
}

func TestEmptyStringWinsForPlainStrings(t *testing.T) {
	tests := []struct {
		name string
		env  env
		get  func(*Config) string
		want string
	}{{
		name: "an empty Host pull secret disables it",
		env:  env{"CONTEXT_MAPPER_HOST_IMAGE_PULL_SECRET": ""},
		get:  func(c *Config) string { return c.Host.ImagePullSecret },
	}, {
		name: "an empty WFC pull secret disables it",
		env:  env{"CONTEXT_MAPPER_WFC_IMAGE_PULL_SECRET": ""},
		get:  func(c *Config) string { return c.WFC.ImagePullSecret },
	}, {
		name: "an empty storage class is kept",
		env:  env{"CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS": ""},
		get:  func(c *Config) string { return c.Host.WorkspaceStorageClass },
	}, {
		name: "an unset pull secret takes the default",
		get:  func(c *Config) string { return c.Host.ImagePullSecret },
		want: "clerum",
	}, {
		name: "a set pull secret is used",
		env:  env{"CONTEXT_MAPPER_WFC_IMAGE_PULL_SECRET": "regcred"},
		get:  func(c *Config) string { return c.WFC.ImagePullSecret },
		want: "regcred",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.get(mustLoad(t, Controller, tt.env)))
		})
	}
}

// boolVars is every boolean variable.
var boolVars = []string{"CLERUM_DEV_MODE", "HCC_LEADER_ELECT", "CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST", "HCC_HOST_SECRET_REQUIRE_LABEL"}

func TestBooleans(t *testing.T) {
	tests := []struct {
		value        string
		leaderElect  bool // default true
		enforceImage bool // default false
	}{
		{value: "true", leaderElect: true, enforceImage: true},
		{value: "TRUE", leaderElect: true, enforceImage: true},
		{value: "True", leaderElect: true, enforceImage: true},
		{value: "1", leaderElect: true, enforceImage: true},
		{value: "false", leaderElect: false, enforceImage: false},
		{value: "FALSE", leaderElect: false, enforceImage: false},
		{value: "False", leaderElect: false, enforceImage: false},
		{value: "0", leaderElect: false, enforceImage: false},
		{value: "", leaderElect: true, enforceImage: false},
	}
	for _, tt := range tests {
		t.Run("the value "+strconv.Quote(tt.value), func(t *testing.T) {
			cfg := mustLoad(t, Controller, env{"HCC_LEADER_ELECT": tt.value, "CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST": tt.value})
			assert.Equal(t, tt.leaderElect, cfg.Core.LeaderElect)
			assert.Equal(t, tt.enforceImage, cfg.ImagePolicy.Enforce)
		})
	}
	t.Run("HCC_HOST_SECRET_REQUIRE_LABEL reads the same spellings, default false", func(t *testing.T) {
		for _, tt := range tests {
			for _, c := range []Component{Controller, Render} {
				cfg := mustLoad(t, c, env{"HCC_HOST_SECRET_REQUIRE_LABEL": tt.value})
				assert.Equal(t, tt.enforceImage, cfg.Host.SecretRequireLabel, "%s %q", c, tt.value)
			}
		}
		assert.False(t, mustLoad(t, Controller, env{}).Host.SecretRequireLabel, "unset: the seed's rule")
	})
	t.Run("dev mode reads the same spellings", func(t *testing.T) {
		assert.True(t, mustLoad(t, Controller, env{"CLERUM_DEV_MODE": "TRUE"}).Core.DevMode)
		assert.False(t, mustLoad(t, Controller, env{"CLERUM_DEV_MODE": "0"}).Core.DevMode)
	})
}

// TestBooleansFailClosed pins docs/configuration.md: the seed read every value but
// "true" and "1" as false, so HCC_LEADER_ELECT=yes turned leader election
// off and CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST=on meant audit mode.
func TestBooleansFailClosed(t *testing.T) {
	for _, name := range boolVars {
		for _, value := range []string{"yes", "on", "no", "off", "y", "t", " true", "false ", "2", "-1", "01", "truee"} {
			t.Run(name+" rejects "+strconv.Quote(value), func(t *testing.T) {
				for _, c := range []Component{Controller, API, Render} {
					_, err := LoadFrom(c, required(t, c, env{name: value}).lookup)
					require.Error(t, err, c.String())
					assert.Equal(t, []string{name}, failedVars(t, err), c.String())
					assert.Contains(t, err.Error(), name+": "+strconv.Quote(value)+" is not true, false, 1 or 0")
				}
			})
		}
	}
}

func TestValidValues(t *testing.T) {
	tests := []struct {
		name      string
		component Component
		env       env
		check     func(t *testing.T, c *Config)
	}{{
		name: "every pull policy spelling is accepted",
		env: env{
			"CONTEXT_MAPPER_MCPSERVER_IMAGE_PULL_POLICY":      "Never",
			"CONTEXT_MAPPER_HOST_IMAGE_PULL_POLICY":           "IfNotPresent",
			"CONTEXT_MAPPER_CHANNEL_READER_IMAGE_PULL_POLICY": "IfNotPresent",
			"CONTEXT_MAPPER_WFC_IMAGE_PULL_POLICY":            "Always",
			"CONTEXT_MAPPER_GFSC_IMAGE_PULL_POLICY":           "Never",
		},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, corev1.PullNever, c.McpServer.ImagePullPolicy)
			assert.Equal(t, corev1.PullIfNotPresent, c.Host.ImagePullPolicy)
			assert.Equal(t, corev1.PullIfNotPresent, c.ChannelReader.ImagePullPolicy)
			assert.Equal(t, corev1.PullAlways, c.WFC.ImagePullPolicy)
			assert.Equal(t, corev1.PullNever, c.GFS.ImagePullPolicy)
		},
	}, {
		name: "quantities are parsed and a request may equal its limit",
		env:  env{"CONTEXT_MAPPER_HOST_RESOURCES_REQUEST_CPU": "500m", "CONTEXT_MAPPER_HOST_WORKSPACE_SIZE": "1Ti", "CONTEXT_MAPPER_DESKTOP_RESOURCES_LIMIT_CPU": "2", "HCC_SFS_MAX_SIZE": "2Ti"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, resource.MustParse("2Ti"), c.WFC.SFSMaxSize)
			assert.Equal(t, resource.MustParse("500m"), c.Host.Resources.Requests[corev1.ResourceCPU])
			assert.Equal(t, resource.MustParse("1Ti"), c.Host.WorkspaceSize)
			assert.Equal(t, resource.MustParse("2"), c.Desktop.Resources.Limits[corev1.ResourceCPU])
		},
	}, {
		name: "the host and target namespaces may move together",
		env:  env{"CONTEXT_MAPPER_HOST_NAMESPACE": "hosts", "HCC_TARGET_NAMESPACE": "hosts"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, "hosts", c.Namespaces.Host)
			assert.Equal(t, "hosts", c.Namespaces.Target)
		},
	}, {
		name: "namespace lists are trimmed",
		env:  env{"CONTEXT_MAPPER_RUNTIME_NAMESPACES": " mcp-server, sandbox-recipes ,rpc-proxy,sandbox-ui,", "CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES": "sandbox-ui"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, []string{"mcp-server", "sandbox-recipes", "rpc-proxy", "sandbox-ui"}, c.NetPol.RuntimeNamespaces)
			assert.Equal(t, []string{"sandbox-ui"}, c.NetPol.MinimalInfraNamespaces)
			assert.NotContains(t, warnedVars(c), "CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES")
		},
	}, {
		name: "image prefixes are trimmed",
		env:  env{"CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES": "ghcr.io/acme/, clerum/"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, []string{"ghcr.io/acme/", "clerum/"}, c.ImagePolicy.AllowedPrefixes)
		},
	}, {
		name: "a base URL loses its trailing slash",
		env:  env{"CONTROL_API_BASE_URL": "https://control-api.example.com:8443/"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, "https://control-api.example.com:8443", c.ControlAPI.BaseURL)
		},
	}, {
		name:  "a log level is matched in any case",
		env:   env{"LOG_LEVEL": "DEBUG"},
		check: func(t *testing.T, c *Config) { assert.Equal(t, "debug", c.Core.LogLevel) },
	}, {
		name:  "an unknown log level falls back to info",
		env:   env{"LOG_LEVEL": "verbose"},
		check: func(t *testing.T, c *Config) { assert.Equal(t, "info", c.Core.LogLevel) },
	}, {
		name:  "a set pod name is the leader-election identity",
		env:   env{"POD_NAME": "hcc-controller-7d9f-abcde"},
		check: func(t *testing.T, c *Config) { assert.Equal(t, "hcc-controller-7d9f-abcde", c.Core.PodName) },
	}, {
		name: "optional GFS names may be set",
		env:  env{"CONTEXT_MAPPER_GFSC_IMAGE_PULL_SECRET": "regcred", "CONTEXT_MAPPER_GFSC_PRIORITY_CLASS": "system-cluster-critical"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, "regcred", c.GFS.ImagePullSecret)
			assert.Equal(t, "system-cluster-critical", c.GFS.PriorityClassName)
		},
	}, {
		name: "audiences and issuer may be changed",
		env:  env{"HCC_MCP_HOST_JWT_ISSUER": "https://issuer.example", "HCC_MCP_HOST_JWT_AUDIENCE": "hcc", "HCC_MCP_HOST_JWT_MIGRATION_AUDIENCE": "wfc"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, "https://issuer.example", c.HostAuth.Issuer)
			assert.Equal(t, "hcc", c.HostAuth.Audience)
			assert.Equal(t, "wfc", c.HostAuth.MigrationAudience)
		},
	}, {
		name:      "the desktop token is held by the API",
		component: API,
		env:       env{"CONTEXT_MAPPER_DESKTOP_API_TOKEN": "desktop-token"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, "desktop-token", c.Desktop.APIToken)
			assert.Empty(t, c.Warnings)
		},
	}, {
		name:      "a legacy Host service account is parsed and warned about",
		component: Controller,
		env:       env{"CONTEXT_MAPPER_HOST_SERVICE_ACCOUNT": "shared-host"},
		check: func(t *testing.T, c *Config) {
			assert.Equal(t, "shared-host", c.Host.ServiceAccount)
			assert.Contains(t, c.Warnings, "CONTEXT_MAPPER_HOST_SERVICE_ACCOUNT: no longer decides the identity of Host pods, which run as their own host-<host> ServiceAccount; the value is ignored")
		},
	}, {
		name:      "the controller does not hold the desktop token",
		component: Controller,
		env:       env{"CONTEXT_MAPPER_DESKTOP_API_TOKEN": "desktop-token"},
		check:     func(t *testing.T, c *Config) { assert.Empty(t, c.Desktop.APIToken) },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustLoad(t, tt.component, tt.env))
		})
	}
}

// TestInvalidValuesFailClosed checks every validated variable with a bad
// value: the load fails and names exactly that variable.
func TestInvalidValuesFailClosed(t *testing.T) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name    string
		env     env
		wantVar string
		reason  string
	}{
		{"a lowercase pull policy", env{"CONTEXT_MAPPER_HOST_IMAGE_PULL_POLICY": "always"}, "CONTEXT_MAPPER_HOST_IMAGE_PULL_POLICY", `"always" is not Always, IfNotPresent or Never`},
		{"an unknown McpServer pull policy", env{"CONTEXT_MAPPER_MCPSERVER_IMAGE_PULL_POLICY": "Sometimes"}, "CONTEXT_MAPPER_MCPSERVER_IMAGE_PULL_POLICY", "not Always"},
		{"an unknown channel-reader pull policy", env{"CONTEXT_MAPPER_CHANNEL_READER_IMAGE_PULL_POLICY": "Latest"}, "CONTEXT_MAPPER_CHANNEL_READER_IMAGE_PULL_POLICY", "not Always"},
		{"an unknown WFC pull policy", env{"CONTEXT_MAPPER_WFC_IMAGE_PULL_POLICY": "never"}, "CONTEXT_MAPPER_WFC_IMAGE_PULL_POLICY", "not Always"},
		{"an unknown gfsc pull policy", env{"CONTEXT_MAPPER_GFSC_IMAGE_PULL_POLICY": "IfNotPresent "}, "CONTEXT_MAPPER_GFSC_IMAGE_PULL_POLICY", "not Always"},
		{"a quantity that does not parse", env{"CONTEXT_MAPPER_STDIO_BRIDGE_LIMIT_MEMORY": "lots"}, "CONTEXT_MAPPER_STDIO_BRIDGE_LIMIT_MEMORY", `"lots" is not a resource quantity`},
		{"a negative quantity", env{"CONTEXT_MAPPER_WFC_RESOURCES_REQUEST_CPU": "-50m"}, "CONTEXT_MAPPER_WFC_RESOURCES_REQUEST_CPU", "negative"},
		{"a gfsc quantity that does not parse", env{"CONTEXT_MAPPER_GFSC_LIMIT_CPU": "half"}, "CONTEXT_MAPPER_GFSC_LIMIT_CPU", "not a resource quantity"},
		{"a zero workspace size", env{"CONTEXT_MAPPER_HOST_WORKSPACE_SIZE": "0"}, "CONTEXT_MAPPER_HOST_WORKSPACE_SIZE", "greater than zero"},
		{"a SharedFileSystem bound that does not parse", env{"HCC_SFS_MAX_SIZE": "100 GB"}, "HCC_SFS_MAX_SIZE", `"100 GB" is not a resource quantity`},
		{"a zero SharedFileSystem bound", env{"HCC_SFS_MAX_SIZE": "0"}, "HCC_SFS_MAX_SIZE", "greater than zero"},
		{"a negative SharedFileSystem bound", env{"HCC_SFS_MAX_SIZE": "-1Gi"}, "HCC_SFS_MAX_SIZE", "negative"},
		{"a request above its limit", env{"CONTEXT_MAPPER_HOST_RESOURCES_REQUEST_CPU": "1"}, "CONTEXT_MAPPER_HOST_RESOURCES_REQUEST_CPU", "request 1 exceeds the limit 500m set by CONTEXT_MAPPER_HOST_RESOURCES_LIMIT_CPU"},
		{"a limit below its request", env{"CONTEXT_MAPPER_DESKTOP_RESOURCES_LIMIT_MEMORY": "128Mi"}, "CONTEXT_MAPPER_DESKTOP_RESOURCES_REQUEST_MEMORY", "exceeds the limit 128Mi"},
		{"a namespace with capitals", env{"CONTEXT_MAPPER_NAMESPACE": "MCP-Server"}, "CONTEXT_MAPPER_NAMESPACE", `"MCP-Server": a lowercase RFC 1123 label`},
		{"a namespace longer than a label", env{"CONTEXT_MAPPER_CHANNELS_NAMESPACE": long}, "CONTEXT_MAPPER_CHANNELS_NAMESPACE", "no more than 63"},
		{"a namespace with a dot", env{"CONTEXT_MAPPER_GFS_NAMESPACE": "gfs.system"}, "CONTEXT_MAPPER_GFS_NAMESPACE", "must not contain dots"},
		{"a runtime namespace listed twice", env{"CONTEXT_MAPPER_RUNTIME_NAMESPACES": "mcp-server,rpc-proxy,mcp-server"}, "CONTEXT_MAPPER_RUNTIME_NAMESPACES", `namespace "mcp-server" is listed twice`},
		{"an invalid runtime namespace", env{"CONTEXT_MAPPER_RUNTIME_NAMESPACES": "mcp-server,Sandbox_UI"}, "CONTEXT_MAPPER_RUNTIME_NAMESPACES", `namespace "Sandbox_UI"`},
		{"a minimal-infra namespace listed twice", env{"CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES": "sandbox-ui, sandbox-ui"}, "CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES", "listed twice"},
		{"an image with a space", env{"CONTEXT_MAPPER_HOST_IMAGE": "clerum/mcp-host :1"}, "CONTEXT_MAPPER_HOST_IMAGE", "contains whitespace"},
		{"an image prefix with a space", env{"CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES": "clerum/,ghcr io/"}, "CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES", `prefix "ghcr io/" contains whitespace`},
		{"a Control API URL without a scheme", env{"CONTROL_API_BASE_URL": "control-api.control-plane.svc:8090"}, "CONTROL_API_BASE_URL", "absolute http or https URL"},
		{"a Control API URL with another scheme", env{"CONTROL_API_BASE_URL": "ftp://control-api"}, "CONTROL_API_BASE_URL", "absolute http or https URL"},
		{"a relative gateway URL", env{"MCP_HOST_GATEWAY_URL": "/gateway"}, "MCP_HOST_GATEWAY_URL", "absolute http or https URL"},
		{"a gateway URL with a query", env{"MCP_HOST_GATEWAY_URL": "http://gateway:8092/?debug=1"}, "MCP_HOST_GATEWAY_URL", "query or fragment"},
		{"a blank issuer", env{"HCC_MCP_HOST_JWT_ISSUER": "  "}, "HCC_MCP_HOST_JWT_ISSUER", "must not be blank"},
		{"a blank audience", env{"HCC_MCP_HOST_JWT_AUDIENCE": "\t"}, "HCC_MCP_HOST_JWT_AUDIENCE", "must not be blank"},
		{"a blank migration audience", env{"HCC_MCP_HOST_JWT_MIGRATION_AUDIENCE": " "}, "HCC_MCP_HOST_JWT_MIGRATION_AUDIENCE", "must not be blank"},
		{"a blank GFS token audience", env{"CONTEXT_MAPPER_GFS_TOKEN_AUDIENCE": " "}, "CONTEXT_MAPPER_GFS_TOKEN_AUDIENCE", "must not be blank"},
		{"a cluster domain with an underscore", env{"CONTEXT_MAPPER_CLUSTER_DOMAIN": "cluster_local"}, "CONTEXT_MAPPER_CLUSTER_DOMAIN", "RFC 1123 subdomain"},
		{"a Postgres app label with a space", env{"CONTEXT_MAPPER_GFS_POSTGRES_APP_LABEL": "control postgres"}, "CONTEXT_MAPPER_GFS_POSTGRES_APP_LABEL", "valid label"},
		{"a GFS ConfigMap name with capitals", env{"CONTEXT_MAPPER_GFS_JWT_CONFIGMAP": "GFS-Config"}, "CONTEXT_MAPPER_GFS_JWT_CONFIGMAP", "RFC 1123 subdomain"},
		{"a GFS ConfigMap key with a slash", env{"CONTEXT_MAPPER_GFS_JWT_CONFIGMAP_KEY": "jwt/key"}, "CONTEXT_MAPPER_GFS_JWT_CONFIGMAP_KEY", "valid config key"},
		{"a GFS Postgres Secret name with an underscore", env{"CONTEXT_MAPPER_GFS_PG_SECRET": "gfs_db"}, "CONTEXT_MAPPER_GFS_PG_SECRET", "RFC 1123 subdomain"},
		{"a GFS Postgres Secret key with a space", env{"CONTEXT_MAPPER_GFS_PG_SECRET_KEY": "connection string"}, "CONTEXT_MAPPER_GFS_PG_SECRET_KEY", "valid config key"},
		{"a GFS drive name with capitals", env{"CONTEXT_MAPPER_GFS_DRIVE_NAME": "Main"}, "CONTEXT_MAPPER_GFS_DRIVE_NAME", "RFC 1123 label"},
		{"a gfsc pull secret that is not a name", env{"CONTEXT_MAPPER_GFSC_IMAGE_PULL_SECRET": "Reg Cred"}, "CONTEXT_MAPPER_GFSC_IMAGE_PULL_SECRET", "RFC 1123 subdomain"},
		{"a gfsc priority class that is not a name", env{"CONTEXT_MAPPER_GFSC_PRIORITY_CLASS": "high!"}, "CONTEXT_MAPPER_GFSC_PRIORITY_CLASS", "RFC 1123 subdomain"},
		{"a target namespace other than the host namespace", env{"HCC_TARGET_NAMESPACE": "other"}, "HCC_TARGET_NAMESPACE", `"other" differs from CONTEXT_MAPPER_HOST_NAMESPACE "mcp-host"`},
		{"a host namespace moved without the target namespace", env{"CONTEXT_MAPPER_HOST_NAMESPACE": "hosts"}, "HCC_TARGET_NAMESPACE", `"mcp-host" differs from CONTEXT_MAPPER_HOST_NAMESPACE "hosts"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFrom(Controller, required(t, Controller, tt.env).lookup)
			require.Error(t, err)
			assert.Equal(t, []string{tt.wantVar}, failedVars(t, err))
			assert.Contains(t, err.Error(), tt.wantVar+": ")
			assert.Contains(t, err.Error(), tt.reason)
		})
	}
}

func TestK8sAPICIDRs(t *testing.T) {
	tests := []struct {
		name       string
		env        env
		wantCIDRs  []string
		wantSource string
	}{{
		name:       "explicit CIDRs win and are trimmed",
		env:        env{"CONTEXT_MAPPER_K8S_API_CIDRS": " 10.0.0.1/32, fd00::1/128 ,", "KUBERNETES_SERVICE_HOST": "10.43.0.1"},
		wantCIDRs:  []string{"10.0.0.1/32", "fd00::1/128"},
		wantSource: "CONTEXT_MAPPER_K8S_API_CIDRS",
	}, {
		name:       "a /24 is the broadest IPv4 entry accepted",
		env:        env{"CONTEXT_MAPPER_K8S_API_CIDRS": "192.168.10.0/24"},
		wantCIDRs:  []string{"192.168.10.0/24"},
		wantSource: "CONTEXT_MAPPER_K8S_API_CIDRS",
	}, {
		name:       "a /120 is the broadest IPv6 entry accepted",
		env:        env{"CONTEXT_MAPPER_K8S_API_CIDRS": "fd00:10::/120"},
		wantCIDRs:  []string{"fd00:10::/120"},
		wantSource: "CONTEXT_MAPPER_K8S_API_CIDRS",
	}, {
		name:       "explicit CIDRs make a non-IP service host irrelevant",
		env:        env{"CONTEXT_MAPPER_K8S_API_CIDRS": "10.0.0.1/32", "KUBERNETES_SERVICE_HOST": "kubernetes.default.svc"},
		wantCIDRs:  []string{"10.0.0.1/32"},
		wantSource: "CONTEXT_MAPPER_K8S_API_CIDRS",
	}, {
		name:       "an empty list falls back to an IPv4 service host as a /32",
		env:        env{"CONTEXT_MAPPER_K8S_API_CIDRS": "", "KUBERNETES_SERVICE_HOST": "10.43.0.1"},
		wantCIDRs:  []string{"10.43.0.1/32"},
		wantSource: "KUBERNETES_SERVICE_HOST",
	}, {
		name:       "an IPv6 service host becomes a /128",
		env:        env{"KUBERNETES_SERVICE_HOST": "fd00:10:96::1"},
		wantCIDRs:  []string{"fd00:10:96::1/128"},
		wantSource: "KUBERNETES_SERVICE_HOST",
	}, {
		name:       "a list of blank entries falls back like an empty one",
		env:        env{"CONTEXT_MAPPER_K8S_API_CIDRS": " , ", "KUBERNETES_SERVICE_HOST": "10.43.0.1"},
		wantCIDRs:  []string{"10.43.0.1/32"},
		wantSource: "KUBERNETES_SERVICE_HOST",
	}, {
		name:       "without either the hard default applies",
		env:        env{"KUBERNETES_SERVICE_HOST": ""},
		wantCIDRs:  []string{"10.96.0.1/32"},
		wantSource: "default",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustLoad(t, Controller, tt.env)
			var want []netip.Prefix
			for _, c := range tt.wantCIDRs {
				want = append(want, netip.MustParsePrefix(c))
			}
			assert.Equal(t, want, cfg.NetPol.K8sAPICIDRs)
			assert.Equal(t, tt.wantSource, cfg.NetPol.K8sAPICIDRSource)
		})
	}
}

func TestK8sAPICIDRsFailClosed(t *testing.T) {
	tests := []struct {
		name    string
		env     env
		wantVar string
		reason  string
	}{
		{"an IPv4 entry broader than /24", env{"CONTEXT_MAPPER_K8S_API_CIDRS": "10.0.0.0/23"}, "CONTEXT_MAPPER_K8S_API_CIDRS", `entry "10.0.0.0/23" is broader than /24`},
		{"a whole private network", env{"CONTEXT_MAPPER_K8S_API_CIDRS": "10.0.0.1/32,10.0.0.0/8"}, "CONTEXT_MAPPER_K8S_API_CIDRS", `entry "10.0.0.0/8" is broader than /24`},
		{"an IPv6 entry broader than /120", env{"CONTEXT_MAPPER_K8S_API_CIDRS": "fd00::/119"}, "CONTEXT_MAPPER_K8S_API_CIDRS", `entry "fd00::/119" is broader than /120`},
		{"an entry with host bits set", env{"CONTEXT_MAPPER_K8S_API_CIDRS": "10.0.0.1/24"}, "CONTEXT_MAPPER_K8S_API_CIDRS", `entry "10.0.0.1/24" has host bits set`},
		{"a bare address", env{"CONTEXT_MAPPER_K8S_API_CIDRS": "10.0.0.1"}, "CONTEXT_MAPPER_K8S_API_CIDRS", `entry "10.0.0.1" is not a CIDR`},
		{"a prefix length past 32", env{"CONTEXT_MAPPER_K8S_API_CIDRS": "10.0.0.1/33"}, "CONTEXT_MAPPER_K8S_API_CIDRS", "is not a CIDR"},
		{"a hostname", env{"CONTEXT_MAPPER_K8S_API_CIDRS": "kubernetes.default/32"}, "CONTEXT_MAPPER_K8S_API_CIDRS", "is not a CIDR"},
		{"an IPv4-mapped IPv6 entry", env{"CONTEXT_MAPPER_K8S_API_CIDRS": "::ffff:10.0.0.1/128"}, "CONTEXT_MAPPER_K8S_API_CIDRS", "IPv4-mapped"},
		{"a non-IP service host with no explicit CIDRs", env{"KUBERNETES_SERVICE_HOST": "kubernetes.default.svc"}, "KUBERNETES_SERVICE_HOST", `"kubernetes.default.svc" is not an IP address`},
		{"a service host with a zone", env{"KUBERNETES_SERVICE_HOST": "fe80::1%eth0"}, "KUBERNETES_SERVICE_HOST", "is not an IP address"},
		{"a bad CIDR list without a second report for the service host", env{"CONTEXT_MAPPER_K8S_API_CIDRS": "bogus", "KUBERNETES_SERVICE_HOST": "bogus"}, "CONTEXT_MAPPER_K8S_API_CIDRS", "is not a CIDR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFrom(Controller, required(t, Controller, tt.env).lookup)
			require.Error(t, err)
			assert.Equal(t, []string{tt.wantVar}, failedVars(t, err))
			assert.Contains(t, err.Error(), tt.reason)
		})
	}
}

func TestNodeLocalDNSCIDR(t *testing.T) {
	t.Run("unset means no NodeLocal DNS", func(t *testing.T) {
		assert.False(t, mustLoad(t, Controller, nil).NetPol.NodeLocalDNSCIDR.IsValid())
	})
	t.Run("one IPv4 /32 is accepted", func(t *testing.T) {
		cfg := mustLoad(t, Controller, env{"CONTEXT_MAPPER_NODELOCAL_DNS_CIDR": "169.254.20.10/32"})
		assert.Equal(t, netip.MustParsePrefix("169.254.20.10/32"), cfg.NetPol.NodeLocalDNSCIDR)
	})
	for _, value := range []string{
		"169.254.20.10",
		"169.254.20.10/31",
		"169.254.20.0/24",
		"fd00::10/128",
		"::ffff:169.254.20.10/128",
		"169.254.20.10/32,169.254.20.11/32",
		" 169.254.20.10/32",
		"node-local-dns",
	} {
		t.Run("rejects "+strconv.Quote(value), func(t *testing.T) {
			_, err := LoadFrom(Controller, required(t, Controller, env{"CONTEXT_MAPPER_NODELOCAL_DNS_CIDR": value}).lookup)
			require.Error(t, err)
			assert.Equal(t, []string{"CONTEXT_MAPPER_NODELOCAL_DNS_CIDR"}, failedVars(t, err))
			assert.Contains(t, err.Error(), "is not exactly one IPv4 /32 CIDR")
		})
	}
}

func TestEgressDenyCIDRs(t *testing.T) {
	tests := []struct {
		name      string
		component Component
		value     string
		want      []string
	}{{
		name: "unset denies nothing extra",
	}, {
		name:  "a list of blank entries denies nothing extra",
		value: " , ,",
	}, {
		name:  "the cluster's ranges of both families are kept in order and trimmed",
		value: " 10.244.0.0/16, 10.96.0.0/12 ,fd00:10:244::/56,192.168.0.0/24,",
		want:  []string{"10.244.0.0/16", "10.96.0.0/12", "fd00:10:244::/56", "192.168.0.0/24"},
	}, {
		name:  "single hosts of either family are networks too",
		value: "172.16.5.4/32,fd00::1/128",
		want:  []string{"172.16.5.4/32", "fd00::1/128"},
	}, {
		name:      "render reads it as the controller does",
		component: Render,
		value:     "10.244.0.0/16",
		want:      []string{"10.244.0.0/16"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			overrides := env{}
			if tt.value != "" {
				overrides["HCC_EGRESS_DENY_CIDRS"] = tt.value
			}
			var want []netip.Prefix
			for _, c := range tt.want {
				want = append(want, netip.MustParsePrefix(c))
			}
			assert.Equal(t, want, mustLoad(t, tt.component, overrides).NetPol.EgressDenyCIDRs)
		})
	}
	t.Run("the API neither reads nor validates it", func(t *testing.T) {
		assert.Empty(t, mustLoad(t, API, env{"HCC_EGRESS_DENY_CIDRS": "bogus"}).NetPol.EgressDenyCIDRs)
	})
}

func TestEgressDenyCIDRsFailClosed(t *testing.T) {
	tests := []struct {
		name   string
		value  string
		reason string
	}{
		{"a bare address", "10.244.0.0/16,10.96.0.1", `entry "10.96.0.1" is not a CIDR`},
		{"a hostname", "cluster.local/16", `entry "cluster.local/16" is not a CIDR`},
		{"a prefix length past 32", "10.0.0.0/33", `entry "10.0.0.0/33" is not a CIDR`},
		{"a prefix length past 128", "fd00::/129", "is not a CIDR"},
		{"an IPv6 zone", "fe80::%eth0/64", "is not a CIDR"},
		{"a space inside an entry", "10.244.0.0 /16", "is not a CIDR"},
		{"a semicolon for a comma", "10.244.0.0/16;10.96.0.0/12", "is not a CIDR"},
		{"IPv4 host bits", "10.244.1.7/16", `entry "10.244.1.7/16" has host bits set (the network is 10.244.0.0/16)`},
		{"IPv6 host bits", "fd00:10:244::1/56", `entry "fd00:10:244::1/56" has host bits set (the network is fd00:10:244::/56)`},
		{"an IPv4-mapped IPv6 entry", "::ffff:10.244.0.0/112", "IPv4-mapped"},
		{"every IPv4 address", "0.0.0.0/0", `entry "0.0.0.0/0" covers every address`},
		{"every IPv6 address", "::/0", "covers every address"},
		{"an entry listed twice", "10.96.0.0/12, 10.96.0.0/12", `entry "10.96.0.0/12" is listed twice`},
	}
	for _, tt := range tests {
		for _, c := range []Component{Controller, Render} {
			t.Run(tt.name+" fails "+c.String(), func(t *testing.T) {
				_, err := LoadFrom(c, required(t, c, env{"HCC_EGRESS_DENY_CIDRS": tt.value}).lookup)
				require.Error(t, err)
				assert.Equal(t, []string{"HCC_EGRESS_DENY_CIDRS"}, failedVars(t, err))
				assert.Contains(t, err.Error(), "HCC_EGRESS_DENY_CIDRS: entry ")
				assert.Contains(t, err.Error(), tt.reason)
			})
		}
	}
}

func TestHMACSecret(t *testing.T) {
	const name = "INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET"
	tests := []struct {
		name      string
		component Component
		env       env
		reason    string // empty when the load succeeds
	}{
		{"the controller refuses to start without it", Controller, env{}, "required unless CLERUM_DEV_MODE is true"},
		{"the controller treats an empty value as missing", Controller, env{name: ""}, "required"},
		{"the controller treats a blank value as missing", Controller, env{name: "   "}, "required"},
		{"the controller refuses a placeholder", Controller, env{name: "replace-with-a-real-secret"}, "placeholder"},
		{"the controller refuses a placeholder in any case", Controller, env{name: "REPLACE-WITH-SECRET"}, "placeholder"},
		{"the controller accepts a real secret", Controller, env{name: "replacement-is-not-a-placeholder"}, ""},
		{"dev mode lifts the requirement", Controller, env{"CLERUM_DEV_MODE": "true"}, ""},
		{"dev mode spelled 1 accepts a placeholder", Controller, env{"CLERUM_DEV_MODE": "1", name: "replace-with-secret"}, ""},
		{"dev mode spelled 0 is not dev mode", Controller, env{"CLERUM_DEV_MODE": "0"}, "required"},
		{"the API never needs it", API, env{}, ""},
		{"render never needs it", Render, env{}, ""},
		{"render ignores a placeholder", Render, env{name: "replace-with-secret"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := required(t, tt.component, nil)
			delete(e, name)
			for k, v := range tt.env {
				e[k] = v
			}
			_, err := LoadFrom(tt.component, e.lookup)
			if tt.reason == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, []string{name}, failedVars(t, err))
			assert.Contains(t, err.Error(), tt.reason)
		})
	}
	t.Run("dev mode spelled yes fails on its own, without a second report for the secret", func(t *testing.T) {
		_, err := LoadFrom(Controller, env{"CLERUM_DEV_MODE": "yes"}.lookup)
		require.Error(t, err)
		assert.Equal(t, []string{"CLERUM_DEV_MODE"}, failedVars(t, err))
	})
	t.Run("only the controller holds it", func(t *testing.T) {
		for _, c := range []Component{API, Render} {
			assert.Empty(t, mustLoad(t, c, env{name: testHMACSecret}).ControlAPI.HMACSecret, c.String())
		}
	})
}

func TestHostJWTPublicKey(t *testing.T) {
	const name = "HCC_MCP_HOST_JWT_PUBLIC_KEY"
	key := testKey()
	pkix := pkixPEM(t, &key.PublicKey)
	pkcs1 := encodePEM("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&key.PublicKey))
	next := testNextKey()
	nextPKIX := pkixPEM(t, &next.PublicKey)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)

	t.Run("accepted", func(t *testing.T) {
		for _, tt := range []struct {
			name  string
			value string
			want  []*rsa.PublicKey
		}{
			{"an RSA 2048 PKIX key", pkix, []*rsa.PublicKey{&key.PublicKey}},
			{"an RSA 2048 PKCS#1 key", pkcs1, []*rsa.PublicKey{&key.PublicKey}},
			{"a key with literal \\n escapes", strings.ReplaceAll(pkix, "\n", `\n`), []*rsa.PublicKey{&key.PublicKey}},
			{"a key with surrounding whitespace", "\n  " + pkix + "\n\n", []*rsa.PublicKey{&key.PublicKey}},
			{"a key with CRLF line ends", strings.ReplaceAll(pkcs1, "\n", "\r\n"), []*rsa.PublicKey{&key.PublicKey}},
			{"two keys one after another, in order", pkix + nextPKIX, []*rsa.PublicKey{&key.PublicKey, &next.PublicKey}},
			{"two keys in the other order", nextPKIX + pkix, []*rsa.PublicKey{&next.PublicKey, &key.PublicKey}},
			{"two keys of both encodings, blank lines between", pkcs1 + "\n\n" + nextPKIX, []*rsa.PublicKey{&key.PublicKey, &next.PublicKey}},
			{"two keys on one line with \\n escapes", strings.ReplaceAll(pkix+nextPKIX, "\n", `\n`), []*rsa.PublicKey{&key.PublicKey, &next.PublicKey}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				cfg := mustLoad(t, API, env{name: tt.value})
				require.Len(t, cfg.HostAuth.PublicKeys, len(tt.want))
				for i, want := range tt.want {
					assert.True(t, want.Equal(cfg.HostAuth.PublicKeys[i]), "key %d", i+1)
				}
			})
		}
	})

	t.Run("rejected", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			env    env
			reason string
		}{
			{"an absent key", env{}, "required"},
			{"an empty key", env{name: ""}, "required"},
			{"a placeholder", env{name: "replace-with-control-api-public-key"}, "placeholder"},
			{"garbage", env{name: "not a key"}, "is not a PEM block"},
			{"text before the PEM block", env{name: "key: " + pkix}, "has data before the first PEM block"},
			{"text after the PEM block", env{name: pkix + "trailing"}, "has data after the PEM block"},
			{"text between two keys", env{name: pkix + "and\n" + nextPKIX}, "key 1: has data after the PEM block"},
			{"text after two keys", env{name: pkix + nextPKIX + "trailing"}, "key 2: has data after the PEM block"},
			{"a placeholder after a key", env{name: pkix + "replace-with-next-key"}, "has data after the PEM block"},
			{"the same key twice", env{name: pkix + pkix}, "key 2 repeats key 1"},
			{"the same key in both encodings", env{name: pkix + pkcs1}, "key 2 repeats key 1"},
			{"the same key again after another", env{name: pkix + nextPKIX + pkcs1}, "key 3 repeats key 1"},
			{"more keys than a rotation needs", env{name: strings.Repeat(pkix, 5)}, "holds 5 PEM blocks, at most 4"},
			{"a key without its end line", env{name: strings.TrimSuffix(strings.TrimSpace(pkix), "-----END PUBLIC KEY-----") + nextPKIX}, "key 1: is not a PEM block"},
			{"a malformed body", env{name: encodePEM("PUBLIC KEY", []byte("not DER"))}, "malformed PUBLIC KEY block"},
			{"a malformed second key", env{name: pkix + encodePEM("PUBLIC KEY", []byte("not DER"))}, "key 2: malformed PUBLIC KEY block"},
			{"a certificate", env{name: encodePEM("CERTIFICATE", []byte("x"))}, `PEM block "CERTIFICATE" is not PUBLIC KEY or RSA PUBLIC KEY`},
			{"a certificate after a key", env{name: pkix + encodePEM("CERTIFICATE", []byte("x"))}, `key 2: PEM block "CERTIFICATE" is not PUBLIC KEY or RSA PUBLIC KEY`},
			{"an RSA private key in PKCS#1", env{name: encodePEM("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))}, "is a private key (RSA PRIVATE KEY)"},
			{"an RSA private key in PKCS#8", env{name: encodePEM("PRIVATE KEY", pkcs8)}, "is a private key (PRIVATE KEY)"},
			{"a private key after a public key", env{name: nextPKIX + encodePEM("PRIVATE KEY", pkcs8)}, "key 2: is a private key (PRIVATE KEY)"},
			{"an EC public key", env{name: pkixPEM(t, &ecKey.PublicKey)}, "is an ECDSA key, want RSA"},
			{"an EC public key beside an RSA key", env{name: pkix + pkixPEM(t, &ecKey.PublicKey)}, "key 2: is an ECDSA key, want RSA"},
			{"an RSA 1024 key", env{name: pkixPEM(t, &testWeakKey().PublicKey)}, "RSA key has 1024 bits, want at least 2048"},
			{"an RSA 1024 key before a good one", env{name: pkixPEM(t, &testWeakKey().PublicKey) + pkix}, "key 1: RSA key has 1024 bits, want at least 2048"},
			{"no key in dev mode", env{"CLERUM_DEV_MODE": "true"}, "required"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				_, err := LoadFrom(API, tt.env.lookup)
				require.Error(t, err)
				assert.Equal(t, []string{name}, failedVars(t, err))
				assert.Contains(t, err.Error(), tt.reason)
				assert.NotContains(t, err.Error(), "BEGIN", "the key material is not echoed")
			})
		}
	})

	t.Run("the controller and render ignore it", func(t *testing.T) {
		for _, c := range []Component{Controller, Render} {
			for _, value := range []string{"", "garbage", pkix, pkix + pkix} {
				cfg := mustLoad(t, c, env{name: value})
				assert.Nil(t, cfg.HostAuth.PublicKeys, c.String())
			}
		}
	})
}

func TestErrorListsEveryProblemOnOneLine(t *testing.T) {
	_, err := LoadFrom(Controller, env{
		"MCP_HOST_GATEWAY_URL":         "gateway",
		"CONTEXT_MAPPER_K8S_API_CIDRS": "10.0.0.0/8",
		"HCC_TARGET_NAMESPACE":         "other",
		"CONTEXT_MAPPER_PORT":          "0",
	}.lookup)
	require.Error(t, err)
	// Declaration order, whichever pass found the problem: the target
	// namespace and HMAC checks run after every variable is parsed.
	assert.Equal(t, []string{
		"CONTEXT_MAPPER_PORT",
		"HCC_TARGET_NAMESPACE",
		"CONTEXT_MAPPER_K8S_API_CIDRS",
		"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET",
		"MCP_HOST_GATEWAY_URL",
	}, failedVars(t, err))
	assert.Equal(t, `CONTEXT_MAPPER_PORT: must be at least 1 (got 0); `+
		`HCC_TARGET_NAMESPACE: "other" differs from CONTEXT_MAPPER_HOST_NAMESPACE "mcp-host"; `+
		`CONTEXT_MAPPER_K8S_API_CIDRS: entry "10.0.0.0/8" is broader than /24; `+
		`INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET: required unless CLERUM_DEV_MODE is true; `+
		`MCP_HOST_GATEWAY_URL: must be an absolute http or https URL`, err.Error())
	assert.NotContains(t, err.Error(), "\n")
}

func TestSecretsNeverAppearInErrors(t *testing.T) {
	const (
		hmac     = "replace-with-TOPSECRET-HMAC"
		token    = "TOPSECRET-DESKTOP-TOKEN"
		password = "TOPSECRET-PASSWORD"
	)
	e := env{
		"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET": hmac,
		"CONTEXT_MAPPER_DESKTOP_API_TOKEN":     token,
		"CONTROL_API_BASE_URL":                 "http://hcc:" + password + "@control-api:8090",
		"CONTEXT_MAPPER_PORT":                  "abc",
	}
	for _, c := range []Component{Controller, API, Render} {
		t.Run(c.String(), func(t *testing.T) {
			_, err := LoadFrom(c, e.lookup)
			require.Error(t, err)
			assert.Contains(t, failedVars(t, err), "CONTROL_API_BASE_URL")
			assert.NotContains(t, err.Error(), "TOPSECRET")
		})
	}
}

func TestWarnings(t *testing.T) {
	quiet := env{
		"CONTEXT_MAPPER_NETPOL_RESYNC_SEC":       "1500",
		"CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST": "true",
		"CONTEXT_MAPPER_GFSC_IMAGE":              "docker.io/clerum/gfs-controller:0.9.5",
	}
	tests := []struct {
		name      string
		component Component
		env       env
		want      []string
	}{{
		name:      "a controller with release settings has nothing to say",
		component: Controller,
		env:       quiet,
	}, {
		name:      "each disabled resync is named",
		component: Controller,
		env:       env{"CONTEXT_MAPPER_HOST_RESYNC_SEC": "0", "CONTEXT_MAPPER_SFS_RESYNC_SEC": "0", "CONTEXT_MAPPER_GFS_RESYNC_SEC": "0", "CONTEXT_MAPPER_NETPOL_RESYNC_SEC": "0"},
		want:      []string{"CONTEXT_MAPPER_HOST_RESYNC_SEC", "CONTEXT_MAPPER_SFS_RESYNC_SEC", "CONTEXT_MAPPER_GFS_RESYNC_SEC", "CONTEXT_MAPPER_NETPOL_RESYNC_SEC"},
	}, {
		name:      "a disabled defaults-only resync is expected and not named",
		component: Controller,
		env:       env{"CONTEXT_MAPPER_NETPOL_DEFAULTS_RESYNC_SEC": "0"},
	}, {
		name:      "a minimal-infra namespace outside the runtime namespaces is named",
		component: Controller,
		env:       env{"CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES": "sandbox-ui,mcp-server"},
		want:      []string{"CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES"},
	}, {
		name:      "the image allowlist in audit mode is named",
		component: Controller,
		env:       env{"CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST": "false"},
		want:      []string{"CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST"},
	}, {
		name:      "the API names an empty desktop token",
		component: API,
		env:       env{"CONTEXT_MAPPER_DESKTOP_API_TOKEN": ""},
		want:      []string{"CONTEXT_MAPPER_DESKTOP_API_TOKEN"},
	}, {
		name:      "render names only what affects its plan",
		component: Render,
		env:       env{"CONTEXT_MAPPER_NETPOL_RESYNC_SEC": "0", "CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST": "false", "CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES": "sandbox-ui"},
		want:      []string{"CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES", "CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := env{}
			for k, v := range quiet {
				e[k] = v
			}
			for k, v := range tt.env {
				e[k] = v
			}
			cfg := mustLoad(t, tt.component, e)
			assert.Equal(t, tt.want, warnedVars(cfg), cfg.Warnings)
		})
	}
	t.Run("the minimal-infra warning names the namespace", func(t *testing.T) {
		cfg := mustLoad(t, Controller, env{"CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES": "sandbox-ui"})
		assert.Contains(t, cfg.Warnings, "CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES: sandbox-ui not in CONTEXT_MAPPER_RUNTIME_NAMESPACES, so ignored")
	})
}

func TestLeaderTimings(t *testing.T) {
	load := func(lease, renew, retry string) (*Config, error) {
		env := map[string]string{
			"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET": "a-real-secret-of-enough-length-0123456789",
			"HCC_LEADER_LEASE_SEC":                 lease, "HCC_LEADER_RENEW_SEC": renew, "HCC_LEADER_RETRY_SEC": retry,
		}
		return LoadFrom(Controller, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}
	cfg, err := load("", "", "")
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{15 * time.Second, 10 * time.Second, 2 * time.Second},
		[]time.Duration{cfg.Core.LeaderLease, cfg.Core.LeaderRenew, cfg.Core.LeaderRetry})
	cfg, err = load("60", "40", "5")
	require.NoError(t, err)
	assert.Equal(t, 40*time.Second, cfg.Core.LeaderRenew)
	for _, bad := range [][3]string{{"10", "10", "2"}, {"10", "15", "2"}, {"15", "10", "9"}, {"15", "10", "0"}, {"1e1", "5", "1"}} {
		_, err := load(bad[0], bad[1], bad[2])
		assert.Error(t, err, "lease %s renew %s retry %s", bad[0], bad[1], bad[2])
	}
}

// TestDNSServerIsAnIPAndPort: HCC_EXTERNAL_EGRESS_DNS_SERVER is empty (the
// system resolver) or an IP literal and a port; anything else fails closed.
func TestDNSServerIsAnIPAndPort(t *testing.T) {
	assert.Empty(t, mustLoad(t, Controller, nil).McpServer.ExternalEgressDNSServer)
	assert.Equal(t, "127.0.0.1:5353", mustLoad(t, Controller, env{"HCC_EXTERNAL_EGRESS_DNS_SERVER": "127.0.0.1:5353"}).McpServer.ExternalEgressDNSServer)
	assert.Equal(t, "[::1]:53", mustLoad(t, Controller, env{"HCC_EXTERNAL_EGRESS_DNS_SERVER": "[::1]:53"}).McpServer.ExternalEgressDNSServer)
	for _, bad := range []string{"127.0.0.1", "localhost:53", "127.0.0.1:dns", "127.0.0.1:0", "127.0.0.1:053", "127.0.0.1:70000"} {
		_, err := LoadFrom(Controller, required(t, Controller, env{"HCC_EXTERNAL_EGRESS_DNS_SERVER": bad}).lookup)
		if assert.Error(t, err, bad) {
			assert.Contains(t, err.Error(), "HCC_EXTERNAL_EGRESS_DNS_SERVER", bad)
		}
	}
}
