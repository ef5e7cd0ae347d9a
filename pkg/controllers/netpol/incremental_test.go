package netpol

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
)

// handlers are the controller's handlers of the kinds a pass plans from,
// for kittest.SyncChanges: the test delivers changes as the informers
// would.
func handlers(c *Controller) map[schema.GroupVersionKind]cache.ResourceEventHandler {
	gv := schema.GroupVersion(clerumv1alpha1.GroupVersion)
	return map[schema.GroupVersionKind]cache.ResourceEventHandler{
		gv.WithKind("Context"):                                    c.contextHandlers(),
		gv.WithKind("McpServer"):                                  c.serverHandlers(),
		networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"): c.policyHandlers(),
	}
}

// deliver shows c what the fake API server holds now, as a watch would.
func (f *fixture) deliver(c *Controller) { f.SyncChanges(handlers(c)) }

// signalledPass runs the pass a signal queues and reports whether it was
// incremental.
func signalledPass(t testing.TB, c *Controller) bool {
	t.Helper()
	_, incremental, err := c.syncSignalled(context.Background())
	require.NoError(t, err)
	return incremental
}

// managedPolicies returns the policies of this operator's types the fake
// API server holds, by key.
func (f *fixture) managedPolicies() map[policyKey]*networkingv1.NetworkPolicy {
	out := map[policyKey]*networkingv1.NetworkPolicy{}
	for _, ns := range PolicyNamespaces(testPlanOpts) {
		list, err := f.Kube.NetworkingV1().NetworkPolicies(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(f.t, err)
		for i := range list.Items {
			if p := &list.Items[i]; owned(p) {
				out[keyOf(p)] = p
			}
		}
	}
	return out
}

// inventory is what the fake API server holds of Contexts and McpServers,
// with the DNS answers given.
func (f *fixture) inventory(resolved map[string]map[string]netpol.Resolution) netpol.Inventory {
	f.t.Helper()
	ctx := context.Background()
	ctxs, err := f.HCC.ClerumV1alpha1().Contexts("mcp-server").List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	servers, err := f.HCC.ClerumV1alpha1().McpServers("mcp-server").List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	inv := netpol.Inventory{Resolved: resolved}
	for i := range ctxs.Items {
		inv.Contexts = append(inv.Contexts, &ctxs.Items[i])
	}
	for i := range servers.Items {
		inv.Servers = append(inv.Servers, &servers.Items[i])
	}
	return inv
}

// requireClusterIsThePlan fails unless the fake API server holds exactly
// the policies Compute plans from what it holds of Contexts and
// McpServers (and the DNS answers given): every planned policy with its
// spec and labels, and no other policy of this operator's types.
func (f *fixture) requireClusterIsThePlan(resolved map[string]map[string]netpol.Resolution, step string) {
	f.t.Helper()
	plan := netpol.Compute(f.inventory(resolved), testPlanOpts)
	live := f.managedPolicies()
	var want []string
	for _, p := range plan.Policies {
		want = append(want, p.Namespace+"/"+p.Name)
		have, ok := live[keyOf(p)]
		require.True(f.t, ok, "after %s: %s/%s is planned but not in the cluster", step, p.Namespace, p.Name)
		require.True(f.t, apiequality.Semantic.DeepEqual(p.Spec, have.Spec), "after %s: %s/%s:\nwant %v\n got %v",
			step, p.Namespace, p.Name, p.Spec, have.Spec)
		for k, v := range p.Labels {
			require.Equal(f.t, v, have.Labels[k], "after %s: label %s of %s/%s", step, k, p.Namespace, p.Name)
		}
	}
	var got []string
	for k := range live {
		got = append(got, k.ns+"/"+k.name)
	}
	slices.Sort(want)
	slices.Sort(got)
	require.Equal(f.t, want, got, "after %s: the policies in the cluster", step)
}

// requirePlannerIsThePlan fails unless the planner c keeps for its
// incremental passes plans exactly what Compute plans from the same world,
// labels and specs alike. The passes hand that planner's own policies,
// whose label maps, selectors, ports and rules are shared (pkg/netpol,
// build.go), to the diff and the writes: a writer that changed one in
// place, rather than a copy, would change it, or its siblings, here.
func (f *fixture) requirePlannerIsThePlan(c *Controller, resolved map[string]map[string]netpol.Resolution, step string) {
	f.t.Helper()
	if c.inc == nil {
		return
	}
	want, got := netpol.Compute(f.inventory(resolved), testPlanOpts), c.inc.Plan()
	require.Equal(f.t, len(want.Policies), len(got.Policies), "after %s: the planner's policies", step)
	for i, w := range want.Policies {
		g := got.Policies[i]
		require.Equal(f.t, keyOf(w), keyOf(g), "after %s: the planner's policies", step)
		require.Equal(f.t, w.Labels, g.Labels, "after %s: the planner's labels of %s/%s", step, w.Namespace, w.Name)
		require.True(f.t, apiequality.Semantic.DeepEqual(w.Spec, g.Spec), "after %s: the planner's %s/%s:\nwant %v\n got %v",
			step, w.Namespace, w.Name, w.Spec, g.Spec)
	}
	require.Equal(f.t, want.Servers, got.Servers, "after %s: the planner's servers", step)
}

// fleetEdits makes random edits to a fake API server through its
// clientsets: Contexts (their servers and contextIds, which they share),
// McpServers (ports, enabled, egress bindings, created and deleted), DNS
// answers, and someone else deleting or widening HCC's policies. Names
// hold dashes so that owners derive colliding policy names.
type fleetEdits struct {
	t        testing.TB
	f        *fixture
	rnd      *rand.Rand
	egress   *fakeEgress
	resolved map[string]map[string]netpol.Resolution
	created  int64
}

var (
	fleetServers  = []string{"s1", "s-2", "s2", "x", "x-y", "y"}
	fleetContexts = []string{"k1", "k2", "k3", "k4"}
	fleetIDs      = []string{"a", "a-x", "a", "b", "x"}
)

func (e *fleetEdits) pick(from []string) string { return from[e.rnd.IntN(len(from))] }

func (e *fleetEdits) context() *clerumv1alpha1.Context {
	e.created++
	c := &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: e.pick(fleetContexts),
			CreationTimestamp: metav1.Unix(1_800_000_000+e.created, 0)},
		Spec: clerumv1alpha1.ContextSpec{ContextID: e.pick(fleetIDs)},
	}
	for range e.rnd.IntN(4) {
		c.Spec.McpServers = append(c.Spec.McpServers, e.pick(fleetServers))
	}
	return c
}

func (e *fleetEdits) server() *clerumv1alpha1.McpServer {
	name := e.pick(fleetServers)
	s := &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name, UID: types.UID(fmt.Sprintf("%s-%d", name, e.rnd.IntN(2)))},
		Spec: clerumv1alpha1.McpServerSpec{Image: "i", Transport: clerumv1alpha1.Transport{
			Type: clerumv1alpha1.TransportSSE, Port: ptr.To([]int32{3000, 8080}[e.rnd.IntN(2)])}},
	}
	if e.rnd.IntN(5) == 0 {
		s.Spec.Enabled = ptr.To(false)
	}
	bindings := []clerumv1alpha1.EgressBinding{
		{Name: "www", Mode: clerumv1alpha1.EgressModePublicWeb},
		{Name: "net", CIDR: "93.184.216.0/24", Port: ptr.To[int32](443)},
		{Name: "api", Host: "api.example.com", Port: ptr.To[int32](443)},
	}
	for _, b := range bindings {
		if e.rnd.IntN(3) == 0 {
			s.Spec.EgressBindings = append(s.Spec.EgressBindings, b)
		}
	}
	if e.rnd.IntN(3) == 0 {
		s.Annotations = map[string]string{names.AnnotationRecipeBindings: fmt.Sprintf(
			`[{"recipe":%q,"from":%q,"to":"runner","port":%d,"protocol":"TCP"}]`, e.pick([]string{"r", "r-b"}), name, 8000+e.rnd.IntN(2))}
	}
	return s
}

// answer sets fresh DNS answers for s's hostname bindings, or none.
func (e *fleetEdits) answer(s *clerumv1alpha1.McpServer) {
	out := map[string]netpol.Resolution{}
	for i := range s.Spec.EgressBindings {
		b := &s.Spec.EgressBindings[i]
		if b.Host != "" && e.rnd.IntN(3) > 0 {
			out[b.Name] = netpol.ResolutionFor(s, b, []netip.Addr{netip.MustParseAddr(fmt.Sprintf("93.184.217.%d", 1+e.rnd.IntN(3)))})
		}
	}
	e.resolved[s.Name] = out
	e.egress.resolved = maps.Clone(e.resolved)
	e.egress.version++
}

// edit makes one random edit and says what it was.
func (e *fleetEdits) edit() string {
	ctx := context.Background()
	hcc := e.f.HCC.ClerumV1alpha1()
	switch e.rnd.IntN(10) {
	case 0, 1, 2:
		c := e.context()
		_, err := hcc.Contexts("mcp-server").Create(ctx, c, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			old, getErr := hcc.Contexts("mcp-server").Get(ctx, c.Name, metav1.GetOptions{})
			require.NoError(e.t, getErr)
			old.Spec = c.Spec
			old.Generation++ // as the API server does on a spec change
			_, err = hcc.Contexts("mcp-server").Update(ctx, old, metav1.UpdateOptions{})
		}
		require.NoError(e.t, err)
		return fmt.Sprintf("set Context %s (contextId %s, servers %v)", c.Name, c.Spec.ContextID, c.Spec.McpServers)
	case 3:
		name := e.pick(fleetContexts)
		_ = hcc.Contexts("mcp-server").Delete(ctx, name, metav1.DeleteOptions{})
		return "delete Context " + name
	case 4, 5, 6:
		s := e.server()
		old, err := hcc.McpServers("mcp-server").Get(ctx, s.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = hcc.McpServers("mcp-server").Create(ctx, s, metav1.CreateOptions{})
		case err == nil:
			old.Spec, old.Annotations = s.Spec, s.Annotations
			old.Generation++ // as the API server does on a spec change
			s = old
			_, err = hcc.McpServers("mcp-server").Update(ctx, old, metav1.UpdateOptions{})
		}
		require.NoError(e.t, err)
		e.answer(s)
		return fmt.Sprintf("set McpServer %s (enabled %v, bindings %d, recipes %v)", s.Name, s.Spec.IsEnabled(), len(s.Spec.EgressBindings), s.Annotations)
	case 7:
		name := e.pick(fleetServers)
		_ = hcc.McpServers("mcp-server").Delete(ctx, name, metav1.DeleteOptions{})
		delete(e.resolved, name)
		e.egress.resolved = maps.Clone(e.resolved)
		e.egress.version++
		return "delete McpServer " + name
	case 8:
		name := e.pick(fleetServers)
		s, err := hcc.McpServers("mcp-server").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "no DNS change (no McpServer " + name + ")"
		}
		e.answer(s)
		return "new DNS answers for McpServer " + name
	default:
		// Someone else deletes or widens one of HCC's policies.
		live := e.f.managedPolicies()
		if len(live) == 0 {
			return "no policy to tamper with"
		}
		keys := slices.SortedFunc(maps.Keys(live), func(a, b policyKey) int {
			return compareKeys(a, b)
		})
		p := live[keys[e.rnd.IntN(len(keys))]].DeepCopy()
		client := e.f.Kube.NetworkingV1().NetworkPolicies(p.Namespace)
		if e.rnd.IntN(2) == 0 {
			require.NoError(e.t, client.Delete(ctx, p.Name, metav1.DeleteOptions{}))
			return "someone deletes " + p.Namespace + "/" + p.Name
		}
		p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
		_, err := client.Update(ctx, p, metav1.UpdateOptions{})
		require.NoError(e.t, err)
		return "someone widens " + p.Namespace + "/" + p.Name
	}
}

func compareKeys(a, b policyKey) int {
	if a.ns != b.ns {
		if a.ns < b.ns {
			return -1
		}
		return 1
	}
	switch {
	case a.name < b.name:
		return -1
	case a.name > b.name:
		return 1
	}
	return 0
}

// TestIncrementalPassesKeepTheClusterAsAFullPassWould is the equivalence
// property of the controller: for random sequences of edits delivered as
// the informers deliver them, the cluster after every signalled pass holds
// exactly the policies a full pass plans from the same inventory, and the
// passes run incrementally whenever the last one converged.
func TestIncrementalPassesKeepTheClusterAsAFullPassWould(t *testing.T) {
	passes, incremental := 0, 0
	for seed := range uint64(8) {
		f, c := newFixture(t, world{})
		c.plan = nil
		f.running(c)
		e := &fleetEdits{t: t, f: f, rnd: rand.New(rand.NewPCG(seed, 2)), egress: f.egress,
			resolved: map[string]map[string]netpol.Resolution{}}
		require.False(t, signalledPass(t, c), "the first pass has no state to build on")
		f.deliver(c)
		for step := range 60 {
			what := fmt.Sprintf("seed %d step %d: %s", seed, step, e.edit())
			f.deliver(c)
			passes++
			inc := signalledPass(t, c)
			if inc {
				incremental++
			}
			what = fmt.Sprintf("%s (incremental pass: %v)", what, inc)
			f.requireClusterIsThePlan(e.resolved, what)
			f.requirePlannerIsThePlan(c, e.resolved, what)
			// The pass's own writes come back through the watch; the
			// pass they signal must have nothing left to do.
			f.deliver(c)
			f.ClearWrites()
			passes++
			if signalledPass(t, c) {
				incremental++
			}
			require.Empty(t, f.Writes(), "after %s, the pass its own writes signalled", what)
			f.requirePlannerIsThePlan(c, e.resolved, what+", and the pass its own writes signalled")
		}
	}
	t.Logf("%d of %d passes ran incrementally", incremental, passes)
	// Every edit but the rare one that needs a full pass (an orphan a
	// contextId change left, a relist share of a tiny fleet) is
	// incremental; a controller that always ran full passes would pass
	// the rest of this test.
	require.Greater(t, incremental, passes*3/4, "incremental passes")
}

// incrementalFixture is a converged cluster of contexts × serversPer
// whose controller has run its first full pass from the caches, so the
// next signalled pass may be incremental.
func incrementalFixture(t *testing.T, contexts, serversPer int) (*fixture, *Controller) {
	t.Helper()
	f, c := convergedFixture(t, contexts, serversPer)
	require.False(t, signalledPass(t, c), "the first pass has no state to build on")
	require.Empty(t, f.Writes(), "converged: no writes")
	require.NotNil(t, c.inc, "a converged full pass that read the caches keeps its planner")
	return f, c
}

// updateContext writes ctx with its generation bumped, as the API server
// does on a spec change.
func (f *fixture) updateContext(ctxObj *clerumv1alpha1.Context) {
	f.t.Helper()
	ctxObj = ctxObj.DeepCopy()
	ctxObj.Generation++
	_, err := f.HCC.ClerumV1alpha1().Contexts(ctxObj.Namespace).Update(context.Background(), ctxObj, metav1.UpdateOptions{})
	require.NoError(f.t, err)
}

func fullPasses(t *testing.T, c *Controller, reason string) float64 {
	return counterValue(t, c.metrics.FullPasses.WithLabelValues(reason))
}

func TestAContextDroppingAServerIsRevokedByAnIncrementalPass(t *testing.T) {
	f, c := incrementalFixture(t, 3, 2)
	changed := f.contexts[1].DeepCopy()
	changed.Spec.McpServers = changed.Spec.McpServers[:1]
	f.updateContext(changed)
	f.deliver(c)
	f.ClearWrites()
	require.True(t, signalledPass(t, c))
	assert.Equal(t, trio("delete", "c0001", "s0001-01"), f.writes())
	assert.NotNil(t, c.inc, "the pass converged")
}

// A deleted Context's allows are disowned by the deletion this process
// observed: revoked by the incremental pass whatever the caps (12 allows
// against a cap of 10), and the observation is then settled.
func TestDeletingAContextIsRevokedByAnIncrementalPassWhateverTheCaps(t *testing.T) {
	f, c := incrementalFixture(t, 2, 4)
	require.NoError(t, f.HCC.ClerumV1alpha1().Contexts("mcp-server").Delete(context.Background(), f.contexts[0].Name, metav1.DeleteOptions{}))
	f.deliver(c)
	f.ClearWrites()
	require.True(t, signalledPass(t, c))
	assert.Len(t, deletes(f.Writes()), 12)
	for _, d := range deletes(f.Writes()) {
		assert.Contains(t, d, "c0000-", "only the deleted Context's allows go")
	}
	observed, _ := c.observed.snapshot()
	assert.Empty(t, observed.RetiredContextIDs, "settled")
}

// A policy someone deletes or widens is put back by the next pass, which
// its own event signals.
func TestAPolicySomeoneDeletesOrWidensIsPutBackIncrementally(t *testing.T) {
	f, c := incrementalFixture(t, 2, 2)
	ctx := context.Background()
	pols := f.Kube.NetworkingV1().NetworkPolicies("mcp-server")
	require.NoError(t, pols.Delete(ctx, "ctx-c0000-s0000-00", metav1.DeleteOptions{}))
	widened, err := pols.Get(ctx, "ctx-c0001-s0001-01", metav1.GetOptions{})
	require.NoError(t, err)
	widened.Spec.Ingress = append(widened.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
	_, err = pols.Update(ctx, widened, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.deliver(c)
	f.ClearWrites()
	require.True(t, signalledPass(t, c))
	assert.Equal(t, map[string][]string{"mcp-server": {
		"create networkpolicies/ctx-c0000-s0000-00", "update networkpolicies/ctx-c0001-s0001-01"}}, f.writes())
}

// What an incremental pass cannot judge alone it hands to a full pass,
// before it writes anything.
func TestAnIncrementalPassHandsOverWhatItCannotJudge(t *testing.T) {
	t.Run("an unexplained orphan: the caps judge the whole set", func(t *testing.T) {
		f, c := incrementalFixture(t, 2, 2)
		stray := policy("mcp-server", "ctx-vanished-s9", names.PolicyTypeContextAllow, 3000)
		stray.Labels[names.LabelContext], stray.Labels[names.LabelMcpServer] = "vanished", "s9"
		_, err := f.Kube.NetworkingV1().NetworkPolicies("mcp-server").Create(context.Background(), stray, metav1.CreateOptions{})
		require.NoError(t, err)
		f.deliver(c)
		f.ClearWrites()
		require.False(t, signalledPass(t, c))
		assert.Equal(t, 1.0, fullPasses(t, c, reasonOrphan))
		assert.Equal(t, []string{"delete networkpolicies/ctx-vanished-s9"}, f.Writes(), "one orphan is within the caps")
	})
	t.Run("a default deny deleted: L0/L1 go by the full pass's order", func(t *testing.T) {
		f, c := incrementalFixture(t, 2, 2)
		require.NoError(t, f.Kube.NetworkingV1().NetworkPolicies("mcp-server").Delete(context.Background(), "deny-all-mcp-server", metav1.DeleteOptions{}))
		f.deliver(c)
		f.ClearWrites()
		require.False(t, signalledPass(t, c))
		assert.Equal(t, 1.0, fullPasses(t, c, reasonDefaults))
		assert.Equal(t, []string{"create networkpolicies/deny-all-mcp-server"}, f.Writes())
	})
	t.Run("a relist: more than a quarter of the plan changed", func(t *testing.T) {
		f, c := incrementalFixture(t, 100, 3) // 900 allows
		for i := range 40 {                   // 240 allows move, 480 names touched
			changed := f.contexts[i].DeepCopy()
			changed.Spec.ContextID += "-moved"
			f.updateContext(changed)
		}
		f.deliver(c)
		require.False(t, signalledPass(t, c))
		assert.Equal(t, 1.0, fullPasses(t, c, reasonRelist))
	})
	t.Run("a resync tick", func(t *testing.T) {
		_, c := incrementalFixture(t, 2, 2)
		c.forceFull.Store(true)
		require.False(t, signalledPass(t, c))
		assert.Equal(t, 1.0, fullPasses(t, c, reasonResync))
		assert.True(t, signalledPass(t, c), "only the next pass")
	})
}

// A pass that does not converge leaves no state: the pass after it is
// full, and the one after that, once converged, incremental again.
func TestAFailedWriteMakesTheNextPassFull(t *testing.T) {
	f, c := incrementalFixture(t, 2, 2)
	changed := f.contexts[0].DeepCopy()
	changed.Spec.McpServers = append(changed.Spec.McpServers, "s0001-00")
	f.updateContext(changed)
	f.deliver(c)
	f.failingCreates("ctx-c0000-s0001-00")
	_, incremental, err := c.syncSignalled(context.Background())
	require.Error(t, err)
	assert.True(t, incremental)
	assert.True(t, c.inc == nil, "a failed write drops the planner")

	f.Kube.ReactionChain = f.Kube.ReactionChain[1:] // the webhook relents
	f.deliver(c)
	before := fullPasses(t, c, reasonNoState)
	require.False(t, signalledPass(t, c))
	assert.Equal(t, before+1, fullPasses(t, c, reasonNoState))
	f.deliver(c)
	require.True(t, signalledPass(t, c))
	f.requireClusterIsThePlan(nil, "the retried create")
}
