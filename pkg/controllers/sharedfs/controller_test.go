package sharedfs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

const ns = "mcp-host"

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// fixture is the reconciler over fake clientsets whose caches are seeded by
// hand; syncSharedFileSystem is called directly and the exact writes
// asserted.
type fixture struct {
	t        *testing.T
	kube     *kubefake.Clientset
	hcc      *hccfake.Clientset
	c        *Controller
	deps     kit.Deps
	reg      *prometheus.Registry
	recorder *record.FakeRecorder
	logs     *logBuffer

	mu      sync.Mutex
	applied map[string][]clerumv1alpha1.SharedFileSystemStatus
}

// jwtConfigMap is the platform's ConfigMap holding value under the key.
func jwtConfigMap(value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testOptions.JWTConfigMap, ResourceVersion: "1"},
		Data: map[string]string{testOptions.JWTConfigMapKey: value, "OTHER": "x"}}
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	f := &fixture{t: t, recorder: record.NewFakeRecorder(1000), logs: &logBuffer{},
		applied: map[string][]clerumv1alpha1.SharedFileSystemStatus{}}
	var kubeObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*clerumv1alpha1.SharedFileSystem); !ok {
			kubeObjs = append(kubeObjs, o)
		}
	}
	f.kube = kubefake.NewClientset(kubeObjs...)
	// An update of the main resource keeps the status, as on the API
	// server (the fake would drop it).
	keepStatus := func(a core.Action) (bool, runtime.Object, error) {
		u := a.(core.UpdateAction)
		if u.GetSubresource() != "" {
			return false, nil, nil
		}
		old, err := f.kube.Tracker().Get(u.GetResource(), u.GetNamespace(), u.GetObject().(metav1.Object).GetName())
		if err != nil {
			return false, nil, nil
		}
		switch o := u.GetObject().(type) {
		case *corev1.PersistentVolumeClaim:
			o.Status = old.(*corev1.PersistentVolumeClaim).Status
		case *appsv1.Deployment:
			o.Status = old.(*appsv1.Deployment).Status
		}
		return false, nil, nil
	}
	// The API server gives every object a UID; a claim's mark is over it.
	var uids atomic.Int64
	f.kube.PrependReactor("create", "*", func(a core.Action) (bool, runtime.Object, error) {
		if o, ok := a.(core.CreateAction).GetObject().(metav1.Object); ok && o.GetUID() == "" {
			o.SetUID(types.UID(fmt.Sprintf("uid-created-%d", uids.Add(1))))
		}
		return false, nil, nil
	})
	f.kube.PrependReactor("update", "persistentvolumeclaims", keepStatus)
	f.kube.PrependReactor("update", "deployments", keepStatus)
	f.hcc = hccfake.NewClientset()
	// The fake clientset cannot apply a CRD's status: capture it, and
	// store it as the API server would.
	f.hcc.PrependReactor("patch", "sharedfilesystems", func(a core.Action) (bool, runtime.Object, error) {
		p := a.(core.PatchAction)
		require.Equal(t, "status", p.GetSubresource())
		require.Equal(t, types.ApplyPatchType, p.GetPatchType())
		var applied clerumv1alpha1.SharedFileSystem
		require.NoError(t, json.Unmarshal(p.GetPatch(), &applied))
		f.mu.Lock()
		f.applied[p.GetName()] = append(f.applied[p.GetName()], applied.Status)
		f.mu.Unlock()
		return true, &clerumv1alpha1.SharedFileSystem{}, nil
	})
	f.reg = prometheus.NewRegistry()
	f.deps = kit.Deps{Kube: f.kube, HCC: f.hcc, Informers: kit.NewInformers(f.kube, f.hcc), Recorder: f.recorder,
		Registry: f.reg, Queues: kit.NewQueues(f.reg, clk), Clock: clk, Log: zerolog.New(f.logs)}
	f.c = New(f.deps, Config{Namespace: ns, Build: testOptions, Resync: time.Minute, Workers: 1})
	for _, o := range objs {
		switch o := o.(type) {
		case *clerumv1alpha1.SharedFileSystem:
			require.NoError(t, f.hcc.Tracker().Add(o.DeepCopy()))
			f.index(o)
		case *corev1.ConfigMap:
			f.index(o)
		default:
			if isManaged(o) {
				f.index(o)
			}
		}
	}
	return f
}

func isManaged(o runtime.Object) bool {
	m, err := meta.Accessor(o)
	return err == nil && m.GetLabels()[names.LabelManagedBy] == names.ManagedByValue
}

func (f *fixture) indexer(obj runtime.Object) cache.Indexer {
	inf := f.deps.Informers
	switch obj.(type) {
	case *clerumv1alpha1.SharedFileSystem:
		return inf.HCC(ns).Clerum().V1alpha1().SharedFileSystems().Informer().GetIndexer()
	case *corev1.ConfigMap:
		return f.c.configMapInformer.GetIndexer()
	case *appsv1.Deployment:
		return inf.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments().Informer().GetIndexer()
	case *corev1.Service:
		return inf.Kube(ns, kit.ManagedObjects, "services").Core().V1().Services().Informer().GetIndexer()
	case *corev1.PersistentVolumeClaim:
		return inf.Kube(ns, kit.ManagedObjects, "persistentvolumeclaims").Core().V1().PersistentVolumeClaims().Informer().GetIndexer()
	case *networkingv1.NetworkPolicy:
		return inf.Kube(ns, kit.ManagedObjects, "networkpolicies").Networking().V1().NetworkPolicies().Informer().GetIndexer()
	}
	f.t.Fatalf("no informer for %T", obj)
	return nil
}

func (f *fixture) index(obj runtime.Object) {
	require.NoError(f.t, f.indexer(obj).Update(obj.DeepCopyObject()))
}

// setFS replaces fs in the fake API server and the cache.
func (f *fixture) setFS(fs *clerumv1alpha1.SharedFileSystem) {
	require.NoError(f.t, f.hcc.Tracker().Update(clerumv1alpha1.Resource("sharedfilesystems").WithVersion("v1alpha1"), fs.DeepCopy(), ns))
	f.index(fs)
}

func (f *fixture) fs(name string) *clerumv1alpha1.SharedFileSystem {
	fs, err := f.hcc.ClerumV1alpha1().SharedFileSystems(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return fs
}

// syncCaches makes every cache show what the fake API server holds (the
// file systems with the status last applied) and forgets the actions.
func (f *fixture) syncCaches() {
	f.t.Helper()
	ctx := context.Background()
	replace := func(items []runtime.Object, sample runtime.Object) {
		var keep []any
		for _, o := range items {
			if isManaged(o) {
				keep = append(keep, o)
			}
		}
		require.NoError(f.t, f.indexer(sample).Replace(keep, ""))
	}
	ds, _ := f.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	replace(objects(ds.Items), &appsv1.Deployment{})
	ss, _ := f.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	replace(objects(ss.Items), &corev1.Service{})
	cs, _ := f.kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	replace(objects(cs.Items), &corev1.PersistentVolumeClaim{})
	ps, _ := f.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	replace(objects(ps.Items), &networkingv1.NetworkPolicy{})
	all, _ := f.hcc.ClerumV1alpha1().SharedFileSystems(ns).List(ctx, metav1.ListOptions{})
	for i := range all.Items {
		fs := &all.Items[i]
		if st, ok := f.lastStatus(fs.Name); ok {
			fs.Status = st
			f.setFS(fs)
		}
	}
	f.clearActions()
}

func objects[T any, P interface {
	*T
	runtime.Object
}](items []T) []runtime.Object {
	out := make([]runtime.Object, 0, len(items))
	for i := range items {
		out = append(out, P(&items[i]))
	}
	return out
}

func (f *fixture) clearActions() {
	f.kube.ClearActions()
	f.hcc.ClearActions()
}

func (f *fixture) sync(name string) (kit.Result, error) {
	return f.c.syncSharedFileSystem(context.Background(), cache.ObjectName{Namespace: ns, Name: name})
}

func (f *fixture) mustSync(name string) kit.Result {
	f.t.Helper()
	r, err := f.sync(name)
	require.NoError(f.t, err)
	return r
}

// writes lists every write sent, as "verb resource/name[/subresource]",
// sorted.
func (f *fixture) writes() []string {
	var out []string
	for _, a := range append(f.kube.Actions(), f.hcc.Actions()...) {
		switch a.GetVerb() {
		case "create", "update", "delete", "patch":
		default:
			continue
		}
		name := ""
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok && o.GetObject() != nil {
			name = o.GetObject().(metav1.Object).GetName()
		} else if n, ok := a.(interface{ GetName() string }); ok {
			name = n.GetName()
		}
		w := a.GetVerb() + " " + a.GetResource().Resource + "/" + name
		if s := a.GetSubresource(); s != "" {
			w += "/" + s
		}
		out = append(out, w)
	}
	sort.Strings(out)
	return out
}

func (f *fixture) lastStatus(name string) (clerumv1alpha1.SharedFileSystemStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	all := f.applied[name]
	if len(all) == 0 {
		return clerumv1alpha1.SharedFileSystemStatus{}, false
	}
	return all[len(all)-1], true
}

func (f *fixture) status(name string) clerumv1alpha1.SharedFileSystemStatus {
	f.t.Helper()
	st, ok := f.lastStatus(name)
	require.True(f.t, ok, "no status applied for %s", name)
	return st
}

func (f *fixture) condition(name, typ string) metav1.Condition {
	f.t.Helper()
	c := meta.FindStatusCondition(f.status(name).Conditions, typ)
	require.NotNil(f.t, c, "condition %s", typ)
	return *c
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// logBuffer holds the reconciler's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// logLines returns every log line written, each as its fields.
func (f *fixture) logLines() []map[string]any {
	f.t.Helper()
	f.logs.mu.Lock()
	defer f.logs.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.logs.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(f.t, json.Unmarshal([]byte(l), &m), "%s", l)
		out = append(out, m)
	}
	return out
}

func (f *fixture) deployment(name string) *appsv1.Deployment {
	d, err := f.kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return d
}

func (f *fixture) claim(name string) *corev1.PersistentVolumeClaim {
	c, err := f.kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return c
}

// bindClaim binds fs's claim, in the API server and the cache, as the
// volume binder does: to a static volume (one not named for the claim), as
// on the project's local cluster.
func (f *fixture) bindClaim(fs string) {
	c := f.claim(names.WFCData(fs))
	c.Spec.VolumeName = "local-pv-07"
	c, err := f.kube.CoreV1().PersistentVolumeClaims(ns).Update(context.Background(), c, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	c.Status.Phase = corev1.ClaimBound
	c, err = f.kube.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(context.Background(), c, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.index(c)
	f.clearActions()
}

// setAvailable makes fs's Deployment available (or not), as the
// Deployment controller would report it.
func (f *fixture) setAvailable(fs string, available bool) {
	d := f.deployment(names.WFCWorkload(fs))
	d.Status.ObservedGeneration = d.Generation
	d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = 1, 1, 0
	if available {
		d.Status.AvailableReplicas = 1
	}
	_, err := f.kube.AppsV1().Deployments(ns).UpdateStatus(context.Background(), d, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.index(d)
	f.clearActions()
}

func created(fs string) []string {
	return []string{
		"create deployments/" + names.WFCWorkload(fs),
		"create networkpolicies/" + names.WFCEgressPolicy(fs),
		"create networkpolicies/" + names.WFCIngressPolicy(fs),
		"create persistentvolumeclaims/" + names.WFCData(fs),
		"create services/" + names.WFCWorkload(fs),
		"patch sharedfilesystems/" + fs + "/status",
		"update persistentvolumeclaims/" + names.WFCData(fs), // its mark
	}
}

// deployed is a fixture with fs created, its writes cached.
func deployed(t *testing.T, fs *clerumv1alpha1.SharedFileSystem, key string) *fixture {
	f := newFixture(t, fs, jwtConfigMap(key))
	f.mustSync(fs.Name)
	f.syncCaches()
	f.events()
	return f
}

func TestCreate(t *testing.T) {
	key := rsaKey(t)
	f := newFixture(t, newFS("team", withHosts("alice")), jwtConfigMap(key))
	f.mustSync("team")
	assert.Equal(t, created("team"), f.writes())

	d := f.deployment("wfc-team")
	want := resources.BuildDeployment(newFS("team", withHosts("alice")), resources.KeyDigest(key), testOptions)
	assert.Equal(t, want.Spec, d.Spec)
	require.Len(t, d.OwnerReferences, 1)
	assert.Equal(t, "SharedFileSystem", d.OwnerReferences[0].Kind)
	assert.Equal(t, types.UID("uid-team"), d.OwnerReferences[0].UID)

	st := f.status("team")
	assert.Equal(t, clerumv1alpha1.FileSystemInitializing, st.Phase)
	assert.Equal(t, "http://wfc-team.mcp-host.svc.cluster.local:8086", st.Endpoint)
	assert.Equal(t, int64(1), st.ObservedGeneration)
	assert.Equal(t, reasons.ConfigFound, f.condition("team", clerumv1alpha1.ConditionConfigResolved).Reason)
	assert.Equal(t, reasons.ClaimPending, f.condition("team", clerumv1alpha1.ConditionVolumeBound).Reason)
	assert.Equal(t, reasons.Progressing, f.condition("team", clerumv1alpha1.ConditionWorkloadReady).Reason)
	assert.Equal(t, reasons.ClaimPending, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
}

func TestResyncWritesNothing(t *testing.T) {
	f := deployed(t, newFS("team", withHosts("alice"), withDirs("inbox")), rsaKey(t))
	f.mustSync("team")
	assert.Empty(t, f.writes(), "a no-op resync writes nothing")
	assert.Empty(t, f.events())
}

func TestPhaseTransitions(t *testing.T) {
	f := deployed(t, newFS("team", withHosts("alice")), rsaKey(t))

	// The claim binds; the WFC is not ready yet.
	f.bindClaim("team")
	f.mustSync("team")
	assert.Equal(t, []string{"patch sharedfilesystems/team/status"}, f.writes())
	assert.Equal(t, clerumv1alpha1.FileSystemInitializing, f.status("team").Phase)
	assert.Equal(t, metav1.ConditionTrue, f.condition("team", clerumv1alpha1.ConditionVolumeBound).Status)
	assert.Equal(t, reasons.Progressing, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
	f.syncCaches()

	// The WFC becomes available: Ready.
	f.setAvailable("team", true)
	f.mustSync("team")
	assert.Equal(t, []string{"patch sharedfilesystems/team/status"}, f.writes())
	assert.Equal(t, clerumv1alpha1.FileSystemReady, f.status("team").Phase)
	assert.Equal(t, metav1.ConditionTrue, f.condition("team", clerumv1alpha1.ConditionReady).Status)
	assert.Equal(t, metav1.ConditionTrue, f.condition("team", clerumv1alpha1.ConditionWorkloadReady).Status)
	f.syncCaches()
	f.mustSync("team")
	assert.Empty(t, f.writes())

	// It stops being available: Degraded, not Initializing.
	f.setAvailable("team", false)
	f.mustSync("team")
	assert.Equal(t, []string{"patch sharedfilesystems/team/status"}, f.writes())
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
	assert.Equal(t, metav1.ConditionFalse, f.condition("team", clerumv1alpha1.ConditionWorkloadReady).Status)
	f.syncCaches()

	// Back: Ready again.
	f.setAvailable("team", true)
	f.mustSync("team")
	assert.Equal(t, clerumv1alpha1.FileSystemReady, f.status("team").Phase)
	assert.Equal(t, 1.0, value(t, f.c.metrics.FileSystems.WithLabelValues("Ready")))
}

func TestSpecChange(t *testing.T) {
	key := rsaKey(t)
	f := deployed(t, newFS("team", withHosts("alice")), key)

	t.Run("hostRefs: the policy and the Deployment's allowed Hosts follow", func(t *testing.T) {
		fs := f.fs("team")
		fs.Spec.HostRefs = []string{"alice", "bob"}
		fs.Generation = 2
		f.setFS(fs)
		f.mustSync("team")
		assert.Equal(t, []string{
			"patch sharedfilesystems/team/status",
			"update deployments/wfc-team",
			"update networkpolicies/wfc-team-egress",
			"update networkpolicies/wfc-team-ingress",
		}, f.writes())
		p, err := f.kube.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), "wfc-team-ingress", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"alice", "bob"}, p.Spec.Ingress[0].From[0].PodSelector.MatchExpressions[0].Values)
		e, err := f.kube.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), "wfc-team-egress", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"alice", "bob"}, e.Spec.PodSelector.MatchExpressions[0].Values, "the Hosts' pods may send")
		assert.Equal(t, "alice,bob", envMap(f.deployment("wfc-team").Spec.Template.Spec.Containers[0])[resources.EnvAllowedHosts])
		assert.Equal(t, int64(2), f.status("team").ObservedGeneration)
		f.syncCaches()
	})
	t.Run("directories: the init container follows", func(t *testing.T) {
		fs := f.fs("team")
		fs.Spec.Directories = []string{"inbox"}
		fs.Generation = 3
		f.setFS(fs)
		f.mustSync("team")
		assert.Equal(t, []string{"patch sharedfilesystems/team/status", "update deployments/wfc-team"}, f.writes())
		inits := f.deployment("wfc-team").Spec.Template.Spec.InitContainers
		require.Len(t, inits, 1)
		assert.Contains(t, inits[0].Command, "inbox")
		f.syncCaches()
	})
	t.Run("the JWT key: the pods roll; another key of the ConfigMap: nothing", func(t *testing.T) {
		other := jwtConfigMap(key)
		other.Data["OTHER"] = "changed"
		f.index(other)
		f.mustSync("team")
		assert.Empty(t, f.writes())

		newKey := ecKey(t)
		f.index(jwtConfigMap(newKey))
		f.mustSync("team")
		assert.Equal(t, []string{"update deployments/wfc-team"}, f.writes())
		assert.Equal(t, resources.KeyDigest(newKey), f.deployment("wfc-team").Spec.Template.Annotations[resources.AnnotationJWTKeyDigest])
	})
}

func TestSizeGrowsNeverShrinks(t *testing.T) {
	f := deployed(t, newFS("team", withSize("20Gi")), rsaKey(t))
	f.bindClaim("team")

	fs := f.fs("team")
	fs.Spec.Size = ptr.To(resource.MustParse("5Gi"))
	fs.Spec.HostRefs = []string{"alice"}
	fs.Generation = 2
	f.setFS(fs)
	f.mustSync("team")
	// The claim is untouched; the rest still follows the spec.
	assert.Equal(t, []string{
		"create networkpolicies/wfc-team-egress",
		"patch sharedfilesystems/team/status",
		"update deployments/wfc-team",
		"update networkpolicies/wfc-team-ingress",
	}, f.writes())
	size := f.claim("wfc-team-data").Spec.Resources.Requests[corev1.ResourceStorage]
	assert.Equal(t, "20Gi", size.String())
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
	vb := f.condition("team", clerumv1alpha1.ConditionVolumeBound)
	assert.Equal(t, reasons.ShrinkRefused, vb.Reason)
	assert.Equal(t, reasons.ShrinkRefused, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
	assert.Contains(t, f.events(), "Warning ChangeRefused PersistentVolumeClaim mcp-host/wfc-team-data is not written: its storage request would shrink from 20Gi to 5Gi; a claim only grows; it is left as it is")
	assert.Equal(t, 1.0, value(t, f.c.metrics.Refused.WithLabelValues("PersistentVolumeClaim", "Shrink")))
	f.syncCaches()

	// Growing is written.
	fs = f.fs("team")
	fs.Spec.Size = ptr.To(resource.MustParse("30Gi"))
	fs.Generation = 3
	f.setFS(fs)
	f.mustSync("team")
	assert.Equal(t, []string{"patch sharedfilesystems/team/status", "update persistentvolumeclaims/wfc-team-data"}, f.writes())
	size = f.claim("wfc-team-data").Spec.Resources.Requests[corev1.ResourceStorage]
	assert.Equal(t, "30Gi", size.String())
	assert.Equal(t, reasons.ClaimBound, f.condition("team", clerumv1alpha1.ConditionVolumeBound).Reason)
}

func TestConfigBlocks(t *testing.T) {
	cases := []struct {
		name   string
		cm     *corev1.ConfigMap
		reason string
	}{
		{"the ConfigMap is missing", nil, reasons.ConfigMissing},
		{"the key is missing", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: testOptions.JWTConfigMap},
			Data: map[string]string{"OTHER": "x"}}, reasons.ConfigMissing},
		{"the value is not a PEM public key", jwtConfigMap("not a key"), reasons.ConfigInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{newFS("team")}
			if tc.cm != nil {
				objs = append(objs, tc.cm)
			}
			f := newFixture(t, objs...)
			f.mustSync("team")
			assert.Equal(t, []string{"patch sharedfilesystems/team/status"}, f.writes(), "nothing is created")
			assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
			cr := f.condition("team", clerumv1alpha1.ConditionConfigResolved)
			assert.Equal(t, metav1.ConditionFalse, cr.Status)
			assert.Equal(t, tc.reason, cr.Reason)
			assert.Equal(t, tc.reason, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
			events := f.events()
			require.Len(t, events, 1)
			assert.Contains(t, events[0], "Warning Blocked "+tc.reason)
			assert.Equal(t, 1.0, value(t, f.c.metrics.Blocked.WithLabelValues(tc.reason)))
		})
	}

	t.Run("a deployed file system is not rolled, and released once fixed", func(t *testing.T) {
		key := rsaKey(t)
		f := deployed(t, newFS("team", withHosts("alice", "bob")), key)
		f.index(jwtConfigMap("garbage"))
		fs := f.fs("team")
		fs.Spec.HostRefs = []string{"alice"}
		fs.Generation = 2
		f.setFS(fs)
		f.mustSync("team")
		// Only the revocation of bob reaches the cluster.
		assert.Equal(t, []string{"patch sharedfilesystems/team/status", "update networkpolicies/wfc-team-egress",
			"update networkpolicies/wfc-team-ingress"}, f.writes(), "bob loses both halves")
		assert.Equal(t, resources.KeyDigest(key), f.deployment("wfc-team").Spec.Template.Annotations[resources.AnnotationJWTKeyDigest])
		assert.Len(t, f.events(), 1)
		f.syncCaches()
		f.mustSync("team")
		assert.Empty(t, f.writes())
		assert.Empty(t, f.events(), "one event per block")

		f.index(jwtConfigMap(key))
		f.mustSync("team")
		assert.Equal(t, []string{"patch sharedfilesystems/team/status", "update deployments/wfc-team"}, f.writes())
		events := f.events()
		require.Len(t, events, 1)
		assert.Contains(t, events[0], "Normal Released")
	})
}

// TestTheBlockedGaugeCountsTheFileSystemsBlockedNow: each blocked file
// system counts once under its reason, until it is released or gone.
func TestTheBlockedGaugeCountsTheFileSystemsBlockedNow(t *testing.T) {
	f := newFixture(t, newFS("a"), newFS("b"))
	blocked := func(reason string) float64 { return value(t, f.c.metrics.Blocked.WithLabelValues(reason)) }
	f.mustSync("a")
	f.mustSync("b")
	f.mustSync("b")
	assert.Equal(t, 2.0, blocked(reasons.ConfigMissing), "one each, however often synced")

	require.NoError(t, f.hcc.Tracker().Delete(clerumv1alpha1.Resource("sharedfilesystems").WithVersion("v1alpha1"), ns, "a"))
	require.NoError(t, f.deps.Informers.HCC(ns).Clerum().V1alpha1().SharedFileSystems().Informer().GetIndexer().Delete(newFS("a")))
	f.mustSync("a")
	assert.Equal(t, 1.0, blocked(reasons.ConfigMissing), "a file system gone is not blocked")

	f.index(jwtConfigMap("not a key"))
	f.mustSync("b")
	assert.Equal(t, 0.0, blocked(reasons.ConfigMissing))
	assert.Equal(t, 1.0, blocked(reasons.ConfigInvalid), "moved to its new reason")

	f.index(jwtConfigMap(rsaKey(t)))
	f.mustSync("b")
	assert.Equal(t, 0.0, blocked(reasons.ConfigInvalid), "released")
}

// TestBlockAndReleaseAreLoggedUnderTheObject: the reconciler's lines name
// it and the file system as namespace/name, under the keys every
// reconciler uses (docs/reconcilers.md#logs).
func TestBlockAndReleaseAreLoggedUnderTheObject(t *testing.T) {
	f := newFixture(t, newFS("team"))
	f.mustSync("team")
	f.index(jwtConfigMap(rsaKey(t)))
	f.mustSync("team")
	byMsg := map[string]map[string]any{}
	for _, l := range f.logLines() {
		byMsg[l["message"].(string)] = l
	}
	want := map[string]map[string]any{
		"shared file system blocked":  {"level": "info", "controller": "sharedfilesystem", "object": "mcp-host/team", "reason": reasons.ConfigMissing},
		"shared file system released": {"level": "info", "controller": "sharedfilesystem", "object": "mcp-host/team", "was": reasons.ConfigMissing},
	}
	for msg, fields := range want {
		require.Contains(t, byMsg, msg)
		delete(byMsg[msg], "message")
		assert.Equal(t, fields, byMsg[msg], "%s: exactly these fields", msg)
	}
}

func TestDeletion(t *testing.T) {
	f := deployed(t, newFS("team"), rsaKey(t))
	f.bindClaim("team")
	fs := f.fs("team")

	// Deleted from the API server and the cache, the deletion seen by the
	// handler: every child goes, the claim included.
	require.NoError(t, f.hcc.Tracker().Delete(clerumv1alpha1.Resource("sharedfilesystems").WithVersion("v1alpha1"), ns, "team"))
	inf := f.deps.Informers.HCC(ns).Clerum().V1alpha1().SharedFileSystems().Informer()
	require.NoError(t, inf.GetIndexer().Delete(fs))
	f.c.ownHandlers(func(cache.ObjectName) {}).OnDelete(fs)
	f.mustSync("team")
	assert.Equal(t, []string{
		"delete deployments/wfc-team",
		"delete networkpolicies/wfc-team-ingress",
		"delete persistentvolumeclaims/wfc-team-data",
		"delete services/wfc-team",
	}, f.writes())
	f.syncCaches()
	f.mustSync("team")
	assert.Empty(t, f.writes())
	assert.False(t, f.c.state.deleted.Seen("team"), "settled once nothing is left")
}

func TestAGoneFileSystemNotSeenDeletedKeepsItsClaim(t *testing.T) {
	f := deployed(t, newFS("team"), rsaKey(t))
	// The children are in the cache: a sync that deleted them would be
	// seen.
	_, cached, err := f.indexer(&corev1.PersistentVolumeClaim{}).GetByKey(ns + "/wfc-team-data")
	require.NoError(t, err)
	require.True(t, cached, "the claim is cached")
	_, cached, err = f.indexer(&appsv1.Deployment{}).GetByKey(ns + "/wfc-team")
	require.NoError(t, err)
	require.True(t, cached, "the Deployment is cached")
	require.NoError(t, f.hcc.Tracker().Delete(clerumv1alpha1.Resource("sharedfilesystems").WithVersion("v1alpha1"), ns, "team"))
	require.NoError(t, f.deps.Informers.HCC(ns).Clerum().V1alpha1().SharedFileSystems().Informer().GetIndexer().Delete(newFS("team")))
	f.mustSync("team")
	assert.Empty(t, f.writes(), "the garbage collector follows the owner references; a claim is never an unexplained orphan")
}

func TestUnmanagedObjectsAreNotAdopted(t *testing.T) {
	unmanagedClaim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wfc-team-data", ResourceVersion: "7"}}
	f := newFixture(t, newFS("team", withHosts("alice")), jwtConfigMap(rsaKey(t)), unmanagedClaim)
	r := f.mustSync("team")
	// The create of the claim meets the unmanaged one: nothing of it is
	// written, and the Deployment is not created.
	assert.Equal(t, []string{
		"create networkpolicies/wfc-team-egress",
		"create networkpolicies/wfc-team-ingress",
		"create persistentvolumeclaims/wfc-team-data",
		"create services/wfc-team",
		"patch sharedfilesystems/team/status",
	}, f.writes())
	assert.Empty(t, f.claim("wfc-team-data").Labels, "not adopted")
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
	assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
	assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionVolumeBound).Reason)
	assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionWorkloadReady).Reason)
	assert.Equal(t, refusedRetry, r.RequeueAfter)
	assert.Equal(t, 1.0, value(t, f.c.metrics.Refused.WithLabelValues("PersistentVolumeClaim", "Unmanaged")))
	var conflict bool
	for _, e := range f.events() {
		conflict = conflict || bytes.Contains([]byte(e), []byte("UnmanagedConflict"))
	}
	assert.True(t, conflict)

	t.Run("an unmanaged Service does not stop the Deployment", func(t *testing.T) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wfc-team", ResourceVersion: "3"}}
		f := newFixture(t, newFS("team"), jwtConfigMap(rsaKey(t)), svc)
		f.mustSync("team")
		assert.Contains(t, f.writes(), "create deployments/wfc-team")
		assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
		assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
	})
}

func TestConfigMapChangesQueueEveryFileSystem(t *testing.T) {
	f := newFixture(t, newFS("a"), newFS("b"))
	h := f.c.configMapHandlers()
	// queued empties the queue and says how many keys it held.
	queued := func() int {
		n := f.c.queue.Len()
		for range n {
			k, _ := f.c.queue.Get()
			f.c.queue.Done(k)
		}
		return n
	}
	h.OnAdd(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unrelated"}}, false)
	assert.Equal(t, 0, queued())
	h.OnAdd(jwtConfigMap("k"), false)
	assert.Equal(t, 2, queued())

	// An update queues them only when the key's value changes: the
	// ConfigMap is the platform's, shared with other keys.
	other := jwtConfigMap("k")
	other.Data["OTHER"] = "changed"
	h.OnUpdate(jwtConfigMap("k"), other)
	assert.Equal(t, 0, queued(), "another key changed")
	h.OnUpdate(jwtConfigMap("k"), jwtConfigMap("k2"))
	assert.Equal(t, 2, queued(), "the key's value changed")
	dropped := jwtConfigMap("k")
	delete(dropped.Data, testOptions.JWTConfigMapKey)
	h.OnUpdate(jwtConfigMap(""), dropped)
	assert.Equal(t, 2, queued(), "the key removed, even one with an empty value")
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: ns + "/" + testOptions.JWTConfigMap})
	assert.Equal(t, 2, queued(), "the ConfigMap gone, seen as a tombstone")
}

// TestAnInformerThatCannotBeWiredFailsRun: a handler that cannot be added
// (here, to a SharedFileSystem informer already stopped) fails Run at once,
// counted in the reconciler's error counter, instead of a reconciler
// running deaf to its own kind.
func TestAnInformerThatCannotBeWiredFailsRun(t *testing.T) {
	f := newFixture(t)
	d := f.deps // a second reconciler, over informers of its own
	reg := prometheus.NewRegistry()
	d.Informers, d.Registry, d.Queues = kit.NewInformers(f.kube, f.hcc), reg, kit.NewQueues(reg, d.Clock)
	stop := make(chan struct{})
	close(stop)
	d.Informers.HCC(ns).Clerum().V1alpha1().SharedFileSystems().Informer().Run(stop) // returns at once: stopped

	c := New(d, Config{Namespace: ns, Build: testOptions, Resync: time.Minute, Workers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.Run(ctx) // without the check, it would wait for a cache that never syncs
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sharedfilesystem: wiring")
	assert.NoError(t, ctx.Err(), "Run returns at once")
	assert.Equal(t, 1.0, value(t, c.base.Errors().WithLabelValues("sharedfilesystem")))
	families, err := reg.Gather()
	require.NoError(t, err)
	var counted bool
	for _, mf := range families {
		counted = counted || mf.GetName() == "clerum_hcc_sfs_reconcile_errors_total"
	}
	assert.True(t, counted, "the error counter keeps its name")
}

func TestPlan(t *testing.T) {
	key := rsaKey(t)
	lookup := func(cm *corev1.ConfigMap) func(string) *corev1.ConfigMap {
		return func(name string) *corev1.ConfigMap {
			if cm != nil && cm.Name == name {
				return cm
			}
			return nil
		}
	}
	fs := newFS("team", withHosts("alice"))
	a := resources.Admit(lookup(jwtConfigMap(key)), testOptions)
	require.Empty(t, a.Block)
	objs := resources.Plan(fs, a, testOptions)
	require.Len(t, objs, 5, "with the egress half: the fs names a Host")
	for _, o := range objs {
		m, _ := meta.Accessor(o)
		assert.Equal(t, "team", m.GetOwnerReferences()[0].Name)
	}

	blocked := resources.Admit(lookup(nil), testOptions)
	assert.Equal(t, reasons.ConfigMissing, blocked.Block)
	assert.Nil(t, resources.Plan(fs, blocked, testOptions))
	assert.Equal(t, reasons.ConfigInvalid, resources.Admit(lookup(jwtConfigMap("x")), testOptions).Block)
}

// value reads one gauge or counter.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	require.NoError(t, m.Write(&out))
	if out.Gauge != nil {
		return out.Gauge.GetValue()
	}
	return out.Counter.GetValue()
}

// TestAForgedClaimWithHCCsLabelsIsNotTakenOver: a claim pre-created under
// the data claim's name with HCC's labels, cloning another claim or naming
// a volume of its creator's choice, is refused like an unmanaged one: no
// WFC mounts it.
func TestAForgedClaimWithHCCsLabelsIsNotTakenOver(t *testing.T) {
	for name, forge := range map[string]func(c *corev1.PersistentVolumeClaim){
		"a clone of another claim": func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "alice-workspace"}
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "alice-workspace"}
		},
		"a volume named at creation": func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName = "pvc-alice-workspace-uid"
			c.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"}
			c.Status.Phase = corev1.ClaimBound
		},
		"a static volume named at creation": func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName = "another-pv"
			c.Status.Phase = corev1.ClaimBound
		},
		"a static volume, under the mark of another claim": func(c *corev1.PersistentVolumeClaim) {
			other := c.DeepCopy()
			other.UID = "uid-hccs-own-claim"
			owner := kit.Owner{Object: newFS("team"), GVK: gvk, IdentityLabel: names.LabelSharedFileSystem}
			c.Annotations = map[string]string{mark.Annotation: kit.NewMarker(testOptions.ClaimMark).Sign(owner, other)}
			c.Spec.VolumeName = "another-pv"
			c.Status.Phase = corev1.ClaimBound
		},
	} {
		t.Run(name, func(t *testing.T) {
			fs := newFS("team", withHosts("alice"))
			forged := resources.BuildClaim(fs, testOptions)
			forged.UID, forged.ResourceVersion = "uid-forged", "7"
			forge(forged)
			f := newFixture(t, fs, jwtConfigMap(rsaKey(t)), forged)
			r := f.mustSync("team")
			assert.NotContains(t, f.writes(), "create deployments/wfc-team", "no WFC mounts it")
			assert.Equal(t, forged.Spec, f.claim("wfc-team-data").Spec, "not taken over")
			assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
			assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
			assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionVolumeBound).Reason)
			assert.Equal(t, refusedRetry, r.RequeueAfter)
			assert.Equal(t, 1.0, value(t, f.c.metrics.Refused.WithLabelValues("PersistentVolumeClaim", string(kit.CauseForeignVolume))))
			assert.Contains(t, strings.Join(f.events(), "\n"), "Warning UnmanagedConflict PersistentVolumeClaim mcp-host/wfc-team-data is not written")
		})
	}
}

func TestASizeAboveTheBoundIsNeverAskedOfTheCluster(t *testing.T) {
	t.Run("no claim and no WFC for a new file system", func(t *testing.T) {
		f := newFixture(t, newFS("team", withSize("101Gi")), jwtConfigMap(rsaKey(t)))
		f.mustSync("team")
		writes := f.writes()
		assert.NotContains(t, writes, "create persistentvolumeclaims/wfc-team-data")
		assert.NotContains(t, writes, "create deployments/wfc-team")
		vb := f.condition("team", clerumv1alpha1.ConditionVolumeBound)
		assert.Equal(t, reasons.InvalidSpec, vb.Reason)
		assert.Equal(t, "spec.size 101Gi is above HCC_SFS_MAX_SIZE (100Gi); the data claim is not created", vb.Message)
		assert.Equal(t, reasons.InvalidSpec, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
		assert.Equal(t, reasons.InvalidSpec, f.condition("team", clerumv1alpha1.ConditionWorkloadReady).Reason)
		assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
	})
	t.Run("the bound itself is allowed", func(t *testing.T) {
		f := newFixture(t, newFS("team", withSize("100Gi")), jwtConfigMap(rsaKey(t)))
		f.mustSync("team")
		assert.Contains(t, f.writes(), "create persistentvolumeclaims/wfc-team-data")
	})
	t.Run("an existing claim is not grown past it, and its WFC keeps running", func(t *testing.T) {
		f := deployed(t, newFS("team", withSize("20Gi")), rsaKey(t))
		f.bindClaim("team")
		fs := f.fs("team")
		fs.Spec.Size = ptr.To(resource.MustParse("1Ti"))
		fs.Generation = 2
		f.setFS(fs)
		f.mustSync("team")
		writes := f.writes()
		assert.NotContains(t, writes, "update persistentvolumeclaims/wfc-team-data")
		assert.NotContains(t, writes, "delete deployments/wfc-team")
		size := f.claim("wfc-team-data").Spec.Resources.Requests[corev1.ResourceStorage]
		assert.Equal(t, "20Gi", size.String())
		vb := f.condition("team", clerumv1alpha1.ConditionVolumeBound)
		assert.Equal(t, reasons.InvalidSpec, vb.Reason)
		assert.Contains(t, vb.Message, "spec.size 1Ti is above HCC_SFS_MAX_SIZE (100Gi); the claim is left as it is (20Gi, Bound)")
		assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
	})
	t.Run("a zero bound admits no size", func(t *testing.T) {
		opts := testOptions
		opts.MaxSize = resource.Quantity{}
		require.Error(t, resources.CheckSize(newFS("team", withSize("1Mi")), opts))
		require.NoError(t, resources.CheckSize(newFS("team"), opts), "no spec.size: the default applies")
	})
}

// TestOnlyTheJWTConfigMapIsWatched: the informer lists and watches the one
// ConfigMap it reads, by a field selector, not every ConfigMap of the host
// namespace.
func TestOnlyTheJWTConfigMapIsWatched(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	f.deps.Informers.Start(ctx.Done())
	defer f.deps.Informers.Shutdown() // after cancel: it waits for the informers to stop
	defer cancel()
	require.Eventually(t, f.c.configMapInformer.HasSynced, 5*time.Second, 10*time.Millisecond)
	var lists int
	for _, a := range f.kube.Actions() {
		if a.GetResource().Resource != "configmaps" || (a.GetVerb() != "list" && a.GetVerb() != "watch") {
			continue
		}
		lists++
		var fs string
		switch a := a.(type) {
		case core.ListAction:
			fs = a.GetListRestrictions().Fields.String()
		case core.WatchAction:
			fs = a.GetWatchRestrictions().Fields.String()
		}
		assert.Equal(t, "metadata.name="+testOptions.JWTConfigMap, fs, "%s", a.GetVerb())
	}
	assert.NotZero(t, lists)
}
