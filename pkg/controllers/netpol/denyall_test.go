package netpol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
)

// heldDenyAll is a policy HCC does not manage holding mcp-server's deny-all
// name, shaped by edit.
func heldDenyAll(edit func(*networkingv1.NetworkPolicy)) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "deny-all-mcp-server", Labels: map[string]string{"team": "platform"}},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	if edit != nil {
		edit(p)
	}
	return p
}

func TestAnUnmanagedDenyAllHolder(t *testing.T) {
	tests := []struct {
		name   string
		holder *networkingv1.NetworkPolicy
		// why is empty when the holder counts as the default deny.
		why string
	}{
		{name: "a holder that is itself a default deny counts as the namespace's default deny", holder: heldDenyAll(nil)},
		{name: "a holder with an ingress rule withholds certification", holder: heldDenyAll(func(p *networkingv1.NetworkPolicy) {
			p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
		}), why: "it has 1 ingress rule(s)"},
		{name: "a holder that isolates only ingress withholds certification", holder: heldDenyAll(func(p *networkingv1.NetworkPolicy) {
			p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		}), why: "its policyTypes lack Egress"},
		{name: "a holder that selects only some pods withholds certification", holder: heldDenyAll(func(p *networkingv1.NetworkPolicy) {
			p.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
		}), why: "its pod selector is not empty"},
		{name: "another writer's managed policy holding the name is judged alike", holder: heldDenyAll(func(p *networkingv1.NetworkPolicy) {
			p.Labels = map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelPolicyType: names.PolicyTypeHost}
			p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
		}), why: "it has 1 egress rule(s)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFixture(t, world{policies: []*networkingv1.NetworkPolicy{
				policy("mcp-server", "ctx-c-stale", names.PolicyTypeContextAllow, 3000), tc.holder}})
			c.plan = nil // the real planner over the seeded listers

			require.NoError(t, fullPass(c))
			assert.Contains(t, f.WritesIn("mcp-server"), "delete networkpolicies/ctx-c-stale", "revocations go on")
			assert.Equal(t, 1.0, gaugeValue(t, c.metrics.UnmanagedConflicts), "the conflict metric stays")
			events := f.Events()
			require.NotEmpty(t, events)
			assert.Contains(t, events[0], "Warning UnmanagedConflict NetworkPolicy mcp-server/deny-all-mcp-server")
			live, err := f.Kube.NetworkingV1().NetworkPolicies("mcp-server").Get(t.Context(), "deny-all-mcp-server", metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, tc.holder.Spec, live.Spec, "the holder is never written")

			if tc.why == "" {
				assert.True(t, f.readiness.Ready(), "certified: the namespace is isolated")
				assert.False(t, f.egress.report.Blocked, "the gates may open")
				assert.Zero(t, gaugeValue(t, c.metrics.DefaultDenyWithheld))
				return
			}
			assert.False(t, f.readiness.Ready(), "the namespace may be open: certification is withheld")
			assert.True(t, f.egress.report.Blocked, "no server's gate opens")
			assert.Equal(t, 1.0, gaugeValue(t, c.metrics.DefaultDenyWithheld))
			reason := f.readiness.Reasons()[ReadinessCheck]
			assert.Contains(t, reason, "NetworkPolicy mcp-server/deny-all-mcp-server")
			assert.Contains(t, reason, tc.why)

			// Once the holder is a default deny, the next pass certifies.
			fixed := heldDenyAll(nil)
			fixed.Labels = tc.holder.Labels
			_, err = f.Kube.NetworkingV1().NetworkPolicies("mcp-server").Update(t.Context(), fixed, metav1.UpdateOptions{})
			require.NoError(t, err)
			f.SyncCaches()
			require.NoError(t, fullPass(c))
			assert.True(t, f.readiness.Ready())
			assert.Empty(t, f.readiness.Reasons())
		})
	}
}

func TestNotADefaultDenyNamesEveryGap(t *testing.T) {
	assert.Empty(t, netpol.NotADefaultDeny(&heldDenyAll(nil).Spec))
	why := netpol.NotADefaultDeny(&networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}},
		Egress:      []networkingv1.NetworkPolicyEgressRule{{}, {}},
	})
	for _, want := range []string{"pod selector", "lack Ingress", "lack Egress", "2 egress rule(s)"} {
		assert.True(t, strings.Contains(why, want), "%q in %q", want, why)
	}
}

func TestCensusSaysWhichDenyAllHolderWithholdsReadiness(t *testing.T) {
	var live []*networkingv1.NetworkPolicy
	for _, p := range netpol.Defaults(testPlanOpts) {
		if p.Labels[names.LabelPolicyType] != names.PolicyTypeDenyAll {
			live = append(live, p)
		}
	}
	open := heldDenyAll(func(p *networkingv1.NetworkPolicy) { p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}} })
	isolating := heldDenyAll(func(p *networkingv1.NetworkPolicy) { p.Namespace, p.Name = "rpc-proxy", "deny-all-rpc-proxy" })
	live = append(live, open, isolating)

	census := TakeCensus(live, netpol.Inventory{}, testPlanOpts, Caps{Absolute: 10, Percent: 20})
	assert.Equal(t, []DenyAllHolder{
		{"mcp-server", "deny-all-mcp-server", "it has 1 ingress rule(s)"},
		{"rpc-proxy", "deny-all-rpc-proxy", ""},
	}, census.DenyAllHolders)
	var out strings.Builder
	require.NoError(t, census.Write(&out, "compiled default", "compiled default"))
	assert.Contains(t, out.String(), "deny-all names held by policies HCC does not manage: 2")
	assert.Contains(t, out.String(), "mcp-server/deny-all-mcp-server\tnot a default deny, withholds readiness: it has 1 ingress rule(s)")
	assert.Contains(t, out.String(), "rpc-proxy/deny-all-rpc-proxy\ta default deny: counts as the namespace's")
}
