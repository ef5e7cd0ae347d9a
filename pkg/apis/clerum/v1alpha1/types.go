package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults the API server applies (through the CRD schema) and that HCC
// applies itself to objects that never went through an API server, such as the
// files `hcc-controller render` reads. The CRD markers below must carry the same
// values; an integration test compares the two.
const (
	DefaultTransportPort     int32 = 3000
	DefaultEgressMode              = EgressModeExactHost
	DefaultEgressProtocol          = corev1.ProtocolTCP
	DefaultMcpServerReplicas int32 = 1
)

// Condition types written to status.conditions.
const (
	// ConditionReady is the summary condition of every kind.
	ConditionReady = "Ready"
	// ConditionSecretsResolved reports whether the Secrets an McpServer or Host
	// references exist with every key it needs.
	ConditionSecretsResolved = "SecretsResolved"
	// ConditionImageAllowed reports the image allowlist verdict for an McpServer.
	ConditionImageAllowed = "ImageAllowed"
	// ConditionExternalEgressReady reports whether every egress binding of an
	// McpServer is programmed. Written only by the NetworkPolicy operator.
	ConditionExternalEgressReady = "ExternalEgressReady"
	// ConditionContextIDConflict is set on a Context whose contextId another
	// Context already holds; such a Context is ignored.
	ConditionContextIDConflict = "ContextIDConflict"
	// ConditionReplicasCapped is True when an McpServer runs fewer replicas
	// than it asks for (a stdio server runs one).
	ConditionReplicasCapped = "ReplicasCapped"
	// ConditionRemoteReachable reports whether a remote McpServer's own
	// egress bindings cover the host of spec.remote.url.
	ConditionRemoteReachable = "RemoteReachable"
	// ConditionFieldsIgnored is True when a remote McpServer sets fields its
	// pods do not use (image, command, args, env, envSecret: they run the
	// platform's egress proxy); written for remote servers only.
	ConditionFieldsIgnored = "FieldsIgnored"
	// ConditionAuthReady reports whether a Host's runtime-token Secret holds
	// a bootstrap credential issued by the Control API for this Host.
	ConditionAuthReady = "AuthReady"
	// ConditionConfigResolved reports whether the Secrets and ConfigMaps a
	// file system's runtime reads exist with the keys it needs, valid.
	ConditionConfigResolved = "ConfigResolved"
	// ConditionVolumeBound reports whether a SharedFileSystem's claim is
	// bound (and at the size asked for).
	ConditionVolumeBound = "VolumeBound"
	// ConditionWorkloadReady reports whether a file system's Deployment has
	// its replicas available on the current template.
	ConditionWorkloadReady = "WorkloadReady"
	// ConditionRootSeeded reports whether a GlobalFileSystem's drive root
	// has been seeded.
	ConditionRootSeeded = "RootSeeded"
)

// Field managers for server-side apply of McpServer status; each owns a
// disjoint set of status fields (docs/api-reference.md).
const (
	FieldManagerMcpServer = "hcc-mcpserver"
	FieldManagerNetPol    = "hcc-netpol"
	// FieldManagerHost writes Host status and the Host operator's children.
	FieldManagerHost = "hcc-host"
	// FieldManagerSharedFileSystem and FieldManagerGlobalFileSystem write
	// the file system reconcilers' status and children.
	FieldManagerSharedFileSystem = "hcc-sharedfilesystem"
	FieldManagerGlobalFileSystem = "hcc-globalfilesystem"
)

// FinalizerHostCleanup holds a Host until HCC has deleted its children in
// the channels namespace, which no owner reference can reach, and its
// workspace claim (docs/host.md).
const FinalizerHostCleanup = "clerum.io/host-cleanup"

// TransportType is how mcp-host talks to an MCP server.
// +kubebuilder:validation:Enum=sse;streamable-http;stdio
type TransportType string

const (
	TransportSSE            TransportType = "sse"
	TransportStreamableHTTP TransportType = "streamable-http"
	// TransportStdio servers get a bridge sidecar that serves streamable-http.
	TransportStdio TransportType = "stdio"
)

// EgressMode selects how an egress binding is turned into a NetworkPolicy.
// +kubebuilder:validation:Enum=exact-host;public-web
type EgressMode string

const (
	// EgressModeExactHost allows one host (resolved through DNS) or one CIDR on
	// one port and protocol.
	EgressModeExactHost EgressMode = "exact-host"
	// EgressModePublicWeb allows the public internet on TCP 80 and 443, with
	// every private and reserved range carved out.
	EgressModePublicWeb EgressMode = "public-web"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=mcps,categories=hcc;clerum
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Transport",type=string,JSONPath=`.spec.transport.type`
// +kubebuilder:printcolumn:name="Enabled",type=boolean,JSONPath=`.spec.enabled`
// +kubebuilder:printcolumn:name="Deployed",type=boolean,JSONPath=`.status.deployed`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Egress",type=string,JSONPath=`.status.conditions[?(@.type=="ExternalEgressReady")].status`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label: at most 63 lowercase alphanumerics or '-', starting and ending with an alphanumeric"
// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || !(self.metadata.name in ['host-context-controller', 'host-context-controller-api-gateway', 'mcp-proxy', 'rpc-proxy', 'channel-reader', 'nginx-workflow-approval-gateway', 'control-postgres'])",optionalOldSelf=true,message="metadata.name is a platform app label value (host-context-controller, host-context-controller-api-gateway, mcp-proxy, rpc-proxy, channel-reader, nginx-workflow-approval-gateway, control-postgres) and is reserved for a platform workload"

// McpServer is one MCP server. HCC runs it as a Deployment and a Service in
// the MCP server namespace; stdio servers get a bridge sidecar and remote
// servers an egress proxy in place of the author's container.
type McpServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec McpServerSpec `json:"spec"`
	// +optional
	Status McpServerStatus `json:"status,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="has(self.remote) || (has(self.image) && size(self.image) > 0)",message="image is required unless remote is set"

// McpServerSpec is the desired state of an McpServer.
type McpServerSpec struct {
	// Description is free text shown to users.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// Enabled servers are deployed and offered to Hosts. Defaults to true.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// Image of the MCP server container. Required unless remote is set.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// Command overrides the image entrypoint.
	// +optional
	// +listType=atomic
	Command []string `json:"command,omitempty"`

	// Args are passed to the command.
	// +optional
	// +listType=atomic
	Args []string `json:"args,omitempty"`

	// Env is added to the server container.
	// +optional
	// +listType=atomic
	Env []corev1.EnvVar `json:"env,omitempty"`

	// EnvSecret maps keys of one Secret in the server's namespace to
	// environment variables. The Secret must exist with every listed key before
	// the server is deployed.
	// +optional
	EnvSecret *EnvSecret `json:"envSecret,omitempty"`

	// Transport says how mcp-host reaches the server.
	Transport Transport `json:"transport"`

	// Remote makes this a proxy to an MCP server outside the cluster: its
	// pods run the platform's egress proxy, and image, command, args, env
	// and envSecret are ignored (condition FieldsIgnored).
	// +optional
	Remote *Remote `json:"remote,omitempty"`

	// Auth names the Secret key holding the credential mcp-host presents to
	// the server. Servers without auth need none.
	// +optional
	Auth *Auth `json:"auth,omitempty"`

	// EgressBindings are the only destinations outside the cluster the server
	// may reach.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	EgressBindings []EgressBinding `json:"egressBindings,omitempty"`

	// Resources of the server container. Requests and limits are each at
	// most 16 CPUs and 64Gi of memory.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.limits) || ((!('cpu' in self.limits) || quantity(string(self.limits['cpu'])).compareTo(quantity('16')) <= 0) && (!('memory' in self.limits) || quantity(string(self.limits['memory'])).compareTo(quantity('64Gi')) <= 0))",message="resources.limits may be at most 16 CPUs and 64Gi of memory"
	// +kubebuilder:validation:XValidation:rule="!has(self.requests) || ((!('cpu' in self.requests) || quantity(string(self.requests['cpu'])).compareTo(quantity('16')) <= 0) && (!('memory' in self.requests) || quantity(string(self.requests['memory'])).compareTo(quantity('64Gi')) <= 0))",message="resources.requests may be at most 16 CPUs and 64Gi of memory"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// Replicas of the server Deployment. Defaults to 1, at most 20.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	Replicas *int32 `json:"replicas,omitempty"`

	// ContextRef is informational: which Context the author meant the server
	// for. Access is granted by Context.spec.mcpServers, never by this field.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ContextRef string `json:"contextRef,omitempty"`
}

// EnvSecret selects keys of one Secret as environment variables.
type EnvSecret struct {
	// Name of the Secret in the McpServer's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Keys to expose; each needs to be present in the Secret.
	// +optional
	// +listType=atomic
	Keys []EnvSecretKey `json:"keys,omitempty"`
}

// EnvSecretKey maps one Secret key to one environment variable.
type EnvSecretKey struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	SecretKey string `json:"secretKey"`

	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z][-._a-zA-Z0-9]*$`
	EnvName string `json:"envName"`
}

// Transport is the protocol and port the server speaks.
type Transport struct {
	Type TransportType `json:"type"`

	// Port the server listens on. Defaults to 3000.
	// +optional
	// +kubebuilder:default=3000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`

	// Path of the MCP endpoint. Defaults to /sse for sse and /mcp otherwise.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^/[-._~a-zA-Z0-9/]*$`
	Path string `json:"path,omitempty"`
}

// Remote points at an MCP server outside the cluster, reached through a
// per-server egress proxy.
type Remote struct {
	// URL of the remote MCP endpoint.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s/?#]+([/?#]\S*)?$`
	URL string `json:"url"`
}

// Auth names where the server's credential lives.
type Auth struct {
	SecretRef SecretKeyReference `json:"secretRef"`
}

// SecretKeyReference names one key of one Secret in the referrer's namespace.
type SecretKeyReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// LocalObjectReference names an object in the referrer's namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// +kubebuilder:validation:XValidation:rule="!(has(self.host) && has(self.cidr))",message="host and cidr are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="(has(self.mode) && self.mode == 'public-web') || ((has(self.host) || has(self.cidr)) && has(self.port))",message="an exact-host binding needs one of host or cidr, and a port"

// EgressBinding allows the server one external destination.
type EgressBinding struct {
	// Name identifies the binding; it becomes part of a NetworkPolicy name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Mode defaults to exact-host.
	// +optional
	// +kubebuilder:default=exact-host
	Mode EgressMode `json:"mode,omitempty"`

	// Host is a public DNS name, resolved to addresses by HCC.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?\.?$`
	Host string `json:"host,omitempty"`

	// CIDR is a public IPv4 or IPv6 range.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="cidr must be a valid CIDR"
	CIDR string `json:"cidr,omitempty"`

	// Port of the destination; required for exact-host.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`

	// Protocol defaults to TCP.
	// +optional
	// +kubebuilder:default=TCP
	// +kubebuilder:validation:Enum=TCP;UDP
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// McpServerStatus has two writers, each applying its own fields with its own
// field manager: hcc-netpol owns the ExternalEgressReady condition and
// resolvedEgressIPs; hcc-mcpserver owns everything else.
type McpServerStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// Deployed is true once the server's Deployment and Service exist for
	// its current spec.
	// +optional
	Deployed bool `json:"deployed"`

	// Ready is true when the server's Deployment has its replicas available.
	// +optional
	Ready bool `json:"ready"`

	// ResolvedEgressIPs are the addresses the egress bindings currently allow.
	// +optional
	// +listType=atomic
	ResolvedEgressIPs []string `json:"resolvedEgressIPs,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// McpServerList is a list of McpServers.
type McpServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []McpServer `json:"items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=ctx,categories=hcc;clerum
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="ContextID",type=string,JSONPath=`.spec.contextId`
// +kubebuilder:printcolumn:name="Conflict",type=string,JSONPath=`.status.conditions[?(@.type=="ContextIDConflict")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="ContextIDConflict")].reason`
// +kubebuilder:printcolumn:name="Servers",type=string,JSONPath=`.spec.mcpServers`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Context grants the mcp-host pods labelled with its contextId access to a
// set of McpServers.
type Context struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ContextSpec `json:"spec"`
	// +optional
	Status ContextStatus `json:"status,omitempty"`
}

// ContextSpec is the desired state of a Context.
type ContextSpec struct {
	// ContextID labels the Host pods of this Context (clerum.io/context) and
	// names its NetworkPolicies. Unique among Contexts: a Context whose
	// contextId another already holds is ignored.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ContextID string `json:"contextId"`

	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// McpServers are the names of the McpServers this Context grants.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	McpServers []string `json:"mcpServers,omitempty"`
}

// ContextStatus is the observed state of a Context.
type ContextStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ContextList is a list of Contexts.
type ContextList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Context `json:"items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=mcph,categories=hcc;clerum
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Context",type=string,JSONPath=`.spec.contextRef`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Auth",type=string,JSONPath=`.status.conditions[?(@.type=="AuthReady")].status`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.status.image`,priority=1
// +kubebuilder:printcolumn:name="Credential-Expires",type=date,JSONPath=`.status.credentialExpiresAt`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label: at most 63 lowercase alphanumerics or '-', starting and ending with an alphanumeric"
// +kubebuilder:validation:XValidation:rule="!self.metadata.name.startsWith('wfc-')",message="metadata.name may not start with wfc-: a SharedFileSystem's workload holds those names in the host namespace"

// Host is one mcp-host runtime. HCC runs it as a Deployment with its own
// Service, workspace volume, identity, runtime credential and channel reader.
type Host struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HostSpec `json:"spec"`
	// +optional
	Status HostStatus `json:"status,omitempty"`
}

// HostSpec is the desired state of a Host.
type HostSpec struct {
	// ContextRef is the name of the Context whose servers this Host may use.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ContextRef string `json:"contextRef"`

	// SecretRef names a Secret in the Host's namespace that must exist before
	// the Host runtime is created.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`

	// Desktop adds the desktop sidecar.
	// +optional
	Desktop *DesktopSpec `json:"desktop,omitempty"`
}

// DesktopSpec configures a Host's desktop sidecar.
type DesktopSpec struct {
	// +optional
	Enabled bool `json:"enabled,omitempty"`
}

// HostStatus is the observed state of a Host, written by server-side apply
// as field manager hcc-host (docs/host.md).
type HostStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ContextID is the contextId stamped on the Host's pods
	// (clerum.io/context); empty while the Host is not deployed.
	// +optional
	ContextID string `json:"contextId,omitempty"`

	// Image is the mcp-host image of the Host's current pod template, so an
	// in-place release (a new CONTEXT_MAPPER_HOST_IMAGE) can be followed Host
	// by Host.
	// +optional
	Image string `json:"image,omitempty"`

	// CredentialExpiresAt is when the bootstrap credential in the Host's
	// runtime-token Secret expires; HCC replaces it
	// HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC before.
	// +optional
	CredentialExpiresAt *metav1.Time `json:"credentialExpiresAt,omitempty"`

	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// HostList is a list of Hosts.
type HostList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Host `json:"items"`
}

// FileSystemPhase summarises a file system's lifecycle for kubectl users.
// +kubebuilder:validation:Enum=Initializing;Ready;Degraded
type FileSystemPhase string

const (
	FileSystemInitializing FileSystemPhase = "Initializing"
	FileSystemReady        FileSystemPhase = "Ready"
	FileSystemDegraded     FileSystemPhase = "Degraded"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=sfs,categories=hcc;clerum
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Size",type=string,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label: at most 63 lowercase alphanumerics or '-', starting and ending with an alphanumeric"

// SharedFileSystem is a volume several Hosts share, served by its own
// workspace-files-controller (WFC) Deployment in the host namespace.
type SharedFileSystem struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec SharedFileSystemSpec `json:"spec"`
	// +optional
	Status SharedFileSystemStatus `json:"status,omitempty"`
}

// SharedFileSystemSpec is the desired state of a SharedFileSystem.
type SharedFileSystemSpec struct {
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// Size of the backing PersistentVolumeClaim; defaults to the host
	// workspace size. It can grow but never shrink, and the controller
	// refuses a size above HCC_SFS_MAX_SIZE (default 100Gi).
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`

	// StorageClassName of the claim; defaults to the host workspace class.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`

	// HostRefs are the Hosts that may use this file system.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	HostRefs []string `json:"hostRefs,omitempty"`

	// Directories are created (relative to the volume root) when the volume
	// is first initialised. No segment may be "." or "..": a directory never
	// climbs out of the volume.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^([-._a-zA-Z0-9]*[-_a-zA-Z0-9][-._a-zA-Z0-9]*|\.{3,})(/([-._a-zA-Z0-9]*[-_a-zA-Z0-9][-._a-zA-Z0-9]*|\.{3,}))*$`
	Directories []string `json:"directories,omitempty"`
}

// SharedFileSystemStatus is the observed state of a SharedFileSystem.
type SharedFileSystemStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// +optional
	Phase FileSystemPhase `json:"phase,omitempty"`

	// Endpoint is the in-cluster URL of the file system's WFC service.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// SharedFileSystemList is a list of SharedFileSystems.
type SharedFileSystemList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SharedFileSystem `json:"items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:resource:shortName=gfs,categories=hcc;clerum
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Drive",type=string,JSONPath=`.spec.driveName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoint`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label: at most 63 lowercase alphanumerics or '-', starting and ending with an alphanumeric"

// GlobalFileSystem is a platform-wide drive served by the GFS controller
// (gfsc) Deployment in the GFS namespace, backed by Postgres.
type GlobalFileSystem struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec GlobalFileSystemSpec `json:"spec"`
	// +optional
	Status GlobalFileSystemStatus `json:"status,omitempty"`
}

// GlobalFileSystemSpec is the desired state of a GlobalFileSystem.
type GlobalFileSystemSpec struct {
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// DriveName is the drive gfsc serves; defaults to
	// CONTEXT_MAPPER_GFS_DRIVE_NAME.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	DriveName string `json:"driveName,omitempty"`
}

// GlobalFileSystemStatus is the observed state of a GlobalFileSystem.
type GlobalFileSystemStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// +optional
	Phase FileSystemPhase `json:"phase,omitempty"`

	// RootSeeded is true once the drive's root directory exists.
	// +optional
	RootSeeded bool `json:"rootSeeded,omitempty"`

	// Endpoint is the in-cluster URL of the drive's gfsc service.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// GlobalFileSystemList is a list of GlobalFileSystems.
type GlobalFileSystemList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GlobalFileSystem `json:"items"`
}
