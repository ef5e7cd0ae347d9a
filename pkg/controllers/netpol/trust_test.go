package netpol

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
)

// A cache filled from the API server's watch cache may lag behind etcd: the
// pass that certifies readiness must see what existed before the process
// started, whatever the cache shows.
func TestCertificationDoesNotTrustALaggingCache(t *testing.T) {
	t.Run("a stale allow the cache has not seen is revoked before readiness", func(t *testing.T) {
		contexts, servers := inventory(1, 1)
		old := policy("mcp-server", "ctx-old-s1", names.PolicyTypeContextAllow, 3000)
		f, c := newFixture(t, world{contexts: contexts, servers: servers,
			policies: append(netpol.Compute(netpol.Inventory{Contexts: contexts, Servers: servers}, testPlanOpts).Policies, old)})
		c.plan = nil   // the real planner over the seeded listers
		f.Unindex(old) // in the API server, not in the cache

		require.NoError(t, fullPass(c))
		assert.Equal(t, map[string][]string{"mcp-server": {"delete networkpolicies/ctx-old-s1"}}, f.writes())
		assert.True(t, f.readiness.Ready())
	})
	t.Run("the allows of a Context deleted before start that the cache still shows are revoked before readiness", func(t *testing.T) {
		contexts, servers := inventory(2, 1)
		gone := contexts[0]
		f, c := newFixture(t, world{contexts: contexts[1:], servers: servers,
			policies: netpol.Compute(netpol.Inventory{Contexts: contexts, Servers: servers}, testPlanOpts).Policies})
		c.opts.Caps = Caps{Absolute: 100, Percent: 100}
		c.plan = nil  // the real planner over the seeded listers
		f.Index(gone) // deleted before the start; the cache still shows it

		require.NoError(t, fullPass(c))
		assert.Equal(t, trio("delete", "c0000", "s0000-00"), f.writes())
		assert.True(t, f.readiness.Ready())
	})
}

// stripOwnerLabels returns ps as the HCC before owner labels wrote them:
// external-egress and recipe-binding policies carried only the server.
func stripOwnerLabels(ps []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, p := range ps {
		p = p.DeepCopy()
		delete(p.Labels, names.LabelContext)
		delete(p.Labels, names.LabelEgressBinding)
		delete(p.Labels, names.LabelRecipe)
		switch p.Labels[names.LabelPolicyType] {
		case names.PolicyTypeContextAllow, names.PolicyTypeRPCProxyEgress:
			delete(p.Labels, names.LabelMcpServer)
		}
		out = append(out, p)
	}
	return out
}

func TestExistingPoliciesGainOwnerLabelsInOneUpdateEach(t *testing.T) {
	contexts, servers := inventory(3, 2)
	for _, s := range servers {
		s.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "api", CIDR: "8.8.8.0/24", Port: ptr.To[int32](443)}}
		s.Annotations = map[string]string{names.AnnotationRecipeBindings: fmt.Sprintf(
			`[{"recipe":"nightly","from":%q,"to":"runner","port":9000,"protocol":"TCP"}]`, s.Name)}
	}
	planned := netpol.Compute(netpol.Inventory{Contexts: contexts, Servers: servers}, testPlanOpts).Policies
	f, c := newFixture(t, world{contexts: contexts, servers: servers, policies: stripOwnerLabels(planned)})
	c.plan = nil // the real planner over the seeded listers

	require.NoError(t, fullPass(c))
	updates := map[string]int{}
	for ns, writes := range f.writes() {
		for _, w := range writes {
			require.Regexp(t, `^update `, w, "only updates: nothing is revoked or created")
			updates[ns+" "+w]++
		}
	}
	byType := map[string]int{}
	for _, p := range planned {
		typ := p.Labels[names.LabelPolicyType]
		if typ == names.PolicyTypeDenyAll || typ == names.PolicyTypeInfrastructure {
			assert.NotContains(t, updates, p.Namespace+" update networkpolicies/"+p.Name, "L0/L1 have no owner")
			continue
		}
		assert.Equal(t, 1, updates[p.Namespace+" update networkpolicies/"+p.Name], p.Name)
		byType[typ]++
	}
	// 3 Contexts × 2 servers: 6 × (ingress, host egress) context-allow, 6
	// rpc-proxy-egress; 6 servers × 1 binding; 6 × 2 recipe-binding halves.
	assert.Equal(t, map[string]int{
		names.PolicyTypeContextAllow: 12, names.PolicyTypeRPCProxyEgress: 6,
		names.PolicyTypeExternalEgress: 6, names.PolicyTypeRecipeBinding: 12,
	}, byType)
	assert.Len(t, updates, 36)

	f.SyncCaches()
	require.NoError(t, fullPass(c))
	assert.Empty(t, f.Writes(), "labelled: the next pass writes nothing")
}

func TestAnInventoryMissingAContextRevokesNothing(t *testing.T) {
	// Context team is live; team-a, whose contextId team's is a prefix of,
	// is missing from the inventory although its 12 allows exist. No
	// deletion was seen: nothing explains them, the cap of 10 trips, and
	// nothing is revoked — in particular no split of ctx-team-a-f00 makes
	// it team's allow of a server "a-f00".
	for _, tc := range []struct {
		name  string
		strip bool
	}{
		{name: "labelled policies"},
		{name: "policies an older HCC wrote without owner labels", strip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			team := &clerumv1alpha1.Context{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "team"},
				Spec: clerumv1alpha1.ContextSpec{ContextID: "team", McpServers: []string{"x"}}}
			teamA := &clerumv1alpha1.Context{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "team-a"},
				Spec: clerumv1alpha1.ContextSpec{ContextID: "team-a"}}
			servers := []*clerumv1alpha1.McpServer{testServer("x")}
			for i := range 4 {
				s := testServer(fmt.Sprintf("f%02d", i))
				servers = append(servers, s)
				teamA.Spec.McpServers = append(teamA.Spec.McpServers, s.Name)
			}
			policies := netpol.Compute(netpol.Inventory{Contexts: []*clerumv1alpha1.Context{team, teamA}, Servers: servers}, testPlanOpts).Policies
			if tc.strip {
				policies = stripOwnerLabels(policies)
			}
			f, c := newFixture(t, world{contexts: []*clerumv1alpha1.Context{team}, servers: servers, policies: policies})
			c.plan = nil   // the real planner over the seeded listers
			f.Index(teamA) // deleted before the start; the cache still shows it

			require.NoError(t, fullPass(c))
			assert.Empty(t, deletes(f.Writes()), "12 unexplained orphans trip the cap of 10: nothing is revoked")
			assert.Equal(t, 12.0, gaugeValue(t, c.metrics.Orphans))
			assert.Equal(t, 1.0, counterValue(t, c.metrics.OrphanCapped.WithLabelValues("absolute")))
			assert.True(t, f.readiness.Ready(), "a tripped cap does not withhold certification")
		})
	}
}

func testServer(name string) *clerumv1alpha1.McpServer {
	return &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name},
		Spec:       clerumv1alpha1.McpServerSpec{Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
	}
}

// What a pass saw deleted is kept until a pass whose revocations all
// succeeded: a failed revocation must not turn the deleted Context's allows
// into unexplained orphans the caps then hold.
func TestObservationsAreKeptUntilAPassWhoseRevocationsAllSucceeded(t *testing.T) {
	f, c := convergedFixture(t, 2, 4) // 12 allows per Context: over the cap of 10
	gone := f.contexts[0]
	f.Unindex(gone)
	c.contextHandlers().OnDelete(gone)
	refuse := true
	f.Kube.PrependReactor("delete", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
		if refuse {
			return true, nil, errors.New("webhook down")
		}
		return false, nil, nil
	})

	require.Error(t, fullPass(c))
	observed, _ := c.observed.snapshot()
	assert.True(t, observed.RetiredContextIDs[gone.Spec.ContextID], "the observation outlives the failed pass")

	refuse = false
	f.ClearWrites()
	require.NoError(t, fullPass(c))
	assert.Len(t, deletes(f.Writes()), 12, "still disowned, so revoked whatever the caps")
}

// After certification a cache that still shows a Context deleted before the
// start would bring back the allows the certifying pass revoked: passes
// keep reading the API server until every cache has reached the
// resourceVersion of that read.
func TestALaggingCacheDoesNotBringRevokedAllowsBack(t *testing.T) {
	contexts, servers := inventory(2, 1)
	gone := contexts[0]
	f, c := newFixture(t, world{contexts: contexts[1:], servers: servers,
		policies: netpol.Compute(netpol.Inventory{Contexts: contexts, Servers: servers}, testPlanOpts).Policies})
	c.opts.Caps = Caps{Absolute: 100, Percent: 100}
	c.plan = nil  // the real planner over the seeded listers
	f.Index(gone) // deleted before the start; the cache still shows it
	require.NoError(t, fullPass(c))
	require.Len(t, deletes(f.Writes()), 3)
	require.True(t, f.readiness.Ready())
	require.Len(t, c.quorumVersions, len(c.cacheVersions), "the certifying read recorded a version per cache")

	f.SyncCaches() // the policy caches show the revocation
	f.Index(gone)  // the Context cache still shows the Context
	require.NoError(t, fullPass(c))
	assert.Empty(t, f.Writes(), "the caches have not caught up: the pass read the API server")

	// Once every cache reports a version at least the certifying read's,
	// passes read the caches (here still showing the Context).
	for i := range c.cacheVersions {
		c.cacheVersions[i] = func() string { return "999999" }
	}
	f.ClearWrites()
	require.NoError(t, fullPass(c))
	assert.Equal(t, trio("create", "c0000", "s0000-00"), f.writes(),
		"caught up: the pass read the caches (here left behind by the test)")
	assert.True(t, c.caughtUp.Load())
}
