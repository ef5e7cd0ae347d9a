package kittest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	applyv1alpha1 "github.com/clerum/hcc/pkg/generated/applyconfiguration/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/secretdigest"
)

const ns = "mcp-host"

var ctx = context.Background()

func managed(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.Labels = map[string]string{names.LabelManagedBy: names.ManagedByValue}
	return m
}

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
}

// fatalTB records a failure instead of ending the test, for asserting that
// the fixture fails a test.
type fatalTB struct {
	testing.TB
	failed []string
}

func (tb *fatalTB) Fatalf(format string, args ...any) {
	tb.failed = append(tb.failed, fmt.Sprintf(format, args...))
}

func TestSecretsAreCachedAsDigests(t *testing.T) {
	f := kittest.NewFixture(t, &corev1.Secret{ObjectMeta: meta("atlas"), Data: map[string][]byte{"uri": []byte("mongodb+srv://secret")}})
	secrets := f.Deps().Informers.Secrets(ns)
	f.SyncCaches()

	s, err := secrets.Lister().Secrets(ns).Get("atlas")
	require.NoError(t, err)
	assert.Equal(t, secretdigest.ValueDigest([]byte("mongodb+srv://secret")), s.Data["uri"], "the cache holds the digest, never the value")

	// Index goes through the same transform.
	f.Index(&corev1.Secret{ObjectMeta: meta("other"), Data: map[string][]byte{"k": []byte("v")}})
	s, err = secrets.Lister().Secrets(ns).Get("other")
	require.NoError(t, err)
	assert.Equal(t, secretdigest.ValueDigest([]byte("v")), s.Data["k"])
}

func TestManagedObjectsInformerCachesNoUnmanagedObject(t *testing.T) {
	f := kittest.NewFixture(t,
		&appsv1.Deployment{ObjectMeta: managed(meta("ours"))},
		&appsv1.Deployment{ObjectMeta: meta("theirs")})
	deployments := f.Deps().Informers.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	f.SyncCaches()

	all, err := deployments.Lister().List(labels.Everything())
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, "ours", all[0].Name)
	assert.Empty(t, all[0].ManagedFields, "cached through StripUnread")

	// Nor can a test put one there by hand.
	tb := &fatalTB{TB: t}
	g := kittest.NewFixture(tb)
	g.Deps().Informers.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments().Informer()
	g.Index(&appsv1.Deployment{ObjectMeta: meta("theirs")})
	assert.Len(t, tb.failed, 1, "indexing an object no informer selects fails the test")
	g.Index(&appsv1.Deployment{ObjectMeta: managed(meta("ours"))})
	assert.Len(t, tb.failed, 1, "a managed one is indexed")
}

func TestConfigMapInformerCachesOnlyItsName(t *testing.T) {
	f := kittest.NewFixture(t,
		&corev1.ConfigMap{ObjectMeta: meta("jwt"), Data: map[string]string{"key": "pem"}},
		&corev1.ConfigMap{ObjectMeta: managed(meta("other"))})
	jwt := f.Deps().Informers.ConfigMap(ns, "jwt", kit.Transform{})
	keysOnly := f.Deps().Informers.ConfigMap(ns, "other", kit.Transform{Name: "name-only", Func: func(obj any) (any, error) {
		cm := obj.(*corev1.ConfigMap)
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}, nil
	}})
	f.SyncCaches()

	assert.Equal(t, []string{ns + "/jwt"}, jwt.GetIndexer().ListKeys())
	obj, ok, err := jwt.GetIndexer().GetByKey(ns + "/jwt")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Empty(t, obj.(*corev1.ConfigMap).ManagedFields, "nil transform: StripUnread")
	assert.Equal(t, "pem", obj.(*corev1.ConfigMap).Data["key"])

	obj, ok, err = keysOnly.GetIndexer().GetByKey(ns + "/other")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Empty(t, obj.(*corev1.ConfigMap).Labels, "cached through the caller's transform")
}

func TestSyncCachesShowsTheWrites(t *testing.T) {
	f := kittest.NewFixture(t, &appsv1.Deployment{ObjectMeta: managed(meta("gone"))})
	deployments := f.Deps().Informers.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	f.SyncCaches()

	_, err := f.Kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: managed(metav1.ObjectMeta{Namespace: ns, Name: "new"})}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.Kube.AppsV1().Deployments(ns).Delete(ctx, "gone", metav1.DeleteOptions{}))
	assert.Equal(t, []string{ns + "/gone"}, deployments.Informer().GetIndexer().ListKeys(), "a write is not in the cache before SyncCaches")

	f.SyncCaches()
	assert.Equal(t, []string{ns + "/new"}, deployments.Informer().GetIndexer().ListKeys())
	assert.Empty(t, f.Writes(), "SyncCaches forgets the writes")
}

func TestWritesListsBothClientsetsWithSubresources(t *testing.T) {
	f := kittest.NewFixture(t,
		&corev1.ConfigMap{ObjectMeta: meta("old")},
		&appsv1.Deployment{ObjectMeta: meta("d")},
		&clerumv1alpha1.Host{ObjectMeta: meta("h1")})

	_, err := f.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, f.Kube.CoreV1().ConfigMaps(ns).Delete(ctx, "old", metav1.DeleteOptions{}))
	_, err = f.Kube.AppsV1().Deployments(ns).UpdateStatus(ctx, &appsv1.Deployment{ObjectMeta: meta("d")}, metav1.UpdateOptions{})
	require.NoError(t, err)
	applyHostStatus(t, f, "h1", 1)
	_, err = f.HCC.ClerumV1alpha1().Hosts(ns).Get(ctx, "h1", metav1.GetOptions{})
	require.NoError(t, err)

	assert.Equal(t, []string{
		"create services/svc",
		"delete configmaps/old",
		"patch hosts/h1/status",
		"update deployments/d/status",
	}, f.Writes(), "reads are no writes; sorted; the subresource after the name")
	f.ClearWrites()
	assert.Empty(t, f.Writes())
}

func TestWritesInKeepsOneNamespacesWrites(t *testing.T) {
	f := kittest.NewFixture(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "old"}})
	require.NoError(t, f.Kube.CoreV1().ConfigMaps("other").Delete(ctx, "old", metav1.DeleteOptions{}))
	for _, namespace := range []string{ns, "other"} {
		_, err := f.Kube.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "same"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := f.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	assert.Equal(t, []string{"create configmaps/same"}, f.WritesIn(ns))
	assert.Equal(t, []string{"create configmaps/same", "delete configmaps/old"}, f.WritesIn("other"), "in Writes' form, sorted")
	assert.Equal(t, []string{"create namespaces/new"}, f.WritesIn(""), "cluster-scoped writes")
	assert.Empty(t, f.WritesIn("nowhere"))
}

func applyHostStatus(t *testing.T, f *kittest.Fixture, name string, generation int64) *clerumv1alpha1.Host {
	t.Helper()
	h, err := f.HCC.ClerumV1alpha1().Hosts(ns).ApplyStatus(ctx,
		applyv1alpha1.Host(name, ns).WithStatus(applyv1alpha1.HostStatus().WithObservedGeneration(generation)),
		metav1.ApplyOptions{FieldManager: "hcc", Force: true})
	require.NoError(t, err)
	return h
}

func TestStatusApplyIsCapturedAndStored(t *testing.T) {
	h := &clerumv1alpha1.Host{ObjectMeta: meta("h1"), Spec: clerumv1alpha1.HostSpec{ContextRef: "c1"}}
	f := kittest.NewFixture(t, h)
	hosts := f.Deps().Informers.HCC(ns).Clerum().V1alpha1().Hosts()
	f.SyncCaches()

	first := applyHostStatus(t, f, "h1", 1)
	second := applyHostStatus(t, f, "h1", 2)
	assert.Less(t, first.ResourceVersion, second.ResourceVersion, "each status write returns a newer resourceVersion")

	applied := kittest.Applied[*clerumv1alpha1.Host](f, ns, "h1")
	require.Len(t, applied, 2, "every apply, in order")
	assert.Equal(t, int64(1), applied[0].Status.ObservedGeneration)
	assert.Equal(t, int64(2), applied[1].Status.ObservedGeneration)

	stored, err := f.HCC.ClerumV1alpha1().Hosts(ns).Get(ctx, "h1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(2), stored.Status.ObservedGeneration, "the fake API server holds the status applied")
	assert.Equal(t, "c1", stored.Spec.ContextRef, "and the rest as it was")

	f.SyncCaches()
	cached, err := hosts.Lister().Hosts(ns).Get("h1")
	require.NoError(t, err)
	assert.Equal(t, int64(2), cached.Status.ObservedGeneration, "the cache shows it after SyncCaches")

	_, err = f.HCC.ClerumV1alpha1().Hosts(ns).ApplyStatus(ctx, applyv1alpha1.Host("gone", ns).WithStatus(applyv1alpha1.HostStatus()),
		metav1.ApplyOptions{FieldManager: "hcc", Force: true})
	assert.True(t, apierrors.IsNotFound(err), "a status apply to a missing object is NotFound: %v", err)
	assert.Empty(t, kittest.Applied[*clerumv1alpha1.Host](f, ns, "gone"))
}

func TestUpdatesKeepWhatTheAPIServerKeeps(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: meta("d"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1}}
	f := kittest.NewFixture(t, d)
	deployments := f.Kube.AppsV1().Deployments(ns)

	write := d.DeepCopy()
	write.Spec.Replicas = ptr.To[int32](2)
	write.Spec.Template.Spec.ServiceAccountName = "sa"
	write.Status = appsv1.DeploymentStatus{}
	got, err := deployments.Update(ctx, write, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), got.Status.AvailableReplicas, "an update of the main resource keeps the status")
	assert.Equal(t, int32(2), *got.Spec.Replicas)
	assert.Equal(t, "sa", got.Spec.Template.Spec.DeprecatedServiceAccount, "the API server's default")
	assert.NotEqual(t, "1", got.ResourceVersion, "each write gets a new resourceVersion")
	rv := got.ResourceVersion

	write = got.DeepCopy()
	write.Spec.Replicas = ptr.To[int32](5)
	write.Status.AvailableReplicas = 2
	got, err = deployments.UpdateStatus(ctx, write, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), got.Status.AvailableReplicas)
	assert.Equal(t, int32(2), *got.Spec.Replicas, "a status update keeps the spec")
	assert.NotEqual(t, rv, got.ResourceVersion)
}

func TestCreateGivesUIDAndResourceVersion(t *testing.T) {
	f := kittest.NewFixture(t)
	write := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}
	got, err := f.Kube.CoreV1().ConfigMaps(ns).Create(ctx, write, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, got.UID)
	assert.NotEmpty(t, got.ResourceVersion)

	h, err := f.HCC.ClerumV1alpha1().Hosts(ns).Create(ctx, &clerumv1alpha1.Host{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, h.UID)
	assert.NotEqual(t, got.UID, h.UID)
}

func TestEventsDrainWithoutWaiting(t *testing.T) {
	f := kittest.NewFixture(t)
	f.Deps().Recorder.Event(&corev1.ConfigMap{}, corev1.EventTypeWarning, "Bad", "it broke")
	f.Deps().Recorder.Event(&corev1.ConfigMap{}, corev1.EventTypeNormal, "Good", "it mended")
	assert.Equal(t, []string{"Warning Bad it broke", "Normal Good it mended"}, f.Events())
	assert.Empty(t, f.Events(), "drained")

	log := f.Deps().Log
	log.Info().Msg("hello")
	assert.Contains(t, f.Log(), `"message":"hello"`)
}
