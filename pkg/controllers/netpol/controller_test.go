package netpol

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
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
	kubefake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
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

// fixture is a controller over fake clientsets whose caches are seeded by
// hand, as in sample-controller: syncFull is called directly and the test
// asserts the exact write actions.
type fixture struct {
	t        testing.TB
	kube     *kubefake.Clientset
	hcc      *hccfake.Clientset
	policies []*networkingv1.NetworkPolicy // live, seeded into the caches
	servers  []*clerumv1alpha1.McpServer
	contexts []*clerumv1alpha1.Context
	// hosts and pods are the Hosts and Host pods of the host namespace,
	// seeded into their caches (hostIndexer, podIndexer).
	hosts     []*clerumv1alpha1.Host
	pods      []*corev1.Pod
	desired   []*networkingv1.NetworkPolicy // what the fake planner returns
	caps      Caps
	egress    *fakeEgress
	readiness *health.Readiness
	registry  *prometheus.Registry
	// contextIndexer and serverIndexer are the caches, for tests that
	// change a Context or a server.
	contextIndexer, serverIndexer cache.Indexer
	policyIndexers                map[string]cache.Indexer
	hostIndexer, podIndexer       cache.Indexer
	clk                           *clocktesting.FakeClock
	deps                          kit.Deps
}

func newFixture(t testing.TB) *fixture {
	return &fixture{
		t:         t,
		caps:      Caps{Absolute: 10, Percent: 20},
		egress:    &fakeEgress{version: 7},
		readiness: health.NewReadiness(),
		registry:  prometheus.NewRegistry(),
		clk:       clocktesting.NewFakeClock(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)),
	}
}

type fakeEgress struct {
	version, applied uint64
	report           EgressReport
}

func (f *fakeEgress) Snapshot() (map[string]map[string]netpol.Resolution, uint64) {
	return nil, f.version
}
func (f *fakeEgress) Applied(v uint64, r EgressReport) { f.applied, f.report = v, r }
func (f *fakeEgress) Primed() <-chan struct{}          { return primed }

// primed is a closed channel: the fake's startup round is always done.
var primed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// fullPass runs one full pass and returns its error.
func fullPass(c *Controller) error {
	_, err := c.syncFull(context.Background())
	return err
}

func (f *fixture) newController() *Controller {
	var kubeObjs, hccObjs []runtime.Object
	for _, p := range f.policies {
		kubeObjs = append(kubeObjs, p)
	}
	for _, s := range f.servers {
		hccObjs = append(hccObjs, s)
	}
	for _, c := range f.contexts {
		hccObjs = append(hccObjs, c)
	}
	f.kube = kubefake.NewSimpleClientset(kubeObjs...)
	f.hcc = hccfake.NewSimpleClientset(hccObjs...)

	f.deps = kit.Deps{
		Kube: f.kube, HCC: f.hcc, Informers: kit.NewInformers(f.kube, f.hcc),
		Recorder: record.NewFakeRecorder(100), Registry: f.registry, Queues: kit.NewQueues(f.registry, f.clk),
		Clock: f.clk, Log: zerolog.Nop(), Readiness: f.readiness,
	}
	c := New(f.deps, f.egress, Options{Plan: testPlanOpts, Caps: f.caps})
	hcc := f.deps.Informers.HCC("mcp-server").Clerum().V1alpha1()
	servers, contexts := hcc.McpServers(), hcc.Contexts()
	c.plan = func(netpol.Inventory, netpol.Options) *netpol.Plan {
		// As the planner does, attribute each policy to its server.
		plan := &netpol.Plan{Policies: f.desired}
		for _, p := range f.desired {
			plan.Servers = append(plan.Servers, p.Labels[names.LabelMcpServer])
		}
		return plan
	}

	f.serverIndexer = servers.Informer().GetIndexer()
	for _, s := range f.servers {
		require.NoError(f.t, f.serverIndexer.Add(s))
	}
	f.contextIndexer = contexts.Informer().GetIndexer()
	for _, x := range f.contexts {
		require.NoError(f.t, f.contextIndexer.Add(x))
	}
	f.policyIndexers = map[string]cache.Indexer{}
	for _, ns := range PolicyNamespaces(testPlanOpts) {
		f.policyIndexers[ns] = f.deps.Informers.Kube(ns, kit.ManagedObjects, "networkpolicies").
			Networking().V1().NetworkPolicies().Informer().GetIndexer()
	}
	for _, p := range f.policies {
		require.NoError(f.t, f.policyIndexers[p.Namespace].Add(p))
	}
	f.hostIndexer = f.deps.Informers.HCC("mcp-host").Clerum().V1alpha1().Hosts().Informer().GetIndexer()
	for _, h := range f.hosts {
		require.NoError(f.t, f.hostIndexer.Add(h))
	}
	f.podIndexer = f.deps.Informers.Kube("mcp-host", kit.ManagedObjects, "pods").Core().V1().Pods().Informer().GetIndexer()
	for _, p := range f.pods {
		require.NoError(f.t, f.podIndexer.Add(p))
	}
	return c
}

// running makes c a controller past its certifying pass: later passes read
// the caches, which the tests seed and change by hand, rather than the API
// server.
func (f *fixture) running(c *Controller) {
	c.certify(changes{})
	c.caughtUp.Store(true)
	f.kube.ClearActions()
}

// syncCaches makes the policy caches show what the fake API server holds
// of the managed policies, as the label-filtered informers would.
func (f *fixture) syncCaches() {
	for ns, indexer := range f.policyIndexers {
		list, err := f.kube.NetworkingV1().NetworkPolicies(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(f.t, err)
		var objs []any
		for i := range list.Items {
			if list.Items[i].Labels[names.LabelManagedBy] == names.ManagedByValue {
				objs = append(objs, &list.Items[i])
			}
		}
		require.NoError(f.t, indexer.Replace(objs, ""))
	}
	f.kube.ClearActions()
}

// writes returns the create/update/delete actions on NetworkPolicies, as
// "verb namespace/name" lines.
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.kube.Actions() {
		if a.GetResource().Resource != "networkpolicies" {
			continue
		}
		// Create and update actions share one method set, so switch on the
		// verb rather than the action type.
		switch a.GetVerb() {
		case "create", "update":
			p := a.(interface{ GetObject() runtime.Object }).GetObject().(*networkingv1.NetworkPolicy)
			out = append(out, a.GetVerb()+" "+p.Namespace+"/"+p.Name)
		case "delete":
			out = append(out, "delete "+a.GetNamespace()+"/"+a.(core.DeleteAction).GetName())
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
	f := newFixture(t)
	f.desired = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "deny-all-mcp-server", names.PolicyTypeDenyAll, 0),
		policy("mcp-server", "ctx-c-s1", names.PolicyTypeContextAllow, 3000),
		policy("mcp-host", "ctx-c-s1-egress", names.PolicyTypeContextAllow, 3000),
	}
	c := f.newController()
	require.NoError(t, fullPass(c))
	// Defaults are ensured before anything else.
	assert.Equal(t, []string{
		"create mcp-server/deny-all-mcp-server",
		"create mcp-server/ctx-c-s1",
		"create mcp-host/ctx-c-s1-egress",
	}, f.writes())
	assert.True(t, f.readiness.Ready())
	assert.Equal(t, uint64(7), f.egress.applied, "the egress version the pass used is reported applied")

	// Second pass over a cluster that matches: zero writes.
	f2 := newFixture(t)
	f2.desired = f.desired
	f2.policies = f.desired
	c2 := f2.newController()
	require.NoError(t, fullPass(c2))
	assert.Empty(t, f2.writes())
}

func TestSyncUpdatesOnlyWhatDiffers(t *testing.T) {
	f := newFixture(t)
	f.policies = ctxPolicies(3)
	f.desired = ctxPolicies(3)
	f.desired[1] = policy("mcp-server", "ctx-c-s01", names.PolicyTypeContextAllow, 4000)
	// A label someone else added survives the update.
	f.policies[1].Labels["team"] = "platform"
	c := f.newController()
	require.NoError(t, fullPass(c))
	require.Equal(t, []string{"update mcp-server/ctx-c-s01"}, f.writes())

	upd := f.kube.Actions()[len(f.kube.Actions())-1].(core.UpdateAction).GetObject().(*networkingv1.NetworkPolicy)
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
			f := newFixture(t)
			f.caps = tc.caps
			f.policies = ctxPolicies(tc.listed)
			f.desired = ctxPolicies(tc.desired)
			c := f.newController()
			require.NoError(t, fullPass(c))

			assert.Len(t, f.writes(), tc.wantDeletes)
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
	f := newFixture(t)
	f.caps = Caps{Absolute: 0, Percent: 0}
	server := &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1"},
		Spec: clerumv1alpha1.McpServerSpec{EgressBindings: []clerumv1alpha1.EgressBinding{
			{Name: "api", Host: "api.example.com"},
		}},
	}
	f.servers = []*clerumv1alpha1.McpServer{server}
	// The binding's allow exists but DNS no longer proves it: not desired.
	f.policies = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "ext-egress-s1-api", names.PolicyTypeExternalEgress, 443),
		policy("mcp-server", "ext-egress-gone-api", names.PolicyTypeExternalEgress, 443),
	}
	c := f.newController()
	require.NoError(t, fullPass(c))
	assert.Equal(t, []string{"delete mcp-server/ext-egress-s1-api"}, f.writes(),
		"the unproven allow of a live server is revoked; the orphan waits for the cap")
}

func TestRepairableClass(t *testing.T) {
	f := newFixture(t)
	unlabelledDesired := policy("mcp-server", "ctx-c-s1", "", 3000)
	unlabelledOrphan := policy("mcp-server", "ctx-c-old", "", 3000)
	hostPolicy := policy("mcp-host", "allow-rpc-proxy-desktop-h1", names.PolicyTypeHost, 0)
	unlabelledHost := policy("mcp-host", "channel-reader-h1-egress", "", 0)
	foreign := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "ctx-not-ours"}}
	f.policies = []*networkingv1.NetworkPolicy{unlabelledDesired, unlabelledOrphan, hostPolicy, unlabelledHost, foreign}
	f.desired = []*networkingv1.NetworkPolicy{policy("mcp-server", "ctx-c-s1", names.PolicyTypeContextAllow, 3000)}
	c := f.newController()
	require.NoError(t, fullPass(c))
	assert.ElementsMatch(t, []string{"update mcp-server/ctx-c-s1", "delete mcp-server/ctx-c-old"}, f.writes(),
		"the repairable class is relabelled or swept; other operators' and unmanaged policies are untouched")
}

func TestFailedRevocationDoesNotCertify(t *testing.T) {
	f := newFixture(t)
	f.policies = ctxPolicies(2)
	f.desired = append(ctxPolicies(1), policy("mcp-server", "ctx-new", names.PolicyTypeContextAllow, 3000))
	c := f.newController()
	f.kube.PrependReactor("delete", "networkpolicies", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcd is sad")
	})
	require.Error(t, fullPass(c))
	assert.False(t, f.readiness.Ready(), "no certification while a revocation failed")
	assert.Contains(t, f.readiness.Reasons()[ReadinessCheck], "not every revocation", "/ready says why")
	assert.Equal(t, []string{"delete mcp-server/ctx-c-s01", "create mcp-server/ctx-new"}, f.writes(),
		"a failed revocation stops neither the others nor the creates")
	assert.Equal(t, 1.0, counterValue(t, c.metrics.WriteErrors.WithLabelValues("delete")))
}

func TestDefaultsPassEnsuresOnlyL0L1(t *testing.T) {
	f := newFixture(t)
	stale := policy("mcp-server", "deny-all-old", names.PolicyTypeDenyAll, 0)
	f.policies = append(ctxPolicies(1), stale)
	c := f.newController()
	_, err := c.syncDefaults(context.Background())
	require.NoError(t, err)
	for _, w := range f.writes() {
		assert.Regexp(t, `^create `, w, "defaults pass never deletes or touches allows")
	}
	assert.NotEmpty(t, f.writes())
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
	f := newFixture(t)
	c := f.newController()
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
	f := newFixture(t)
	older := &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "a-first", CreationTimestamp: metav1.Unix(100, 0)},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: "shared"},
	}
	newer := older.DeepCopy()
	newer.Name, newer.CreationTimestamp = "b-second", metav1.Unix(200, 0)
	f.contexts = []*clerumv1alpha1.Context{older, newer}
	c := f.newController()
	c.plan = planWithoutPolicies
	recorder := c.recorder.(*record.FakeRecorder)

	require.NoError(t, fullPass(c))
	var patched []string
	for _, a := range f.hcc.Actions() {
		if a.GetVerb() == "patch" {
			patched = append(patched, a.GetSubresource()+" "+a.(core.PatchAction).GetName())
		}
	}
	assert.Equal(t, []string{"status b-second"}, patched, "only the ignored Context gets the condition")
	require.Len(t, recorder.Events, 1)
	assert.Contains(t, <-recorder.Events, "Warning DuplicateContextID contextId shared is already held by Context a-first")

	require.NoError(t, fullPass(c))
	assert.Empty(t, recorder.Events, "one event per conflict, not one per pass")
}

func TestRejectedRecipeBindingIsReportedOnce(t *testing.T) {
	f := newFixture(t)
	f.servers = []*clerumv1alpha1.McpServer{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1", Annotations: map[string]string{
			names.AnnotationRecipeBindings: `[{"recipe":"r1","from":"someone-else","to":"w","port":8080}]`,
		}},
		Spec: clerumv1alpha1.McpServerSpec{Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
	}}
	c := f.newController()
	c.plan = planWithoutPolicies
	recorder := c.recorder.(*record.FakeRecorder)
	require.NoError(t, fullPass(c))
	require.Len(t, recorder.Events, 1)
	assert.Contains(t, <-recorder.Events, "Warning BindingRejected recipe:r1")
	require.NoError(t, fullPass(c))
	assert.Empty(t, recorder.Events)
}

func TestMissingNamespaceDoesNotBlockCertification(t *testing.T) {
	f := newFixture(t)
	f.desired = []*networkingv1.NetworkPolicy{
		policy("mcp-server", "deny-all-mcp-server", names.PolicyTypeDenyAll, 0),
		policy("sandbox-recipes", "deny-all-sandbox-recipes", names.PolicyTypeDenyAll, 0),
		policy("sandbox-recipes", "allow-dns-egress-sandbox-recipes", names.PolicyTypeInfrastructure, 0),
		policy("mcp-server", "ext-egress-s1-api", names.PolicyTypeExternalEgress, 443),
	}
	c := f.newController()
	f.kube.PrependReactor("create", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
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
	assert.Equal(t, []string{
		"create mcp-server/deny-all-mcp-server",
		"create sandbox-recipes/deny-all-sandbox-recipes", // tried once, then the namespace is skipped
		"create mcp-server/ext-egress-s1-api",
	}, f.writes())
}
