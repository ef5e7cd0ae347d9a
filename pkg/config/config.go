// Package config reads the environment variables that configure hcc-controller
// (including its offline render subcommand) and hcc-api.
//
// Every variable is declared once, in variables.go, with its default, parsing
// rule and description; Load iterates that table and docs/configuration.md is
// rendered from it. Invalid values fail closed: Load reports every bad variable
// in one error so the binaries exit before they contact the cluster, rather
// than programming a permissive policy from a value they misread.
package config

import (
	"crypto/rsa"
	"fmt"
	"net/netip"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Component is the program that loads the configuration. Some variables are
// read by one component only: a value a component never uses is neither
// required nor held in its Config.
type Component int

const (
	// Controller is hcc-controller reconciling a live cluster.
	Controller Component = iota
	// API is the hcc-api HTTP server.
	API
	// Render is hcc-controller's offline render subcommand.
	Render
)

// String returns the command line that runs the component.
func (c Component) String() string {
	switch c {
	case Controller:
		return "hcc-controller"
	case API:
		return "hcc-api"
	case Render:
		return "hcc-controller render"
	}
	return fmt.Sprintf("Component(%d)", int(c))
}

// Config is the typed configuration of one component.
type Config struct {
	Core          Core
	Namespaces    Namespaces
	McpServer     McpServer
	Host          Host
	HostAuth      HostAuth
	Desktop       Desktop
	ChannelReader ChannelReader
	WFC           WFC
	GFS           GFS
	NetPol        NetPol
	ImagePolicy   ImagePolicy
	ControlAPI    ControlAPI
	Dev           Dev

	// Warnings are legal but risky settings, one line each, that the binary
	// logs at startup.
	Warnings []string
}

// Core holds process-wide settings.
type Core struct {
	Port           int32 // hcc-api HTTP port
	ControllerPort int32 // hcc-controller health and metrics port
	PprofPort      int32 // hcc-controller's profiles on 127.0.0.1; 0: none
	DevMode        bool
	LogLevel       string // one of debug, info, warn, error
	PodName        string // leader-election identity
	LeaderElect    bool
	// LeaderLease, LeaderRenew and LeaderRetry are the leader-election
	// lease duration, renew deadline and retry period.
	LeaderLease, LeaderRenew, LeaderRetry time.Duration
	// Workers per reconciler.
	McpServerWorkers, HostWorkers, FileSystemWorkers int
	KubeAPIQPS                                       float32
	KubeAPIBurst                                     int
	ClusterDomain                                    string
}

// Namespaces holds the namespace of each workload HCC manages or selects.
type Namespaces struct {
	McpServer    string // McpServer and Context objects and their workloads
	ControlPlane string
	Host         string
	GFS          string
	RPCProxy     string
	Channels     string
	Sandbox      string
	// Target is the namespace named to the Control API; it always equals Host.
	Target string
}

// McpServer configures the workloads reconciled for McpServer objects.
type McpServer struct {
	ImagePullPolicy      corev1.PullPolicy
	EgressProxyImage     string
	StdioBridgeImage     string
	StdioBridgeResources corev1.ResourceRequirements
	// ExternalEgressResync is the periodic DNS re-resolution interval; 0 disables it.
	ExternalEgressResync     time.Duration
	ExternalEgressDNSTimeout time.Duration
	// ExternalEgressDNSServer is the IP:port of the DNS server hostname
	// bindings are resolved with; empty: the system resolver.
	ExternalEgressDNSServer string
}

// Host configures the mcp-host workloads reconciled for Host objects.
type Host struct {
	Image                 string
	ImagePullPolicy       corev1.PullPolicy
	ImagePullSecret       string // empty: no imagePullSecrets
	Port                  int32
	ConfigMapName         string
	ServiceAccount        string
	WorkspaceStorageClass string
	WorkspaceSize         resource.Quantity
	WorkspacePath         string
	Resources             corev1.ResourceRequirements
	Resync                time.Duration // 0 disables
	// BootstrapRefreshBefore is how long before expiry the bootstrap
	// credential Secret is replaced.
	BootstrapRefreshBefore time.Duration
	// CredentialMaxLifetime is the longest credential lifetime accepted
	// from the Control API (HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC).
	CredentialMaxLifetime time.Duration
	// SecretRequireLabel (HCC_HOST_SECRET_REQUIRE_LABEL): spec.secretRef
	// must name a Secret labelled clerum.io/secret-for-host=<host>; false
	// admits any Secret but the kinds no Host may read (docs/host.md).
	SecretRequireLabel bool
	// AdoptCredentialsCreatedBefore
	// (HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE): an unmarked
	// runtime-token Secret the API server created before it may be adopted
	// instead of re-issued (docs/host.md); zero: never.
	AdoptCredentialsCreatedBefore time.Time
}

// HostAuth configures verification of the RS256 tokens mcp-host presents to
// the v2 API.
type HostAuth struct {
	PublicKeys         []*rsa.PublicKey // loaded by the API component only: one or more, in the variable's order
	Issuer             string
	Audience           string
	MigrationAudience  string
	MaxTTL             time.Duration
	RateLimitPerMinute int
}

// Desktop configures the optional desktop sidecar of a Host.
type Desktop struct {
	Image     string
	Port      int32
	Resources corev1.ResourceRequirements
	// APIToken guards GET /api/v1/desktop/{hostRef}; empty leaves it open.
	// Loaded by the API component only.
	APIToken string
}

// ChannelReader configures the per-Host channel-reader workloads.
type ChannelReader struct {
	Image           string
	ImagePullPolicy corev1.PullPolicy
	HandoffPort     int32
}

// WFC configures the workspace-files-controller run for each SharedFileSystem.
type WFC struct {
	Image                    string
	ImagePullPolicy          corev1.PullPolicy
	ImagePullSecret          string // empty: no imagePullSecrets
	Port                     int32
	InitImage                string
	Resources                corev1.ResourceRequirements
	JWTPublicKeyConfigMap    string
	JWTPublicKeyConfigMapKey string
	MaxUploadBytes           int64
	MaxListEntries           int
	MaxPathDepth             int
	SFSResync                time.Duration     // SharedFileSystem resync; 0 disables
	SFSMaxSize               resource.Quantity // largest SharedFileSystem spec.size
}

// GFS configures the GlobalFileSystem controller (gfsc) workloads.
type GFS struct {
	Port              int32
	Image             string
	ImagePullPolicy   corev1.PullPolicy
	ImagePullSecret   string // empty: no imagePullSecrets
	PriorityClassName string // empty: none
	InitImage         string
	Resources         corev1.ResourceRequirements
	PostgresAppLabel  string
	PostgresPort      int32
	JWTConfigMap      string
	JWTConfigMapKey   string
	PostgresSecret    string
	PostgresSecretKey string
	DriveName         string
	TokenAudience     string
	Resync            time.Duration // 0 disables
}

// NetPol configures NetworkPolicy generation.
type NetPol struct {
	RuntimeNamespaces      []string
	MinimalInfraNamespaces []string
	// K8sAPICIDRs are the API-server destinations, already resolved through
	// the fallback chain; K8sAPICIDRSource names the source that supplied
	// them: "CONTEXT_MAPPER_K8S_API_CIDRS", "KUBERNETES_SERVICE_HOST" or
	// "default".
	K8sAPICIDRs      []netip.Prefix
	K8sAPICIDRSource string
	// KubernetesServiceHost is the raw fallback source of K8sAPICIDRs.
	KubernetesServiceHost string
	// NodeLocalDNSCIDR is the NodeLocal DNSCache address; the zero Prefix
	// means unset.
	NodeLocalDNSCIDR netip.Prefix
	// EgressDenyCIDRs are networks external egress (L3) may never reach:
	// the cluster's pod, Service and node ranges. Empty means none.
	EgressDenyCIDRs        []netip.Prefix
	Resync                 time.Duration // full convergence; 0 disables
	DefaultsResync         time.Duration // L0/L1 defaults only; 0 disables
	OrphanDeleteCap        int
	OrphanDeleteCapPercent int
	// HostOrphanDeleteCap(Percent) are the Host sweep's caps, with the same
	// rules as the NetworkPolicy ones.
	HostOrphanDeleteCap        int
	HostOrphanDeleteCapPercent int
}

// ImagePolicy configures the allowlist applied to local-mode McpServer images.
type ImagePolicy struct {
	AllowedPrefixes []string
	Enforce         bool // false: audit mode, log would-be denials only
}

// ControlAPI configures the Control API integration.
type ControlAPI struct {
	BaseURL string // without a trailing slash
	// HMACSecret signs InternalControl JWTs. Loaded by the Controller
	// component only; empty in dev mode.
	HMACSecret string
	GatewayURL string // injected into mcp-host pods, never called by HCC
}

// Dev holds the raw JSON fixtures used in dev mode. They are parsed by the
// development provider, which treats malformed JSON as empty.
type Dev struct {
	McpServersJSON string
	ContextsJSON   string
	McpAuthJSON    string
}

// Load reads the configuration of component c from the process environment.
func Load(c Component) (*Config, error) {
	return LoadFrom(c, os.LookupEnv)
}

// LoadFrom reads the configuration of component c through lookup, which has
// the semantics of os.LookupEnv. On failure it returns an *Error naming every
// invalid variable.
func LoadFrom(c Component, lookup func(string) (string, bool)) (*Config, error) {
	cfg := &Config{}
	// reasons is indexed like variables so that the error lists problems in
	// declaration order whichever pass found them.
	reasons := make([]string, len(variables))
	for i, v := range variables {
		if !v.readBy.has(c) {
			continue
		}
		if err := v.field.set(cfg, v.value(lookup)); err != nil {
			reasons[i] = err.Error()
		}
	}
	// Cross-variable rules run once every variable is parsed. A rule whose
	// inputs are invalid is skipped: that value is already reported, and a
	// second report (say, a namespace mismatch) would only mislead.
	for i, v := range variables {
		if v.cross == nil || !v.readBy.has(c) || reasons[i] != "" || anyFailed(v.cross.needs, reasons) {
			continue
		}
		if err := v.cross.check(cfg); err != nil {
			reasons[i] = err.Error()
		}
	}
	if err := newError(reasons); err != nil {
		return nil, err
	}
	for _, v := range variables {
		if v.warn == nil || !v.readBy.has(c) || !v.warn.shownBy.has(c) {
			continue
		}
		if w := v.warn.text(cfg); w != "" {
			cfg.Warnings = append(cfg.Warnings, v.name+": "+w)
		}
	}
	return cfg, nil
}

func anyFailed(names []string, reasons []string) bool {
	for _, n := range names {
		if reasons[declared[n]] != "" {
			return true
		}
	}
	return false
}
