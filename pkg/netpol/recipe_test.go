package netpol

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

func recipePolicies(plan *Plan) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, p := range plan.Policies {
		if p.Labels[names.LabelPolicyType] == names.PolicyTypeRecipeBinding {
			out = append(out, p)
		}
	}
	return out
}

func TestRecipeBindings(t *testing.T) {
	tests := []struct {
		name           string
		annotation     string
		want           []string
		wantPorts      []networkingv1.NetworkPolicyPort // of every planned policy
		wantRejections []Rejection
	}{
		{
			name:       "a valid binding gets an egress half and an ingress half on TCP by default",
			annotation: `[{"recipe":"nightly","from":"s1","to":"runner","port":9000}]`,
			want:       []string{"mcp-server/bind-nightly-s1-runner-egress", "sandbox-recipes/bind-nightly-s1-runner-ingress"},
			wantPorts:  []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 9000)},
		},
		{
			name:       "a UDP binding keeps its protocol",
			annotation: `[{"recipe":"nightly","from":"s1","to":"runner","port":5353,"protocol":"UDP"}]`,
			want:       []string{"mcp-server/bind-nightly-s1-runner-egress", "sandbox-recipes/bind-nightly-s1-runner-ingress"},
			wantPorts:  []networkingv1.NetworkPolicyPort{port(corev1.ProtocolUDP, 5353)},
		},
		{
			name: "duplicates collapse",
			annotation: `[{"recipe":"nightly","from":"s1","to":"runner","port":9000},
				{"recipe":"nightly","from":"s1","to":"runner","port":9000,"protocol":"TCP"}]`,
			want:      []string{"mcp-server/bind-nightly-s1-runner-egress", "sandbox-recipes/bind-nightly-s1-runner-ingress"},
			wantPorts: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 9000)},
		},
		{
			name: "one pair on several ports is one pair of policies listing every port",
			annotation: `[{"recipe":"nightly","from":"s1","to":"runner","port":9001},
				{"recipe":"nightly","from":"s1","to":"runner","port":9000,"protocol":"UDP"},
				{"recipe":"nightly","from":"s1","to":"runner","port":9000}]`,
			want: []string{"mcp-server/bind-nightly-s1-runner-egress", "sandbox-recipes/bind-nightly-s1-runner-ingress"},
			wantPorts: []networkingv1.NetworkPolicyPort{
				port(corev1.ProtocolTCP, 9000), port(corev1.ProtocolTCP, 9001), port(corev1.ProtocolUDP, 9000),
			},
		},
		{
			name: "distinct recipes and workloads get their own pairs",
			annotation: `[{"recipe":"nightly","from":"s1","to":"runner","port":9000},
				{"recipe":"weekly","from":"s1","to":"runner","port":9000},
				{"recipe":"nightly","from":"s1","to":"indexer","port":9000}]`,
			want: []string{
				"mcp-server/bind-nightly-s1-indexer-egress", "mcp-server/bind-nightly-s1-runner-egress", "mcp-server/bind-weekly-s1-runner-egress",
				"sandbox-recipes/bind-nightly-s1-indexer-ingress", "sandbox-recipes/bind-nightly-s1-runner-ingress", "sandbox-recipes/bind-weekly-s1-runner-ingress",
			},
			wantPorts: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 9000)},
		},
		{
			name:           "an entry from another server is rejected",
			annotation:     `[{"recipe":"nightly","from":"s2","to":"runner","port":9000}]`,
			wantRejections: []Rejection{{Kind: RejectedRecipeBinding, Server: "s1", Binding: "recipe:nightly", Reason: `from "s2" is not this McpServer (s1)`}},
		},
		{
			name:           "a recipe that is not a DNS label is rejected",
			annotation:     `[{"recipe":"Nightly Run","from":"s1","to":"runner","port":9000}]`,
			wantRejections: []Rejection{{Kind: RejectedRecipeBinding, Server: "s1", Binding: "recipe:Nightly Run", Reason: `recipe "Nightly Run" is not a DNS label`}},
		},
		{
			name:           "a workload that is not a DNS label is rejected",
			annotation:     `[{"recipe":"nightly","from":"s1","to":"runner.v2","port":9000}]`,
			wantRejections: []Rejection{{Kind: RejectedRecipeBinding, Server: "s1", Binding: "recipe:nightly", Reason: `to "runner.v2" is not a DNS label`}},
		},
		{
			name:           "port 0 is rejected",
			annotation:     `[{"recipe":"nightly","from":"s1","to":"runner"}]`,
			wantRejections: []Rejection{{Kind: RejectedRecipeBinding, Server: "s1", Binding: "recipe:nightly", Reason: "port 0 is outside 1-65535"}},
		},
		{
			name:           "a port above 65535 is rejected",
			annotation:     `[{"recipe":"nightly","from":"s1","to":"runner","port":65536}]`,
			wantRejections: []Rejection{{Kind: RejectedRecipeBinding, Server: "s1", Binding: "recipe:nightly", Reason: "port 65536 is outside 1-65535"}},
		},
		{
			name:           "a protocol other than TCP or UDP is rejected",
			annotation:     `[{"recipe":"nightly","from":"s1","to":"runner","port":9000,"protocol":"SCTP"}]`,
			wantRejections: []Rejection{{Kind: RejectedRecipeBinding, Server: "s1", Binding: "recipe:nightly", Reason: `protocol "SCTP" is neither TCP nor UDP`}},
		},
		{
			name: "an invalid entry leaves the valid ones in place",
			annotation: `[{"recipe":"bad","from":"s1","to":"runner","port":0},
				{"recipe":"nightly","from":"s1","to":"runner","port":9000}]`,
			want:           []string{"mcp-server/bind-nightly-s1-runner-egress", "sandbox-recipes/bind-nightly-s1-runner-ingress"},
			wantPorts:      []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 9000)},
			wantRejections: []Rejection{{Kind: RejectedRecipeBinding, Server: "s1", Binding: "recipe:bad", Reason: "port 0 is outside 1-65535"}},
		},
		{
			name:       "malformed JSON rejects the whole annotation",
			annotation: `[{"recipe":"nightly","from":"s1","to":"runner","port":"9000"}]`,
			wantRejections: []Rejection{{Kind: RejectedRecipeBinding, Server: "s1", Binding: "recipe:*",
				Reason: "annotation clerum.io/recipe-bindings is not a JSON list of {recipe, from, to, port, protocol}: json: cannot unmarshal string into Go struct field recipeBinding.port of type int64"}},
		},
		{
			name:       "an empty list binds nothing",
			annotation: `[]`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer("s1", withRecipeBindings(tc.annotation))
			plan := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{s}}, defaultOptions(t))
			policies := recipePolicies(plan)
			assert.Equal(t, tc.want, keys(policies))
			assert.Equal(t, tc.wantRejections, plan.Rejections)
			for _, p := range policies {
				assert.Equal(t, "s1", p.Labels[names.LabelMcpServer])
				if len(p.Spec.Egress) > 0 {
					assert.Equal(t, tc.wantPorts, p.Spec.Egress[0].Ports, p.Name)
				} else {
					assert.Equal(t, tc.wantPorts, p.Spec.Ingress[0].Ports, p.Name)
				}
			}
		})
	}
}

func TestRecipeBindingsFollowTheServer(t *testing.T) {
	annotation := `[{"recipe":"nightly","from":"s1","to":"runner","port":9000}]`
	opts := defaultOptions(t)

	present := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{newServer("s1", withRecipeBindings(annotation))}}, opts)
	require.Len(t, recipePolicies(present), 2)

	t.Run("a deleted server's binding policies are no longer planned", func(t *testing.T) {
		assert.Empty(t, recipePolicies(Compute(Inventory{}, opts)))
	})
	t.Run("a disabled server's binding policies are no longer planned", func(t *testing.T) {
		plan := Compute(Inventory{Servers: []*clerumv1alpha1.McpServer{newServer("s1", disabled, withRecipeBindings(annotation))}}, opts)
		assert.Empty(t, recipePolicies(plan))
		assert.Empty(t, plan.Rejections)
	})
}
