package netpol

import (
	"context"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/netpol"
)

// The operator writes exactly the policies the planner plans for the same
// inventory, and render prints the planner's plan (netpol.Compute over the
// Contexts, the servers and the resolved addresses): a full pass over an
// empty cluster leaves the policies render prints, no more, no fewer, none
// different.
func TestSyncAndRenderProduceTheSamePolicies(t *testing.T) {
	contexts, servers := inventory(3, 2)
	servers[0].Spec.EgressBindings = []clerumv1alpha1.EgressBinding{
		{Name: "api", CIDR: "8.8.8.0/24", Port: ptr.To[int32](443)},
	}
	f, c := newFixture(t, world{contexts: contexts, servers: servers})
	c.plan = nil // the real planner over the seeded listers
	require.NoError(t, fullPass(c))

	// What render plans for the same inventory (no lookups answered: the
	// fake coordinator resolves nothing either).
	want := netpol.Compute(netpol.Inventory{Contexts: contexts, Servers: servers}, testPlanOpts).Policies
	require.NotEmpty(t, want)

	var got []*networkingv1.NetworkPolicy
	for _, ns := range PolicyNamespaces(testPlanOpts) {
		list, err := f.Kube.NetworkingV1().NetworkPolicies(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		for i := range list.Items {
			got = append(got, &list.Items[i])
		}
	}
	assert.Equal(t, policyKeys(want), policyKeys(got), "the same policies, by namespace and name")
	byKey := map[string]*networkingv1.NetworkPolicy{}
	for _, p := range got {
		byKey[p.Namespace+"/"+p.Name] = p
	}
	for _, w := range want {
		g, ok := byKey[w.Namespace+"/"+w.Name]
		if !ok {
			continue
		}
		assert.Equal(t, w.Labels, g.Labels, "%s/%s: labels", w.Namespace, w.Name)
		assert.Equal(t, w.Annotations, g.Annotations, "%s/%s: annotations", w.Namespace, w.Name)
		assert.Equal(t, w.Spec, g.Spec, "%s/%s: spec", w.Namespace, w.Name)
	}
}

func policyKeys(ps []*networkingv1.NetworkPolicy) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	sort.Strings(out)
	return out
}
