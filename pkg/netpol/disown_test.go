package netpol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// owners is the owner labels of a test policy; nil writes none (a policy
// an older HCC wrote).
func owners(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func ctxOwners(id, server string) map[string]string {
	return owners(names.LabelContext, id, names.LabelMcpServer, server)
}

func serverOwner(server string) map[string]string { return owners(names.LabelMcpServer, server) }

func TestJudgeDispose(t *testing.T) {
	opts := defaultOptions(t)
	opts.RuntimeNamespaces = []string{"mcp-server", "rpc-proxy", "sandbox-ui"}
	opts.MinimalInfraNamespaces = []string{"sandbox-ui"}
	longServer := strings.Repeat("s", 70)
	inv := Inventory{
		Contexts: []*clerumv1alpha1.Context{
			newContext("alpha", "alpha", 0, "search", "missing"),
			newContext("team", "team", 1, "search"),
			newContext("team-b", "team-b", 2, "files"),
		},
		Servers: []*clerumv1alpha1.McpServer{
			newServer("search", withBindings(publicWebBinding("www")), withRecipeBindings(`[]`)),
			newServer("files"),
			newServer("old", disabled),
			newServer("multi-part"),
			newServer("a"),
		},
	}
	observed := Observed{
		DeletedServers:    map[string]bool{"gone": true, longServer: true},
		RetiredContextIDs: map[string]bool{"renamed": true, "team": true},
	}
	judge := NewJudge(inv, opts, observed)
	tests := []struct {
		name, namespace, policy, typ string
		labels                       map[string]string
		want                         Disposition
		server                       string
	}{
		// Attributed by the owner labels.
		{name: "a Context that no longer names the server disowns its ingress", namespace: "mcp-server", policy: "ctx-alpha-files", typ: names.PolicyTypeContextAllow, labels: ctxOwners("alpha", "files"), want: Disowned, server: "files"},
		{name: "a Context that no longer names the server disowns its host egress", namespace: "mcp-host", policy: "ctx-alpha-files-egress", typ: names.PolicyTypeContextAllow, labels: ctxOwners("alpha", "files"), want: Disowned, server: "files"},
		{name: "a Context that no longer names the server disowns the rpc-proxy egress", namespace: "rpc-proxy", policy: "rpc-egress-alpha-files", typ: names.PolicyTypeRPCProxyEgress, labels: ctxOwners("alpha", "files"), want: Disowned, server: "files"},
		{name: "a contextId and a server with dashes are read from the labels", namespace: "mcp-server", policy: "ctx-team-b-multi-part", typ: names.PolicyTypeContextAllow, labels: ctxOwners("team-b", "multi-part"), want: Disowned, server: "multi-part"},
		{name: "a disabled server disowns its allows in every Context", namespace: "mcp-server", policy: "ctx-nobody-old", typ: names.PolicyTypeContextAllow, labels: ctxOwners("nobody", "old"), want: Disowned, server: "old"},
		{name: "a server seen deleted disowns its allows", namespace: "mcp-server", policy: "ctx-alpha-gone", typ: names.PolicyTypeContextAllow, labels: ctxOwners("alpha", "gone"), want: Disowned, server: "gone"},
		{name: "a server seen deleted is found by the hashed label value of its long name", namespace: "mcp-server", policy: "ext-egress-long", typ: names.PolicyTypeExternalEgress, labels: serverOwner(names.Label(longServer)), want: Disowned, server: names.Label(longServer)},
		{name: "a contextId seen retired does not disown the allows its live holder still wants: the holder's spec decides", namespace: "rpc-proxy", policy: "rpc-egress-team-search", typ: names.PolicyTypeRPCProxyEgress, labels: ctxOwners("team", "search"), want: Orphan},
		{name: "a contextId seen retired whose live holder no longer wants the server disowns it", namespace: "rpc-proxy", policy: "rpc-egress-team-files", typ: names.PolicyTypeRPCProxyEgress, labels: ctxOwners("team", "files"), want: Disowned, server: "files"},
		{name: "a contextId seen retired disowns its allows", namespace: "rpc-proxy", policy: "rpc-egress-renamed-search", typ: names.PolicyTypeRPCProxyEgress, labels: ctxOwners("renamed", "search"), want: Disowned, server: "search"},
		{name: "a Context deleted while no controller ran leaves an orphan", namespace: "mcp-server", policy: "ctx-vanished-search", typ: names.PolicyTypeContextAllow, labels: ctxOwners("vanished", "search"), want: Orphan},
		{name: "a server deleted while no controller ran leaves an orphan", namespace: "mcp-server", policy: "ctx-alpha-missing", typ: names.PolicyTypeContextAllow, labels: ctxOwners("alpha", "missing"), want: Orphan},
		{name: "a Context that never named the server disowns the allow", namespace: "mcp-server", policy: "ctx-alpha-unknown", typ: names.PolicyTypeContextAllow, labels: ctxOwners("alpha", "unknown"), want: Disowned, server: "unknown"},
		{name: "with Context team live and team-a gone, the labels of ctx-team-a-files name the absent team-a: an orphan", namespace: "mcp-server", policy: "ctx-team-a-files", typ: names.PolicyTypeContextAllow, labels: ctxOwners("team-a", "files"), want: Orphan},
		{name: "the labels decide, not the name", namespace: "mcp-server", policy: "ctx-alpha-files", typ: names.PolicyTypeContextAllow, labels: ctxOwners("vanished", "search"), want: Orphan},
		{name: "a live server without that binding disowns its external egress", namespace: "mcp-server", policy: "ext-egress-search-api", typ: names.PolicyTypeExternalEgress, labels: serverOwner("search"), want: Disowned, server: "search"},
		{name: "with server a live and a-b gone, the labels of ext-egress-a-b-x name the absent a-b: an orphan", namespace: "mcp-server", policy: "ext-egress-a-b-x", typ: names.PolicyTypeExternalEgress, labels: serverOwner("a-b"), want: Orphan},
		{name: "with server a live, the labels of ext-egress-a-b-x naming a disown it", namespace: "mcp-server", policy: "ext-egress-a-b-x", typ: names.PolicyTypeExternalEgress, labels: serverOwner("a"), want: Disowned, server: "a"},
		{name: "a deleted server disowns its external egress", namespace: "mcp-server", policy: "ext-egress-gone-api", typ: names.PolicyTypeExternalEgress, labels: serverOwner("gone"), want: Disowned, server: "gone"},
		{name: "the external egress of an unknown server is an orphan", namespace: "mcp-server", policy: "ext-egress-unknown-api", typ: names.PolicyTypeExternalEgress, labels: serverOwner("unknown"), want: Orphan},
		{name: "a live server without that recipe entry disowns the egress half", namespace: "mcp-server", policy: "bind-nightly-search-runner-egress", typ: names.PolicyTypeRecipeBinding, labels: serverOwner("search"), want: Disowned, server: "search"},
		{name: "a live server without that recipe entry disowns the ingress half", namespace: "sandbox-recipes", policy: "bind-nightly-search-runner-ingress", typ: names.PolicyTypeRecipeBinding, labels: serverOwner("search"), want: Disowned, server: "search"},
		{name: "a recipe binding of an unknown server is an orphan", namespace: "mcp-server", policy: "bind-nightly-unknown-runner-egress", typ: names.PolicyTypeRecipeBinding, labels: serverOwner("unknown"), want: Orphan},

		// Without owner labels (an older HCC): the name, when it reads one way.
		{name: "an unlabelled allow whose name reads one way is attributed by it", namespace: "mcp-server", policy: "ctx-alpha-files", typ: names.PolicyTypeContextAllow, want: Disowned, server: "files"},
		{name: "an unlabelled host egress whose name reads one way is attributed by it", namespace: "mcp-host", policy: "ctx-alpha-files-egress", typ: names.PolicyTypeContextAllow, want: Disowned, server: "files"},
		{name: "an unlabelled rpc-proxy egress whose name reads one way is attributed by it", namespace: "rpc-proxy", policy: "rpc-egress-alpha-files", typ: names.PolicyTypeRPCProxyEgress, want: Disowned, server: "files"},
		{name: "with Context team live and team-a gone, an unlabelled ctx-team-a-files reads two ways: an orphan", namespace: "mcp-server", policy: "ctx-team-a-files", typ: names.PolicyTypeContextAllow, want: Orphan},
		{name: "with server a live and a-b gone, an unlabelled ext-egress-a-b-x reads two ways: an orphan", namespace: "mcp-server", policy: "ext-egress-a-b-x", typ: names.PolicyTypeExternalEgress, want: Orphan},
		{name: "an unlabelled name that parses two ways is an orphan even when both readings name known owners", namespace: "mcp-server", policy: "ctx-team-b-files", typ: names.PolicyTypeContextAllow, want: Orphan},
		{name: "an unlabelled allow with only one owner label is read by its name", namespace: "mcp-server", policy: "ctx-alpha-files", typ: names.PolicyTypeContextAllow, labels: serverOwner("files"), want: Disowned, server: "files"},
		{name: "an unlabelled name with a part that is no DNS label reads one way", namespace: "mcp-server", policy: "ctx-alpha--files", typ: names.PolicyTypeContextAllow, want: Orphan},
		{name: "an unlabelled external egress whose name reads one way is attributed by it", namespace: "mcp-server", policy: "ext-egress-search-api", typ: names.PolicyTypeExternalEgress, want: Disowned, server: "search"},
		{name: "an unlabelled recipe binding whose name reads one way is attributed by it", namespace: "sandbox-recipes", policy: "bind-nightly-search-runner-ingress", typ: names.PolicyTypeRecipeBinding, want: Disowned, server: "search"},
		{name: "an unlabelled recipe binding whose name reads two ways is an orphan", namespace: "mcp-server", policy: "bind-nightly-multi-part-runner-egress", typ: names.PolicyTypeRecipeBinding, want: Orphan},
		{name: "an unlabelled host egress outside the host namespace is an orphan", namespace: "rpc-proxy", policy: "ctx-alpha-files-egress", typ: names.PolicyTypeContextAllow, want: Orphan},
		{name: "an unlabelled shortened name cannot be read back and is an orphan", namespace: "mcp-server", policy: names.ExternalEgressPolicy("search", strings.Repeat("b", 250)), typ: names.PolicyTypeExternalEgress, want: Orphan},

		{name: "deny-all is never swept", namespace: "mcp-host", policy: "deny-all-mcp-host", typ: names.PolicyTypeDenyAll, want: Kept},
		{name: "L1 of a namespace off the runtime list is kept", namespace: "mcp-host", policy: "allow-dns-egress-mcp-host", typ: names.PolicyTypeInfrastructure, want: Kept},
		{name: "L1 a minimal-infra namespace no longer needs is revoked", namespace: "sandbox-ui", policy: "allow-hcc-api-egress-sandbox-ui", typ: names.PolicyTypeInfrastructure, want: Disowned},
		{name: "L1 named for another namespace is kept", namespace: "sandbox-ui", policy: "allow-k8s-api-egress-elsewhere", typ: names.PolicyTypeInfrastructure, want: Kept},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, server := judge.Dispose(livePolicy(tc.namespace, tc.policy, tc.typ, tc.labels), tc.typ)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.server, server)
		})
	}

	empty := NewJudge(Inventory{}, opts, Observed{})
	d, _ := empty.Dispose(livePolicy("mcp-server", "ctx-alpha-files", names.PolicyTypeContextAllow, ctxOwners("alpha", "files")), names.PolicyTypeContextAllow)
	assert.Equal(t, Orphan, d, "an empty inventory explains nothing: the caps guard against it")
}

// TestPlannedPoliciesCarryTheirOwners pins the owner labels of every policy
// type that has an owner (docs/names.md): what the judge reads.
func TestPlannedPoliciesCarryTheirOwners(t *testing.T) {
	opts := defaultOptions(t)
	inv := Inventory{
		Contexts: []*clerumv1alpha1.Context{newContext("c", "team-a", 0, "files")},
		Servers: []*clerumv1alpha1.McpServer{newServer("files", withBindings(publicWebBinding("www")),
			withRecipeBindings(`[{"recipe":"nightly","from":"files","to":"runner","port":8080,"protocol":"TCP"}]`))},
	}
	plan := Compute(inv, opts)
	seen := map[string]int{}
	for _, p := range plan.Policies {
		typ := p.Labels[names.LabelPolicyType]
		seen[typ]++
		switch typ {
		case names.PolicyTypeContextAllow, names.PolicyTypeRPCProxyEgress:
			assert.Equal(t, "team-a", p.Labels[names.LabelContext], p.Name)
			assert.Equal(t, "files", p.Labels[names.LabelMcpServer], p.Name)
			if p.Namespace == opts.McpServerNamespace {
				assert.Equal(t, map[string]string{names.LabelMcpServer: "files"}, p.Spec.PodSelector.MatchLabels,
					"the context label is metadata: the ingress half still selects the server's pods")
			}
		case names.PolicyTypeExternalEgress:
			assert.Equal(t, "files", p.Labels[names.LabelMcpServer], p.Name)
			assert.Equal(t, "www", p.Labels[names.LabelEgressBinding], p.Name)
		case names.PolicyTypeRecipeBinding:
			assert.Equal(t, "files", p.Labels[names.LabelMcpServer], p.Name)
			assert.Equal(t, "nightly", p.Labels[names.LabelRecipe], p.Name)
		default:
			assert.NotContains(t, p.Labels, names.LabelMcpServer, p.Name)
			assert.NotContains(t, p.Labels, names.LabelContext, p.Name)
		}
	}
	for _, typ := range []string{names.PolicyTypeContextAllow, names.PolicyTypeRPCProxyEgress, names.PolicyTypeExternalEgress, names.PolicyTypeRecipeBinding} {
		assert.NotZero(t, seen[typ], typ)
	}
}

func livePolicy(namespace, name, typ string, labels map[string]string) *networkingv1.NetworkPolicy {
	l := map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelPolicyType: typ}
	for k, v := range labels {
		l[k] = v
	}
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: l}}
}
