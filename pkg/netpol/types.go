// Package netpol plans HCC's NetworkPolicies: from the Contexts, McpServers,
// their resolved external egress and the configuration, it computes the
// complete desired set of policies the NetworkPolicy operator owns. Planning
// is pure — no client, no clock, no resolver — so the same code drives the
// controller, `hcc-controller render` and the benchmarks. Writing the plan
// to a cluster is the applier's job (pkg/controllers/netpol).
package netpol

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/types"

	networkingv1 "k8s.io/api/networking/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// Options is the part of the configuration the planner reads.
type Options struct {
	McpServerNamespace    string // CONTEXT_MAPPER_NAMESPACE
	HostNamespace         string // CONTEXT_MAPPER_HOST_NAMESPACE
	RPCProxyNamespace     string // CONTEXT_MAPPER_RPC_PROXY_NAMESPACE
	ControlPlaneNamespace string // CONTEXT_MAPPER_CONTROL_PLANE_NAMESPACE
	SandboxNamespace      string // CONTEXT_MAPPER_SANDBOX_NAMESPACE

	// RuntimeNamespaces get L0 and L1; MinimalInfraNamespaces among them get
	// only deny-all and DNS egress.
	RuntimeNamespaces      []string
	MinimalInfraNamespaces []string

	// K8sAPICIDRs are the API-server destinations, already resolved through
	// the configuration's fallback chain.
	K8sAPICIDRs []netip.Prefix
	// NodeLocalDNSCIDR, when valid, adds an ipBlock DNS egress rule.
	NodeLocalDNSCIDR netip.Prefix

	// APIPort is the hcc-api port (CONTEXT_MAPPER_PORT).
	APIPort int32

	// EgressDenyCIDRs (HCC_EGRESS_DENY_CIDRS) are ranges external egress
	// may never reach, beside the built-in exceptions and K8sAPICIDRs.
	EgressDenyCIDRs []netip.Prefix
	// ClusterDomain (CONTEXT_MAPPER_CLUSTER_DOMAIN): hostnames under it are
	// refused like *.cluster.local.
	ClusterDomain string

	// ImageRefused, when set, reports whether the image allowlist in enforce
	// mode refuses a server: such a server is planned and judged like a
	// disabled one (no allows; its allows are disowned). Nil refuses none
	// (audit mode).
	ImageRefused func(*clerumv1alpha1.McpServer) bool

	// shared, set by Compute and NewIncremental, holds the parts one
	// plan's policies share (planCache).
	shared *planCache
}

// ServerActive reports whether s may hold allows: it is enabled, its name
// is not one reserved for a platform workload (its pods would be selected
// as that workload's; the operator runs nothing of it), and the image
// allowlist does not refuse it (docs/networkpolicy.md).
func (o Options) ServerActive(s *clerumv1alpha1.McpServer) bool {
	return s.Spec.IsEnabled() && !names.ReservedMcpServerName(s.Name) && (o.ImageRefused == nil || !o.ImageRefused(s))
}

// Inventory is everything the planner reads besides Options. Objects are
// read-only: the planner never mutates them.
type Inventory struct {
	// Contexts and McpServers in the MCP server namespace.
	Contexts []*clerumv1alpha1.Context
	Servers  []*clerumv1alpha1.McpServer

	// Resolved holds, per server name and binding name, the current DNS
	// answer of a hostname binding. A binding with no entry, or an entry
	// that answers another server (UID) or another host, port or protocol
	// (the spec changed since the lookup), gets no allow: DNS-derived
	// allows are never kept without a current answer for what they allow.
	Resolved map[string]map[string]Resolution
}

// Resolution is a DNS answer for one hostname binding, with what it was the
// answer for.
type Resolution struct {
	ServerUID types.UID
	Host      string
	Port      int32
	Protocol  string
	Addrs     []netip.Addr
}

// ResolutionFor returns addrs as the answer for binding b of server s.
func ResolutionFor(s *clerumv1alpha1.McpServer, b *clerumv1alpha1.EgressBinding, addrs []netip.Addr) Resolution {
	r := Resolution{ServerUID: s.UID, Host: b.Host, Protocol: b.EffectiveProtocol(), Addrs: addrs}
	if b.Port != nil {
		r.Port = *b.Port
	}
	return r
}

// answers reports whether r is an answer for binding b of server s as they
// are now.
func (r Resolution) answers(s *clerumv1alpha1.McpServer, b *clerumv1alpha1.EgressBinding) bool {
	want := ResolutionFor(s, b, nil)
	return r.ServerUID == want.ServerUID && r.Host == want.Host && r.Port == want.Port && r.Protocol == want.Protocol
}

// Plan is the planner's output.
type Plan struct {
	// Policies is the complete desired set of NetworkPolicies of the policy
	// types the NetworkPolicy operator owns, sorted by namespace and name.
	Policies []*networkingv1.NetworkPolicy
	// Servers holds, for each of Policies, the McpServer it is for, or ""
	// for L0/L1: a failed write of a policy keeps only that server's
	// runtime gate closed.
	Servers []string

	// Rejections lists egress bindings and recipe bindings that produce no
	// policy because they are invalid or unsafe, sorted by server, then
	// binding.
	Rejections []Rejection

	// Conflicts lists Contexts ignored because an older Context already
	// holds their contextId, sorted by Context name.
	Conflicts []ContextConflict
}

// RejectionKind says what a Rejection is about.
type RejectionKind string

const (
	// RejectedEgressBinding is an egress binding that gets no policy; the
	// external-egress coordinator reports it on the server's status and
	// keeps the server's gate closed.
	RejectedEgressBinding RejectionKind = "egress-binding"
	// RejectedRecipeBinding is an entry of the recipe-bindings annotation.
	RejectedRecipeBinding RejectionKind = "recipe-binding"
	// RejectedContextAllow is a Context allow whose name another owner holds.
	RejectedContextAllow RejectionKind = "context-allow"
)

// Rejection explains why one binding of a server produces no policy.
type Rejection struct {
	Kind   RejectionKind
	Server string
	// Binding is the egress binding name, "recipe:<recipe>" for a recipe
	// binding, or "context:<contextId>" for a Context allow whose name
	// collides with another's.
	Binding string
	Reason  string
}

// ContextConflict is a Context ignored for a duplicate contextId.
type ContextConflict struct {
	Context   string // the ignored Context's name
	ContextID string
	HeldBy    string // the name of the Context that keeps the contextId
}
