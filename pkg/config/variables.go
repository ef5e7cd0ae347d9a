package config

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// groups declares every environment variable, once, in the order Load reads
// them, errors list them and docs/configuration.md shows them.
var groups = []group{{
	title: "Core / server",
	vars: []variable{{
		name: "CONTEXT_MAPPER_PORT", def: "8081",
		desc:  "hcc-api HTTP port.",
		field: port(func(c *Config) *int32 { return &c.Core.Port }),
	}, {
		name: "HCC_CONTROLLER_PORT", def: "8082",
		desc:  "hcc-controller port for `/health`, `/ready` and `/metrics`.",
		field: port(func(c *Config) *int32 { return &c.Core.ControllerPort }),
	}, {
		name: "HCC_PPROF_PORT", def: "0",
		desc: "Port of hcc-controller's Go profiles (`/debug/pprof/`: heap, CPU, goroutines), served on 127.0.0.1 only (reach it with `kubectl port-forward`); 0 serves none. " +
			"A heap profile shows what the caches hold: leave it off except to profile.",
		field:  integer(func(c *Config) *int32 { return &c.Core.PprofPort }, 0, 65535),
		readBy: only(Controller),
	}, {
		name: "CLERUM_DEV_MODE", def: "false",
		desc:  "Serve McpServers, Contexts and credentials from the `CLERUM_*` JSON variables instead of the cluster; the controller does not reconcile. Lifts the HMAC secret requirement.",
		field: boolean(func(c *Config) *bool { return &c.Core.DevMode }),
	}, {
		name: "LOG_LEVEL", def: "info",
		desc:  "Log level.",
		field: logLevel(func(c *Config) *string { return &c.Core.LogLevel }),
	}, {
		name: "POD_NAME", docDefault: "(hostname)",
		desc:  "Leader-election identity.",
		field: hostnameDefault(func(c *Config) *string { return &c.Core.PodName }),
	}, {
		name: "HCC_LEADER_ELECT", def: "true",
		desc:  "Run hcc-controller under leader election.",
		field: boolean(func(c *Config) *bool { return &c.Core.LeaderElect }),
	}, {
		name: "HCC_LEADER_LEASE_SEC", def: "15",
		desc:   "Leader-election lease duration: how long a standby waits after the leader stops renewing.",
		field:  seconds(func(c *Config) *time.Duration { return &c.Core.LeaderLease }, 1),
		readBy: only(Controller),
	}, {
		name: "HCC_LEADER_RENEW_SEC", def: "10",
		desc:   "Leader-election renew deadline: a leader that cannot renew for this long stops. Must be shorter than the lease and longer than the retry period.",
		field:  seconds(func(c *Config) *time.Duration { return &c.Core.LeaderRenew }, 1),
		readBy: only(Controller),
		cross:  &crossCheck{needs: []string{"HCC_LEADER_LEASE_SEC", "HCC_LEADER_RETRY_SEC"}, check: leaderTimings},
	}, {
		name: "HCC_LEADER_RETRY_SEC", def: "2",
		desc:   "Leader-election retry period.",
		field:  seconds(func(c *Config) *time.Duration { return &c.Core.LeaderRetry }, 1),
		readBy: only(Controller),
	}, {
		name: "HCC_MCPSERVER_WORKERS", def: "4",
		desc:   "McpServers the McpServer operator syncs at once.",
		field:  integer(func(c *Config) *int { return &c.Core.McpServerWorkers }, 1, 64),
		readBy: only(Controller),
	}, {
		name: "HCC_HOST_WORKERS", def: "2",
		desc:   "Hosts the Host operator syncs at once.",
		field:  integer(func(c *Config) *int { return &c.Core.HostWorkers }, 1, 64),
		readBy: only(Controller),
	}, {
		name: "HCC_FILESYSTEM_WORKERS", def: "1",
		desc:   "SharedFileSystems and GlobalFileSystems the filesystem reconcilers sync at once.",
		field:  integer(func(c *Config) *int { return &c.Core.FileSystemWorkers }, 1, 64),
		readBy: only(Controller),
	}, {
		name: "HCC_KUBE_API_QPS", def: "50",
		desc:  "Sustained request rate to the Kubernetes API server, of all of the binary's clients together (hcc-controller's leader election has a budget of its own).",
		field: qps(func(c *Config) *float32 { return &c.Core.KubeAPIQPS }),
	}, {
		name: "HCC_KUBE_API_BURST", def: "100",
		desc:  "Request burst to the Kubernetes API server, of all of the binary's clients together.",
		field: integer(func(c *Config) *int { return &c.Core.KubeAPIBurst }, 1, math.MaxInt64),
	}, {
		name: "CONTEXT_MAPPER_CLUSTER_DOMAIN", def: "cluster.local",
		desc:  "Cluster DNS domain used in the Service URLs the API reports.",
		field: dnsSubdomain(func(c *Config) *string { return &c.Core.ClusterDomain }),
	}},
}, {
	title: "Namespaces",
	vars: []variable{{
		name: "CONTEXT_MAPPER_NAMESPACE", def: "mcp-server",
		desc:  "McpServer and Context objects and the MCP server workloads.",
		field: dnsLabel(func(c *Config) *string { return &c.Namespaces.McpServer }),
	}, {
		name: "CONTEXT_MAPPER_CONTROL_PLANE_NAMESPACE", def: "control-plane",
		desc:  "Control-plane gateways, mcp-proxy and HCC itself.",
		field: dnsLabel(func(c *Config) *string { return &c.Namespaces.ControlPlane }),
	}, {
		name: "CONTEXT_MAPPER_HOST_NAMESPACE", def: "mcp-host",
		desc:  "Host objects and mcp-host pods.",
		field: dnsLabel(func(c *Config) *string { return &c.Namespaces.Host }),
	}, {
		name: "CONTEXT_MAPPER_GFS_NAMESPACE", def: "gfs",
		desc:  "GlobalFileSystem objects and the gfsc workloads.",
		field: dnsLabel(func(c *Config) *string { return &c.Namespaces.GFS }),
	}, {
		name: "CONTEXT_MAPPER_RPC_PROXY_NAMESPACE", def: "rpc-proxy",
		desc:  "rpc-proxy pods, selected by the egress policies.",
		field: dnsLabel(func(c *Config) *string { return &c.Namespaces.RPCProxy }),
	}, {
		name: "CONTEXT_MAPPER_CHANNELS_NAMESPACE", def: "channels",
		desc:  "Per-Host channel-reader workloads.",
		field: dnsLabel(func(c *Config) *string { return &c.Namespaces.Channels }),
	}, {
		name: "CONTEXT_MAPPER_SANDBOX_NAMESPACE", def: "sandbox-recipes",
		desc:  "Workflow-recipe workloads.",
		field: dnsLabel(func(c *Config) *string { return &c.Namespaces.Sandbox }),
	}, {
		name: "HCC_TARGET_NAMESPACE", def: "mcp-host",
		desc:  "Namespace named to the Control API when requesting mcp-host credentials. Must equal `CONTEXT_MAPPER_HOST_NAMESPACE`.",
		field: dnsLabel(func(c *Config) *string { return &c.Namespaces.Target }),
		cross: &crossCheck{needs: []string{"CONTEXT_MAPPER_HOST_NAMESPACE"}, check: targetIsHostNamespace},
	}},
}, {
	title: "MCP server provisioning",
	vars: []variable{{
		name: "CONTEXT_MAPPER_MCPSERVER_IMAGE_PULL_POLICY", def: "IfNotPresent",
		desc:  "Pull policy of McpServer workloads.",
		field: pullPolicy(func(c *Config) *corev1.PullPolicy { return &c.McpServer.ImagePullPolicy }),
	}, {
		name: "CONTEXT_MAPPER_EGRESS_PROXY_IMAGE", def: "clerum/nginx-egress-proxy:0.1.0",
		desc:  "nginx egress proxy run for each remote McpServer.",
		field: image(func(c *Config) *string { return &c.McpServer.EgressProxyImage }),
	}, {
		name: "CONTEXT_MAPPER_STDIO_BRIDGE_IMAGE", def: "docker.io/clerum/stdio-bridge:0.9.5",
		desc:  "stdio-bridge sidecar of stdio McpServers. Default chosen by this project.",
		field: image(func(c *Config) *string { return &c.McpServer.StdioBridgeImage }),
	}, {
		name: "CONTEXT_MAPPER_STDIO_BRIDGE_REQUEST_MEMORY", def: "32Mi",
		desc:  "stdio-bridge memory request.",
		field: request(stdioBridgeResources, corev1.ResourceMemory),
		cross: withinLimit(stdioBridgeResources, corev1.ResourceMemory, "CONTEXT_MAPPER_STDIO_BRIDGE_LIMIT_MEMORY"),
	}, {
		name: "CONTEXT_MAPPER_STDIO_BRIDGE_REQUEST_CPU", def: "50m",
		desc:  "stdio-bridge CPU request.",
		field: request(stdioBridgeResources, corev1.ResourceCPU),
		cross: withinLimit(stdioBridgeResources, corev1.ResourceCPU, "CONTEXT_MAPPER_STDIO_BRIDGE_LIMIT_CPU"),
	}, {
		name: "CONTEXT_MAPPER_STDIO_BRIDGE_LIMIT_MEMORY", def: "128Mi",
		desc:  "stdio-bridge memory limit.",
		field: limit(stdioBridgeResources, corev1.ResourceMemory),
	}, {
		name: "CONTEXT_MAPPER_STDIO_BRIDGE_LIMIT_CPU", def: "200m",
		desc:  "stdio-bridge CPU limit.",
		field: limit(stdioBridgeResources, corev1.ResourceCPU),
	}, {
		name: "HCC_EXTERNAL_EGRESS_RESYNC_SEC", def: "300",
		desc:  "Interval of the periodic DNS re-resolution of external egress bindings. 0 disables it; watch events still reconcile.",
		field: seconds(func(c *Config) *time.Duration { return &c.McpServer.ExternalEgressResync }, 0),
	}, {
		name: "HCC_EXTERNAL_EGRESS_DNS_TIMEOUT_MS", def: "5000",
		desc:  "Deadline of one hostname lookup.",
		field: milliseconds(func(c *Config) *time.Duration { return &c.McpServer.ExternalEgressDNSTimeout }, 1),
	}, {
		name: "HCC_EXTERNAL_EGRESS_DNS_SERVER", def: "",
		desc:  "IP:port of the DNS server that resolves external egress hostnames, asked instead of the system resolver (/etc/resolv.conf). Empty: the system resolver. Meant for tests, which run their own server.",
		field: optional(validated("IP:port", validateIPPort, func(c *Config) *string { return &c.McpServer.ExternalEgressDNSServer })),
	}},
}, {
	title: "mcp-host provisioning",
	vars: []variable{{
		name: "CONTEXT_MAPPER_HOST_IMAGE", def: "docker.io/clerum/mcp-host:0.9.5",
		desc:  "mcp-host image of Host Deployments. Default chosen by this project.",
		field: image(func(c *Config) *string { return &c.Host.Image }),
	}, {
		name: "CONTEXT_MAPPER_HOST_IMAGE_PULL_POLICY", def: "Always",
		desc:  "Pull policy of Host Deployments.",
		field: pullPolicy(func(c *Config) *corev1.PullPolicy { return &c.Host.ImagePullPolicy }),
	}, {
		name: "CONTEXT_MAPPER_HOST_IMAGE_PULL_SECRET", def: "clerum",
		desc:  "imagePullSecrets name of Host Deployments; empty for none.",
		field: text(func(c *Config) *string { return &c.Host.ImagePullSecret }),
	}, {
		name: "CONTEXT_MAPPER_HOST_PORT", def: "8080",
		desc:  "mcp-host container and Service port.",
		field: port(func(c *Config) *int32 { return &c.Host.Port }),
	}, {
		name: "CONTEXT_MAPPER_HOST_CONFIGMAP_NAME", def: "mcp-host-config",
		desc:  "ConfigMap loaded into mcp-host containers through `envFrom`.",
		field: text(func(c *Config) *string { return &c.Host.ConfigMapName }),
	}, {
		name: "CONTEXT_MAPPER_HOST_SERVICE_ACCOUNT", def: "mcp-host",
		desc:  "The legacy shared ServiceAccount of Host pods. Parsed, but no longer their identity: each Host's pod runs as its own `host-<host>` account, whose Role reads only that Host and its Secrets (docs/host.md). Set to anything but the default, it is warned about at startup.",
		field: text(func(c *Config) *string { return &c.Host.ServiceAccount }),
		warn: &warning{shownBy: only(Controller), text: func(c *Config) string {
			if c.Host.ServiceAccount == "mcp-host" {
				return ""
			}
			return "no longer decides the identity of Host pods, which run as their own host-<host> ServiceAccount; the value is ignored"
		}},
	}, {
		name: "CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS", def: "do-block-storage-retain",
		desc:  "StorageClass of per-Host workspace claims.",
		field: text(func(c *Config) *string { return &c.Host.WorkspaceStorageClass }),
	}, {
		name: "CONTEXT_MAPPER_HOST_WORKSPACE_SIZE", def: "10Gi",
		desc:  "Size of per-Host workspace claims.",
		field: size(func(c *Config) *resource.Quantity { return &c.Host.WorkspaceSize }),
	}, {
		name: "CONTEXT_MAPPER_HOST_WORKSPACE_PATH", def: "/workspace",
		desc:  "Workspace mount path in mcp-host containers.",
		field: text(func(c *Config) *string { return &c.Host.WorkspacePath }),
	}, {
		name: "CONTEXT_MAPPER_HOST_RESOURCES_REQUEST_MEMORY", def: "128Mi",
		desc:  "mcp-host memory request.",
		field: request(hostResources, corev1.ResourceMemory),
		cross: withinLimit(hostResources, corev1.ResourceMemory, "CONTEXT_MAPPER_HOST_RESOURCES_LIMIT_MEMORY"),
	}, {
		name: "CONTEXT_MAPPER_HOST_RESOURCES_REQUEST_CPU", def: "100m",
		desc:  "mcp-host CPU request.",
		field: request(hostResources, corev1.ResourceCPU),
		cross: withinLimit(hostResources, corev1.ResourceCPU, "CONTEXT_MAPPER_HOST_RESOURCES_LIMIT_CPU"),
	}, {
		name: "CONTEXT_MAPPER_HOST_RESOURCES_LIMIT_MEMORY", def: "512Mi",
		desc:  "mcp-host memory limit.",
		field: limit(hostResources, corev1.ResourceMemory),
	}, {
		name: "CONTEXT_MAPPER_HOST_RESOURCES_LIMIT_CPU", def: "500m",
		desc:  "mcp-host CPU limit.",
		field: limit(hostResources, corev1.ResourceCPU),
	}, {
		name: "CONTEXT_MAPPER_HOST_RESYNC_SEC", def: "300",
		desc:  "Interval of the periodic full Host reconcile, which repairs missed watch events and degraded credentials. 0 disables it (warned at startup).",
		field: seconds(func(c *Config) *time.Duration { return &c.Host.Resync }, 0),
		warn:  resyncDisabled(func(c *Config) time.Duration { return c.Host.Resync }, "missed Host events and degraded credentials are not repaired until restart"),
	}, {
		name: "HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC", def: "900",
		desc:  "How long before expiry the bootstrap credential Secret of a Host is replaced.",
		field: seconds(func(c *Config) *time.Duration { return &c.Host.BootstrapRefreshBefore }, 1),
	}, {
		name: "HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC", def: "2592000",
		desc: "Longest bootstrap credential lifetime accepted from the Control API (30 days): an answer whose `expiresAt` lies further out is invalid and not stored. " +
			"Must exceed `HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC` by more than 300 seconds, the shortest lifetime accepted.",
		field: seconds(func(c *Config) *time.Duration { return &c.Host.CredentialMaxLifetime }, 1),
		cross: &crossCheck{needs: []string{"HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC"}, check: credentialLifetimes},
	}, {
		name: "HCC_HOST_SECRET_REQUIRE_LABEL", def: "false",
		desc: "Which Secret a Host's `spec.secretRef` may name (docs/host.md, \"Identity and hardening\"). False: any Secret of the host namespace that exists, except a service-account token, a registry credential, a Secret labelled `clerum.io/managed-by=host-context-controller` and one labelled `clerum.io/secret-for-host` for another Host. " +
			"True: it must also be labelled `clerum.io/secret-for-host=<host name>`. A Host whose Secret is refused is blocked, and its Role does not grant it.",
		field: boolean(func(c *Config) *bool { return &c.Host.SecretRequireLabel }),
	}, {
		name: "HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE",
		desc: "The migration from a controller that did not mark runtime-token Secrets (docs/host.md, \"Adopting credentials across an upgrade\"). Empty: an unmarked runtime-token Secret holds nothing HCC believes and its credential is re-issued. " +
			"Set, to the time the previous controller was stopped: an unmarked one the API server created before this instant, for the Host it names, holding a credential not yet due and not beyond `HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC`, is marked and kept instead, without calling the Control API. Unset it once the upgrade is done (warned at startup while set).",
		field:  pastTimestamp(func(c *Config) *time.Time { return &c.Host.AdoptCredentialsCreatedBefore }, time.Now),
		readBy: only(Controller),
		warn: &warning{text: func(c *Config) string {
			if c.Host.AdoptCredentialsCreatedBefore.IsZero() {
				return ""
			}
			return "unmarked runtime-token Secrets created before " + c.Host.AdoptCredentialsCreatedBefore.UTC().Format(time.RFC3339) +
				" are adopted as they are, not re-issued; unset it once every Host's credential is marked"
		}},
	}},
}, {
	title: "mcp-host API authorization",
	vars: []variable{{
		name:   "HCC_MCP_HOST_JWT_PUBLIC_KEY",
		desc:   "Public keys that verify the RS256 tokens of the v2 Host API. Several keys let a Control API key rotation proceed without an outage (docs/http-api.md): a token whose `kid` is a key's RFC 7638 thumbprint is checked against that key only, a token without `kid` against each key. Required, dev mode included.",
		readBy: only(API),
		field:  rsaPublicKeys(func(c *Config) *[]*rsa.PublicKey { return &c.HostAuth.PublicKeys }),
	}, {
		name: "HCC_MCP_HOST_JWT_ISSUER", def: "control-api",
		desc:  "Exact `iss` accepted.",
		field: nonBlank(func(c *Config) *string { return &c.HostAuth.Issuer }),
	}, {
		name: "HCC_MCP_HOST_JWT_AUDIENCE", def: "host-context-controller",
		desc:  "`aud` every accepted token carries.",
		field: nonBlank(func(c *Config) *string { return &c.HostAuth.Audience }),
	}, {
		name: "HCC_MCP_HOST_JWT_MIGRATION_AUDIENCE", def: "workflow-controller",
		desc:  "The one other `aud` a token may carry alongside the audience.",
		field: nonBlank(func(c *Config) *string { return &c.HostAuth.MigrationAudience }),
	}, {
		name: "HCC_MCP_HOST_JWT_MAX_TTL_SECONDS", def: "600",
		desc:  "Largest `exp - iat` accepted. The shipped Deployment sets `300`, the Control API's access-token lifetime (docs/deploy.md).",
		field: seconds(func(c *Config) *time.Duration { return &c.HostAuth.MaxTTL }, 1),
	}, {
		name: "HCC_MCP_HOST_API_RATE_LIMIT_PER_MINUTE", def: "120",
		desc:  "Requests per minute per Host UID and action.",
		field: integer(func(c *Config) *int { return &c.HostAuth.RateLimitPerMinute }, 1, math.MaxInt64),
	}},
}, {
	title: "Desktop",
	note:  "The sidecar added to a Host whose `spec.desktop.enabled` is true.",
	vars: []variable{{
		name: "CONTEXT_MAPPER_DESKTOP_IMAGE", def: "clerum/mcp-host-desktop:latest",
		desc:  "Desktop sidecar image.",
		field: image(func(c *Config) *string { return &c.Desktop.Image }),
	}, {
		name: "CONTEXT_MAPPER_DESKTOP_PORT", def: "3000",
		desc:  "Desktop container port.",
		field: port(func(c *Config) *int32 { return &c.Desktop.Port }),
	}, {
		name: "CONTEXT_MAPPER_DESKTOP_RESOURCES_REQUEST_MEMORY", def: "256Mi",
		desc:  "Desktop memory request.",
		field: request(desktopResources, corev1.ResourceMemory),
		cross: withinLimit(desktopResources, corev1.ResourceMemory, "CONTEXT_MAPPER_DESKTOP_RESOURCES_LIMIT_MEMORY"),
	}, {
		name: "CONTEXT_MAPPER_DESKTOP_RESOURCES_REQUEST_CPU", def: "250m",
		desc:  "Desktop CPU request.",
		field: request(desktopResources, corev1.ResourceCPU),
		cross: withinLimit(desktopResources, corev1.ResourceCPU, "CONTEXT_MAPPER_DESKTOP_RESOURCES_LIMIT_CPU"),
	}, {
		name: "CONTEXT_MAPPER_DESKTOP_RESOURCES_LIMIT_MEMORY", def: "4Gi",
		desc:  "Desktop memory limit.",
		field: limit(desktopResources, corev1.ResourceMemory),
	}, {
		name: "CONTEXT_MAPPER_DESKTOP_RESOURCES_LIMIT_CPU", def: "1",
		desc:  "Desktop CPU limit.",
		field: limit(desktopResources, corev1.ResourceCPU),
	}, {
		name:   "CONTEXT_MAPPER_DESKTOP_API_TOKEN",
		desc:   "Bearer token for `GET /api/v1/desktop/{hostRef}`. Empty leaves the endpoint unauthenticated (warned at startup); set it in any shared cluster.",
		readBy: only(API),
		field:  text(func(c *Config) *string { return &c.Desktop.APIToken }),
		warn: &warning{text: func(c *Config) string {
			if c.Desktop.APIToken != "" {
				return ""
			}
			return "empty, so GET /api/v1/desktop/{hostRef} is unauthenticated"
		}},
	}},
}, {
	title: "channel-reader provisioning",
	vars: []variable{{
		name: "CONTEXT_MAPPER_CHANNEL_READER_IMAGE", def: "clerum/channel-reader:0.9.5",
		desc:  "Image of per-Host channel-reader Deployments.",
		field: image(func(c *Config) *string { return &c.ChannelReader.Image }),
	}, {
		name: "CONTEXT_MAPPER_CHANNEL_READER_IMAGE_PULL_POLICY", def: "Always",
		desc:  "Pull policy of channel-reader Deployments.",
		field: pullPolicy(func(c *Config) *corev1.PullPolicy { return &c.ChannelReader.ImagePullPolicy }),
	}, {
		name: "CONTEXT_MAPPER_CHANNEL_READER_HANDOFF_PORT", def: "8099",
		desc:  "Internal handoff port of channel-reader Services.",
		field: port(func(c *Config) *int32 { return &c.ChannelReader.HandoffPort }),
	}},
}, {
	title: "workspace-files-controller (WFC) provisioning",
	note:  "One WFC runs for each SharedFileSystem.",
	vars: []variable{{
		name: "CONTEXT_MAPPER_WFC_IMAGE", def: "docker.io/clerum/workspace-files-controller:0.9.5",
		desc:  "WFC image. Default chosen by this project.",
		field: image(func(c *Config) *string { return &c.WFC.Image }),
	}, {
		name: "CONTEXT_MAPPER_WFC_IMAGE_PULL_POLICY", def: "IfNotPresent",
		desc:  "Pull policy of WFC Deployments.",
		field: pullPolicy(func(c *Config) *corev1.PullPolicy { return &c.WFC.ImagePullPolicy }),
	}, {
		name: "CONTEXT_MAPPER_WFC_IMAGE_PULL_SECRET", def: "clerum",
		desc:  "imagePullSecrets name of WFC Deployments; empty for none.",
		field: text(func(c *Config) *string { return &c.WFC.ImagePullSecret }),
	}, {
		name: "CONTEXT_MAPPER_WFC_PORT", def: "8086",
		desc:  "WFC container and Service port.",
		field: port(func(c *Config) *int32 { return &c.WFC.Port }),
	}, {
		name: "CONTEXT_MAPPER_WFC_INIT_IMAGE", def: "busybox:1.36",
		desc:  "Init container that creates directories on a fresh claim and sets their owner.",
		field: image(func(c *Config) *string { return &c.WFC.InitImage }),
	}, {
		name: "CONTEXT_MAPPER_WFC_RESOURCES_REQUEST_MEMORY", def: "64Mi",
		desc:  "WFC memory request.",
		field: request(wfcResources, corev1.ResourceMemory),
		cross: withinLimit(wfcResources, corev1.ResourceMemory, "CONTEXT_MAPPER_WFC_RESOURCES_LIMIT_MEMORY"),
	}, {
		name: "CONTEXT_MAPPER_WFC_RESOURCES_REQUEST_CPU", def: "50m",
		desc:  "WFC CPU request.",
		field: request(wfcResources, corev1.ResourceCPU),
		cross: withinLimit(wfcResources, corev1.ResourceCPU, "CONTEXT_MAPPER_WFC_RESOURCES_LIMIT_CPU"),
	}, {
		name: "CONTEXT_MAPPER_WFC_RESOURCES_LIMIT_MEMORY", def: "128Mi",
		desc:  "WFC memory limit.",
		field: limit(wfcResources, corev1.ResourceMemory),
	}, {
		name: "CONTEXT_MAPPER_WFC_RESOURCES_LIMIT_CPU", def: "200m",
		desc:  "WFC CPU limit.",
		field: limit(wfcResources, corev1.ResourceCPU),
	}, {
		name: "CONTEXT_MAPPER_WFC_JWT_PUBLIC_KEY_CM", def: "mcp-host-config",
		desc:  "ConfigMap holding the JWT public key the WFC verifies with.",
		field: text(func(c *Config) *string { return &c.WFC.JWTPublicKeyConfigMap }),
	}, {
		name: "CONTEXT_MAPPER_WFC_JWT_PUBLIC_KEY_CM_KEY", def: "CLERUM_AUTH_JWT_PUBLIC_KEY",
		desc:  "Key of that ConfigMap.",
		field: text(func(c *Config) *string { return &c.WFC.JWTPublicKeyConfigMapKey }),
	}, {
		name: "CONTEXT_MAPPER_WFC_MAX_UPLOAD_BYTES", def: "104857600",
		desc:  "Largest upload the WFC accepts (100 MiB by default).",
		field: integer(func(c *Config) *int64 { return &c.WFC.MaxUploadBytes }, 1, math.MaxInt64),
	}, {
		name: "CONTEXT_MAPPER_WFC_MAX_LIST_ENTRIES", def: "5000",
		desc:  "Most directory entries the WFC lists.",
		field: integer(func(c *Config) *int { return &c.WFC.MaxListEntries }, 1, math.MaxInt64),
	}, {
		name: "CONTEXT_MAPPER_WFC_MAX_PATH_DEPTH", def: "32",
		desc:  "Deepest path the WFC traverses.",
		field: integer(func(c *Config) *int { return &c.WFC.MaxPathDepth }, 1, math.MaxInt64),
	}, {
		name: "CONTEXT_MAPPER_SFS_RESYNC_SEC", def: "60",
		desc:  "Interval of the periodic full SharedFileSystem reconcile. Watches see only SharedFileSystem changes, so this is what notices a bound claim or a ready WFC. 0 disables it (warned at startup).",
		field: seconds(func(c *Config) *time.Duration { return &c.WFC.SFSResync }, 0),
		warn:  resyncDisabled(func(c *Config) time.Duration { return c.WFC.SFSResync }, "SharedFileSystems do not become Ready when their claim binds or their WFC starts"),
	}, {
		name: "HCC_SFS_MAX_SIZE", def: "100Gi",
		desc:   "Largest `spec.size` a SharedFileSystem may ask for (a Kubernetes quantity). A larger one gets no claim, or its claim is not grown (`VolumeBound=False`, `InvalidSpec`).",
		field:  size(func(c *Config) *resource.Quantity { return &c.WFC.SFSMaxSize }),
		readBy: only(Controller, Render),
	}},
}, {
	title: "GlobalFileSystem (GFS) provisioning",
	note:  "Every value here is validated; an invalid one stops startup.",
	vars: []variable{{
		name: "CONTEXT_MAPPER_GFSC_PORT", def: "8087",
		desc:  "gfsc Service port.",
		field: port(func(c *Config) *int32 { return &c.GFS.Port }),
	}, {
		name: "CONTEXT_MAPPER_GFSC_IMAGE", def: "clerum/gfs-controller:test",
		desc:  "gfsc writer image. The default is a test tag (warned at startup); override it.",
		field: image(func(c *Config) *string { return &c.GFS.Image }),
		warn: &warning{shownBy: only(Controller), text: func(c *Config) string {
			if !strings.HasSuffix(c.GFS.Image, ":test") {
				return ""
			}
			return "uses a :test tag; set a release image"
		}},
	}, {
		name: "CONTEXT_MAPPER_GFSC_IMAGE_PULL_POLICY", def: "IfNotPresent",
		desc:  "Pull policy of gfsc Deployments.",
		field: pullPolicy(func(c *Config) *corev1.PullPolicy { return &c.GFS.ImagePullPolicy }),
	}, {
		name:  "CONTEXT_MAPPER_GFSC_IMAGE_PULL_SECRET",
		desc:  "imagePullSecrets name of gfsc Deployments; empty for none.",
		field: optional(dnsSubdomain(func(c *Config) *string { return &c.GFS.ImagePullSecret })),
	}, {
		name:  "CONTEXT_MAPPER_GFSC_PRIORITY_CLASS",
		desc:  "priorityClassName of gfsc Deployments; empty for none.",
		field: optional(dnsSubdomain(func(c *Config) *string { return &c.GFS.PriorityClassName })),
	}, {
		name: "CONTEXT_MAPPER_GFSC_INIT_IMAGE", def: "busybox:1.36",
		desc:  "gfsc init container image.",
		field: image(func(c *Config) *string { return &c.GFS.InitImage }),
	}, {
		name: "CONTEXT_MAPPER_GFSC_REQUEST_MEMORY", def: "128Mi",
		desc:  "gfsc memory request.",
		field: request(gfscResources, corev1.ResourceMemory),
		cross: withinLimit(gfscResources, corev1.ResourceMemory, "CONTEXT_MAPPER_GFSC_LIMIT_MEMORY"),
	}, {
		name: "CONTEXT_MAPPER_GFSC_REQUEST_CPU", def: "100m",
		desc:  "gfsc CPU request.",
		field: request(gfscResources, corev1.ResourceCPU),
		cross: withinLimit(gfscResources, corev1.ResourceCPU, "CONTEXT_MAPPER_GFSC_LIMIT_CPU"),
	}, {
		name: "CONTEXT_MAPPER_GFSC_LIMIT_MEMORY", def: "256Mi",
		desc:  "gfsc memory limit.",
		field: limit(gfscResources, corev1.ResourceMemory),
	}, {
		name: "CONTEXT_MAPPER_GFSC_LIMIT_CPU", def: "500m",
		desc:  "gfsc CPU limit.",
		field: limit(gfscResources, corev1.ResourceCPU),
	}, {
		name: "CONTEXT_MAPPER_GFS_POSTGRES_APP_LABEL", def: "control-postgres",
		desc:  "`app` label of the Postgres pods gfsc may reach.",
		field: labelValue(func(c *Config) *string { return &c.GFS.PostgresAppLabel }),
	}, {
		name: "CONTEXT_MAPPER_GFS_POSTGRES_PORT", def: "5432",
		desc:  "Postgres port gfsc may reach.",
		field: port(func(c *Config) *int32 { return &c.GFS.PostgresPort }),
	}, {
		name: "CONTEXT_MAPPER_GFS_JWT_CONFIGMAP", def: "gfs-config",
		desc:  "ConfigMap holding the JWT public key gfsc verifies with.",
		field: dnsSubdomain(func(c *Config) *string { return &c.GFS.JWTConfigMap }),
	}, {
		name: "CONTEXT_MAPPER_GFS_JWT_CONFIGMAP_KEY", def: "jwt-public-key",
		desc:  "Key of that ConfigMap.",
		field: dataKey(func(c *Config) *string { return &c.GFS.JWTConfigMapKey }),
	}, {
		name: "CONTEXT_MAPPER_GFS_PG_SECRET", def: "gfs-controller-db",
		desc:  "Secret holding the gfsc Postgres connection string.",
		field: dnsSubdomain(func(c *Config) *string { return &c.GFS.PostgresSecret }),
	}, {
		name: "CONTEXT_MAPPER_GFS_PG_SECRET_KEY", def: "connection-string",
		desc:  "Key of that Secret.",
		field: dataKey(func(c *Config) *string { return &c.GFS.PostgresSecretKey }),
	}, {
		name: "CONTEXT_MAPPER_GFS_DRIVE_NAME", def: "main",
		desc:  "Default drive name.",
		field: dnsLabel(func(c *Config) *string { return &c.GFS.DriveName }),
	}, {
		name: "CONTEXT_MAPPER_GFS_TOKEN_AUDIENCE", def: "gfs-controller",
		desc:  "`aud` expected on GFS access tokens.",
		field: nonBlank(func(c *Config) *string { return &c.GFS.TokenAudience }),
	}, {
		name: "CONTEXT_MAPPER_GFS_RESYNC_SEC", def: "60",
		desc:  "Interval of the periodic full GlobalFileSystem reconcile, which drives it to Ready and seeds its root directory. 0 disables it (warned at startup).",
		field: seconds(func(c *Config) *time.Duration { return &c.GFS.Resync }, 0),
		warn:  resyncDisabled(func(c *Config) time.Duration { return c.GFS.Resync }, "GlobalFileSystems may not converge to Ready"),
	}},
}, {
	title: "NetworkPolicy",
	vars: []variable{{
		name: "CONTEXT_MAPPER_RUNTIME_NAMESPACES", def: "mcp-server,mcp-host,sandbox-recipes,rpc-proxy",
		desc:  "Namespaces that get the L0 deny-all and L1 infrastructure policies.",
		field: namespaceList(func(c *Config) *[]string { return &c.NetPol.RuntimeNamespaces }),
	}, {
		name:  "CONTEXT_MAPPER_MINIMAL_INFRA_NAMESPACES",
		desc:  "Runtime namespaces that get only deny-all and DNS egress, without HCC API or Kubernetes API egress. A namespace that is not a runtime namespace is ignored (warned at startup).",
		field: namespaceList(func(c *Config) *[]string { return &c.NetPol.MinimalInfraNamespaces }),
		warn:  &warning{shownBy: only(Controller, Render), text: minimalInfraOutsideRuntime},
	}, {
		name:  "CONTEXT_MAPPER_K8S_API_CIDRS",
		desc:  "API-server destinations of `allow-k8s-api-egress-*`. Empty falls back to `KUBERNETES_SERVICE_HOST`, then to `10.96.0.1/32`. An entry with host bits set is refused.",
		field: apiServerCIDRs(func(c *Config) *[]netip.Prefix { return &c.NetPol.K8sAPICIDRs }),
	}, {
		name: "KUBERNETES_SERVICE_HOST", docDefault: "(set by Kubernetes)",
		desc:  "Used as a `/32` (or `/128`) when `CONTEXT_MAPPER_K8S_API_CIDRS` is empty; it must then be an IP address.",
		field: serviceHost(func(c *Config) *string { return &c.NetPol.KubernetesServiceHost }),
		cross: &crossCheck{needs: []string{"CONTEXT_MAPPER_K8S_API_CIDRS"}, check: resolveAPIServerCIDRs},
	}, {
		name:  "CONTEXT_MAPPER_NODELOCAL_DNS_CIDR",
		desc:  "NodeLocal DNSCache address allowed for DNS egress. Empty for none.",
		field: optional(ipv4Host(func(c *Config) *netip.Prefix { return &c.NetPol.NodeLocalDNSCIDR })),
	}, {
		name:   "HCC_EGRESS_DENY_CIDRS",
		desc:   "Networks that external egress (L3) may never reach: the cluster's pod, Service and node ranges. IPv4 entries join the `except` list of public-web bindings; an exact-host CIDR, or a resolved address of either family, that overlaps an entry is rejected like a private range. L1 policies are not affected. Empty for none.",
		readBy: only(Controller, Render),
		field:  egressDenyCIDRs(func(c *Config) *[]netip.Prefix { return &c.NetPol.EgressDenyCIDRs }),
	}, {
		name: "CONTEXT_MAPPER_NETPOL_RESYNC_SEC", def: "0",
		desc:  "Interval of the periodic full NetworkPolicy convergence (orphan sweep and defaults). A tick while a pass runs is skipped. 0 disables it (warned at startup).",
		field: seconds(func(c *Config) *time.Duration { return &c.NetPol.Resync }, 0),
		warn:  resyncDisabled(func(c *Config) time.Duration { return c.NetPol.Resync }, "orphaned or drifted NetworkPolicies are repaired only by events and restarts"),
	}, {
		name: "CONTEXT_MAPPER_NETPOL_DEFAULTS_RESYNC_SEC", def: "0",
		desc:  "Interval of the periodic L0/L1 defaults-only pass. 0 disables it.",
		field: seconds(func(c *Config) *time.Duration { return &c.NetPol.DefaultsResync }, 0),
	}, {
		name: "CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP", def: "10",
		desc:  "A sweep finding more orphaned policies than this deletes none of them and counts the refusal. Checked before the percent cap. 0 refuses every orphan delete.",
		field: integer(func(c *Config) *int { return &c.NetPol.OrphanDeleteCap }, 0, math.MaxInt64),
	}, {
		name: "CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP_PERCENT", def: "20",
		desc:  "The same refusal when orphans exceed this percentage of the managed policies listed. Above 100 it never fires.",
		field: integer(func(c *Config) *int { return &c.NetPol.OrphanDeleteCapPercent }, 0, math.MaxInt64),
	}, {
		name: "HCC_HOST_ORPHAN_DELETE_CAP", def: "10",
		desc:   "The Host sweep's absolute cap, with the NetworkPolicy cap's rules but counted in Hosts: when more Hosts than this left per-Host objects nothing accounts for, none of them is deleted (docs/host.md).",
		field:  integer(func(c *Config) *int { return &c.NetPol.HostOrphanDeleteCap }, 0, math.MaxInt64),
		readBy: only(Controller),
	}, {
		name: "HCC_HOST_ORPHAN_DELETE_CAP_PERCENT", def: "20",
		desc:   "The Host sweep's percent cap: none is deleted when such Hosts are more than this percentage of the Hosts with per-Host objects.",
		field:  integer(func(c *Config) *int { return &c.NetPol.HostOrphanDeleteCapPercent }, 0, math.MaxInt64),
		readBy: only(Controller),
	}},
}, {
	title: "Plugin image allowlist",
	vars: []variable{{
		name: "CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES", def: "ghcr.io/evenfire-ai/,mongodb/,mcr.microsoft.com/,clerum/,docker.io/clerum/",
		desc:  "Trusted image prefixes for local-mode McpServers. Default chosen by this project.",
		field: prefixList(func(c *Config) *[]string { return &c.ImagePolicy.AllowedPrefixes }),
	}, {
		name: "CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST", def: "false",
		desc:  "Block images outside the allowlist. False is audit mode: would-be denials are only logged (warned at startup).",
		field: boolean(func(c *Config) *bool { return &c.ImagePolicy.Enforce }),
		warn: &warning{shownBy: only(Controller, Render), text: func(c *Config) string {
			if c.ImagePolicy.Enforce {
				return ""
			}
			return "false, so the image allowlist only logs images it would block"
		}},
	}},
}, {
	title: "Control-API integration",
	vars: []variable{{
		name: "CONTROL_API_BASE_URL", def: "http://control-api.control-plane.svc.cluster.local:8090",
		desc:  "In-cluster Control API, called to issue mcp-host bootstrap credentials.",
		field: httpURL(func(c *Config) *string { return &c.ControlAPI.BaseURL }),
	}, {
		name:   "INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET",
		desc:   "HS256 secret that signs InternalControl JWTs. Required unless `CLERUM_DEV_MODE` is true; a `replace-with-…` placeholder counts as unset.",
		readBy: only(Controller),
		field:  text(func(c *Config) *string { return &c.ControlAPI.HMACSecret }),
		cross:  &crossCheck{needs: []string{"CLERUM_DEV_MODE"}, check: requireSigningSecret},
	}, {
		name: "MCP_HOST_GATEWAY_URL", def: "http://nginx-workflow-approval-gateway.control-plane.svc:8092",
		desc:  "Gateway between mcp-host and the Control API, injected into mcp-host pods.",
		field: httpURL(func(c *Config) *string { return &c.ControlAPI.GatewayURL }),
	}},
}, {
	title: "Dev mode",
	note:  "Used only when `CLERUM_DEV_MODE` is true, by the development provider, which treats malformed JSON as empty.",
	vars: []variable{{
		name: "CLERUM_MCP_SERVERS", def: "[]",
		desc:  "JSON array of McpServer objects.",
		field: text(func(c *Config) *string { return &c.Dev.McpServersJSON }),
	}, {
		name: "CLERUM_CONTEXTS", def: "[]",
		desc:  "JSON array of Context objects.",
		field: text(func(c *Config) *string { return &c.Dev.ContextsJSON }),
	}, {
		name: "CLERUM_MCP_AUTH", def: "{}",
		desc:  "JSON object mapping an McpServer name to its auth token.",
		field: text(func(c *Config) *string { return &c.Dev.McpAuthJSON }),
	}},
}}

// variables is groups flattened in declaration order; declared maps a name to
// its index there.
var (
	variables = flatten(groups)
	declared  = indexNames(variables)
)

func flatten(gs []group) []variable {
	var vs []variable
	for _, g := range gs {
		vs = append(vs, g.vars...)
	}
	return vs
}

func indexNames(vs []variable) map[string]int {
	index := make(map[string]int, len(vs))
	for i, v := range vs {
		index[v.name] = i
	}
	return index
}

func stdioBridgeResources(c *Config) *corev1.ResourceRequirements {
	return &c.McpServer.StdioBridgeResources
}

func hostResources(c *Config) *corev1.ResourceRequirements    { return &c.Host.Resources }
func desktopResources(c *Config) *corev1.ResourceRequirements { return &c.Desktop.Resources }
func wfcResources(c *Config) *corev1.ResourceRequirements     { return &c.WFC.Resources }
func gfscResources(c *Config) *corev1.ResourceRequirements    { return &c.GFS.Resources }

// leaderTimings enforces what client-go's leader election requires: a lease
// longer than the renew deadline, which is longer than the retry period
// (with its jitter).
func leaderTimings(c *Config) error {
	if c.Core.LeaderRenew >= c.Core.LeaderLease {
		return fmt.Errorf("%s must be shorter than HCC_LEADER_LEASE_SEC %s", c.Core.LeaderRenew, c.Core.LeaderLease)
	}
	if float64(c.Core.LeaderRenew) <= 1.2*float64(c.Core.LeaderRetry) {
		return fmt.Errorf("%s must be longer than 1.2 × HCC_LEADER_RETRY_SEC %s", c.Core.LeaderRenew, c.Core.LeaderRetry)
	}
	return nil
}

func targetIsHostNamespace(c *Config) error {
	if c.Namespaces.Target != c.Namespaces.Host {
		return fmt.Errorf("%q differs from CONTEXT_MAPPER_HOST_NAMESPACE %q", c.Namespaces.Target, c.Namespaces.Host)
	}
	return nil
}

// requireSigningSecret fails closed on a missing or example secret: a
// controller that cannot sign cannot provision a Host, and one that signs
// with a published placeholder hands out forgeable requests. Dev mode never
// calls the Control API, so it needs no secret. The reasons never quote the
// value.
func requireSigningSecret(c *Config) error {
	switch s := c.ControlAPI.HMACSecret; {
	case c.Core.DevMode:
		return nil
	case strings.TrimSpace(s) == "":
		return errors.New("required unless CLERUM_DEV_MODE is true")
	case isPlaceholder(s):
		return errors.New("is still a replace-with-… placeholder")
	}
	return nil
}

// minCredentialMargin is how much longer than the refresh window a
// credential must live (the Host operator's MinCredentialMargin).
const minCredentialMargin = 5 * time.Minute

// credentialLifetimes refuses a maximum credential lifetime no credential
// could meet: it must exceed the shortest accepted, the refresh window plus
// its margin.
func credentialLifetimes(c *Config) error {
	if c.Host.CredentialMaxLifetime <= c.Host.BootstrapRefreshBefore+minCredentialMargin {
		return fmt.Errorf("must exceed HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC (%d) by more than %d seconds",
			int64(c.Host.BootstrapRefreshBefore/time.Second), int64(minCredentialMargin/time.Second))
	}
	return nil
}

// resyncDisabled warns the controller that a zero interval turned off a
// self-healing timer; consequence says what goes unrepaired.
func resyncDisabled(interval func(*Config) time.Duration, consequence string) *warning {
	return &warning{shownBy: only(Controller), text: func(c *Config) string {
		if interval(c) != 0 {
			return ""
		}
		return "0 disables the periodic resync; " + consequence
	}}
}

func minimalInfraOutsideRuntime(c *Config) string {
	var outside []string
	for _, ns := range c.NetPol.MinimalInfraNamespaces {
		if !slices.Contains(c.NetPol.RuntimeNamespaces, ns) {
			outside = append(outside, ns)
		}
	}
	if len(outside) == 0 {
		return ""
	}
	return fmt.Sprintf("%s not in CONTEXT_MAPPER_RUNTIME_NAMESPACES, so ignored", strings.Join(outside, ", "))
}
