package globalfs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// testSeedKey signs the seed Jobs of the tests.
var testSeedKey = mark.NewKey("test-hmac-secret", mark.PurposeSeedJob)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// fixture is the reconciler over kittest's fake API server, its caches
// seeded from it; syncGlobalFileSystem is called directly and the exact
// writes asserted.
type fixture struct {
	*kittest.Fixture
	t *testing.T
	c *Controller
	// seen counts the statuses of each GlobalFileSystem statuses returned.
	seen map[string]int
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	f := &fixture{Fixture: kittest.NewFixture(t, objs...), t: t, seen: map[string]int{}}
	f.c = New(f.Deps(), Config{Namespace: resourcestest.Namespace, Build: resourcestest.Options, Resync: time.Minute, Workers: 1, SeedKey: testSeedKey})
	require.NoError(t, f.c.base.Err(), "the reconciler is wired")
	f.SyncCaches()
	return f
}

// setGFS stores g in the fake API server and the cache.
func (f *fixture) setGFS(g *clerumv1alpha1.GlobalFileSystem) {
	gvr := clerumv1alpha1.Resource("globalfilesystems").WithVersion("v1alpha1")
	if _, err := f.HCC.Tracker().Get(gvr, g.Namespace, g.Name); err == nil {
		require.NoError(f.t, f.HCC.Tracker().Update(gvr, g.DeepCopy(), g.Namespace))
	} else {
		require.NoError(f.t, f.HCC.Tracker().Add(g.DeepCopy()))
	}
	f.Index(g)
}

// sync runs one sync of name.
func (f *fixture) sync(name string) (kit.Result, error) {
	return f.c.syncGlobalFileSystem(context.Background(), cache.ObjectName{Namespace: resourcestest.Namespace, Name: name})
}

func (f *fixture) mustSync(name string) kit.Result {
	f.t.Helper()
	res, err := f.sync(name)
	require.NoError(f.t, err)
	return res
}

// writes returns the writes to the children since the last call (the
// statuses are statuses'), as "verb resource/name", and forgets them.
func (f *fixture) writes() []string {
	var out []string
	for _, w := range f.Writes() {
		if !strings.HasPrefix(w, "patch globalfilesystems/") {
			out = append(out, w)
		}
	}
	f.ClearWrites()
	return out
}

// statuses returns the statuses applied since the last call, by
// GlobalFileSystem name.
func (f *fixture) statuses() []clerumv1alpha1.GlobalFileSystemStatus {
	list, err := f.HCC.ClerumV1alpha1().GlobalFileSystems(resourcestest.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(f.t, err)
	var out []clerumv1alpha1.GlobalFileSystemStatus
	for _, g := range list.Items {
		applied := kittest.Applied[*clerumv1alpha1.GlobalFileSystem](f.Fixture, resourcestest.Namespace, g.Name)
		for _, a := range applied[min(f.seen[g.Name], len(applied)):] {
			out = append(out, a.Status)
		}
		f.seen[g.Name] = len(applied)
	}
	return out
}

// lastStatus returns the one status applied since the last call.
func (f *fixture) lastStatus() clerumv1alpha1.GlobalFileSystemStatus {
	f.t.Helper()
	s := f.statuses()
	require.Len(f.t, s, 1, "want exactly one status write")
	return s[0]
}

// adopt caches what the fake API server holds for g's children and gives
// g the status st, as the informers would after a sync.
func (f *fixture) adopt(g *clerumv1alpha1.GlobalFileSystem, st clerumv1alpha1.GlobalFileSystemStatus) *clerumv1alpha1.GlobalFileSystem {
	for _, o := range []struct {
		gvr  schema.GroupVersionResource
		name string
	}{
		{appsv1.SchemeGroupVersion.WithResource("deployments"), names.GFSCWorkload(g.Name)},
		{corev1.SchemeGroupVersion.WithResource("services"), names.GFSCWorkload(g.Name)},
		{networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), names.GFSCEgressPolicy(g.Name)},
		{batchv1.SchemeGroupVersion.WithResource("jobs"), resources.SeedJobName(g.Name)},
	} {
		if obj, err := f.Kube.Tracker().Get(o.gvr, resourcestest.Namespace, o.name); err == nil {
			f.Index(obj)
		}
	}
	g = g.DeepCopy()
	g.Status = st
	f.setGFS(g)
	return g
}

// setAvailable marks name's Deployment available (or not).
func (f *fixture) setAvailable(name string, available bool) {
	obj, err := f.Kube.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), resourcestest.Namespace, names.GFSCWorkload(name))
	require.NoError(f.t, err)
	d := obj.(*appsv1.Deployment).DeepCopy()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation}
	if available {
		d.Status.AvailableReplicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas = 1, 1, 1
	}
	require.NoError(f.t, f.Kube.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), d, resourcestest.Namespace))
	f.Index(d)
	f.ClearWrites()
}

// setJob gives name's seed Job a finished condition of typ.
func (f *fixture) setJob(name string, typ batchv1.JobConditionType) {
	gvr := batchv1.SchemeGroupVersion.WithResource("jobs")
	obj, err := f.Kube.Tracker().Get(gvr, resourcestest.Namespace, resources.SeedJobName(name))
	require.NoError(f.t, err)
	j := obj.(*batchv1.Job).DeepCopy()
	j.Status.Conditions = []batchv1.JobCondition{{Type: typ, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
	require.NoError(f.t, f.Kube.Tracker().Update(gvr, j, resourcestest.Namespace))
	f.Index(j)
	f.ClearWrites()
}

func condition(st clerumv1alpha1.GlobalFileSystemStatus, typ string) metav1.Condition {
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

var creates = []string{
	"create deployments/gfsc-main",
	"create jobs/gfsc-main-seed",
	"create networkpolicies/gfsc-main-egress",
	"create services/gfsc-main",
	"update jobs/gfsc-main-seed", // its mark, once it has a UID
}

// converge syncs a fresh GFS to Ready: children created, Deployment
// available, seed Job complete, status adopted.
func converge(t *testing.T, f *fixture, g *clerumv1alpha1.GlobalFileSystem) *clerumv1alpha1.GlobalFileSystem {
	t.Helper()
	f.mustSync(g.Name)
	g = f.adopt(g, f.lastStatus())
	f.writes()
	f.setAvailable(g.Name, true)
	f.setJob(g.Name, batchv1.JobComplete)
	f.mustSync(g.Name)
	st := f.lastStatus()
	require.Equal(t, clerumv1alpha1.FileSystemReady, st.Phase)
	return f.adopt(g, st)
}

func TestSyncCreatesTheChildrenAndReportsInitializing(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	f.mustSync("main")
	// The write list is sorted; the order of the creates is pinned here:
	// the egress policy first, so no pod starts unisolated.
	var order []string
	for _, a := range f.Kube.Actions() {
		if a.GetVerb() == "create" {
			order = append(order, a.GetResource().Resource)
		}
	}
	assert.Equal(t, []string{"networkpolicies", "services", "deployments", "jobs"}, order)
	assert.Equal(t, creates, f.writes())

	st := f.lastStatus()
	assert.Equal(t, clerumv1alpha1.FileSystemInitializing, st.Phase)
	assert.False(t, st.RootSeeded)
	assert.Equal(t, "http://gfsc-main.gfs.svc.cluster.local:8087", st.Endpoint)
	assert.Equal(t, int64(1), st.ObservedGeneration)
	assert.Equal(t, metav1.ConditionTrue, condition(st, clerumv1alpha1.ConditionConfigResolved).Status)
	assert.Equal(t, reasons.SeedPending, condition(st, clerumv1alpha1.ConditionRootSeeded).Reason)
	assert.Equal(t, reasons.Progressing, condition(st, clerumv1alpha1.ConditionReady).Reason)
	assert.Equal(t, metav1.ConditionFalse, condition(st, clerumv1alpha1.ConditionWorkloadReady).Status)

	obj, err := f.Kube.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), resourcestest.Namespace, "gfsc-main")
	require.NoError(t, err)
	d := obj.(*appsv1.Deployment)
	require.Len(t, d.OwnerReferences, 1)
	assert.Equal(t, "main", d.OwnerReferences[0].Name)
	raw, _ := json.Marshal(d)
	assert.NotContains(t, string(raw), "hunter2", "the connection string is referenced, never inlined")
}

func TestSyncOfAConvergedGFSWritesNothing(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	converge(t, f, resourcestest.NewGFS("main"))
	f.writes()
	for range 2 {
		f.mustSync("main")
		assert.Empty(t, f.writes())
		assert.Empty(t, f.statuses())
	}
	assert.Equal(t, 1.0, value(t, f.c.metrics.FileSystems.WithLabelValues("Ready")))
}

func TestReadinessTransitions(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	f.mustSync("main")
	g := f.adopt(resourcestest.NewGFS("main"), f.lastStatus())

	// Available, but the seed has not completed: still Initializing.
	f.setAvailable("main", true)
	f.mustSync("main")
	st := f.lastStatus()
	assert.Equal(t, clerumv1alpha1.FileSystemInitializing, st.Phase)
	assert.Equal(t, reasons.SeedPending, condition(st, clerumv1alpha1.ConditionReady).Reason)
	g = f.adopt(g, st)

	f.setJob("main", batchv1.JobComplete)
	f.mustSync("main")
	st = f.lastStatus()
	assert.Equal(t, clerumv1alpha1.FileSystemReady, st.Phase)
	assert.True(t, st.RootSeeded)
	assert.Equal(t, metav1.ConditionTrue, condition(st, clerumv1alpha1.ConditionReady).Status)
	assert.Equal(t, reasons.Seeded, condition(st, clerumv1alpha1.ConditionRootSeeded).Reason)
	g = f.adopt(g, st)

	// Lost its pod: Degraded, and stays so until it is back.
	f.setAvailable("main", false)
	f.mustSync("main")
	st = f.lastStatus()
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, st.Phase)
	assert.Equal(t, reasons.Progressing, condition(st, clerumv1alpha1.ConditionWorkloadReady).Reason)
	assert.True(t, st.RootSeeded, "a seeded root stays seeded")
	g = f.adopt(g, st)
	f.mustSync("main")
	assert.Empty(t, f.statuses(), "still Degraded: nothing to write")

	f.setAvailable("main", true)
	f.mustSync("main")
	assert.Equal(t, clerumv1alpha1.FileSystemReady, f.lastStatus().Phase)
	assert.Empty(t, f.writes(), "a seeded GFS never runs the seed again")
	_ = g
}

func TestSeedJobIsNotRecreatedOnceSeeded(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	g := converge(t, f, resourcestest.NewGFS("main"))
	// The TTL controller removes the finished Job.
	j, err := f.Kube.Tracker().Get(batchv1.SchemeGroupVersion.WithResource("jobs"), resourcestest.Namespace, "gfsc-main-seed")
	require.NoError(t, err)
	f.Unindex(j)
	f.mustSync(g.Name)
	assert.Empty(t, f.writes())
	assert.Empty(t, f.statuses())
}

func TestSeedFailureDegradesAndIsReportedOnce(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	f.mustSync("main")
	g := f.adopt(resourcestest.NewGFS("main"), f.lastStatus())
	f.setAvailable("main", true)
	f.setJob("main", batchv1.JobFailed)
	f.Events()

	f.mustSync("main")
	st := f.lastStatus()
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, st.Phase)
	assert.Equal(t, reasons.SeedFailed, condition(st, clerumv1alpha1.ConditionReady).Reason)
	assert.Equal(t, reasons.SeedFailed, condition(st, clerumv1alpha1.ConditionRootSeeded).Reason)
	assert.Contains(t, condition(st, clerumv1alpha1.ConditionRootSeeded).Message, "BackoffLimitExceeded")
	assert.False(t, st.RootSeeded)
	assert.Empty(t, f.writes(), "a failed Job is kept for its logs, not re-created at once")
	assert.Equal(t, []string{"Warning SeedFailed " + condition(st, clerumv1alpha1.ConditionRootSeeded).Message}, f.Events())

	f.adopt(g, st)
	f.mustSync("main")
	assert.Empty(t, f.Events())
	assert.Empty(t, f.statuses())
}

func TestRotatedConfigReplacesAnUnfinishedSeedAndRollsThePods(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	f.mustSync("main")
	f.adopt(resourcestest.NewGFS("main"), f.lastStatus())
	f.writes()
	s := resourcestest.PGSecret()
	s.Data[resourcestest.Options.PostgresSecretKey] = []byte("postgres://gfsc:rotated@db:5432/gfs")
	s.ResourceVersion = "2"
	f.Index(s)

	f.mustSync("main")
	assert.Equal(t, []string{"delete jobs/gfsc-main-seed", "update deployments/gfsc-main"}, f.writes())
}

func TestDriveChangeRollsAndSeedsTheNewDrive(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	g := converge(t, f, resourcestest.NewGFS("main"))
	f.writes()
	g = g.DeepCopy()
	g.Spec.DriveName, g.Generation = "archive", 2
	f.setGFS(g)

	// First the reset of rootSeeded, on its own.
	_, err := f.sync("main")
	require.ErrorIs(t, err, kit.ErrCacheBehind)
	assert.Empty(t, f.writes())
	st := f.lastStatus()
	assert.False(t, st.RootSeeded)
	g = f.adopt(g, st)

	// Then the roll, and the old drive's Job replaced.
	f.mustSync("main")
	assert.Equal(t, []string{"delete jobs/gfsc-main-seed", "update deployments/gfsc-main"}, f.writes())
	f.adopt(g, f.lastStatus())
	// The old Job's deletion reaches the cache.
	f.Unindex(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: resourcestest.Namespace, Name: "gfsc-main-seed"}})
	f.mustSync("main")
	assert.Equal(t, []string{"create jobs/gfsc-main-seed", "update jobs/gfsc-main-seed"}, f.writes())
	obj, err := f.Kube.Tracker().Get(batchv1.SchemeGroupVersion.WithResource("jobs"), resourcestest.Namespace, "gfsc-main-seed")
	require.NoError(t, err)
	assert.Equal(t, resources.SeedArgs("archive"), obj.(*batchv1.Job).Spec.Template.Spec.Containers[0].Args)
}

func TestMissingOrInvalidConfigBlocksEverything(t *testing.T) {
	noKey := resourcestest.PGSecret()
	noKey.Data = map[string][]byte{"other": []byte("x")}
	cases := map[string]struct {
		objs    []runtime.Object
		reason  string
		mention string
	}{
		"no Secret":        {objs: []runtime.Object{resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM)}, reason: reasons.ConfigMissing, mention: "Secret gfs-controller-db does not exist"},
		"no Secret key":    {objs: []runtime.Object{noKey, resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM)}, reason: reasons.ConfigMissing, mention: "has no key connection-string"},
		"no ConfigMap":     {objs: []runtime.Object{resourcestest.PGSecret()}, reason: reasons.ConfigMissing, mention: "ConfigMap gfs-config does not exist"},
		"no ConfigMap key": {objs: []runtime.Object{resourcestest.PGSecret(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: resourcestest.Namespace, Name: "gfs-config"}}}, reason: reasons.ConfigMissing, mention: "has no key jwt-public-key"},
		"not a PEM":        {objs: []runtime.Object{resourcestest.PGSecret(), resourcestest.JWTConfigMap("not a key")}, reason: reasons.ConfigInvalid, mention: "not a usable public key"},
		"a private key":    {objs: []runtime.Object{resourcestest.PGSecret(), resourcestest.JWTConfigMap("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")}, reason: reasons.ConfigInvalid, mention: "not a usable public key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, append(tc.objs, resourcestest.NewGFS("main"))...)
			f.mustSync("main")
			assert.Empty(t, f.writes(), "nothing is created")
			st := f.lastStatus()
			assert.Equal(t, clerumv1alpha1.FileSystemDegraded, st.Phase)
			cr := condition(st, clerumv1alpha1.ConditionConfigResolved)
			assert.Equal(t, metav1.ConditionFalse, cr.Status)
			assert.Equal(t, tc.reason, cr.Reason)
			assert.Contains(t, cr.Message, tc.mention)
			assert.Equal(t, tc.reason, condition(st, clerumv1alpha1.ConditionReady).Reason)
			ev := f.Events()
			require.Len(t, ev, 1)
			assert.True(t, strings.HasPrefix(ev[0], "Warning Blocked "), ev[0])
			raw, _ := json.Marshal(st)
			assert.NotContains(t, string(raw), "hunter2")
		})
	}
}

func TestConfigLostAfterDeployingLeavesTheWorkloadAlone(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	g := converge(t, f, resourcestest.NewGFS("main"))
	f.writes()
	f.Events()
	f.Unindex(resourcestest.PGSecret())

	f.mustSync("main")
	assert.Empty(t, f.writes(), "nothing rolled or deleted")
	st := f.lastStatus()
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, st.Phase)
	assert.Equal(t, metav1.ConditionTrue, condition(st, clerumv1alpha1.ConditionWorkloadReady).Status, "what runs keeps running")
	assert.Equal(t, "http://gfsc-main.gfs.svc.cluster.local:8087", st.Endpoint)
	f.adopt(g, st)

	f.Index(resourcestest.PGSecret())
	f.mustSync("main")
	assert.Empty(t, f.writes())
	assert.Equal(t, clerumv1alpha1.FileSystemReady, f.lastStatus().Phase)
	ev := f.Events()
	require.Len(t, ev, 2)
	assert.True(t, strings.HasPrefix(ev[1], "Normal Released "), ev[1])
}

// A block is one Warning however many syncs it lasts, its release one
// Normal event; a GlobalFileSystem deleted while blocked is forgotten, so
// a later one of the same name, blocked too, is reported again.
func TestABlockIsReportedOnceAndForgottenWithItsGlobalFileSystem(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret())
	for range 3 {
		f.mustSync("main")
	}
	ev := f.Events()
	require.Len(t, ev, 1, "one event for the block: %v", ev)
	assert.True(t, strings.HasPrefix(ev[0], "Warning Blocked "+reasons.ConfigMissing), ev[0])

	f.Unindex(resourcestest.NewGFS("main"))
	f.mustSync("main") // gone
	later := resourcestest.NewGFS("main")
	later.UID = "uid-a-later-main"
	f.setGFS(later)
	f.mustSync("main")
	ev = f.Events()
	require.Len(t, ev, 1, "the later one's block is its own: %v", ev)
	assert.True(t, strings.HasPrefix(ev[0], "Warning Blocked "), ev[0])

	f.Index(resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	f.mustSync("main")
	f.mustSync("main")
	assert.Equal(t, []string{"Normal Released no longer blocked (was " + reasons.ConfigMissing + ")"}, f.Events())
}

func TestUnmanagedObjectHoldingANameIsNotAdopted(t *testing.T) {
	squatter := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: resourcestest.Namespace, Name: "gfsc-main", ResourceVersion: "7"}}
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM), squatter)
	res := f.mustSync("main")
	assert.Equal(t, []string{
		"create deployments/gfsc-main",
		"create jobs/gfsc-main-seed",
		"create networkpolicies/gfsc-main-egress",
		"create services/gfsc-main",
		"update jobs/gfsc-main-seed",
	}, f.writes(), "the Service create meets the unmanaged object and stops; the others go on")
	assert.Equal(t, refusedRetry, res.RequeueAfter)
	st := f.lastStatus()
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, st.Phase)
	assert.Equal(t, reasons.NotOwned, condition(st, clerumv1alpha1.ConditionReady).Reason)
	assert.Empty(t, st.Endpoint)
	obj, err := f.Kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("services"), resourcestest.Namespace, "gfsc-main")
	require.NoError(t, err)
	assert.Empty(t, obj.(*corev1.Service).Labels, "left as it is")
	ev := f.Events()
	require.NotEmpty(t, ev)
	assert.Contains(t, ev[0], reasons.EventUnmanagedConflict)
	assert.Equal(t, 1.0, value(t, f.c.metrics.Refused.WithLabelValues("Service", string(kit.CauseUnmanaged))))
}

// gfsc and its seed hold the connection string: they never start while
// their egress policy's name is held by an object HCC does not own.
func TestNoRuntimeWithoutItsEgressPolicy(t *testing.T) {
	squatter := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: resourcestest.Namespace, Name: "gfsc-main-egress", ResourceVersion: "7"}}
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM), squatter)
	res := f.mustSync("main")
	assert.Equal(t, []string{
		"create networkpolicies/gfsc-main-egress",
		"create services/gfsc-main",
	}, f.writes(), "no Deployment and no seed Job without the policy")
	assert.Equal(t, refusedRetry, res.RequeueAfter)
	st := f.lastStatus()
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, st.Phase)
	assert.Equal(t, reasons.NotOwned, condition(st, clerumv1alpha1.ConditionReady).Reason)
}

func TestDeletionRemovesTheChildren(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	f.mustSync("main")
	g := f.adopt(resourcestest.NewGFS("main"), f.lastStatus())
	f.writes()
	f.Unindex(g)

	f.mustSync("main")
	assert.ElementsMatch(t, []string{
		"delete deployments/gfsc-main",
		"delete services/gfsc-main",
		"delete networkpolicies/gfsc-main-egress",
		"delete jobs/gfsc-main-seed",
	}, f.writes())
	assert.Empty(t, f.statuses())
}

// eventful takes a converged GlobalFileSystem main through what makes the
// reconciler write events and log lines where its configuration is at
// stake: a block of an invalid JWT key beside the Postgres Secret and its
// release, then a rotated connection string, read from the API server,
// whose roll fails: synced through the loop, which logs the failure.
func eventful(t *testing.T, f *fixture) {
	t.Helper()
	g := converge(t, f, resourcestest.NewGFS("main"))
	f.Index(resourcestest.JWTConfigMap("not a key"))
	f.mustSync("main")
	g = f.adopt(g, f.lastStatus())
	f.Index(resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	f.mustSync("main")
	f.adopt(g, f.lastStatus())

	rotated := resourcestest.PGSecret()
	rotated.Data[resourcestest.Options.PostgresSecretKey] = []byte("postgres://gfsc:hunter2-rotated@control-postgres.control-plane:5432/gfs")
	rotated.ResourceVersion = "2"
	require.NoError(t, f.Kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), rotated, resourcestest.Namespace))
	f.Index(rotated)
	f.Kube.PrependReactor("update", "deployments", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("the API server is restarting")
	})
	f.c.queue.Add(cache.ObjectName{Namespace: resourcestest.Namespace, Name: "main"})
	require.True(t, f.c.base.Loop().ProcessNext(context.Background()))
}

func TestNoValueReachesLogsOrEvents(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	eventful(t, f)
	// What is checked below is there to check: the block and release
	// events, their log lines and the loop's line of the failed sync.
	ev := f.Events()
	require.Len(t, ev, 2, "a block and its release: %v", ev)
	logs := f.Log()
	for _, line := range []string{"globalfilesystem blocked", "globalfilesystem released", "sync failed", "the API server is restarting"} {
		require.Contains(t, logs, line)
	}

	for _, e := range ev {
		assert.NotContains(t, e, "hunter2")
	}
	assert.NotContains(t, logs, "hunter2")
	assert.NotContains(t, fmt.Sprint(f.c.admit()), "hunter2")
}

// Every line the reconciler writes names it, and the GlobalFileSystem as
// namespace/name under "object" (docs/reconcilers.md#logs).
func TestEveryLogLineNamesTheReconcilerAndTheObject(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	eventful(t, f)
	lines := strings.Split(strings.TrimSpace(f.Log()), "\n")
	require.GreaterOrEqual(t, len(lines), 3, "the block, the release and the failed sync")
	for _, line := range lines {
		var fields map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &fields), line)
		assert.Equal(t, "globalfilesystem", fields[kit.LogController], line)
		assert.Equal(t, "gfs/main", fields[kit.LogObject], line)
	}
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

// forgedSeedJob is a Job with HCC's labels and annotations, as anyone who
// can create Jobs in the GFS namespace could write it, complete, and
// carrying mark (empty: none).
func forgedSeedJob(g *clerumv1alpha1.GlobalFileSystem, digest, markValue string) *batchv1.Job {
	j := resources.BuildSeedJob(g, resourcestest.Options, digest)
	j.UID = "uid-forged"
	j.ResourceVersion = "1"
	j.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(g, gvk)}
	if markValue != "" {
		j.Annotations[mark.Annotation] = markValue
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	return j
}

func TestAForgedSeedJobNeverSetsRootSeeded(t *testing.T) {
	g := resourcestest.NewGFS("main")
	digest := resources.Admit(resourcestest.Digested(resourcestest.PGSecret()), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM), resourcestest.Options).Digest
	// A mark copied from HCC's Job of the same name (another UID), and one
	// computed with another key.
	copied := resources.BuildSeedJob(g, resourcestest.Options, digest)
	copied.UID = "uid-the-real-one"
	for name, markValue := range map[string]string{
		"no mark":     "",
		"copied mark": resources.SeedJobMark(testSeedKey, g, copied),
		"other key":   resources.SeedJobMark(mark.NewKey("another-secret", mark.PurposeSeedJob), g, forgedSeedJob(g, digest, "")),
		"other purpose": mark.NewKey("test-hmac-secret", mark.PurposeRuntimeToken).Sign(
			resources.SeedMarkFields(g, forgedSeedJob(g, digest, ""))...),
	} {
		t.Run(name, func(t *testing.T) {
			forged := forgedSeedJob(g, digest, markValue)
			f := newFixture(t, g, resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM), forged)
			f.mustSync("main")
			st := f.lastStatus()
			assert.False(t, st.RootSeeded, "a Job HCC did not mark is not believed")
			assert.Equal(t, reasons.SeedPending, condition(st, clerumv1alpha1.ConditionRootSeeded).Reason)
			assert.Contains(t, f.writes(), "delete jobs/gfsc-main-seed", "the forged Job is replaced")
			assert.Contains(t, strings.Join(f.Events(), "\n"), "Warning "+resources.EventSeedJobUnmarked+" the seed Job gfsc-main-seed carries no valid mark")
		})
	}
}

func TestTheSeedJobHCCCreatedCarriesAMarkThatVerifies(t *testing.T) {
	g := resourcestest.NewGFS("main")
	f := newFixture(t, g, resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	f.mustSync("main")
	obj, err := f.Kube.Tracker().Get(batchv1.SchemeGroupVersion.WithResource("jobs"), resourcestest.Namespace, "gfsc-main-seed")
	require.NoError(t, err)
	j := obj.(*batchv1.Job)
	assert.True(t, resources.SeedJobMarked(testSeedKey, g, j))
	other := resourcestest.NewGFS("main")
	other.UID = "uid-a-later-main"
	assert.False(t, resources.SeedJobMarked(testSeedKey, other, j), "the mark names its GlobalFileSystem's UID")
	moved := j.DeepCopy()
	moved.Annotations[resources.AnnotationDrive] = "another-drive"
	assert.False(t, resources.SeedJobMarked(testSeedKey, g, moved), "the mark covers the drive")
}

func TestNoSeedJobWithoutAKey(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	f.c.cfg.SeedKey = mark.Key{}
	_, err := f.sync("main")
	require.ErrorIs(t, err, errNoSeedKey)
	assert.NotContains(t, f.writes(), "create jobs/gfsc-main-seed")
}

func TestTwoGlobalFileSystemsOnOneDriveRunOneWriter(t *testing.T) {
	older := resourcestest.NewGFS("b-older", func(g *clerumv1alpha1.GlobalFileSystem) { g.CreationTimestamp = metav1.NewTime(t0) })
	younger := resourcestest.NewGFS("a-younger", func(g *clerumv1alpha1.GlobalFileSystem) {
		g.CreationTimestamp = metav1.NewTime(t0.Add(time.Minute))
	})
	f := newFixture(t, older, younger, resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))

	// The older one holds the drive, whatever the names say.
	f.mustSync(older.Name)
	assert.Contains(t, f.writes(), "create deployments/gfsc-b-older")
	older = f.adopt(older, f.lastStatus())
	f.writes()
	f.Events()

	res := f.mustSync(younger.Name)
	assert.Empty(t, f.writes(), "no gfsc, no seed, nothing else for the one that does not hold the drive")
	st := f.lastStatus()
	assert.Equal(t, clerumv1alpha1.FileSystemDegraded, st.Phase)
	ready := condition(st, clerumv1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, resources.ReasonDriveConflict, ready.Reason)
	assert.Contains(t, ready.Message, "drive main is held by GlobalFileSystem b-older")
	assert.Equal(t, []string{"Warning DriveConflict " + ready.Message}, f.Events())
	assert.Equal(t, refusedRetry, res.RequeueAfter)
	younger = f.adopt(younger, st)
	f.mustSync(younger.Name)
	assert.Empty(t, f.writes())
	assert.Empty(t, f.statuses())
	assert.Empty(t, f.Events(), "one event per conflict")

	// The holder goes: while its gfsc is still there the next one waits,
	// then takes the drive over.
	gvr := clerumv1alpha1.Resource("globalfilesystems").WithVersion("v1alpha1")
	require.NoError(t, f.HCC.Tracker().Delete(gvr, resourcestest.Namespace, older.Name))
	f.Unindex(older)
	f.mustSync(younger.Name)
	assert.Empty(t, f.writes())
	st = f.lastStatus()
	assert.Contains(t, condition(st, clerumv1alpha1.ConditionReady).Message, "still served by the gfsc Deployment gfsc-b-older")
	younger = f.adopt(younger, st)
	f.Events()

	f.mustSync(older.Name) // gone: its children are deleted
	assert.Contains(t, f.writes(), "delete deployments/gfsc-b-older")
	d, err := f.c.deployments.Deployments(resourcestest.Namespace).Get("gfsc-b-older")
	require.NoError(t, err)
	f.Unindex(d)

	f.mustSync(younger.Name)
	assert.Equal(t, []string{
		"create deployments/gfsc-a-younger",
		"create jobs/gfsc-a-younger-seed",
		"create networkpolicies/gfsc-a-younger-egress",
		"create services/gfsc-a-younger",
		"update jobs/gfsc-a-younger-seed",
	}, f.writes())
	assert.Equal(t, []string{"Normal Released holds drive main now; gfsc starts"}, f.Events())
	assert.NotEqual(t, resources.ReasonDriveConflict, condition(f.lastStatus(), clerumv1alpha1.ConditionReady).Reason)
}

func TestAGlobalFileSystemThatLosesItsDriveStopsItsWriter(t *testing.T) {
	// Two writers of one drive from before HCC kept one per drive: the
	// older keeps running, the younger's gfsc and seed are deleted.
	older := resourcestest.NewGFS("older", func(g *clerumv1alpha1.GlobalFileSystem) { g.CreationTimestamp = metav1.NewTime(t0) })
	younger := resourcestest.NewGFS("younger", func(g *clerumv1alpha1.GlobalFileSystem) {
		g.CreationTimestamp = metav1.NewTime(t0.Add(time.Second))
		g.Spec.DriveName = "other"
	})
	f := newFixture(t, older, younger, resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	older = converge(t, f, older)
	younger = converge(t, f, younger)
	f.writes()
	younger = younger.DeepCopy()
	younger.Spec.DriveName = ""
	f.setGFS(younger)

	f.mustSync(older.Name)
	assert.Empty(t, f.writes(), "the holder's gfsc already serves the drive; it keeps running")
	_, err := f.sync(younger.Name)
	require.ErrorIs(t, err, kit.ErrCacheBehind, "rootSeeded is reset first, while the gfsc still shows the old drive")
	assert.Empty(t, f.writes())
	st := f.lastStatus()
	assert.False(t, st.RootSeeded)
	younger = f.adopt(younger, st)

	f.mustSync(younger.Name)
	assert.Equal(t, []string{"delete deployments/gfsc-younger", "delete jobs/gfsc-younger-seed"}, f.writes())
	assert.Equal(t, resources.ReasonDriveConflict, condition(f.lastStatus(), clerumv1alpha1.ConditionReady).Reason)
}

func TestTheInitContainerWaitsForTheConnectionStringsHostWithoutItsPassword(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	f.mustSync("main")
	obj, err := f.Kube.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), resourcestest.Namespace, "gfsc-main")
	require.NoError(t, err)
	init := obj.(*appsv1.Deployment).Spec.Template.Spec.InitContainers[0]
	assert.Equal(t, []corev1.EnvVar{{Name: resources.EnvPostgresHost, Value: "control-postgres.control-plane"}, {Name: resources.EnvPostgresPort, Value: "5432"}}, init.Env)
	out, err := json.Marshal(obj)
	require.NoError(t, err)
	assert.NotContains(t, string(out), "hunter2")

	// Read once per configuration: a second sync reads no Secret.
	f.Kube.ClearActions()
	f.mustSync("main")
	for _, a := range f.Kube.Actions() {
		assert.NotEqual(t, "secrets", a.GetResource().Resource, "the Secret is read again only when the configuration changes")
	}
}

// TestOnlyTheJWTConfigMapIsWatched: the informer lists and watches the one
// ConfigMap it reads, by a field selector, not every ConfigMap of the GFS
// namespace.
func TestOnlyTheJWTConfigMapIsWatched(t *testing.T) {
	f := newFixture(t)
	f.AssertWatchesOnlyName("configmaps", resourcestest.Options.JWTConfigMap, f.c.configMapInformer.HasSynced)
}

// TestACacheThatShowsTheSeedJobBeforeItsMarkDoesNotReplaceIt: the create's
// event can reach the cache before the mark's update; the Job this process
// just created and marked is not taken for a forged one.
func TestACacheThatShowsTheSeedJobBeforeItsMarkDoesNotReplaceIt(t *testing.T) {
	f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	// The fake API server assigns no UIDs; the real one does.
	f.Kube.PrependReactor("create", "jobs", func(a core.Action) (bool, runtime.Object, error) {
		a.(core.CreateAction).GetObject().(*batchv1.Job).UID = "uid-of-the-created-job"
		return false, nil, nil
	})
	f.mustSync("main")
	require.Contains(t, f.writes(), "update jobs/gfsc-main-seed")
	obj, err := f.Kube.Tracker().Get(batchv1.SchemeGroupVersion.WithResource("jobs"), resourcestest.Namespace, "gfsc-main-seed")
	require.NoError(t, err)
	stale := obj.(*batchv1.Job).DeepCopy()
	delete(stale.Annotations, mark.Annotation)
	f.Index(stale)

	f.mustSync("main")
	assert.NotContains(t, f.writes(), "delete jobs/gfsc-main-seed")
	assert.NotContains(t, strings.Join(f.Events(), "\n"), resources.EventSeedJobUnmarked)
}

// TestTheMarkIsWrittenAfterAConflict: the Job controller may update the
// Job between its create and its mark; the mark is written on a fresh read
// of the same Job.
func TestTheMarkIsWrittenAfterAConflict(t *testing.T) {
	g := resourcestest.NewGFS("main")
	f := newFixture(t, g, resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	conflicts := 1
	f.Kube.PrependReactor("update", "jobs", func(core.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(batchv1.Resource("jobs"), "gfsc-main-seed", fmt.Errorf("the object has been modified"))
	})
	f.mustSync("main")
	obj, err := f.Kube.Tracker().Get(batchv1.SchemeGroupVersion.WithResource("jobs"), resourcestest.Namespace, "gfsc-main-seed")
	require.NoError(t, err)
	assert.True(t, resources.SeedJobMarked(testSeedKey, g, obj.(*batchv1.Job)))
}

// A Deployment that only looks like another file system's gfsc (labels and
// a container env are anyone's to write) must not keep a drive's holder
// from starting; the gfsc of another GlobalFileSystem, named for it and
// controlled by it, does until it is gone (found by an attacker review).
func TestOnlyAnotherFileSystemsOwnGFSCHoldsTheDrive(t *testing.T) {
	built := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM))
	built.mustSync("main")
	obj, err := built.Kube.Tracker().Get(appsv1.SchemeGroupVersion.WithResource("deployments"), resourcestest.Namespace, "gfsc-main")
	require.NoError(t, err)
	template := obj.(*appsv1.Deployment)

	lookalike := func(name, label string, owner *metav1.OwnerReference) *appsv1.Deployment {
		d := template.DeepCopy()
		d.Name, d.UID, d.OwnerReferences = name, types.UID(name+"-uid"), nil
		d.Labels[names.LabelGlobalFileSystem] = label
		if owner != nil {
			d.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return d
	}
	ghostOwner := &metav1.OwnerReference{APIVersion: clerumv1alpha1.GroupVersion.String(), Kind: "GlobalFileSystem",
		Name: "ghost", UID: "ghost-uid", Controller: ptr.To(true)}
	for _, tc := range []struct {
		name   string
		d      *appsv1.Deployment
		starts bool
	}{
		{"a lookalike without an owner", lookalike("evil", "ghost", nil), true},
		{"a lookalike named for no file system it is controlled by", lookalike("evil", "ghost", ghostOwner), true},
		{"another file system's gfsc, named for it and controlled by it", lookalike("gfsc-ghost", "ghost", ghostOwner), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, resourcestest.NewGFS("main"), resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM), tc.d)
			_, _ = f.sync("main")
			created := slices.Contains(f.writes(), "create deployments/gfsc-main")
			assert.Equal(t, tc.starts, created, "writes: %v", f.writes())
		})
	}
}

// An informer the reconciler cannot add its handlers to (it has stopped)
// fails Run at once, and is counted, instead of leaving the reconciler deaf
// to GlobalFileSystems or waiting for a cache that never syncs.
func TestAnInformerThatCannotBeWiredFailsRun(t *testing.T) {
	f := kittest.NewFixture(t)
	filesystems := f.Deps().Informers.HCC(resourcestest.Namespace).Clerum().V1alpha1().GlobalFileSystems().Informer()
	stop := make(chan struct{})
	close(stop)
	filesystems.Run(stop) // returns at once: the informer has stopped
	c := New(f.Deps(), Config{Namespace: resourcestest.Namespace, Build: resourcestest.Options, Resync: time.Minute, Workers: 1, SeedKey: testSeedKey})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := c.Run(ctx) // without the check, it would wait for a cache nobody runs
	require.Error(t, err)
	assert.Contains(t, err.Error(), "globalfilesystem: wiring")
	assert.Positive(t, value(t, c.base.Errors().WithLabelValues("globalfilesystem")))
	assert.NoError(t, ctx.Err(), "Run failed at once, not when the caches gave up")
}
