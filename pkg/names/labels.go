package names

// Label keys and values that programs outside HCC rely on (docs/names.md).
const (
	// LabelApp selects an McpServer's pods: its value is the server name.
	LabelApp = "app"
	// LabelManagedBy marks every object HCC creates and the pods of its
	// Deployments.
	LabelManagedBy = "clerum.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "host-context-controller"
	// LabelMcpServer carries the server name on McpServer Deployments and
	// pods, and names the owning server of every context-allow,
	// rpc-proxy-egress, external-egress and recipe-binding NetworkPolicy.
	LabelMcpServer = "clerum.io/mcpserver"
	// LabelHost carries the Host name on every per-Host object; among pods,
	// only Host pods carry it.
	LabelHost = "clerum.io/host"
	// LabelContext carries the Context's spec.contextId on Host pods, and
	// names the owning Context of every context-allow and rpc-proxy-egress
	// NetworkPolicy (metadata only: it never changes what a policy selects).
	LabelContext = "clerum.io/context"
	// LabelEgressBinding names the egress binding of an external-egress
	// NetworkPolicy.
	LabelEgressBinding = "clerum.io/egress-binding"
	// LabelRecipe names the recipe of a recipe-binding NetworkPolicy.
	LabelRecipe = "clerum.io/recipe"
	// LabelSharedFileSystem carries the SharedFileSystem's name on every
	// object HCC creates for it, and its pods.
	LabelSharedFileSystem = "clerum.io/sharedfilesystem"
	// LabelGlobalFileSystem carries the GlobalFileSystem's name on every
	// object HCC creates for it, and its pods.
	LabelGlobalFileSystem = "clerum.io/globalfilesystem"
	// LabelPolicyType classifies every NetworkPolicy HCC owns.
	LabelPolicyType = "clerum.io/policy-type"
	// LabelK8sAPIEgress is set by the platform: "true" opts a pod outside
	// mcp-host into API-server egress.
	LabelK8sAPIEgress = "clerum.io/k8s-api-egress"
	// LabelWorkflowMcpHost is set by the platform on workflow MCP host pods in
	// the sandbox namespace.
	LabelWorkflowMcpHost = "clerum.io/workflow-mcp-host"
)

// AnnotationRecipeBindings on an McpServer holds a JSON list of
// {recipe, from, to, port, protocol}: the recipe workloads the server may
// reach (docs/names.md).
const AnnotationRecipeBindings = "clerum.io/recipe-bindings"

// Values of LabelPolicyType. Each orphan sweep touches only its own types.
const (
	PolicyTypeDenyAll        = "deny-all"
	PolicyTypeInfrastructure = "infrastructure"
	PolicyTypeContextAllow   = "context-allow"
	PolicyTypeRPCProxyEgress = "rpc-proxy-egress"
	PolicyTypeExternalEgress = "external-egress"
	PolicyTypeRecipeBinding  = "recipe-binding"
	PolicyTypeHost           = "host"
	PolicyTypeFileSystem     = "filesystem"
)

// App label values of peers HCC's policies select but does not create.
const (
	AppRPCProxy      = "rpc-proxy"
	AppMcpProxy      = "mcp-proxy"
	AppController    = "host-context-controller"
	AppAPIGateway    = "host-context-controller-api-gateway"
	KubeDNSLabelKey  = "k8s-app"
	KubeDNSLabelVal  = "kube-dns"
	KubeSystem       = "kube-system"
	NamespaceNameKey = "kubernetes.io/metadata.name"
)
