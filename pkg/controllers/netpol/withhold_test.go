package netpol

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
	"github.com/clerum/hcc/pkg/reasons"
)

var t0 = metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))

func namedContext(name, id string, created metav1.Time, servers ...string) *clerumv1alpha1.Context {
	return &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name, CreationTimestamp: created},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: id, McpServers: servers},
	}
}

func sseServer(name string) *clerumv1alpha1.McpServer {
	return &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name},
		Spec:       clerumv1alpha1.McpServerSpec{Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
	}
}

func hostOf(name, contextRef string) *clerumv1alpha1.Host {
	return &clerumv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: name},
		Spec:       clerumv1alpha1.HostSpec{ContextRef: contextRef},
	}
}

// hostPod is a Host pod as the informer caches it: metadata only.
func hostPod(name, host, contextID string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: name, Labels: map[string]string{
		names.LabelManagedBy: names.ManagedByValue, names.LabelHost: host, names.LabelContext: contextID,
	}}}
}

// trio is verb of the three allows of contextId id to server, as
// f.writes lists them.
func trio(verb, id, server string) map[string][]string {
	return map[string][]string{
		"mcp-host":   {verb + " networkpolicies/ctx-" + id + "-" + server + "-egress"},
		"mcp-server": {verb + " networkpolicies/ctx-" + id + "-" + server},
		"rpc-proxy":  {verb + " networkpolicies/rpc-egress-" + id + "-" + server},
	}
}

// drain empties c's queue of the signals so far.
func drain(c *Controller) {
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		c.queue.Forget(k)
		c.queue.Done(k)
	}
}

// holderChange is a cluster converged on Context a holding contextId team
// with server s1, whose Host ha runs pod ha-0; then a is deleted and Context
// b, created later, takes team, naming servers. The Host operator has not
// stopped ha-0 yet.
func holderChange(t *testing.T, servers ...string) (*fixture, *Controller) {
	a := namedContext("a", "team", t0, "s1")
	w := world{
		contexts: []*clerumv1alpha1.Context{a},
		servers:  []*clerumv1alpha1.McpServer{sseServer("s1"), sseServer("s2")},
		hosts:    []*clerumv1alpha1.Host{hostOf("ha", "a")},
		pods:     []*corev1.Pod{hostPod("ha-0", "ha", "team")},
	}
	w.policies = netpol.Compute(netpol.Inventory{Contexts: w.contexts, Servers: w.servers}, testPlanOpts).Policies
	f, c := newFixture(t, w)
	c.plan = nil // the real planner over the seeded listers
	f.running(c)
	require.NoError(t, fullPass(c))
	require.Empty(t, f.Writes(), "converged")

	contexts := f.HCC.ClerumV1alpha1().Contexts("mcp-server")
	require.NoError(t, contexts.Delete(t.Context(), a.Name, metav1.DeleteOptions{}))
	b := namedContext("b", "team", metav1.NewTime(t0.Add(time.Hour)), servers...)
	_, err := contexts.Create(t.Context(), b, metav1.CreateOptions{})
	require.NoError(t, err)
	f.SyncCaches()
	c.contextHandlers().OnDelete(a)
	c.contextHandlers().OnAdd(b, false)
	f.Events()
	return f, c
}

func TestAHolderChangeWithholdsTheNewHoldersAllowsUntilTheOldHostsPodsAreGone(t *testing.T) {
	f, c := holderChange(t, "s2")

	require.NoError(t, fullPass(c))
	assert.Equal(t, trio("delete", "team", "s1"), f.writes(),
		"a's allows are revoked as usual; b's allow of s2 is not created while ha-0 carries team")
	assert.Equal(t, 1.0, gaugeValue(t, c.metrics.GrantsWithheld))
	assert.True(t, f.readiness.Ready(), "withholding a grant is no failed revocation")
	events := f.Events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Warning "+reasons.EventGrantsWithheld)
	assert.Contains(t, events[0], "contextId team")
	assert.Contains(t, events[0], "Host ha")
	assert.Contains(t, events[0], "Context a does not hold it (Context b does)")

	// A later pass still withholds, and reports nothing new.
	f.SyncCaches()
	require.NoError(t, fullPass(c))
	assert.Empty(t, f.Writes())
	assert.Empty(t, f.Events())

	// The Host operator stopped ha: its pod goes, which asks for a pass,
	// and that pass grants.
	gone := f.pods[0]
	f.Unindex(gone)
	drain(c)
	c.podHandlers().OnDelete(gone)
	assert.Equal(t, 1, c.queue.Len(), "a Host pod's deletion signals a pass")
	require.NoError(t, fullPass(c))
	assert.Equal(t, trio("create", "team", "s2"), f.writes())
	assert.Zero(t, gaugeValue(t, c.metrics.GrantsWithheld))
}

func TestATerminatingPodStillWithholds(t *testing.T) {
	f, c := holderChange(t, "s2")
	terminating := f.pods[0].DeepCopy()
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(2 * time.Hour)))
	f.Index(terminating)
	c.podHandlers().OnUpdate(f.pods[0], terminating)

	require.NoError(t, fullPass(c))
	assert.Equal(t, trio("delete", "team", "s1"), f.writes(), "a terminating pod keeps its network until it is gone")
	assert.Equal(t, 1.0, gaugeValue(t, c.metrics.GrantsWithheld))
}

func TestAPodOfNoLiveHostWithholdsItsContextIDOnly(t *testing.T) {
	f, c := newFixture(t, world{
		contexts: []*clerumv1alpha1.Context{namedContext("b", "team", t0, "s1"), namedContext("other", "x", t0, "s1")},
		servers:  []*clerumv1alpha1.McpServer{sseServer("s1")},
		hosts:    []*clerumv1alpha1.Host{hostOf("hx", "other")},
		pods:     []*corev1.Pod{hostPod("gone-0", "gone", "team"), hostPod("hx-0", "hx", "x")},
		policies: netpol.Defaults(testPlanOpts),
	})
	c.plan = nil // the real planner over the seeded listers
	f.running(c)

	require.NoError(t, fullPass(c))
	assert.Equal(t, trio("create", "x", "s1"), f.writes(),
		"team is withheld while a pod of a Host that does not exist carries it; x's own Host pod withholds nothing")
	events := f.Events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "pod gone-0 of Host gone carries it, and no such Host exists")

	// A Host named gone appears for Context b: it vouches for the pod.
	h := hostOf("gone", "b")
	_, err := f.HCC.ClerumV1alpha1().Hosts(h.Namespace).Create(t.Context(), h, metav1.CreateOptions{})
	require.NoError(t, err)
	f.SyncCaches()
	drain(c)
	c.hostHandlers().OnAdd(h, false)
	assert.Equal(t, 1, c.queue.Len(), "a new Host signals a pass")
	require.NoError(t, fullPass(c))
	assert.Equal(t, trio("create", "team", "s1"), f.writes())
}

// TestAWithheldContextIDKeepsItsAllowsAndNeverWidensThem: b names s1, as a
// did: the allows a left are planned for b and kept, never deleted because
// they were withheld; an update that would widen one waits, one that
// narrows is written, and one that does both revokes.
func TestAWithheldContextIDKeepsItsAllowsAndNeverWidensThem(t *testing.T) {
	t.Run("kept", func(t *testing.T) {
		f, c := holderChange(t, "s1")
		require.NoError(t, fullPass(c))
		assert.Empty(t, f.Writes(), "the allows a left are b's now: kept")
	})

	ingress := func(f *fixture) *networkingv1.NetworkPolicy {
		p, err := f.Kube.NetworkingV1().NetworkPolicies("mcp-server").Get(t.Context(), "ctx-team-s1", metav1.GetOptions{})
		require.NoError(t, err)
		return p
	}
	t.Run("widening", func(t *testing.T) {
		f, c := holderChange(t, "s1")
		narrowed := ingress(f) // narrowed by hand: mcp-proxy dropped
		narrowed.Spec.Ingress[0].From = narrowed.Spec.Ingress[0].From[:2]
		f.Index(narrowed)
		require.NoError(t, fullPass(c))
		assert.Empty(t, f.Writes(), "restoring the hand-narrowed allow would widen it: it waits")
		assert.Equal(t, 1.0, gaugeValue(t, c.metrics.GrantsWithheld))

		f.Unindex(f.pods[0])
		require.NoError(t, fullPass(c))
		assert.Equal(t, map[string][]string{"mcp-server": {"update networkpolicies/ctx-team-s1"}}, f.writes())
	})
	t.Run("narrowing", func(t *testing.T) {
		f, c := holderChange(t, "s1")
		widened := ingress(f) // widened by hand: every pod of the cluster
		widened.Spec.Ingress[0].From = append(widened.Spec.Ingress[0].From,
			networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})
		f.Index(widened)
		require.NoError(t, fullPass(c))
		assert.Equal(t, map[string][]string{"mcp-server": {"update networkpolicies/ctx-team-s1"}}, f.writes(), "a repair that narrows is a revocation: written")
	})
	t.Run("both", func(t *testing.T) {
		f, c := holderChange(t, "s1")
		moved := f.servers[0].DeepCopy() // s1 moves to another port
		moved.Spec.Transport.Port = ptr.To[int32](4000)
		f.Index(moved)
		require.NoError(t, fullPass(c))
		assert.Equal(t, trio("delete", "team", "s1"), f.writes(),
			"the old port is revoked and the new one not granted: the allows go until ha-0 is gone")
		assert.True(t, f.readiness.Ready())
	})
}

func TestPodHandlersSignalOnlyWhatMayRelease(t *testing.T) {
	_, c := newFixture(t, world{})
	p := hostPod("ha-0", "ha", "team")
	c.podHandlers().OnAdd(p, false)
	terminating := p.DeepCopy()
	terminating.DeletionTimestamp = ptr.To(t0)
	c.podHandlers().OnUpdate(p, terminating)
	assert.Zero(t, c.queue.Len(), "a new or terminating pod only withholds: no pass")
	relabelled := p.DeepCopy()
	relabelled.Labels[names.LabelContext] = "other"
	c.podHandlers().OnUpdate(p, relabelled)
	assert.Equal(t, 1, c.queue.Len(), "a pod that changed its contextId may release one")
}

func TestPodMetadataKeepsWhatAPassReads(t *testing.T) {
	full := hostPod("ha-0", "ha", "team")
	full.DeletionTimestamp = ptr.To(t0)
	full.Spec = corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "i"}}}
	full.Status.Phase = corev1.PodRunning
	full.Annotations = map[string]string{"big": strings.Repeat("x", 100)}
	out, err := podMetadata(full)
	require.NoError(t, err)
	assert.Equal(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "ha-0",
		Labels: full.Labels, DeletionTimestamp: full.DeletionTimestamp}}, out)
}

func TestAnInformerThatCannotBeWiredFailsRun(t *testing.T) {
	f, _ := newFixture(t, world{})
	// The Host pod informer of another set of informers already runs
	// without the controller's transform: it can no longer be set, and the
	// controller must not run without it.
	d := f.Deps()
	d.Informers = kit.NewInformers(f.Kube, f.HCC)
	pods := d.Informers.Kube("mcp-host", kit.ManagedObjects, "pods").Core().V1().Pods().Informer()
	stop := make(chan struct{})
	defer close(stop)
	go pods.Run(stop)
	require.Eventually(t, pods.HasSynced, 5*time.Second, 10*time.Millisecond)

	d.Readiness = f.readiness
	d.Registry = prometheus.NewRegistry()
	d.Queues = kit.NewQueues(d.Registry, f.Clock)
	c := New(d, f.egress, Options{Plan: testPlanOpts})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := c.Run(ctx) // without the check, it would wait for caches nobody started
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the Host pod informer's transform")
}
