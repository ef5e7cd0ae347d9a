// Package names derives the name of every object and label value HCC creates.
//
// Each derived name goes through Fit, so a name that would exceed its kind's
// limit is shortened the same way everywhere: a readable prefix of the full
// name, a dash, and a hash of the full name. Shortening is deterministic (the
// same input always yields the same name, on every replica and in render) and
// never fails, so no user-chosen name can make HCC unable to name an object.
package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Length limits of the names HCC derives.
const (
	// MaxObjectName is the limit of a DNS subdomain: most object names,
	// NetworkPolicies, Deployments, Secrets, ConfigMaps and RBAC objects.
	MaxObjectName = 253
	// MaxLabel is the limit of a DNS label: Service names and label values.
	MaxLabel = 63

	// hashLen hex digits of SHA-256 (40 bits) make collisions between two
	// shortened names of one kind and namespace negligible.
	hashLen = 10
)

// Fit returns name when it is at most max bytes long. Otherwise it returns a
// prefix of name followed by "-" and a hash of the whole of name, exactly max
// bytes long. Trailing '-' and '.' are trimmed from the prefix so the result
// stays a valid DNS label or subdomain when name is one.
func Fit(name string, max int) string {
	if len(name) <= max {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:hashLen]
	prefix := strings.TrimRight(name[:max-hashLen-1], "-.")
	return prefix + "-" + hash
}

// Object fits name into the DNS subdomain limit.
func Object(name string) string { return Fit(name, MaxObjectName) }

// Label fits name into the DNS label limit, for Service names and label values.
func Label(name string) string { return Fit(name, MaxLabel) }

// Names of the objects HCC creates for one McpServer (docs/names.md).
// Deployment, Service and the remote egress proxy ConfigMap share the server's
// name; server names are DNS labels, so they already fit.

// McpServerWorkload names the Deployment and Service of McpServer server.
func McpServerWorkload(server string) string { return Label(server) }

// McpServerProxyConfig names the ConfigMap holding a remote server's egress
// proxy configuration.
func McpServerProxyConfig(server string) string { return Label(server) }

// Names of the objects HCC creates for one Host H.

// HostWorkload names the Deployment and Service of Host host.
func HostWorkload(host string) string { return Label(host) }

// HostWorkspace names the workspace PersistentVolumeClaim of Host host.
func HostWorkspace(host string) string { return Object(host + "-workspace") }

// HostRuntimeTokens names the Secret holding Host host's runtime credential.
func HostRuntimeTokens(host string) string {
	return Object("host-" + host + "-mcp-host-runtime-tokens")
}

// HostIdentity names the ServiceAccount, Role and RoleBinding of Host host.
func HostIdentity(host string) string { return Object("host-" + host) }

// HostDesktopPolicy names the NetworkPolicy that lets rpc-proxy reach the
// desktop of Host host.
func HostDesktopPolicy(host string) string {
	return Object("allow-rpc-proxy-desktop-" + host)
}

// ChannelReader names the channel-reader Deployment and Service of Host host.
// Both carry the Service limit so they always share one name.
func ChannelReader(host string) string { return Label("channel-reader-" + host) }

// ChannelReaderEgressPolicy names the channel-reader egress NetworkPolicy of
// Host host.
func ChannelReaderEgressPolicy(host string) string {
	return Object("channel-reader-" + host + "-egress")
}

// Names of the objects HCC creates for one SharedFileSystem F (host
// namespace) and one GlobalFileSystem G (GFS namespace).

// WFCWorkload names the workspace-files-controller Deployment and Service of
// SharedFileSystem fs; both carry the Service limit so they share one name.
func WFCWorkload(fs string) string { return Label("wfc-" + fs) }

// WFCData names the data PersistentVolumeClaim of SharedFileSystem fs.
func WFCData(fs string) string { return Object("wfc-" + fs + "-data") }

// WFCIngressPolicy names the NetworkPolicy admitting fs's Hosts to its WFC.
func WFCIngressPolicy(fs string) string { return Object("wfc-" + fs + "-ingress") }

// WFCEgressPolicy names its other half: the NetworkPolicy letting fs's
// Hosts' pods reach its WFC under the host namespace's default deny.
func WFCEgressPolicy(fs string) string { return Object("wfc-" + fs + "-egress") }

// GFSCWorkload names the gfsc Deployment and Service of GlobalFileSystem gfs.
func GFSCWorkload(gfs string) string { return Label("gfsc-" + gfs) }

// GFSCSeedJob names the one-shot Job that seeds gfs's drive root; it is a
// label value on the Job's pods (job-name), so it keeps the label limit.
func GFSCSeedJob(gfs string) string { return Label("gfsc-" + gfs + "-seed") }

// GFSCEgressPolicy names the NetworkPolicy limiting gfs's gfsc egress.
func GFSCEgressPolicy(gfs string) string { return Object("gfsc-" + gfs + "-egress") }

// NetworkPolicy names of the four-layer model (docs/names.md).

// DenyAllPolicy names the L0 default-deny policy of namespace ns.
func DenyAllPolicy(ns string) string { return Object("deny-all-" + ns) }

// DNSEgressPolicy names the L1 DNS egress policy of namespace ns.
func DNSEgressPolicy(ns string) string { return Object("allow-dns-egress-" + ns) }

// HCCAPIEgressPolicy names the L1 policy letting namespace ns reach hcc-api.
func HCCAPIEgressPolicy(ns string) string { return Object("allow-hcc-api-egress-" + ns) }

// K8sAPIEgressPolicy names the L1 API-server egress policy of namespace ns.
func K8sAPIEgressPolicy(ns string) string { return Object("allow-k8s-api-egress-" + ns) }

// HCCAPIIngressPolicy is the single, non-suffixed ingress policy for the
// controller API in the MCP server namespace.
const HCCAPIIngressPolicy = "allow-host-context-controller-api"

// ContextIngressPolicy names the L2 ingress policy of server in a Context.
func ContextIngressPolicy(contextID, server string) string {
	return Object("ctx-" + contextID + "-" + server)
}

// ContextEgressPolicy names the L2 mcp-host egress policy of server in a
// Context.
func ContextEgressPolicy(contextID, server string) string {
	return Object("ctx-" + contextID + "-" + server + "-egress")
}

// RPCProxyEgressPolicy names the L2 rpc-proxy egress policy of server in a
// Context.
func RPCProxyEgressPolicy(contextID, server string) string {
	return Object("rpc-egress-" + contextID + "-" + server)
}

// ExternalEgressPolicy names the L3 policy of one egress binding of server.
func ExternalEgressPolicy(server, binding string) string {
	return Object("ext-egress-" + server + "-" + binding)
}

// RecipeBindingEgressPolicy names the MCP-server-side half of a recipe binding.
func RecipeBindingEgressPolicy(recipe, from, to string) string {
	return Object("bind-" + recipe + "-" + from + "-" + to + "-egress")
}

// RecipeBindingIngressPolicy names the sandbox-side half of a recipe binding.
func RecipeBindingIngressPolicy(recipe, from, to string) string {
	return Object("bind-" + recipe + "-" + from + "-" + to + "-ingress")
}
