package netpol

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	clerumlisters "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
	"github.com/clerum/hcc/pkg/reasons"
)

// deletes returns the deletes among writes.
func deletes(writes []string) []string {
	var out []string
	for _, w := range writes {
		if strings.HasPrefix(w, "delete ") {
			out = append(out, w)
		}
	}
	return out
}

// unexplained returns n context-allow policies of a Context nobody knows,
// as left by objects deleted while no controller ran.
func unexplained(n int) []*networkingv1.NetworkPolicy {
	var ps []*networkingv1.NetworkPolicy
	for i := range n {
		ps = append(ps, policy("mcp-server", fmt.Sprintf("ctx-vanished-s%02d", i), names.PolicyTypeContextAllow, 3000))
	}
	return ps
}

func TestDeletingAContextRevokesItsAllowsWhateverTheCaps(t *testing.T) {
	// One Context naming 4 servers holds 12 allows: more than the default
	// absolute cap of 10.
	f, c := convergedFixture(t, 2, 4)
	gone := f.contexts[0]
	f.Unindex(gone)
	c.contextHandlers().OnDelete(gone)

	require.NoError(t, fullPass(c))
	assert.Len(t, deletes(f.Writes()), 12, "every allow of the deleted Context is revoked")
	for _, d := range deletes(f.Writes()) {
		assert.Contains(t, d, "c0000-", "only the deleted Context's allows go")
	}
	assert.Zero(t, counterValue(t, c.metrics.OrphanCapped.WithLabelValues("absolute")), "revocations are no orphans")
	assert.True(t, f.readiness.Ready())

	// The pass succeeded, so the observation is settled.
	observed, _ := c.observed.snapshot()
	assert.Empty(t, observed.RetiredContextIDs)
}

func TestAContextDeletedWhileNoControllerRanCountsAgainstTheCaps(t *testing.T) {
	f, c := convergedFixture(t, 2, 4)
	f.Unindex(f.contexts[0]) // no event: this process never saw it

	require.NoError(t, fullPass(c))
	assert.Empty(t, deletes(f.Writes()), "12 unexplained orphans trip the cap of 10")
	assert.Equal(t, 1.0, counterValue(t, c.metrics.OrphanCapped.WithLabelValues("absolute")))
}

func TestAContextIDChangeRetiresTheOldAllows(t *testing.T) {
	f, c := convergedFixture(t, 2, 4)
	old := f.contexts[0]
	renamed := old.DeepCopy()
	renamed.Spec.ContextID, renamed.Generation = "renamed", old.Generation+1
	f.Index(renamed)
	c.contextHandlers().OnUpdate(old, renamed)

	f.Kube.PrependReactor("create", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, nil // the fake tracker would keep nothing anyway
	})
	require.NoError(t, fullPass(c))
	assert.Len(t, deletes(f.Writes()), 12, "the old contextId's allows are revoked before the new ones are created")
}

func TestRemovingElevenBindingsRevokesElevenPolicies(t *testing.T) {
	server := &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1", Generation: 1},
		Spec:       clerumv1alpha1.McpServerSpec{Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
	}
	for i := range 12 {
		server.Spec.EgressBindings = append(server.Spec.EgressBindings, clerumv1alpha1.EgressBinding{
			Name: fmt.Sprintf("b%02d", i), CIDR: fmt.Sprintf("8.8.%d.0/24", i), Port: ptr.To[int32](443),
		})
	}
	servers := []*clerumv1alpha1.McpServer{server}
	f, c := newFixture(t, world{servers: servers, policies: netpol.Compute(netpol.Inventory{Servers: servers}, testPlanOpts).Policies})
	c.plan = nil // the real planner over the seeded listers
	f.running(c)

	fewer := server.DeepCopy()
	fewer.Spec.EgressBindings, fewer.Generation = fewer.Spec.EgressBindings[:1], 2
	f.Index(fewer)
	require.NoError(t, fullPass(c))
	assert.Len(t, deletes(f.Writes()), 11)
	assert.Zero(t, counterValue(t, c.metrics.OrphanCapped.WithLabelValues("absolute")))
}

func TestATrippedCapHoldsBackOnlyTheUnexplained(t *testing.T) {
	contexts, servers := inventory(3, 2)
	f, c := newFixture(t, world{contexts: contexts, servers: servers, policies: append(
		netpol.Compute(netpol.Inventory{Contexts: contexts, Servers: servers}, testPlanOpts).Policies, unexplained(20)...)})
	c.plan = nil           // the real planner over the seeded listers
	c.caughtUp.Store(true) // after the certifying pass, read the caches

	require.NoError(t, fullPass(c))
	require.Empty(t, deletes(f.Writes()), "20 unexplained orphans trip the cap")

	// A server leaves a Context: its three allows go, the orphans stay.
	changed := f.contexts[1].DeepCopy()
	changed.Spec.McpServers, changed.Generation = changed.Spec.McpServers[:1], 2
	f.Index(changed)
	f.ClearWrites()
	require.NoError(t, fullPass(c))
	assert.Equal(t, trio("delete", "c0001", "s0001-01"), f.writes())
	assert.Equal(t, 2.0, counterValue(t, c.metrics.OrphanCapped.WithLabelValues("absolute")), "the cap still holds the orphans")
	assert.Equal(t, 20.0, gaugeValue(t, c.metrics.Orphans))
}

func TestDefaultsAreNeverSwept(t *testing.T) {
	// mcp-host left the runtime list (the shipped list drops it): its L0 and
	// L1 stay. sandbox-recipes stays on the list but became minimal-infra:
	// the L1 it no longer needs is revoked.
	f, c := newFixture(t, world{policies: []*networkingv1.NetworkPolicy{
		policy("mcp-host", "deny-all-mcp-host", names.PolicyTypeDenyAll, 0),
		policy("mcp-host", "allow-dns-egress-mcp-host", names.PolicyTypeInfrastructure, 0),
		policy("mcp-host", "allow-k8s-api-egress-mcp-host", "", 0), // repairable class
		policy("sandbox-recipes", "allow-hcc-api-egress-sandbox-recipes", names.PolicyTypeInfrastructure, 0),
	}})
	c.opts.Caps = Caps{Absolute: 0}
	c.opts.Plan.RuntimeNamespaces = []string{"mcp-server", "sandbox-recipes"}
	c.opts.Plan.MinimalInfraNamespaces = []string{"sandbox-recipes"}
	require.NoError(t, fullPass(c))
	assert.Equal(t, map[string][]string{"sandbox-recipes": {"delete networkpolicies/allow-hcc-api-egress-sandbox-recipes"}}, f.writes(),
		"the cap of 0 holds no revocation back")
	assert.Equal(t, 3.0, gaugeValue(t, c.metrics.KeptDefaults))
}

func TestAnUnmanagedPolicyHoldingAReservedNameIsSkippedAndReported(t *testing.T) {
	// A static manifest from a migration holds s1's name, invisible to the
	// managed-only informer.
	static := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "ext-egress-s1-api"}}
	f, c := newFixture(t, world{policies: append(ctxPolicies(1), policy("mcp-server", "ctx-c-stale", names.PolicyTypeContextAllow, 3000), static)})
	f.desired = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "deny-all-mcp-server", names.PolicyTypeDenyAll, 0),
		policy("mcp-server", "ext-egress-s1-api", names.PolicyTypeExternalEgress, 443),
		policy("mcp-server", "ext-egress-s2-api", names.PolicyTypeExternalEgress, 443),
	}
	f.desired[1].Labels[names.LabelMcpServer] = "s1"
	f.desired[2].Labels[names.LabelMcpServer] = "s2"

	after, err := c.syncFull(context.Background())
	require.NoError(t, err, "an unmanaged object is no failed pass")
	assert.Zero(t, after)
	assert.True(t, f.readiness.Ready(), "nor does it hold back readiness")
	assert.Contains(t, f.WritesIn("mcp-server"), "delete networkpolicies/ctx-c-stale", "revocations go on")
	assert.Contains(t, f.WritesIn("mcp-server"), "create networkpolicies/ext-egress-s2-api", "other creates go on")

	f.SyncCaches()
	_, err = c.syncFull(context.Background())
	require.NoError(t, err, "the next pass meets the same object and goes on again")
	assert.Equal(t, map[string][]string{"mcp-server": {"create networkpolicies/ext-egress-s1-api"}}, f.writes(), "only the conflicting create is tried again")
	live, err := f.Kube.NetworkingV1().NetworkPolicies("mcp-server").Get(context.Background(), "ext-egress-s1-api", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, live.Labels, "the unmanaged object is never written")
	assert.Equal(t, 1.0, gaugeValue(t, c.metrics.UnmanagedConflicts))
	assert.Zero(t, counterValue(t, c.metrics.WriteErrors.WithLabelValues("create")))
	assert.True(t, f.egress.report.Failed.Has("s1"), "only its server's gate stays closed")
	assert.False(t, f.egress.report.Failed.Has("s2"))
	events := f.Events()
	require.Len(t, events, 1, "reported once, not once per pass")
	assert.Contains(t, events[0], "Warning UnmanagedConflict NetworkPolicy mcp-server/ext-egress-s1-api")
}

// failingCreates makes the fake API server refuse creating the named
// policies, as a webhook or RBAC would.
func (f *fixture) failingCreates(names ...string) {
	f.Kube.PrependReactor("create", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
		p := a.(core.CreateAction).GetObject().(*networkingv1.NetworkPolicy)
		for _, n := range names {
			if p.Name == n {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "networkpolicies"}, p.Name, errors.New("a webhook says no"))
			}
		}
		return false, nil, nil
	})
}

// twoServersDesired is a controller that revokes ctx-c-stale and ensures
// mcp-server's L0 and L1 and an allow of servers s1 and s2.
func twoServersDesired(t *testing.T) (*fixture, *Controller) {
	f, c := newFixture(t, world{policies: []*networkingv1.NetworkPolicy{policy("mcp-server", "ctx-c-stale", names.PolicyTypeContextAllow, 3000)}})
	f.desired = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "deny-all-mcp-server", names.PolicyTypeDenyAll, 0),
		policy("mcp-server", "allow-dns-egress-mcp-server", names.PolicyTypeInfrastructure, 0),
		policy("mcp-server", "ext-egress-s1-api", names.PolicyTypeExternalEgress, 443),
		policy("mcp-server", "ext-egress-s2-api", names.PolicyTypeExternalEgress, 443),
	}
	f.desired[2].Labels[names.LabelMcpServer] = "s1"
	f.desired[3].Labels[names.LabelMcpServer] = "s2"
	return f, c
}

func TestAFailedCreateBlocksOnlyItsServer(t *testing.T) {
	f, c := twoServersDesired(t)
	f.failingCreates("allow-dns-egress-mcp-server", "ext-egress-s1-api")
	err := fullPass(c)
	require.Error(t, err, "the pass retries with backoff")
	assert.Contains(t, err.Error(), "allow-dns-egress-mcp-server")
	assert.Contains(t, err.Error(), "ext-egress-s1-api")
	assert.Equal(t, map[string][]string{"mcp-server": {
		"create networkpolicies/allow-dns-egress-mcp-server",
		"create networkpolicies/deny-all-mcp-server",
		"create networkpolicies/ext-egress-s1-api",
		"create networkpolicies/ext-egress-s2-api",
		"delete networkpolicies/ctx-c-stale",
	}}, f.writes(), "a failed L1 create stops neither revocations nor other creates")
	assert.Equal(t, []string{"deny-all-mcp-server", "allow-dns-egress-mcp-server", "ctx-c-stale", "ext-egress-s1-api", "ext-egress-s2-api"}, f.sent())
	assert.True(t, f.readiness.Ready(), "every revocation succeeded; a missing L1 allow opens nothing")
	assert.Equal(t, []string{"s1"}, f.egress.report.Failed.UnsortedList())
	assert.False(t, f.egress.report.Blocked)
}

func TestAFailedDefaultDenyWithholdsCertificationAndEveryGate(t *testing.T) {
	f, c := twoServersDesired(t)
	f.failingCreates("deny-all-mcp-server")
	require.Error(t, fullPass(c))
	assert.Contains(t, f.WritesIn("mcp-server"), "delete networkpolicies/ctx-c-stale", "revocations still go on")
	assert.Contains(t, f.WritesIn("mcp-server"), "create networkpolicies/ext-egress-s2-api", "and creates")
	assert.False(t, f.readiness.Ready(), "a namespace without its default deny is open")
	assert.True(t, f.egress.report.Blocked, "no server's pods are isolated: every gate stays closed")
}

func TestSystemicCreateFailuresStopCreatesButNotRevocations(t *testing.T) {
	f, c := newFixture(t, world{policies: ctxPolicies(3)})
	for i := range 50 {
		f.desired = append(f.desired, policy("mcp-server", fmt.Sprintf("ctx-c-new%02d", i), names.PolicyTypeContextAllow, 3000))
	}
	f.desired = append(f.desired, ctxPolicies(2)...) // ctx-c-s02 is disowned... or an orphan: deleted either way
	f.Kube.PrependReactor("create", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "networkpolicies"}, "x", errors.New("exceeded quota"))
	})
	require.Error(t, fullPass(c))
	creates := 0
	for _, w := range f.Writes() {
		if strings.HasPrefix(w, "create ") {
			creates++
		}
	}
	assert.Equal(t, maxCreateFailures, creates, "after %d failures the pass stops asking", maxCreateFailures)
	assert.Equal(t, []string{"delete networkpolicies/ctx-c-s02"}, deletes(f.WritesIn("mcp-server")), "revocations are always attempted")
	assert.Len(t, deletes(f.Writes()), 1)
}

func TestALaggingCacheIsRetriedQuietly(t *testing.T) {
	mine := policy("mcp-server", "ctx-c-s00", names.PolicyTypeContextAllow, 3000)
	mine.Labels[names.LabelMcpServer] = "s00"
	t.Run("the holder is the planned policy: its gate may open, the pass is retried", func(t *testing.T) {
		f, c := newFixture(t, world{policies: []*networkingv1.NetworkPolicy{mine}})
		f.desired = []*networkingv1.NetworkPolicy{mine}
		f.running(c)
		// HCC created it a moment ago; the informer has not seen it yet.
		f.Unindex(mine)
		_, err := c.syncFull(context.Background())
		require.ErrorIs(t, err, kit.ErrCacheBehind, "what else the cache misses this pass cannot know")
		assert.Equal(t, []string{"create networkpolicies/ctx-c-s00"}, f.Writes(), "refused: it exists")
		assert.Empty(t, f.egress.report.Failed, "its server's gate may open: the policy is in place")
		assert.Zero(t, counterValue(t, c.metrics.WriteErrors.WithLabelValues("create")), "no error is counted")
		assert.Zero(t, gaugeValue(t, c.metrics.UnmanagedConflicts))
	})
	t.Run("the holder differs: retried from the newer object", func(t *testing.T) {
		f, c := newFixture(t, world{policies: []*networkingv1.NetworkPolicy{mine}})
		wider := mine.DeepCopy()
		wider.Spec.Ingress = nil
		f.desired = []*networkingv1.NetworkPolicy{wider}
		f.running(c)
		f.Unindex(mine)
		_, err := c.syncFull(context.Background())
		require.ErrorIs(t, err, kit.ErrCacheBehind)
		assert.True(t, f.egress.report.Failed.Has("s00"), "not as planned: the gate waits")
		assert.Zero(t, counterValue(t, c.metrics.WriteErrors.WithLabelValues("create")), "no error is counted")
		assert.Zero(t, gaugeValue(t, c.metrics.UnmanagedConflicts))
	})
}

func TestStatusOnlyUpdatesDoNotSignal(t *testing.T) {
	_, c := newFixture(t, world{})
	server := &clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1", Generation: 2, ResourceVersion: "1"}}
	handlers := c.serverHandlers()
	for i := range 1000 {
		next := server.DeepCopy()
		next.ResourceVersion = fmt.Sprint(i + 2)
		next.Status.Ready = i%2 == 0
		handlers.OnUpdate(server, next)
	}
	assert.Zero(t, c.queue.Len(), "1,000 status writes ask for no pass")

	edited := server.DeepCopy()
	edited.Generation = 3
	handlers.OnUpdate(server, edited)
	assert.Equal(t, 1, c.queue.Len())
}

func TestSignalsCoalesceWithAMinimumInterval(t *testing.T) {
	f, c := newFixture(t, world{})
	clk := f.Clock
	c.opts.MinInterval = time.Second
	defer c.queue.ShutDown()

	c.Signal() // no pass ran yet: at once
	require.Equal(t, 1, c.queue.Len())
	kind, _ := c.queue.Get()
	c.lastStart.Store(clk.Now().UnixNano())
	for range 100 {
		c.Signal() // a burst while the pass runs
	}
	c.queue.Done(kind)
	assert.Zero(t, c.queue.Len(), "the burst waits for the minimum interval")
	clk.Step(time.Second)
	require.Eventually(t, func() bool {
		clk.Step(time.Millisecond) // the queue arms its timer from its own goroutine
		return c.queue.Len() == 1
	}, 5*time.Second, time.Millisecond, "after the interval the burst is one pass")
}

// TestContextIDConflictCondition pins the condition hcc-api refuses tokens
// on: its type, status, reason, kept transition time and clearing.
func TestContextIDConflictCondition(t *testing.T) {
	older := &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "a-first", Generation: 1, CreationTimestamp: metav1.Unix(100, 0)},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: "shared"},
	}
	newer := older.DeepCopy()
	newer.Name, newer.CreationTimestamp = "b-second", metav1.Unix(200, 0)
	f, c := newFixture(t, world{contexts: []*clerumv1alpha1.Context{older, newer}})
	c.plan = planWithoutPolicies
	c.caughtUp.Store(true) // after the certifying pass, read the caches
	// applied returns the conditions applied to newer, in order.
	applied := func() []metav1.Condition {
		var out []metav1.Condition
		for _, a := range kittest.Applied[*clerumv1alpha1.Context](f.Fixture, "mcp-server", "b-second") {
			require.Len(t, a.Status.Conditions, 1)
			out = append(out, a.Status.Conditions[0])
		}
		return out
	}

	require.NoError(t, fullPass(c))
	require.Len(t, applied(), 1)
	got := applied()[0]
	assert.Equal(t, clerumv1alpha1.ConditionContextIDConflict, got.Type)
	assert.Equal(t, metav1.ConditionTrue, got.Status)
	assert.Equal(t, reasons.EventDuplicateContextID, got.Reason)
	assert.Equal(t, "contextId shared is already held by Context a-first; this Context is ignored", got.Message)
	assert.Equal(t, int64(1), got.ObservedGeneration)
	assert.True(t, got.LastTransitionTime.Time.Equal(f.Clock.Now().Truncate(time.Second)))

	f.SyncCaches() // the cache shows the condition
	f.Clock.Step(time.Hour)
	require.NoError(t, fullPass(c))
	assert.Len(t, applied(), 1, "a held condition is not written again")
	assert.Empty(t, kittest.Applied[*clerumv1alpha1.Context](f.Fixture, "mcp-server", "a-first"), "the holder gets none")

	// The holder goes: the condition clears, with a new transition time.
	require.NoError(t, f.HCC.ClerumV1alpha1().Contexts("mcp-server").Delete(t.Context(), older.Name, metav1.DeleteOptions{}))
	f.SyncCaches()
	require.NoError(t, fullPass(c))
	require.Len(t, applied(), 2)
	cleared := applied()[1]
	assert.Equal(t, metav1.ConditionFalse, cleared.Status)
	assert.Equal(t, "Unique", cleared.Reason)
	assert.True(t, cleared.LastTransitionTime.Time.Equal(f.Clock.Now().Truncate(time.Second)))

	f.SyncCaches()
	require.NoError(t, fullPass(c))
	assert.Len(t, applied(), 2, "a cleared condition is not written again")
}

// racyServers deletes servers from the cache right after a pass has listed
// them, as an informer delivers a delete between two reads of a pass.
type racyServers struct {
	clerumlisters.McpServerLister
	after func()
}

type racyServersIn struct {
	clerumlisters.McpServerNamespaceLister
	after func()
}

func (r racyServers) McpServers(ns string) clerumlisters.McpServerNamespaceLister {
	return racyServersIn{r.McpServerLister.McpServers(ns), r.after}
}

func (r racyServersIn) List(s labels.Selector) ([]*clerumv1alpha1.McpServer, error) {
	out, err := r.McpServerNamespaceLister.List(s)
	if r.after != nil {
		r.after()
	}
	return out, err
}

func TestADeletionDuringAPassIsNotForgotten(t *testing.T) {
	f, c := convergedFixture(t, 1, 4)
	once := true
	c.serverLister = racyServers{c.serverLister, func() {
		if once {
			once = false
			for _, s := range f.servers {
				f.Unindex(s)
				c.serverHandlers().OnDelete(s)
			}
		}
	}}
	require.NoError(t, fullPass(c), "this pass planned the servers as still there")
	require.Empty(t, deletes(f.Writes()))
	require.NoError(t, fullPass(c))
	assert.Len(t, deletes(f.Writes()), 12, "the next pass revokes what the deletions disowned, whatever the caps")
}

func TestObservationsOutliveACacheThatIsBehind(t *testing.T) {
	contexts, servers := inventory(1, 4)
	f, c := newFixture(t, world{contexts: contexts, servers: servers})
	c.plan = nil                    // the real planner over the seeded listers
	c.caughtUp.Store(true)          // after the certifying pass, read the caches
	require.NoError(t, fullPass(c)) // creates L0/L1 and 12 allows; the cache has not seen them
	for _, s := range f.servers {
		require.NoError(t, f.HCC.ClerumV1alpha1().McpServers(s.Namespace).Delete(t.Context(), s.Name, metav1.DeleteOptions{}))
		f.Unindex(s)
		c.serverHandlers().OnDelete(s)
	}
	_, err := c.syncFull(context.Background())
	require.ErrorIs(t, err, kit.ErrCacheBehind)
	f.SyncCaches()
	require.NoError(t, fullPass(c))
	assert.Len(t, deletes(f.Writes()), 12, "the servers' allows are revoked once the cache shows them")
}

func TestOtherWritersPoliciesSignalNoPass(t *testing.T) {
	_, c := newFixture(t, world{})
	handlers := c.policyHandlers()
	host := policy("mcp-host", "allow-rpc-proxy-desktop-h1", names.PolicyTypeHost, 0)
	handlers.OnAdd(host, false)
	handlers.OnUpdate(host, host)
	handlers.OnDelete(host)
	assert.Zero(t, c.queue.Len())
	handlers.OnDelete(policy("mcp-server", "ctx-c-s1", names.PolicyTypeContextAllow, 3000))
	assert.Equal(t, 1, c.queue.Len(), "drift of one of its own does")
}

func TestAPolicyAControllerOwnsIsNotWritten(t *testing.T) {
	owned := policy("mcp-server", "ctx-c-s00", names.PolicyTypeContextAllow, 3000)
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u", Controller: ptr.To(true)}}
	f, c := newFixture(t, world{policies: []*networkingv1.NetworkPolicy{owned, policy("mcp-server", "ctx-c-gone", names.PolicyTypeContextAllow, 3000)}})
	f.desired = []*networkingv1.NetworkPolicy{policy("mcp-server", "ctx-c-s00", names.PolicyTypeContextAllow, 4000)}
	require.NoError(t, fullPass(c))
	assert.Equal(t, map[string][]string{"mcp-server": {"delete networkpolicies/ctx-c-gone"}}, f.writes(), "neither updated nor deleted")
	assert.Equal(t, 1.0, gaugeValue(t, c.metrics.UnmanagedConflicts))
}

func TestDeletesCarryUIDAndResourceVersionPreconditions(t *testing.T) {
	stale := policy("mcp-server", "ctx-c-gone", names.PolicyTypeContextAllow, 3000)
	stale.ResourceVersion = "42"
	f, c := newFixture(t, world{policies: []*networkingv1.NetworkPolicy{stale}})
	var got *metav1.Preconditions
	f.Kube.PrependReactor("delete", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
		got = a.(core.DeleteAction).GetDeleteOptions().Preconditions
		return false, nil, nil
	})
	require.NoError(t, fullPass(c))
	require.NotNil(t, got)
	assert.Equal(t, stale.UID, *got.UID)
	assert.Equal(t, "42", *got.ResourceVersion, "a policy relabelled since the cache saw it is not deleted")
}

func TestANotFoundThatIsNotTheNamespaceIsAnError(t *testing.T) {
	f, c := newFixture(t, world{})
	f.desired = []*networkingv1.NetworkPolicy{policy("mcp-server", "ctx-c-s00", names.PolicyTypeContextAllow, 3000)}
	f.Kube.PrependReactor("create", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "admission.example.com", Resource: "webhooks"}, "policy-check")
	})
	require.Error(t, fullPass(c))
	assert.Zero(t, gaugeValue(t, c.metrics.MissingNamespaces))
}

// Only the holder's going retires a contextId: a younger duplicate created
// and deleted while the inventory lacks the real holder (the wrong
// inventory the caps exist for) must not make the holder's allows disowned
// and revoked outside the caps (found by an attacker review).
func TestDeletingAYoungerDuplicateRetiresNoContextID(t *testing.T) {
	f, c := convergedFixture(t, 2, 4)
	holder := f.contexts[0]
	duplicate := holder.DeepCopy()
	duplicate.Name, duplicate.UID = "duplicate", "duplicate-uid"
	duplicate.CreationTimestamp = metav1.NewTime(holder.CreationTimestamp.Add(time.Hour))
	duplicate.Spec.McpServers = nil
	f.Index(duplicate)
	c.contextHandlers().OnAdd(duplicate, false)
	f.Unindex(duplicate)
	c.contextHandlers().OnDelete(duplicate)

	observed, _ := c.observed.snapshot()
	assert.Empty(t, observed.RetiredContextIDs, "the duplicate never held the id")

	f.Unindex(holder) // the inventory comes back without the holder; no event
	require.NoError(t, fullPass(c))
	assert.Empty(t, deletes(f.Writes()), "12 unexplained orphans trip the cap of 10")
}

func TestDeletingTheHolderRetiresItsContextIDEvenWithADuplicateLeft(t *testing.T) {
	f, c := convergedFixture(t, 2, 4)
	holder := f.contexts[0]
	duplicate := holder.DeepCopy()
	duplicate.Name, duplicate.UID = "duplicate", "duplicate-uid"
	duplicate.CreationTimestamp = metav1.NewTime(holder.CreationTimestamp.Add(time.Hour))
	duplicate.Spec.McpServers = nil
	f.Index(duplicate)
	f.Unindex(holder)
	c.contextHandlers().OnDelete(holder)

	observed, _ := c.observed.snapshot()
	assert.True(t, observed.RetiredContextIDs[holder.Spec.ContextID], "the holder held the id")
}
