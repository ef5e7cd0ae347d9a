package netpol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
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
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	clerumlisters "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
	"github.com/clerum/hcc/pkg/reasons"
)

// deletes returns the delete actions of f, sorted.
func (f *fixture) deletes() []string {
	var out []string
	for _, w := range f.writes() {
		if strings.HasPrefix(w, "delete ") {
			out = append(out, w)
		}
	}
	sort.Strings(out)
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
	require.NoError(t, f.contextIndexer.Delete(gone))
	c.contextHandlers().OnDelete(gone)

	require.NoError(t, fullPass(c))
	assert.Len(t, f.deletes(), 12, "every allow of the deleted Context is revoked")
	for _, d := range f.deletes() {
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
	require.NoError(t, f.contextIndexer.Delete(f.contexts[0])) // no event: this process never saw it

	require.NoError(t, fullPass(c))
	assert.Empty(t, f.deletes(), "12 unexplained orphans trip the cap of 10")
	assert.Equal(t, 1.0, counterValue(t, c.metrics.OrphanCapped.WithLabelValues("absolute")))
}

func TestAContextIDChangeRetiresTheOldAllows(t *testing.T) {
	f, c := convergedFixture(t, 2, 4)
	old := f.contexts[0]
	renamed := old.DeepCopy()
	renamed.Spec.ContextID, renamed.Generation = "renamed", old.Generation+1
	require.NoError(t, f.contextIndexer.Update(renamed))
	c.contextHandlers().OnUpdate(old, renamed)

	f.kube.PrependReactor("create", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, nil // the fake tracker would keep nothing anyway
	})
	require.NoError(t, fullPass(c))
	assert.Len(t, f.deletes(), 12, "the old contextId's allows are revoked before the new ones are created")
}

func TestRemovingElevenBindingsRevokesElevenPolicies(t *testing.T) {
	f := newFixture(t)
	server := &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1", Generation: 1},
		Spec:       clerumv1alpha1.McpServerSpec{Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
	}
	for i := range 12 {
		server.Spec.EgressBindings = append(server.Spec.EgressBindings, clerumv1alpha1.EgressBinding{
			Name: fmt.Sprintf("b%02d", i), CIDR: fmt.Sprintf("8.8.%d.0/24", i), Port: ptr.To[int32](443),
		})
	}
	f.servers = []*clerumv1alpha1.McpServer{server}
	f.policies = netpol.Compute(netpol.Inventory{Servers: f.servers}, testPlanOpts).Policies
	c := f.newController()
	c.plan = netpol.Compute
	f.running(c)

	fewer := server.DeepCopy()
	fewer.Spec.EgressBindings, fewer.Generation = fewer.Spec.EgressBindings[:1], 2
	require.NoError(t, f.serverIndexer.Update(fewer))
	require.NoError(t, fullPass(c))
	assert.Len(t, f.deletes(), 11)
	assert.Zero(t, counterValue(t, c.metrics.OrphanCapped.WithLabelValues("absolute")))
}

func TestATrippedCapHoldsBackOnlyTheUnexplained(t *testing.T) {
	f := newFixture(t)
	f.contexts, f.servers = inventory(3, 2)
	f.policies = append(netpol.Compute(netpol.Inventory{Contexts: f.contexts, Servers: f.servers}, testPlanOpts).Policies,
		unexplained(20)...)
	c := f.newController()
	c.plan = netpol.Compute
	c.caughtUp.Store(true) // after the certifying pass, read the caches the test changes by hand

	require.NoError(t, fullPass(c))
	require.Empty(t, f.deletes(), "20 unexplained orphans trip the cap")

	// A server leaves a Context: its three allows go, the orphans stay.
	changed := f.contexts[1].DeepCopy()
	changed.Spec.McpServers, changed.Generation = changed.Spec.McpServers[:1], 2
	require.NoError(t, f.contextIndexer.Update(changed))
	f.kube.ClearActions()
	require.NoError(t, fullPass(c))
	assert.Equal(t, []string{
		"delete mcp-host/ctx-c0001-s0001-01-egress",
		"delete mcp-server/ctx-c0001-s0001-01",
		"delete rpc-proxy/rpc-egress-c0001-s0001-01",
	}, f.deletes())
	assert.Equal(t, 2.0, counterValue(t, c.metrics.OrphanCapped.WithLabelValues("absolute")), "the cap still holds the orphans")
	assert.Equal(t, 20.0, gaugeValue(t, c.metrics.Orphans))
}

func TestDefaultsAreNeverSwept(t *testing.T) {
	f := newFixture(t)
	// mcp-host left the runtime list (the shipped list drops it): its L0 and
	// L1 stay. sandbox-recipes stays on the list but became minimal-infra:
	// the L1 it no longer needs is revoked.
	f.policies = []*networkingv1.NetworkPolicy{
		policy("mcp-host", "deny-all-mcp-host", names.PolicyTypeDenyAll, 0),
		policy("mcp-host", "allow-dns-egress-mcp-host", names.PolicyTypeInfrastructure, 0),
		policy("mcp-host", "allow-k8s-api-egress-mcp-host", "", 0), // repairable class
		policy("sandbox-recipes", "allow-hcc-api-egress-sandbox-recipes", names.PolicyTypeInfrastructure, 0),
	}
	f.caps = Caps{Absolute: 0}
	c := f.newController()
	c.opts.Plan.RuntimeNamespaces = []string{"mcp-server", "sandbox-recipes"}
	c.opts.Plan.MinimalInfraNamespaces = []string{"sandbox-recipes"}
	require.NoError(t, fullPass(c))
	assert.Equal(t, []string{"delete sandbox-recipes/allow-hcc-api-egress-sandbox-recipes"}, f.deletes(),
		"the cap of 0 holds no revocation back")
	assert.Equal(t, 3.0, gaugeValue(t, c.metrics.KeptDefaults))
}

func TestAnUnmanagedPolicyHoldingAReservedNameIsSkippedAndReported(t *testing.T) {
	f := newFixture(t)
	f.desired = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "deny-all-mcp-server", names.PolicyTypeDenyAll, 0),
		policy("mcp-server", "ext-egress-s1-api", names.PolicyTypeExternalEgress, 443),
		policy("mcp-server", "ext-egress-s2-api", names.PolicyTypeExternalEgress, 443),
	}
	f.desired[1].Labels[names.LabelMcpServer] = "s1"
	f.desired[2].Labels[names.LabelMcpServer] = "s2"
	f.policies = append(ctxPolicies(1), policy("mcp-server", "ctx-c-stale", names.PolicyTypeContextAllow, 3000))
	c := f.newController()
	// A static manifest from a migration holds s1's name, invisible to the
	// managed-only informer.
	static := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "ext-egress-s1-api"}}
	require.NoError(t, f.kube.Tracker().Add(static))
	recorder := c.recorder.(*record.FakeRecorder)

	after, err := c.syncFull(context.Background())
	require.NoError(t, err, "an unmanaged object is no failed pass")
	assert.Zero(t, after)
	assert.True(t, f.readiness.Ready(), "nor does it hold back readiness")
	assert.Contains(t, f.writes(), "delete mcp-server/ctx-c-stale", "revocations go on")
	assert.Contains(t, f.writes(), "create mcp-server/ext-egress-s2-api", "other creates go on")

	f.syncCaches()
	_, err = c.syncFull(context.Background())
	require.NoError(t, err, "the next pass meets the same object and goes on again")
	assert.Equal(t, []string{"create mcp-server/ext-egress-s1-api"}, f.writes(), "only the conflicting create is tried again")
	live, err := f.kube.NetworkingV1().NetworkPolicies("mcp-server").Get(context.Background(), "ext-egress-s1-api", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, live.Labels, "the unmanaged object is never written")
	assert.Equal(t, 1.0, gaugeValue(t, c.metrics.UnmanagedConflicts))
	assert.Zero(t, counterValue(t, c.metrics.WriteErrors.WithLabelValues("create")))
	assert.True(t, f.egress.report.Failed.Has("s1"), "only its server's gate stays closed")
	assert.False(t, f.egress.report.Failed.Has("s2"))
	require.Len(t, recorder.Events, 1, "reported once, not once per pass")
	assert.Contains(t, <-recorder.Events, "Warning UnmanagedConflict NetworkPolicy mcp-server/ext-egress-s1-api")
}

// failingCreates makes the fake API server refuse creating the named
// policies, as a webhook or RBAC would.
func (f *fixture) failingCreates(names ...string) {
	f.kube.PrependReactor("create", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
		p := a.(core.CreateAction).GetObject().(*networkingv1.NetworkPolicy)
		for _, n := range names {
			if p.Name == n {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "networkpolicies"}, p.Name, errors.New("a webhook says no"))
			}
		}
		return false, nil, nil
	})
}

func twoServersDesired(f *fixture) {
	f.desired = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "deny-all-mcp-server", names.PolicyTypeDenyAll, 0),
		policy("mcp-server", "allow-dns-egress-mcp-server", names.PolicyTypeInfrastructure, 0),
		policy("mcp-server", "ext-egress-s1-api", names.PolicyTypeExternalEgress, 443),
		policy("mcp-server", "ext-egress-s2-api", names.PolicyTypeExternalEgress, 443),
	}
	f.desired[2].Labels[names.LabelMcpServer] = "s1"
	f.desired[3].Labels[names.LabelMcpServer] = "s2"
	f.policies = []*networkingv1.NetworkPolicy{policy("mcp-server", "ctx-c-stale", names.PolicyTypeContextAllow, 3000)}
}

func TestAFailedCreateBlocksOnlyItsServer(t *testing.T) {
	f := newFixture(t)
	twoServersDesired(f)
	c := f.newController()
	f.failingCreates("allow-dns-egress-mcp-server", "ext-egress-s1-api")
	err := fullPass(c)
	require.Error(t, err, "the pass retries with backoff")
	assert.Contains(t, err.Error(), "allow-dns-egress-mcp-server")
	assert.Contains(t, err.Error(), "ext-egress-s1-api")
	assert.Equal(t, []string{
		"create mcp-server/deny-all-mcp-server",
		"create mcp-server/allow-dns-egress-mcp-server",
		"delete mcp-server/ctx-c-stale",
		"create mcp-server/ext-egress-s1-api",
		"create mcp-server/ext-egress-s2-api",
	}, f.writes(), "a failed L1 create stops neither revocations nor other creates")
	assert.True(t, f.readiness.Ready(), "every revocation succeeded; a missing L1 allow opens nothing")
	assert.Equal(t, []string{"s1"}, f.egress.report.Failed.UnsortedList())
	assert.False(t, f.egress.report.Blocked)
}

func TestAFailedDefaultDenyWithholdsCertificationAndEveryGate(t *testing.T) {
	f := newFixture(t)
	twoServersDesired(f)
	c := f.newController()
	f.failingCreates("deny-all-mcp-server")
	require.Error(t, fullPass(c))
	assert.Contains(t, f.writes(), "delete mcp-server/ctx-c-stale", "revocations still go on")
	assert.Contains(t, f.writes(), "create mcp-server/ext-egress-s2-api", "and creates")
	assert.False(t, f.readiness.Ready(), "a namespace without its default deny is open")
	assert.True(t, f.egress.report.Blocked, "no server's pods are isolated: every gate stays closed")
}

func TestSystemicCreateFailuresStopCreatesButNotRevocations(t *testing.T) {
	f := newFixture(t)
	for i := range 50 {
		f.desired = append(f.desired, policy("mcp-server", fmt.Sprintf("ctx-c-new%02d", i), names.PolicyTypeContextAllow, 3000))
	}
	f.policies = ctxPolicies(3)
	f.desired = append(f.desired, ctxPolicies(2)...) // ctx-c-s02 is disowned... or an orphan: deleted either way
	c := f.newController()
	f.kube.PrependReactor("create", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "networkpolicies"}, "x", errors.New("exceeded quota"))
	})
	require.Error(t, fullPass(c))
	creates := 0
	for _, w := range f.writes() {
		if strings.HasPrefix(w, "create ") {
			creates++
		}
	}
	assert.Equal(t, maxCreateFailures, creates, "after %d failures the pass stops asking", maxCreateFailures)
	assert.Equal(t, []string{"delete mcp-server/ctx-c-s02"}, f.deletes(), "revocations are always attempted")
}

func TestALaggingCacheIsRetriedQuietly(t *testing.T) {
	f := newFixture(t)
	mine := policy("mcp-server", "ctx-c-s00", names.PolicyTypeContextAllow, 3000)
	f.desired = []*networkingv1.NetworkPolicy{mine}
	c := f.newController()
	f.running(c)
	// HCC created it a moment ago; the informer has not seen it yet.
	require.NoError(t, f.kube.Tracker().Add(mine.DeepCopy()))
	_, err := c.syncFull(context.Background())
	require.ErrorIs(t, err, kit.ErrCacheBehind)
	assert.Zero(t, counterValue(t, c.metrics.WriteErrors.WithLabelValues("create")), "no error is counted")
	assert.Zero(t, gaugeValue(t, c.metrics.UnmanagedConflicts))
}

func TestStatusOnlyUpdatesDoNotSignal(t *testing.T) {
	f := newFixture(t)
	c := f.newController()
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
	f := newFixture(t)
	c := f.newController()
	clk := f.clk
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
	f := newFixture(t)
	older := &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "a-first", Generation: 1, CreationTimestamp: metav1.Unix(100, 0)},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: "shared"},
	}
	newer := older.DeepCopy()
	newer.Name, newer.CreationTimestamp = "b-second", metav1.Unix(200, 0)
	f.contexts = []*clerumv1alpha1.Context{older, newer}
	c := f.newController()
	c.plan = planWithoutPolicies
	c.caughtUp.Store(true) // after the certifying pass, read the caches the test changes by hand
	var applied []metav1.Condition
	f.hcc.PrependReactor("patch", "contexts", func(a core.Action) (bool, runtime.Object, error) {
		var obj clerumv1alpha1.Context
		require.NoError(t, json.Unmarshal(a.(core.PatchAction).GetPatch(), &obj))
		require.Len(t, obj.Status.Conditions, 1)
		applied = append(applied, obj.Status.Conditions[0])
		return true, newer, nil
	})
	// show makes the cache hold the last applied condition on newer.
	show := func() {
		cur := newer.DeepCopy()
		cur.Status.Conditions = []metav1.Condition{applied[len(applied)-1]}
		require.NoError(t, f.contextIndexer.Update(cur))
	}

	require.NoError(t, fullPass(c))
	require.Len(t, applied, 1)
	got := applied[0]
	assert.Equal(t, clerumv1alpha1.ConditionContextIDConflict, got.Type)
	assert.Equal(t, metav1.ConditionTrue, got.Status)
	assert.Equal(t, reasons.EventDuplicateContextID, got.Reason)
	assert.Equal(t, "contextId shared is already held by Context a-first; this Context is ignored", got.Message)
	assert.Equal(t, int64(1), got.ObservedGeneration)
	assert.True(t, got.LastTransitionTime.Time.Equal(f.clk.Now().Truncate(time.Second)))

	show()
	f.clk.Step(time.Hour)
	require.NoError(t, fullPass(c))
	assert.Len(t, applied, 1, "a held condition is not written again")

	// The holder goes: the condition clears, with a new transition time.
	require.NoError(t, f.contextIndexer.Delete(older))
	require.NoError(t, fullPass(c))
	require.Len(t, applied, 2)
	cleared := applied[1]
	assert.Equal(t, metav1.ConditionFalse, cleared.Status)
	assert.Equal(t, "Unique", cleared.Reason)
	assert.True(t, cleared.LastTransitionTime.Time.Equal(f.clk.Now().Truncate(time.Second)))

	show()
	require.NoError(t, fullPass(c))
	assert.Len(t, applied, 2, "a cleared condition is not written again")
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
				require.NoError(t, f.serverIndexer.Delete(s))
				c.serverHandlers().OnDelete(s)
			}
		}
	}}
	require.NoError(t, fullPass(c), "this pass planned the servers as still there")
	require.Empty(t, f.deletes())
	require.NoError(t, fullPass(c))
	assert.Len(t, f.deletes(), 12, "the next pass revokes what the deletions disowned, whatever the caps")
}

func TestObservationsOutliveACacheThatIsBehind(t *testing.T) {
	f := newFixture(t)
	f.contexts, f.servers = inventory(1, 4)
	c := f.newController()
	c.plan = netpol.Compute
	c.caughtUp.Store(true)          // after the certifying pass, read the caches the test changes by hand
	require.NoError(t, fullPass(c)) // creates L0/L1 and 12 allows; the cache has not seen them
	for _, s := range f.servers {
		require.NoError(t, f.serverIndexer.Delete(s))
		c.serverHandlers().OnDelete(s)
	}
	_, err := c.syncFull(context.Background())
	require.ErrorIs(t, err, kit.ErrCacheBehind)
	f.syncCaches()
	require.NoError(t, fullPass(c))
	assert.Len(t, f.deletes(), 12, "the servers' allows are revoked once the cache shows them")
}

func TestOtherWritersPoliciesSignalNoPass(t *testing.T) {
	f := newFixture(t)
	c := f.newController()
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
	f := newFixture(t)
	owned := policy("mcp-server", "ctx-c-s00", names.PolicyTypeContextAllow, 3000)
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u", Controller: ptr.To(true)}}
	f.policies = []*networkingv1.NetworkPolicy{owned, policy("mcp-server", "ctx-c-gone", names.PolicyTypeContextAllow, 3000)}
	f.desired = []*networkingv1.NetworkPolicy{policy("mcp-server", "ctx-c-s00", names.PolicyTypeContextAllow, 4000)}
	c := f.newController()
	require.NoError(t, fullPass(c))
	assert.Equal(t, []string{"delete mcp-server/ctx-c-gone"}, f.writes(), "neither updated nor deleted")
	assert.Equal(t, 1.0, gaugeValue(t, c.metrics.UnmanagedConflicts))
}

func TestDeletesCarryUIDAndResourceVersionPreconditions(t *testing.T) {
	f := newFixture(t)
	stale := policy("mcp-server", "ctx-c-gone", names.PolicyTypeContextAllow, 3000)
	stale.ResourceVersion = "42"
	f.policies = []*networkingv1.NetworkPolicy{stale}
	c := f.newController()
	var got *metav1.Preconditions
	f.kube.PrependReactor("delete", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
		got = a.(core.DeleteAction).GetDeleteOptions().Preconditions
		return false, nil, nil
	})
	require.NoError(t, fullPass(c))
	require.NotNil(t, got)
	assert.Equal(t, stale.UID, *got.UID)
	assert.Equal(t, "42", *got.ResourceVersion, "a policy relabelled since the cache saw it is not deleted")
}

func TestANotFoundThatIsNotTheNamespaceIsAnError(t *testing.T) {
	f := newFixture(t)
	f.desired = []*networkingv1.NetworkPolicy{policy("mcp-server", "ctx-c-s00", names.PolicyTypeContextAllow, 3000)}
	c := f.newController()
	f.kube.PrependReactor("create", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
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
	require.NoError(t, f.contextIndexer.Add(duplicate))
	c.contextHandlers().OnAdd(duplicate, false)
	require.NoError(t, f.contextIndexer.Delete(duplicate))
	c.contextHandlers().OnDelete(duplicate)

	observed, _ := c.observed.snapshot()
	assert.Empty(t, observed.RetiredContextIDs, "the duplicate never held the id")

	require.NoError(t, f.contextIndexer.Delete(holder)) // the inventory comes back without the holder; no event
	require.NoError(t, fullPass(c))
	assert.Empty(t, f.deletes(), "12 unexplained orphans trip the cap of 10")
}

func TestDeletingTheHolderRetiresItsContextIDEvenWithADuplicateLeft(t *testing.T) {
	f, c := convergedFixture(t, 2, 4)
	holder := f.contexts[0]
	duplicate := holder.DeepCopy()
	duplicate.Name, duplicate.UID = "duplicate", "duplicate-uid"
	duplicate.CreationTimestamp = metav1.NewTime(holder.CreationTimestamp.Add(time.Hour))
	duplicate.Spec.McpServers = nil
	require.NoError(t, f.contextIndexer.Add(duplicate))
	require.NoError(t, f.contextIndexer.Delete(holder))
	c.contextHandlers().OnDelete(holder)

	observed, _ := c.observed.snapshot()
	assert.True(t, observed.RetiredContextIDs[holder.Spec.ContextID], "the holder held the id")
}
