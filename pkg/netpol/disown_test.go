package netpol

import (
	"testing"

	"github.com/stretchr/testify/assert"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

func TestJudgeDispose(t *testing.T) {
	opts := defaultOptions(t)
	opts.RuntimeNamespaces = []string{"mcp-server", "rpc-proxy", "sandbox-ui"}
	opts.MinimalInfraNamespaces = []string{"sandbox-ui"}
	inv := Inventory{
		Contexts: []*clerumv1alpha1.Context{
			newContext("alpha", "alpha", 0, "search", "missing"),
			newContext("team-a", "team-a", 1, "files"),
		},
		Servers: []*clerumv1alpha1.McpServer{
			newServer("search", withBindings(publicWebBinding("www")), withRecipeBindings(`[]`)),
			newServer("files"),
			newServer("old", disabled),
			newServer("multi-part"),
		},
	}
	observed := Observed{
		DeletedServers:    map[string]bool{"gone": true},
		RetiredContextIDs: map[string]bool{"renamed": true},
	}
	judge := NewJudge(inv, opts, observed)
	tests := []struct {
		name, namespace, policy, typ string
		want                         Disposition
		server                       string
	}{
		{name: "a Context that no longer names the server disowns its ingress", namespace: "mcp-server", policy: "ctx-alpha-files", typ: names.PolicyTypeContextAllow, want: Disowned, server: "files"},
		{name: "a Context that no longer names the server disowns its host egress", namespace: "mcp-host", policy: "ctx-alpha-files-egress", typ: names.PolicyTypeContextAllow, want: Disowned, server: "files"},
		{name: "a Context that no longer names the server disowns the rpc-proxy egress", namespace: "rpc-proxy", policy: "rpc-egress-alpha-files", typ: names.PolicyTypeRPCProxyEgress, want: Disowned, server: "files"},
		{name: "a contextId with a dash is split where a Context holds it", namespace: "mcp-server", policy: "ctx-team-a-multi-part", typ: names.PolicyTypeContextAllow, want: Disowned, server: "multi-part"},
		{name: "a disabled server disowns its allows in every Context", namespace: "mcp-server", policy: "ctx-nobody-old", typ: names.PolicyTypeContextAllow, want: Disowned, server: "old"},
		{name: "a server seen deleted disowns its allows", namespace: "mcp-server", policy: "ctx-alpha-gone", typ: names.PolicyTypeContextAllow, want: Disowned, server: "gone"},
		{name: "a contextId seen retired disowns its allows", namespace: "rpc-proxy", policy: "rpc-egress-renamed-search", typ: names.PolicyTypeRPCProxyEgress, want: Disowned, server: "search"},
		{name: "a Context deleted while no controller ran leaves an orphan", namespace: "mcp-server", policy: "ctx-vanished-search", typ: names.PolicyTypeContextAllow, want: Orphan},
		{name: "a server deleted while no controller ran leaves an orphan", namespace: "mcp-server", policy: "ctx-alpha-missing", typ: names.PolicyTypeContextAllow, want: Orphan},
		{name: "a Context that never named the server disowns the allow", namespace: "mcp-server", policy: "ctx-alpha-unknown", typ: names.PolicyTypeContextAllow, want: Disowned, server: "unknown"},
		{name: "a live server without that binding disowns its external egress", namespace: "mcp-server", policy: "ext-egress-search-api", typ: names.PolicyTypeExternalEgress, want: Disowned, server: "search"},
		{name: "a server name with a dash is found in an external egress name", namespace: "mcp-server", policy: "ext-egress-multi-part-x", typ: names.PolicyTypeExternalEgress, want: Disowned, server: "multi-part"},
		{name: "a deleted server disowns its external egress", namespace: "mcp-server", policy: "ext-egress-gone-api", typ: names.PolicyTypeExternalEgress, want: Disowned, server: "gone"},
		{name: "the external egress of an unknown server is an orphan", namespace: "mcp-server", policy: "ext-egress-unknown-api", typ: names.PolicyTypeExternalEgress, want: Orphan},
		{name: "a live server without that recipe entry disowns the egress half", namespace: "mcp-server", policy: "bind-nightly-search-runner-egress", typ: names.PolicyTypeRecipeBinding, want: Disowned, server: "search"},
		{name: "a live server without that recipe entry disowns the ingress half", namespace: "sandbox-recipes", policy: "bind-nightly-search-runner-ingress", typ: names.PolicyTypeRecipeBinding, want: Disowned, server: "search"},
		{name: "a recipe binding of an unknown server is an orphan", namespace: "mcp-server", policy: "bind-nightly-unknown-runner-egress", typ: names.PolicyTypeRecipeBinding, want: Orphan},
		{name: "deny-all is never swept", namespace: "mcp-host", policy: "deny-all-mcp-host", typ: names.PolicyTypeDenyAll, want: Kept},
		{name: "L1 of a namespace off the runtime list is kept", namespace: "mcp-host", policy: "allow-dns-egress-mcp-host", typ: names.PolicyTypeInfrastructure, want: Kept},
		{name: "L1 a minimal-infra namespace no longer needs is revoked", namespace: "sandbox-ui", policy: "allow-hcc-api-egress-sandbox-ui", typ: names.PolicyTypeInfrastructure, want: Disowned},
		{name: "L1 named for another namespace is kept", namespace: "sandbox-ui", policy: "allow-k8s-api-egress-elsewhere", typ: names.PolicyTypeInfrastructure, want: Kept},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, server := judge.Dispose(tc.namespace, tc.policy, tc.typ)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.server, server)
		})
	}

	empty := NewJudge(Inventory{}, opts, Observed{})
	d, _ := empty.Dispose("mcp-server", "ctx-alpha-files", names.PolicyTypeContextAllow)
	assert.Equal(t, Orphan, d, "an empty inventory explains nothing: the caps guard against it")
}
