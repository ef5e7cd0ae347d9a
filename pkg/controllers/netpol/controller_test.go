package netpol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/health"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
)

var testPlanOpts = netpol.Options{
	McpServerNamespace:    "mcp-server",
	HostNamespace:         "mcp-host",
	RPCProxyNamespace:     "rpc-proxy",
	ControlPlaneNamespace: "control-plane",
	SandboxNamespace:      "sandbox-recipes",
	RuntimeNamespaces:     []string{"mcp-server", "rpc-proxy"},
	K8sAPICIDRs:           []netip.Prefix{netip.MustParsePrefix("10.96.0.1/32")},
	APIPort:               8081,
}

// world is what the fake API server holds when a test starts. policies
// may hold some HCC does not manage: the caches, which list only managed
// ones, lack them.
type world struct {
	contexts []*clerumv1alpha1.Context
	servers  []*clerumv1alpha1.McpServer
	policies []*networkingv1.NetworkPolicy
	hosts    []*clerumv1alpha1.Host
	pods     []*corev1.Pod
}

// fixture is a controller's world in a unit test: a kittest.Fixture whose
// fake API server and caches hold world, a fake planner and a fake egress
// coordinator. syncFull is called directly and the test asserts the
// writes. A running controller (f.running) reads only the caches: a test
// shows it a change with f.Index or f.Unindex, as its informer would
// deliver it, or with a write to the fake and SyncCaches, which also
// delivers the controller's own writes.
type fixture struct {
	*kittest.Fixture
	world
	t testing.TB
	// desired is what the fake planner returns; a test that wants the
	// real planner sets c.plan.
	desired   []*networkingv1.NetworkPolicy
	egress    *fakeEgress
	readiness *health.Readiness
}

// newFixture returns a controller over w with orphan caps of 10 and 20 %.
func newFixture(t testing.TB, w world) (*fixture, *Controller) {
	f := &fixture{t: t, world: w, egress: &fakeEgress{version: 7}, readiness: health.NewReadiness(),
		Fixture: kittest.NewFixture(t, slices.Concat(objects(w.contexts), objects(w.servers), objects(w.policies),
			objects(w.hosts), objects(w.pods))...)}
	d := f.Deps()
	d.Readiness = f.readiness
	c := New(d, f.egress, Options{Plan: testPlanOpts, Caps: Caps{Absolute: 10, Percent: 20}})
	c.plan = func(netpol.Inventory, netpol.Options) *netpol.Plan {
		// As the planner does, attribute each policy to its server.
		plan := &netpol.Plan{Policies: f.desired}
		for _, p := range f.desired {
			plan.Servers = append(plan.Servers, p.Labels[names.LabelMcpServer])
		}
		return plan
	}
	f.SyncCaches()
	return f, c
}

// objects returns items as runtime.Objects, for kittest.NewFixture.
func objects[T runtime.Object](items []T) []runtime.Object {
	out := make([]runtime.Object, 0, len(items))
	for _, o := range items {
		out = append(out, o)
	}
	return out
}

type fakeEgress struct {
	version, applied uint64
	report           EgressReport
	// resolved are the DNS answers Snapshot returns.
	resolved map[string]map[string]netpol.Resolution
	// landed are the servers Landed released, as "name@version", in order;
	// onLanded, if set, hears each.
	landed   []string
	onLanded func(server string)
}

func (f *fakeEgress) Snapshot() (map[string]map[string]netpol.Resolution, uint64) {
	return maps.Clone(f.resolved), f.version
}
func (f *fakeEgress) Applied(v uint64, r EgressReport) { f.applied, f.report = v, r }

// Landed records each server released early, with the version.
func (f *fakeEgress) Landed(v uint64, servers []string, _ EgressReport) {
	for _, s := range servers {
		f.landed = append(f.landed, fmt.Sprintf("%s@%d", s, v))
		if f.onLanded != nil {
			f.onLanded(s)
		}
	}
}
func (f *fakeEgress) Primed() <-chan struct{} { return primed }

// primed is a closed channel: the fake's startup round is always done.
var primed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// fullPass runs one full pass and returns its error.
func fullPass(c *Controller) error {
	_, err := c.syncFull(context.Background())
	return err
}

// running makes c a controller past its certifying pass: later passes read
// the caches rather than the API server.
func (f *fixture) running(c *Controller) {
	c.certify(changes{})
	c.caughtUp.Store(true)
	f.ClearWrites()
}

// writes returns the writes by namespace, each namespace's as f.WritesIn
// lists them; a namespace without writes is left out.
func (f *fixture) writes() map[string][]string {
	out := map[string][]string{}
	n := 0
	for _, ns := range PolicyNamespaces(testPlanOpts) {
		if w := f.WritesIn(ns); len(w) > 0 {
			out[ns], n = w, n+len(w)
		}
	}
	require.Len(f.t, f.Writes(), n, "no write outside the policy namespaces")
	return out
}

// sent returns the names of the NetworkPolicies written, in the order the
// writes were sent: the order of a pass's steps, which Writes, sorted,
// does not show.
func (f *fixture) sent() []string {
	var out []string
	for _, a := range f.Kube.Actions() {
		if a.GetResource().Resource != "networkpolicies" {
			continue
		}
		// Create and update actions share one method set, so switch on the
		// verb rather than the action type.
		switch a.GetVerb() {
		case "create", "update":
			out = append(out, a.(core.CreateAction).GetObject().(*networkingv1.NetworkPolicy).Name)
		case "delete":
			out = append(out, a.(core.DeleteAction).GetName())
		}
	}
	return out
}

func policy(ns, name, typ string, port int32) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			UID:    types.UID(ns + "/" + name),
			Labels: map[string]string{names.LabelManagedBy: names.ManagedByValue},
		},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	if typ != "" {
		p.Labels[names.LabelPolicyType] = typ
	}
	if port != 0 {
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(port))}}}}
	}
	return p
}

// ctxPolicies returns n context-allow policies in mcp-server.
func ctxPolicies(n int) []*networkingv1.NetworkPolicy {
	var ps []*networkingv1.NetworkPolicy
	for i := range n {
		ps = append(ps, policy("mcp-server", fmt.Sprintf("ctx-c-s%02d", i), names.PolicyTypeContextAllow, 3000))
	}
	return ps
}

func TestSyncCreatesFromEmptyThenWritesNothing(t *testing.T) {
	f, c := newFixture(t, world{})
	f.desired = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "deny-all-mcp-server", names.PolicyTypeDenyAll, 0),
		policy("mcp-server", "ctx-c-s1", names.PolicyTypeContextAllow, 3000),
		policy("mcp-host", "ctx-c-s1-egress", names.PolicyTypeContextAllow, 3000),
	}
	require.NoError(t, fullPass(c))
	assert.Equal(t, map[string][]string{
		"mcp-server": {"create networkpolicies/ctx-c-s1", "create networkpolicies/deny-all-mcp-server"},
		"mcp-host":   {"create networkpolicies/ctx-c-s1-egress"},
	}, f.writes())
	assert.Equal(t, []string{"deny-all-mcp-server", "ctx-c-s1", "ctx-c-s1-egress"}, f.sent(),
		"defaults are ensured before anything else")
	assert.True(t, f.readiness.Ready())
	assert.Equal(t, uint64(7), f.egress.applied, "the egress version the pass used is reported applied")

	// Second pass over a cluster that matches: zero writes.
	f2, c2 := newFixture(t, world{policies: f.desired})
	f2.desired = f.desired
	require.NoError(t, fullPass(c2))
	assert.Empty(t, f2.Writes())
}

// A pass that runs before the cache shows the allows the last pass created
// sends them no second time (it would only meet AlreadyExists); a default
// it created is sent again (one deleted before the cache saw it must come
// back at once). Once the cache shows them, nothing is written.
func TestACreateTheCacheHasNotShownIsNotSentAgain(t *testing.T) {
	f, c := newFixture(t, world{})
	f.running(c)
	f.desired = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "deny-all-mcp-server", names.PolicyTypeDenyAll, 0),
		policy("mcp-server", "ctx-c-s1", names.PolicyTypeContextAllow, 3000),
	}
	require.NoError(t, fullPass(c))
	require.Equal(t, []string{"create networkpolicies/ctx-c-s1", "create networkpolicies/deny-all-mcp-server"}, f.WritesIn("mcp-server"))
	f.ClearWrites()

	// The cache does not show the creates yet: the default's AlreadyExists
	// says so.
	assert.ErrorIs(t, fullPass(c), kit.ErrCacheBehind)
	assert.Equal(t, []string{"create networkpolicies/deny-all-mcp-server"}, f.WritesIn("mcp-server"),
		"only the default is sent again")
	f.ClearWrites()

	f.Clock.Step(createdTTL)
	assert.ErrorIs(t, fullPass(c), kit.ErrCacheBehind, "creates the cache never showed")
	assert.Equal(t, []string{"create networkpolicies/ctx-c-s1", "create networkpolicies/deny-all-mcp-server"}, f.WritesIn("mcp-server"),
		"after createdTTL the allow is sent again")

	f.SyncCaches()
	require.NoError(t, fullPass(c))
	assert.Empty(t, f.Writes())
}

// The watch may deliver a create before the writer records it, leaving the
// create waiting; a deletion the cache shows ends the wait, so a policy
// deleted by hand is created again at once.
func TestADeletionEndsTheWaitForACreate(t *testing.T) {
	f, c := newFixture(t, world{})
	p := policy("mcp-host", "ctx-c-s1-egress", names.PolicyTypeContextAllow, 3000)
	h := c.policyHandlers()
	h.OnAdd(p, false) // the watch first
	c.created.add(keyOf(p), f.Clock.Now())
	require.True(t, c.created.pendingFor(keyOf(p), f.Clock.Now()))
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "mcp-host/ctx-c-s1-egress", Obj: p})
	assert.False(t, c.created.pendingFor(keyOf(p), f.Clock.Now()))
}

func TestSyncUpdatesOnlyWhatDiffers(t *testing.T) {
	live := ctxPolicies(3)
	// A label someone else added survives the update.
	live[1].Labels["team"] = "platform"
	f, c := newFixture(t, world{policies: live})
	f.desired = ctxPolicies(3)
	f.desired[1] = policy("mcp-server", "ctx-c-s01", names.PolicyTypeContextAllow, 4000)
	require.NoError(t, fullPass(c))
	require.Equal(t, map[string][]string{"mcp-server": {"update networkpolicies/ctx-c-s01"}}, f.writes())

	upd := f.Kube.Actions()[len(f.Kube.Actions())-1].(core.UpdateAction).GetObject().(*networkingv1.NetworkPolicy)
	assert.Equal(t, "platform", upd.Labels["team"])
	assert.Equal(t, int32(4000), upd.Spec.Ingress[0].Ports[0].Port.IntVal)
}

func TestOrphanCaps(t *testing.T) {
	tests := []struct {
		name        string
		listed      int // live context-allow policies
		desired     int // how many of them are still desired
		caps        Caps
		wantDeletes int
		wantCapped  string
	}{
		{name: "orphans at the absolute cap are deleted", listed: 60, desired: 50, caps: Caps{Absolute: 10, Percent: 20}, wantDeletes: 10},
		{name: "orphans one above the absolute cap are kept", listed: 61, desired: 50, caps: Caps{Absolute: 10, Percent: 20}, wantCapped: "absolute"},
		{name: "the percent rule binds on a small fleet", listed: 10, desired: 7, caps: Caps{Absolute: 10, Percent: 20}, wantCapped: "percent"},
		{name: "orphans at the percent limit are deleted", listed: 10, desired: 8, caps: Caps{Absolute: 10, Percent: 20}, wantDeletes: 2},
		{name: "the percent rule is inert below one policy", listed: 4, desired: 0, caps: Caps{Absolute: 10, Percent: 20}, wantDeletes: 4},
		{name: "cap 0 refuses every orphan delete", listed: 5, desired: 4, caps: Caps{Absolute: 0, Percent: 20}, wantCapped: "absolute"},
		{name: "a percent above 100 never fires", listed: 5, desired: 0, caps: Caps{Absolute: 10, Percent: 101}, wantDeletes: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, c := newFixture(t, world{policies: ctxPolicies(tc.listed)})
			c.opts.Caps = tc.caps
			f.desired = ctxPolicies(tc.desired)
			require.NoError(t, fullPass(c))

			assert.Len(t, f.Writes(), tc.wantDeletes)
			capped := 0.0
			if tc.wantCapped != "" {
				capped = 1
			}
			assert.Equal(t, capped, counterValue(t, c.metrics.OrphanCapped.WithLabelValues(orDefault(tc.wantCapped))))
			assert.True(t, f.readiness.Ready(), "a tripped cap still certifies")
		})
	}
}

func TestWithheldExternalEgressIsRevokedDespiteTheCap(t *testing.T) {
	server := &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1"},
		Spec: clerumv1alpha1.McpServerSpec{EgressBindings: []clerumv1alpha1.EgressBinding{
			{Name: "api", Host: "api.example.com"},
		}},
	}
	// The binding's allow exists but DNS no longer proves it: not desired.
	f, c := newFixture(t, world{servers: []*clerumv1alpha1.McpServer{server}, policies: []*networkingv1.NetworkPolicy{
		policy("mcp-server", "ext-egress-s1-api", names.PolicyTypeExternalEgress, 443),
		policy("mcp-server", "ext-egress-gone-api", names.PolicyTypeExternalEgress, 443),
	}})
	c.opts.Caps = Caps{Absolute: 0, Percent: 0}
	require.NoError(t, fullPass(c))
	assert.Equal(t, map[string][]string{"mcp-server": {"delete networkpolicies/ext-egress-s1-api"}}, f.writes(),
		"the unproven allow of a live server is revoked; the orphan waits for the cap")
}

func TestRepairableClass(t *testing.T) {
	unlabelledDesired := policy("mcp-server", "ctx-c-s1", "", 3000)
	unlabelledOrphan := policy("mcp-server", "ctx-c-old", "", 3000)
	hostPolicy := policy("mcp-host", "allow-rpc-proxy-desktop-h1", names.PolicyTypeHost, 0)
	unlabelledHost := policy("mcp-host", "channel-reader-h1-egress", "", 0)
	foreign := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "ctx-not-ours"}}
	f, c := newFixture(t, world{policies: []*networkingv1.NetworkPolicy{unlabelledDesired, unlabelledOrphan, hostPolicy, unlabelledHost, foreign}})
	f.desired = []*networkingv1.NetworkPolicy{policy("mcp-server", "ctx-c-s1", names.PolicyTypeContextAllow, 3000)}
	require.NoError(t, fullPass(c))
	assert.Equal(t, map[string][]string{"mcp-server": {"delete networkpolicies/ctx-c-old", "update networkpolicies/ctx-c-s1"}}, f.writes(),
		"the repairable class is relabelled or swept; other operators' and unmanaged policies are untouched")
}

func TestFailedRevocationDoesNotCertify(t *testing.T) {
	f, c := newFixture(t, world{policies: ctxPolicies(2)})
	f.desired = append(ctxPolicies(1), policy("mcp-server", "ctx-new", names.PolicyTypeContextAllow, 3000))
	f.Kube.PrependReactor("delete", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is sad")
	})
	require.Error(t, fullPass(c))
	assert.False(t, f.readiness.Ready(), "no certification while a revocation failed")
	assert.Contains(t, f.readiness.Reasons()[ReadinessCheck], "not every revocation", "/ready says why")
	assert.Equal(t, map[string][]string{"mcp-server": {"create networkpolicies/ctx-new", "delete networkpolicies/ctx-c-s01"}}, f.writes(),
		"a failed revocation stops neither the others nor the creates")
	assert.Equal(t, []string{"ctx-c-s01", "ctx-new"}, f.sent(), "revocations before grants")
	assert.Equal(t, 1.0, counterValue(t, c.metrics.WriteErrors.WithLabelValues("delete")))
}

func TestDefaultsPassEnsuresOnlyL0L1(t *testing.T) {
	stale := policy("mcp-server", "deny-all-old", names.PolicyTypeDenyAll, 0)
	f, c := newFixture(t, world{policies: append(ctxPolicies(1), stale)})
	_, err := c.syncDefaults(context.Background())
	require.NoError(t, err)
	for _, w := range f.Writes() {
		assert.Regexp(t, `^create `, w, "defaults pass never deletes or touches allows")
	}
	assert.NotEmpty(t, f.Writes())
}

// planWithoutPolicies is the real planner with its policies dropped, for
// tests about what a pass reports rather than what it writes (the fake
// client would refuse creating the same policies on a second pass).
func planWithoutPolicies(inv netpol.Inventory, o netpol.Options) *netpol.Plan {
	plan := netpol.Compute(inv, o)
	plan.Policies = nil
	return plan
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	var m dto.Metric
	require.NoError(t, g.Write(&m))
	return m.GetGauge().GetValue()
}

func orDefault(rule string) string {
	if rule == "" {
		return "absolute"
	}
	return rule
}

func TestResyncTickIsSkippedWhileAPassRuns(t *testing.T) {
	_, c := newFixture(t, world{})
	c.opts.Resync = 5 * time.Millisecond
	c.opts.DefaultsResync = 5 * time.Millisecond
	c.fullInFlight.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.resyncTimers(ctx) })
	require.Eventually(t, func() bool {
		return counterValue(t, c.metrics.TicksSkipped.WithLabelValues("pass-in-flight")) >= 2
	}, 5*time.Second, 5*time.Millisecond)
	cancel()
	// The defaults timer was free to queue its pass; the full pass never was.
	assert.Zero(t, counterValue(t, c.metrics.TicksSkipped.WithLabelValues("defaults-only-in-flight")))
	for c.queue.Len() > 0 {
		kind, _ := c.queue.Get()
		assert.Equal(t, passDefaults, kind, "a skipped tick does not coalesce into a queued pass")
		c.queue.Done(kind)
	}
}

func TestCensus(t *testing.T) {
	server := &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1"},
		Spec: clerumv1alpha1.McpServerSpec{
			Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE},
			EgressBindings: []clerumv1alpha1.EgressBinding{{Name: "api", Host: "api.example.com", Port: ptr.To[int32](443)}},
		},
	}
	inv := netpol.Inventory{Servers: []*clerumv1alpha1.McpServer{server}}
	live := append(netpol.Defaults(testPlanOpts),
		policy("mcp-server", "ctx-gone-s1", names.PolicyTypeContextAllow, 3000),
		policy("mcp-host", "ctx-gone-s1-egress", "", 3000), // the repairable class
		policy("mcp-server", "ext-egress-s1-api", names.PolicyTypeExternalEgress, 443),
		policy("mcp-host", "allow-rpc-proxy-desktop-h1", names.PolicyTypeHost, 0),
		policy("mcp-host", "deny-all-mcp-host", names.PolicyTypeDenyAll, 0), // mcp-host left the runtime list
	)
	for _, p := range live {
		p.Labels[names.LabelManagedBy] = names.ManagedByValue
	}

	census := TakeCensus(live, inv, testPlanOpts, Caps{Absolute: 1, Percent: 20})
	assert.Equal(t, 1, census.ByType[repairableType])
	assert.Zero(t, census.ByType[names.PolicyTypeHost], "other operators' policies are not counted")
	assert.Equal(t, []CensusEntry{
		{"mcp-host", "ctx-gone-s1-egress", repairableType},
		{"mcp-server", "ctx-gone-s1", names.PolicyTypeContextAllow},
	}, census.Orphans)
	assert.Equal(t, []CensusEntry{{"mcp-server", "ext-egress-s1-api", names.PolicyTypeExternalEgress}}, census.Disowned)
	assert.Equal(t, []CensusEntry{{"mcp-host", "deny-all-mcp-host", names.PolicyTypeDenyAll}}, census.Stale)
	assert.Equal(t, "absolute", census.Capped)

	var out bytes.Buffer
	require.NoError(t, census.Write(&out, "from CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP", "compiled default"))
	text := out.String()
	assert.Contains(t, text, "unexplained orphans (only these count against the caps): 2")
	assert.Contains(t, text, "disowned allows (revoked whatever the caps; hostname allows DNS still proves are kept): 1")
	assert.Contains(t, text, "stale L0/L1 policies (kept, never swept): 1")
	assert.Contains(t, text, "absolute 1 (from CONTEXT_MAPPER_NETPOL_ORPHAN_DELETE_CAP), percent 20 (compiled default)")
	assert.Contains(t, text, "cap would trip: yes, by the absolute rule")

	relaxed := TakeCensus(live, inv, testPlanOpts, Caps{Absolute: 10, Percent: 100})
	assert.Empty(t, relaxed.Capped)
}

func TestDuplicateContextIDIsReportedOnTheIgnoredContext(t *testing.T) {
	older := &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "a-first", CreationTimestamp: metav1.Unix(100, 0)},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: "shared"},
	}
	newer := older.DeepCopy()
	newer.Name, newer.CreationTimestamp = "b-second", metav1.Unix(200, 0)
	f, c := newFixture(t, world{contexts: []*clerumv1alpha1.Context{older, newer}})
	c.plan = planWithoutPolicies

	require.NoError(t, fullPass(c))
	assert.Equal(t, []string{"patch contexts/b-second/status"}, f.Writes(), "only the ignored Context gets the condition")
	events := f.Events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Warning DuplicateContextID contextId shared is already held by Context a-first")

	require.NoError(t, fullPass(c))
	assert.Empty(t, f.Events(), "one event per conflict, not one per pass")
}

func TestRejectedRecipeBindingIsReportedOnce(t *testing.T) {
	f, c := newFixture(t, world{servers: []*clerumv1alpha1.McpServer{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1", Annotations: map[string]string{
			names.AnnotationRecipeBindings: `[{"recipe":"r1","from":"someone-else","to":"w","port":8080}]`,
		}},
		Spec: clerumv1alpha1.McpServerSpec{Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
	}}})
	c.plan = planWithoutPolicies
	require.NoError(t, fullPass(c))
	events := f.Events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Warning BindingRejected recipe:r1")
	require.NoError(t, fullPass(c))
	assert.Empty(t, f.Events())
}

func TestMissingNamespaceDoesNotBlockCertification(t *testing.T) {
	f, c := newFixture(t, world{})
	f.desired = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "deny-all-mcp-server", names.PolicyTypeDenyAll, 0),
		policy("sandbox-recipes", "deny-all-sandbox-recipes", names.PolicyTypeDenyAll, 0),
		policy("sandbox-recipes", "allow-dns-egress-sandbox-recipes", names.PolicyTypeInfrastructure, 0),
		policy("mcp-server", "ext-egress-s1-api", names.PolicyTypeExternalEgress, 443),
	}
	f.Kube.PrependReactor("create", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() == "sandbox-recipes" {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "sandbox-recipes")
		}
		return false, nil, nil
	})
	after, err := c.syncFull(context.Background())
	require.NoError(t, err, "a missing namespace is no failed pass")
	assert.Equal(t, missingNamespaceRetry, after, "the pass comes back until the namespace exists")
	assert.Equal(t, 1.0, gaugeValue(t, c.metrics.MissingNamespaces))
	assert.True(t, f.readiness.Ready(), "a namespace without pods blocks no certification")
	assert.Equal(t, uint64(7), f.egress.applied, "nor the egress gates")
	assert.Equal(t, map[string][]string{
		"mcp-server":      {"create networkpolicies/deny-all-mcp-server", "create networkpolicies/ext-egress-s1-api"},
		"sandbox-recipes": {"create networkpolicies/deny-all-sandbox-recipes"}, // tried once, then the namespace is skipped
	}, f.writes())
	assert.Equal(t, []string{"deny-all-mcp-server", "deny-all-sandbox-recipes", "ext-egress-s1-api"}, f.sent())
}

func TestPassDurationBucketsReachFifteenMinutes(t *testing.T) {
	_, c := newFixture(t, world{})
	h := c.metrics.PassDuration.WithLabelValues("full", "success")
	h.Observe(600)
	var m dto.Metric
	require.NoError(t, h.(prometheus.Histogram).Write(&m))
	var bounds []float64
	for _, b := range m.GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	assert.Contains(t, bounds, 0.005, "the low buckets stay")
	assert.Contains(t, bounds, 40.96, "the low buckets stay")
	assert.Equal(t, 900.0, bounds[len(bounds)-1], "a pass of minutes lands in a bucket, not only in +Inf")
}

func TestLastPassDurationIsSetByEveryPass(t *testing.T) {
	f, c := newFixture(t, world{})
	f.desired = ctxPolicies(1)
	// The fake planner takes the time the pass is said to take.
	took := 90 * time.Second
	plan := c.plan
	c.plan = func(inv netpol.Inventory, o netpol.Options) *netpol.Plan {
		f.Clock.Step(took)
		return plan(inv, o)
	}
	ctx := context.Background()
	_, err := c.sync(ctx, passFull)
	require.NoError(t, err)
	assert.Equal(t, 90.0, gaugeValue(t, c.metrics.LastPassDuration.WithLabelValues("full")))

	// A failed pass sets it too: a pass failing after minutes is as much a
	// treadmill as one succeeding after minutes.
	took = 7 * time.Minute
	f.desired = append(f.desired, policy("mcp-server", "ctx-new", names.PolicyTypeContextAllow, 3000))
	f.Kube.PrependReactor("create", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is sad")
	})
	_, err = c.sync(ctx, passFull)
	require.Error(t, err)
	assert.Equal(t, 420.0, gaugeValue(t, c.metrics.LastPassDuration.WithLabelValues("full")))
	assert.Zero(t, gaugeValue(t, c.metrics.LastPassDuration.WithLabelValues("defaults")), "each kind has its own")
}

// TestResyncTickIsSkippedWhileARealPassRuns: a full pass marks itself in
// flight for as long as it runs, so every tick meanwhile is skipped and
// counted and queues nothing: no second pass starts while one runs. Once
// it has returned, the next tick queues a pass again.
func TestResyncTickIsSkippedWhileARealPassRuns(t *testing.T) {
	_, c := newFixture(t, world{})
	c.opts.Resync = 5 * time.Millisecond
	planning, release := make(chan struct{}), make(chan struct{})
	var plans sync.WaitGroup
	plans.Add(1)
	plan := c.plan
	c.plan = func(inv netpol.Inventory, o netpol.Options) *netpol.Plan {
		plans.Done() // a second call panics: a second pass started
		close(planning)
		<-release
		return plan(inv, o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock() // a failing assertion must not leave the pass blocked
	passErr := make(chan error, 1)
	wg.Go(func() { _, err := c.sync(ctx, passFull); passErr <- err })
	<-planning
	wg.Go(func() { c.resyncTimers(ctx) })

	skipped := func() float64 { return counterValue(t, c.metrics.TicksSkipped.WithLabelValues("pass-in-flight")) }
	require.Eventually(t, func() bool { return skipped() >= 3 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, c.queue.Len(), "a tick during the pass queues no second one")

	unblock()
	require.NoError(t, <-passErr)
	require.Eventually(t, func() bool { return c.queue.Len() > 0 }, 5*time.Second, time.Millisecond,
		"after the pass a tick queues the next")
	kind, _ := c.queue.Get()
	assert.Equal(t, passFull, kind)
	c.queue.Done(kind)
}

// A namespace held in Terminating by a finalizer refuses creates with 403
// "namespace is being terminated" (NamespaceLifecycle admission): like a
// missing namespace, it is no failed pass and blocks no certification.
func TestTerminatingNamespaceDoesNotBlockCertification(t *testing.T) {
	f, c := newFixture(t, world{})
	f.desired = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "deny-all-mcp-server", names.PolicyTypeDenyAll, 0),
		policy("sandbox-recipes", "deny-all-sandbox-recipes", names.PolicyTypeDenyAll, 0),
		policy("sandbox-recipes", "allow-dns-egress-sandbox-recipes", names.PolicyTypeInfrastructure, 0),
	}
	f.Kube.PrependReactor("create", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
		if a.GetNamespace() != "sandbox-recipes" {
			return false, nil, nil
		}
		// As k8s.io/apiserver's NamespaceLifecycle admission answers.
		err := apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}, "",
			errors.New("unable to create new content in namespace sandbox-recipes because it is being terminated"))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause,
			Message: "namespace sandbox-recipes is being terminated", Field: "metadata.namespace"}}
		return true, nil, err
	})
	after, err := c.syncFull(context.Background())
	require.NoError(t, err, "a terminating namespace is no failed pass")
	assert.Equal(t, missingNamespaceRetry, after, "the pass comes back until the namespace is gone or back")
	assert.True(t, f.readiness.Ready(), "a terminating namespace blocks no certification")
	assert.Zero(t, counterValue(t, c.metrics.WriteErrors.WithLabelValues(verbCreate)))
	assert.Equal(t, map[string][]string{
		"mcp-server":      {"create networkpolicies/deny-all-mcp-server"},
		"sandbox-recipes": {"create networkpolicies/deny-all-sandbox-recipes"}, // tried once, then the namespace is skipped
	}, f.writes())
}
