package names

import "slices"

// Further app label values that policies select: the channel reader of each
// Host (pkg/controllers/host), the workflow approval gateway mcp-host may
// reach (deploy/base/mcp-host) and the default Postgres app of gfsc
// (CONTEXT_MAPPER_GFS_POSTGRES_APP_LABEL).
const (
	AppChannelReader   = "channel-reader"
	AppApprovalGateway = "nginx-workflow-approval-gateway"
	AppPostgres        = "control-postgres"
)

// ReservedMcpServerNames are the names an McpServer may not have: its pods
// carry app=<name> (LabelApp), so a server holding one of the platform's app
// values would be selected by every policy written for that platform
// workload — a server named host-context-controller would be admitted from
// all of mcp-host by allow-host-context-controller-api (docs/mcpserver.md).
// The McpServer CRD's CEL rule on metadata.name repeats this list
// (pkg/apis/clerum/v1alpha1; a test keeps the two equal); the operator and
// render refuse an older object holding one as InvalidSpec.
var ReservedMcpServerNames = []string{
	AppController,
	AppAPIGateway,
	AppMcpProxy,
	AppRPCProxy,
	AppChannelReader,
	AppApprovalGateway,
	AppPostgres,
}

// ReservedMcpServerName reports whether name is one an McpServer may not
// have.
func ReservedMcpServerName(name string) bool {
	return slices.Contains(ReservedMcpServerNames, name)
}

// Secret types no McpServer or Host may read: a service-account token
// speaks for a ServiceAccount, and registry credentials for a registry
// account; neither is a server's configuration.
const (
	secretTypeServiceAccountToken = "kubernetes.io/service-account-token"
	secretTypeDockercfg           = "kubernetes.io/dockercfg"
	secretTypeDockerConfigJSON    = "kubernetes.io/dockerconfigjson"
)

// ForbiddenSecret says why a Secret of type secretType with labels may not
// be named by an McpServer's envSecret or auth, or "" when it may: it is a
// service-account token, a registry credential, or one of HCC's own
// Secrets (LabelManagedBy), such as a Host's runtime credential. The
// operator reports such a reference as SecretsMissing and hcc-api never
// hands its value out (docs/mcpserver.md).
func ForbiddenSecret(secretType string, labels map[string]string) string {
	switch {
	case secretType == secretTypeServiceAccountToken:
		return "is a service-account token"
	case secretType == secretTypeDockercfg || secretType == secretTypeDockerConfigJSON:
		return "is a registry credential (" + secretType + ")"
	case labels[LabelManagedBy] != "":
		return "is managed by HCC (label " + LabelManagedBy + ")"
	}
	return ""
}
