package sharedfs

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources/resourcestest"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

const ns = "mcp-host"

// fixture is the reconciler over kittest's fake API server, its caches
// filled through its own informers; syncSharedFileSystem is called
// directly and the exact writes asserted.
type fixture struct {
	*kittest.Fixture
	t *testing.T
	c *Controller
}

// jwtConfigMap is the platform's ConfigMap holding value under the key.
func jwtConfigMap(value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resourcestest.Options.JWTConfigMap, ResourceVersion: "1"},
		Data: map[string]string{resourcestest.Options.JWTConfigMapKey: value, "OTHER": "x"}}
}

// newFixture is the reconciler over a fake API server holding objs, its
// caches showing them.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{Fixture: kittest.NewFixture(t, objs...), t: t}
	f.c = New(f.Deps(), testConfig)
	f.SyncCaches()
	return f
}

var testConfig = Config{Namespace: ns, Build: resourcestest.Options, Resync: time.Minute, Workers: 1}

var sharedFileSystems = clerumv1alpha1.Resource("sharedfilesystems").WithVersion("v1alpha1")

// setFS replaces fs in the fake API server and the cache.
func (f *fixture) setFS(fs *clerumv1alpha1.SharedFileSystem) {
	require.NoError(f.t, f.HCC.Tracker().Update(sharedFileSystems, fs.DeepCopy(), ns))
	f.Index(fs)
}

// setConfigMap puts cm in the fake API server and the cache, as the
// platform changing it would.
func (f *fixture) setConfigMap(cm *corev1.ConfigMap) {
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	if err := f.Kube.Tracker().Update(gvr, cm.DeepCopy(), ns); err != nil {
		require.NoError(f.t, f.Kube.Tracker().Add(cm.DeepCopy()))
	}
	f.Index(cm)
}

func (f *fixture) fs(name string) *clerumv1alpha1.SharedFileSystem {
	fs, err := f.HCC.ClerumV1alpha1().SharedFileSystems(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return fs
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

func (f *fixture) sync(name string) (kit.Result, error) {
	return f.c.syncSharedFileSystem(context.Background(), cache.ObjectName{Namespace: ns, Name: name})
}

func (f *fixture) mustSync(name string) kit.Result {
	f.t.Helper()
	r, err := f.sync(name)
	require.NoError(f.t, err)
	return r
}

// status is the status last applied to the file system name.
func (f *fixture) status(name string) clerumv1alpha1.SharedFileSystemStatus {
	f.t.Helper()
	applied := kittest.Applied[*clerumv1alpha1.SharedFileSystem](f.Fixture, ns, name)
	require.NotEmpty(f.t, applied, "no status applied for %s", name)
	return applied[len(applied)-1].Status
}

func (f *fixture) condition(name, typ string) metav1.Condition {
	f.t.Helper()
	c := meta.FindStatusCondition(f.status(name).Conditions, typ)
	require.NotNil(f.t, c, "condition %s", typ)
	return *c
}

// logLines returns every log line written, each as its fields.
func (f *fixture) logLines() []map[string]any {
	f.t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.Log()), "\n") {
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
	d, err := f.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return d
}

func (f *fixture) claim(name string) *corev1.PersistentVolumeClaim {
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return c
}

// bindClaim binds fs's claim, in the API server and the cache, as the
// volume binder does: to a static volume (one not named for the claim), as
// on the project's local cluster.
func (f *fixture) bindClaim(fs string) {
	c := f.claim(names.WFCData(fs))
	c.Spec.VolumeName = "local-pv-07"
	c, err := f.Kube.CoreV1().PersistentVolumeClaims(ns).Update(context.Background(), c, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	c.Status.Phase = corev1.ClaimBound
	c, err = f.Kube.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(context.Background(), c, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.Index(c)
	f.ClearWrites()
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
	d, err := f.Kube.AppsV1().Deployments(ns).UpdateStatus(context.Background(), d, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.Index(d)
	f.ClearWrites()
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
	f.SyncCaches()
	f.Events()
	return f
}

func TestCreate(t *testing.T) {
	key := resourcestest.RSAKey(t)
	f := newFixture(t, resourcestest.NewFS("team", resourcestest.WithHosts("alice")), jwtConfigMap(key))
	f.mustSync("team")
	assert.Equal(t, created("team"), f.Writes())

	d := f.deployment("wfc-team")
	want := resources.BuildDeployment(resourcestest.NewFS("team", resourcestest.WithHosts("alice")), resources.KeyDigest(key), resourcestest.Options)
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
	f := deployed(t, resourcestest.NewFS("team", resourcestest.WithHosts("alice"), resourcestest.WithDirs("inbox")), resourcestest.RSAKey(t))
	f.mustSync("team")
	assert.Empty(t, f.Writes(), "a no-op resync writes nothing")
	assert.Empty(t, f.Events())
}

func TestPhaseTransitions(t *testing.T) {
	f := deployed(t, resourcestest.NewFS("team", resourcestest.WithHosts("alice")), resourcestest.RSAKey(t))

	// The claim binds; the WFC is not ready yet.
	f.bindClaim("team")
	f.mustSync("team")
	assert.Equal(t, []string{"patch sharedfilesystems/team/status"}, f.Writes())
	assert.Equal(t, clerumv1alpha1.FileSystemInitializing, f.status("team").Phase)
	assert.Equal(t, metav1.ConditionTrue, f.condition("team", clerumv1alpha1.ConditionVolumeBound).Status)
	assert.Equal(t, reasons.Progressing, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
	f.SyncCaches()

	// The WFC becomes available: Ready.
	f.setAvailable("team", true)
	f.mustSync("team")
	assert.Equal(t, []string{"patch sharedfilesystems/team/status"}, f.Writes())
	assert.Equal(t, clerumv1alpha1.FileSystemReady, f.status("team").Phase)
	assert.Equal(t, metav1.ConditionTrue, f.condition("team", clerumv1alpha1.ConditionReady).Status)
	assert.Equal(t, metav1.ConditionTrue, f.condition("team", clerumv1alpha1.ConditionWorkloadReady).Status)
	f.SyncCaches()
	f.mustSync("team")
	assert.Empty(t, f.Writes())

	// It stops being available: Degraded, not Initializing.
	f.setAvailable("team", false)
	f.mustSync("team")
	assert.Equal(t, []string{"patch sharedfilesystems/team/status"}, f.Writes())
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
	assert.Equal(t, metav1.ConditionFalse, f.condition("team", clerumv1alpha1.ConditionWorkloadReady).Status)
	f.SyncCaches()

	// Back: Ready again.
	f.setAvailable("team", true)
	f.mustSync("team")
	assert.Equal(t, clerumv1alpha1.FileSystemReady, f.status("team").Phase)
	assert.Equal(t, 1.0, value(t, f.c.metrics.FileSystems.WithLabelValues("Ready")))
}

func TestSpecChange(t *testing.T) {
	key := resourcestest.RSAKey(t)
	f := deployed(t, resourcestest.NewFS("team", resourcestest.WithHosts("alice")), key)

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
		}, f.Writes())
		p, err := f.Kube.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), "wfc-team-ingress", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"alice", "bob"}, p.Spec.Ingress[0].From[0].PodSelector.MatchExpressions[0].Values)
		e, err := f.Kube.NetworkingV1().NetworkPolicies(ns).Get(context.Background(), "wfc-team-egress", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"alice", "bob"}, e.Spec.PodSelector.MatchExpressions[0].Values, "the Hosts' pods may send")
		assert.Equal(t, "alice,bob", resourcestest.EnvMap(f.deployment("wfc-team").Spec.Template.Spec.Containers[0])[resources.EnvAllowedHosts])
		assert.Equal(t, int64(2), f.status("team").ObservedGeneration)
		f.SyncCaches()
	})
	t.Run("directories: the init container follows", func(t *testing.T) {
		fs := f.fs("team")
		fs.Spec.Directories = []string{"inbox"}
		fs.Generation = 3
		f.setFS(fs)
		f.mustSync("team")
		assert.Equal(t, []string{"patch sharedfilesystems/team/status", "update deployments/wfc-team"}, f.Writes())
		inits := f.deployment("wfc-team").Spec.Template.Spec.InitContainers
		require.Len(t, inits, 1)
		assert.Contains(t, inits[0].Command, "inbox")
		f.SyncCaches()
	})
	t.Run("the JWT key: the pods roll; another key of the ConfigMap: nothing", func(t *testing.T) {
		other := jwtConfigMap(key)
		other.Data["OTHER"] = "changed"
		f.setConfigMap(other)
		f.mustSync("team")
		assert.Empty(t, f.Writes())

		newKey := resourcestest.ECKey(t)
		f.setConfigMap(jwtConfigMap(newKey))
		f.mustSync("team")
		assert.Equal(t, []string{"update deployments/wfc-team"}, f.Writes())
		assert.Equal(t, resources.KeyDigest(newKey), f.deployment("wfc-team").Spec.Template.Annotations[resources.AnnotationJWTKeyDigest])
	})
}

func TestSizeGrowsNeverShrinks(t *testing.T) {
	f := deployed(t, resourcestest.NewFS("team", resourcestest.WithSize("20Gi")), resourcestest.RSAKey(t))
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
	}, f.Writes())
	size := f.claim("wfc-team-data").Spec.Resources.Requests[corev1.ResourceStorage]
	assert.Equal(t, "20Gi", size.String())
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
	vb := f.condition("team", clerumv1alpha1.ConditionVolumeBound)
	assert.Equal(t, reasons.ShrinkRefused, vb.Reason)
	assert.Equal(t, reasons.ShrinkRefused, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
	assert.Contains(t, f.Events(), "Warning ChangeRefused PersistentVolumeClaim mcp-host/wfc-team-data is not written: its storage request would shrink from 20Gi to 5Gi; a claim only grows; it is left as it is")
	assert.Equal(t, 1.0, value(t, f.c.metrics.Refused.WithLabelValues("PersistentVolumeClaim", "Shrink")))
	f.SyncCaches()

	// Growing is written.
	fs = f.fs("team")
	fs.Spec.Size = ptr.To(resource.MustParse("30Gi"))
	fs.Generation = 3
	f.setFS(fs)
	f.mustSync("team")
	assert.Equal(t, []string{"patch sharedfilesystems/team/status", "update persistentvolumeclaims/wfc-team-data"}, f.Writes())
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
		{"the key is missing", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: resourcestest.Options.JWTConfigMap},
			Data: map[string]string{"OTHER": "x"}}, reasons.ConfigMissing},
		{"the value is not a PEM public key", jwtConfigMap("not a key"), reasons.ConfigInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{resourcestest.NewFS("team")}
			if tc.cm != nil {
				objs = append(objs, tc.cm)
			}
			f := newFixture(t, objs...)
			f.mustSync("team")
			assert.Equal(t, []string{"patch sharedfilesystems/team/status"}, f.Writes(), "nothing is created")
			assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
			cr := f.condition("team", clerumv1alpha1.ConditionConfigResolved)
			assert.Equal(t, metav1.ConditionFalse, cr.Status)
			assert.Equal(t, tc.reason, cr.Reason)
			assert.Equal(t, tc.reason, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
			events := f.Events()
			require.Len(t, events, 1)
			assert.Contains(t, events[0], "Warning Blocked "+tc.reason)
			assert.Equal(t, 1.0, value(t, f.c.metrics.Blocked.WithLabelValues(tc.reason)))
		})
	}

	t.Run("a deployed file system is not rolled, and released once fixed", func(t *testing.T) {
		key := resourcestest.RSAKey(t)
		f := deployed(t, resourcestest.NewFS("team", resourcestest.WithHosts("alice", "bob")), key)
		f.setConfigMap(jwtConfigMap("garbage"))
		fs := f.fs("team")
		fs.Spec.HostRefs = []string{"alice"}
		fs.Generation = 2
		f.setFS(fs)
		f.mustSync("team")
		// Only the revocation of bob reaches the cluster.
		assert.Equal(t, []string{"patch sharedfilesystems/team/status", "update networkpolicies/wfc-team-egress",
			"update networkpolicies/wfc-team-ingress"}, f.Writes(), "bob loses both halves")
		assert.Equal(t, resources.KeyDigest(key), f.deployment("wfc-team").Spec.Template.Annotations[resources.AnnotationJWTKeyDigest])
		assert.Len(t, f.Events(), 1)
		f.SyncCaches()
		f.mustSync("team")
		assert.Empty(t, f.Writes())
		assert.Empty(t, f.Events(), "one event per block")

		f.setConfigMap(jwtConfigMap(key))
		f.mustSync("team")
		assert.Equal(t, []string{"patch sharedfilesystems/team/status", "update deployments/wfc-team"}, f.Writes())
		events := f.Events()
		require.Len(t, events, 1)
		assert.Contains(t, events[0], "Normal Released")
	})
}

// TestTheBlockedGaugeCountsTheFileSystemsBlockedNow: each blocked file
// system counts once under its reason, until it is released or gone.
func TestTheBlockedGaugeCountsTheFileSystemsBlockedNow(t *testing.T) {
	f := newFixture(t, resourcestest.NewFS("a"), resourcestest.NewFS("b"))
	blocked := func(reason string) float64 { return value(t, f.c.metrics.Blocked.WithLabelValues(reason)) }
	f.mustSync("a")
	f.mustSync("b")
	f.mustSync("b")
	assert.Equal(t, 2.0, blocked(reasons.ConfigMissing), "one each, however often synced")

	require.NoError(t, f.HCC.Tracker().Delete(sharedFileSystems, ns, "a"))
	f.Unindex(resourcestest.NewFS("a"))
	f.mustSync("a")
	assert.Equal(t, 1.0, blocked(reasons.ConfigMissing), "a file system gone is not blocked")

	f.setConfigMap(jwtConfigMap("not a key"))
	f.mustSync("b")
	assert.Equal(t, 0.0, blocked(reasons.ConfigMissing))
	assert.Equal(t, 1.0, blocked(reasons.ConfigInvalid), "moved to its new reason")

	f.setConfigMap(jwtConfigMap(resourcestest.RSAKey(t)))
	f.mustSync("b")
	assert.Equal(t, 0.0, blocked(reasons.ConfigInvalid), "released")
}

// TestBlockAndReleaseAreLoggedUnderTheObject: the reconciler's lines name
// it and the file system as namespace/name, under the keys every
// reconciler uses (docs/reconcilers.md#logs).
func TestBlockAndReleaseAreLoggedUnderTheObject(t *testing.T) {
	f := newFixture(t, resourcestest.NewFS("team"))
	f.mustSync("team")
	f.setConfigMap(jwtConfigMap(resourcestest.RSAKey(t)))
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
	f := deployed(t, resourcestest.NewFS("team"), resourcestest.RSAKey(t))
	f.bindClaim("team")
	fs := f.fs("team")

	// Deleted from the API server and the cache, the deletion seen by the
	// handler: every child goes, the claim included.
	require.NoError(t, f.HCC.Tracker().Delete(sharedFileSystems, ns, "team"))
	f.Unindex(fs)
	f.c.ownHandlers(func(cache.ObjectName) {}).OnDelete(fs)
	f.mustSync("team")
	assert.Equal(t, []string{
		"delete deployments/wfc-team",
		"delete networkpolicies/wfc-team-ingress",
		"delete persistentvolumeclaims/wfc-team-data",
		"delete services/wfc-team",
	}, f.Writes())
	f.SyncCaches()
	f.mustSync("team")
	assert.Empty(t, f.Writes())
	assert.False(t, f.c.state.deleted.Seen("team"), "settled once nothing is left")
}

func TestAGoneFileSystemNotSeenDeletedKeepsItsClaim(t *testing.T) {
	f := deployed(t, resourcestest.NewFS("team"), resourcestest.RSAKey(t))
	// The children are in the cache: a sync that deleted them would be
	// seen.
	_, err := f.c.claims.PersistentVolumeClaims(ns).Get("wfc-team-data")
	require.NoError(t, err, "the claim is cached")
	_, err = f.c.deployments.Deployments(ns).Get("wfc-team")
	require.NoError(t, err, "the Deployment is cached")
	require.NoError(t, f.HCC.Tracker().Delete(sharedFileSystems, ns, "team"))
	f.Unindex(resourcestest.NewFS("team"))
	f.mustSync("team")
	assert.Empty(t, f.Writes(), "the garbage collector follows the owner references; a claim is never an unexplained orphan")
}

func TestUnmanagedObjectsAreNotAdopted(t *testing.T) {
	unmanagedClaim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wfc-team-data", ResourceVersion: "7"}}
	f := newFixture(t, resourcestest.NewFS("team", resourcestest.WithHosts("alice")), jwtConfigMap(resourcestest.RSAKey(t)), unmanagedClaim)
	r := f.mustSync("team")
	// The create of the claim meets the unmanaged one: nothing of it is
	// written, and the Deployment is not created.
	assert.Equal(t, []string{
		"create networkpolicies/wfc-team-egress",
		"create networkpolicies/wfc-team-ingress",
		"create persistentvolumeclaims/wfc-team-data",
		"create services/wfc-team",
		"patch sharedfilesystems/team/status",
	}, f.Writes())
	assert.Empty(t, f.claim("wfc-team-data").Labels, "not adopted")
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
	assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
	assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionVolumeBound).Reason)
	assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionWorkloadReady).Reason)
	assert.Equal(t, refusedRetry, r.RequeueAfter)
	assert.Equal(t, 1.0, value(t, f.c.metrics.Refused.WithLabelValues("PersistentVolumeClaim", "Unmanaged")))
	var conflict bool
	for _, e := range f.Events() {
		conflict = conflict || bytes.Contains([]byte(e), []byte("UnmanagedConflict"))
	}
	assert.True(t, conflict)

	t.Run("an unmanaged Service does not stop the Deployment", func(t *testing.T) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wfc-team", ResourceVersion: "3"}}
		f := newFixture(t, resourcestest.NewFS("team"), jwtConfigMap(resourcestest.RSAKey(t)), svc)
		f.mustSync("team")
		assert.Contains(t, f.Writes(), "create deployments/wfc-team")
		assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
		assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
	})
}

func TestConfigMapChangesQueueEveryFileSystem(t *testing.T) {
	f := newFixture(t, resourcestest.NewFS("a"), resourcestest.NewFS("b"))
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
	delete(dropped.Data, resourcestest.Options.JWTConfigMapKey)
	h.OnUpdate(jwtConfigMap(""), dropped)
	assert.Equal(t, 2, queued(), "the key removed, even one with an empty value")
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: ns + "/" + resourcestest.Options.JWTConfigMap})
	assert.Equal(t, 2, queued(), "the ConfigMap gone, seen as a tombstone")
}

// TestAnInformerThatCannotBeWiredFailsRun: a handler that cannot be added
// (here, to a SharedFileSystem informer already stopped) fails Run at once,
// counted in the reconciler's error counter, instead of a reconciler
// running deaf to its own kind.
func TestAnInformerThatCannotBeWiredFailsRun(t *testing.T) {
	f := kittest.NewFixture(t)
	stop := make(chan struct{})
	close(stop)
	f.Deps().Informers.HCC(ns).Clerum().V1alpha1().SharedFileSystems().Informer().Run(stop) // returns at once: stopped

	c := New(f.Deps(), testConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.Run(ctx) // without the check, it would wait for a cache that never syncs
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sharedfilesystem: wiring")
	assert.NoError(t, ctx.Err(), "Run returns at once, its ConfigMap informer stopped")
	assert.Equal(t, 1.0, value(t, c.base.Errors().WithLabelValues("sharedfilesystem")))
	families, err := f.Registry.Gather()
	require.NoError(t, err)
	var counted bool
	for _, mf := range families {
		counted = counted || mf.GetName() == "clerum_hcc_sfs_reconcile_errors_total"
	}
	assert.True(t, counted, "the error counter keeps its name")
}

func TestPlan(t *testing.T) {
	key := resourcestest.RSAKey(t)
	lookup := func(cm *corev1.ConfigMap) func(string) *corev1.ConfigMap {
		return func(name string) *corev1.ConfigMap {
			if cm != nil && cm.Name == name {
				return cm
			}
			return nil
		}
	}
	fs := resourcestest.NewFS("team", resourcestest.WithHosts("alice"))
	a := resources.Admit(lookup(jwtConfigMap(key)), resourcestest.Options)
	require.Empty(t, a.Block)
	objs := resources.Plan(fs, a, resourcestest.Options)
	require.Len(t, objs, 5, "with the egress half: the fs names a Host")
	for _, o := range objs {
		m, _ := meta.Accessor(o)
		assert.Equal(t, "team", m.GetOwnerReferences()[0].Name)
	}

	blocked := resources.Admit(lookup(nil), resourcestest.Options)
	assert.Equal(t, reasons.ConfigMissing, blocked.Block)
	assert.Nil(t, resources.Plan(fs, blocked, resourcestest.Options))
	assert.Equal(t, reasons.ConfigInvalid, resources.Admit(lookup(jwtConfigMap("x")), resourcestest.Options).Block)
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
			owner := kit.Owner{Object: resourcestest.NewFS("team"), GVK: gvk, IdentityLabel: names.LabelSharedFileSystem}
			c.Annotations = map[string]string{mark.Annotation: kit.NewMarker(resourcestest.Options.ClaimMark).Sign(owner, other)}
			c.Spec.VolumeName = "another-pv"
			c.Status.Phase = corev1.ClaimBound
		},
	} {
		t.Run(name, func(t *testing.T) {
			fs := resourcestest.NewFS("team", resourcestest.WithHosts("alice"))
			forged := resources.BuildClaim(fs, resourcestest.Options)
			forged.UID, forged.ResourceVersion = "uid-forged", "7"
			forge(forged)
			f := newFixture(t, fs, jwtConfigMap(resourcestest.RSAKey(t)), forged)
			r := f.mustSync("team")
			assert.NotContains(t, f.Writes(), "create deployments/wfc-team", "no WFC mounts it")
			assert.Equal(t, forged.Spec, f.claim("wfc-team-data").Spec, "not taken over")
			assert.Equal(t, clerumv1alpha1.FileSystemDegraded, f.status("team").Phase)
			assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionReady).Reason)
			assert.Equal(t, reasons.NotOwned, f.condition("team", clerumv1alpha1.ConditionVolumeBound).Reason)
			assert.Equal(t, refusedRetry, r.RequeueAfter)
			assert.Equal(t, 1.0, value(t, f.c.metrics.Refused.WithLabelValues("PersistentVolumeClaim", string(kit.CauseForeignVolume))))
			assert.Contains(t, strings.Join(f.Events(), "\n"), "Warning UnmanagedConflict PersistentVolumeClaim mcp-host/wfc-team-data is not written")
		})
	}
}

func TestASizeAboveTheBoundIsNeverAskedOfTheCluster(t *testing.T) {
	t.Run("no claim and no WFC for a new file system", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewFS("team", resourcestest.WithSize("101Gi")), jwtConfigMap(resourcestest.RSAKey(t)))
		f.mustSync("team")
		writes := f.Writes()
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
		f := newFixture(t, resourcestest.NewFS("team", resourcestest.WithSize("100Gi")), jwtConfigMap(resourcestest.RSAKey(t)))
		f.mustSync("team")
		assert.Contains(t, f.Writes(), "create persistentvolumeclaims/wfc-team-data")
	})
	t.Run("an existing claim is not grown past it, and its WFC keeps running", func(t *testing.T) {
		f := deployed(t, resourcestest.NewFS("team", resourcestest.WithSize("20Gi")), resourcestest.RSAKey(t))
		f.bindClaim("team")
		fs := f.fs("team")
		fs.Spec.Size = ptr.To(resource.MustParse("1Ti"))
		fs.Generation = 2
		f.setFS(fs)
		f.mustSync("team")
		writes := f.Writes()
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
		opts := resourcestest.Options
		opts.MaxSize = resource.Quantity{}
		require.Error(t, resources.CheckSize(resourcestest.NewFS("team", resourcestest.WithSize("1Mi")), opts))
		require.NoError(t, resources.CheckSize(resourcestest.NewFS("team"), opts), "no spec.size: the default applies")
	})
}

// TestTheHostOperatorMayAskForTheSameConfigMap: by default the Host
// operator's ConfigMap and the JWT key ConfigMap are one, mcp-host-config,
// which the Host operator takes from kit.Informers.ConfigMap with a
// transform that keeps only its existence: this reconciler, which reads
// the key's value, builds beside it with an informer of its own, and its
// cache holds the value.
func TestTheHostOperatorMayAskForTheSameConfigMap(t *testing.T) {
	f := kittest.NewFixture(t, jwtConfigMap(resourcestest.RSAKey(t)))
	hosts := f.Deps().Informers.ConfigMap(ns, resourcestest.Options.JWTConfigMap, kit.Transform{Name: "existence-only", Func: func(obj any) (any, error) {
		cm := obj.(*corev1.ConfigMap)
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}, nil
	}})
	var c *Controller
	require.NotPanics(t, func() { c = New(f.Deps(), testConfig) })
	f.SyncCaches()
	assert.NotSame(t, hosts, c.configMapInformer)
	assert.NotNil(t, c.configMap(resourcestest.Options.JWTConfigMap), "the JWT key ConfigMap is cached")
	assert.NotEmpty(t, c.configMap(resourcestest.Options.JWTConfigMap).Data[resourcestest.Options.JWTConfigMapKey], "with its key's value")
}

// TestOnlyTheJWTConfigMapIsWatched: the informer lists and watches the one
// ConfigMap it reads, by a field selector, not every ConfigMap of the host
// namespace.
func TestOnlyTheJWTConfigMapIsWatched(t *testing.T) {
	f := newFixture(t)
	f.AssertWatchesOnlyName("configmaps", resourcestest.Options.JWTConfigMap, f.c.configMapInformer.HasSynced)
}
