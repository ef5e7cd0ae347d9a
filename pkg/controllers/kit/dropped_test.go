package kit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/pkg/controllers/kit"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
)

const lastApplied = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"h1"}}`

// applied is obj as kubectl apply leaves it: the last-applied annotation
// and managedFields beside HCC's metadata and someone else's annotation.
func applied[T kit.Child](obj T) T {
	a := map[string]string{kit.LastAppliedAnnotation: lastApplied, "team.example/owner": "a"}
	for k, v := range obj.GetAnnotations() {
		a[k] = v
	}
	obj.SetAnnotations(a)
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}})
	return obj
}

// cachedInformers starts the informers of i and waits for them.
func cachedInformers(t *testing.T, i *kit.Informers, synced ...cache.InformerSynced) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); i.Shutdown() })
	i.Start(ctx.Done())
	timeout, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	require.NoError(t, kit.WaitForSync("test", timeout.Done(), synced...))
}

// updateOf returns the object of the one update among actions.
func updateOf[T kit.Child](t *testing.T, actions []clienttesting.Action) T {
	t.Helper()
	var out []T
	for _, a := range actions {
		if u, ok := a.(clienttesting.UpdateAction); ok {
			out = append(out, u.GetObject().(T))
		}
	}
	require.Len(t, out, 1, "one update")
	return out[0]
}

func verbs(actions []clienttesting.Action) []string {
	var out []string
	for _, a := range actions {
		out = append(out, a.GetVerb())
	}
	return out
}

// The informers cache a child without what kubectl apply added, and an
// update of that child, built from the cached copy, still sends every
// annotation the server holds: Ensure reads the child first.
func TestEnsureKeepsTheAnnotationsTheCacheDropped(t *testing.T) {
	ctx := context.Background()
	live := applied(withRef(buildDeployment(ns, "h1", "h1"), liveHost))
	live.Spec.Replicas = ptr.To[int32](3) // drifted: HCC owns the spec
	kube := kubefake.NewClientset(live)
	i := kit.NewInformers(kube, hccfake.NewSimpleClientset())
	deployments := i.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	cachedInformers(t, i, deployments.Informer().HasSynced)

	cached, err := deployments.Lister().Deployments(ns).Get("h1")
	require.NoError(t, err)
	assert.Empty(t, cached.ManagedFields, "the cache drops managedFields")
	assert.NotContains(t, cached.Annotations, kit.LastAppliedAnnotation, "and the last-applied annotation")
	assert.True(t, i.Dropped(cached))
	assert.False(t, i.Dropped(live), "the server's copy lacks nothing")

	children := kit.NewChildren(kube, i, "hcc-host", record.NewFakeRecorder(16), nil)
	kube.ClearActions()
	_, action, err := kit.Ensure(ctx, children, kit.Deployments, owner, cached, buildDeployment(ns, "h1", "h1"))
	require.NoError(t, err)
	assert.Equal(t, kit.ActionUpdate, action)
	assert.Equal(t, []string{"get", "update"}, verbs(kube.Actions()), "read before the update")
	sent := updateOf[*appsv1.Deployment](t, kube.Actions())
	assert.Equal(t, lastApplied, sent.Annotations[kit.LastAppliedAnnotation], "the update keeps the last-applied annotation")
	assert.Equal(t, "a", sent.Annotations["team.example/owner"])
	assert.Equal(t, int32(1), *sent.Spec.Replicas, "and writes the builder's spec")
	assert.Empty(t, sent.ManagedFields, "the server keeps its own managedFields")
}

// A child HCC created carries no last-applied annotation: its update is
// built from the cache, without a read.
func TestEnsureUpdatesAnUnstrippedChildWithoutARead(t *testing.T) {
	live := withRef(buildDeployment(ns, "h1", "h1"), liveHost)
	live.Spec.Replicas = ptr.To[int32](3)
	kube := kubefake.NewClientset(live)
	i := kit.NewInformers(kube, hccfake.NewSimpleClientset())
	deployments := i.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	cachedInformers(t, i, deployments.Informer().HasSynced)
	cached, err := deployments.Lister().Deployments(ns).Get("h1")
	require.NoError(t, err)
	assert.False(t, i.Dropped(cached))

	kube.ClearActions()
	_, action, err := kit.Ensure(context.Background(), kit.NewChildren(kube, i, "hcc-host", record.NewFakeRecorder(16), nil),
		kit.Deployments, owner, cached, buildDeployment(ns, "h1", "h1"))
	require.NoError(t, err)
	assert.Equal(t, kit.ActionUpdate, action)
	assert.Equal(t, []string{"update"}, verbs(kube.Actions()))
}

// A Secret's cache keeps no annotation but HCC's own (secretdigest): the
// update of a credential Secret keeps the others all the same.
func TestEnsureKeepsTheAnnotationsOfADigestedSecret(t *testing.T) {
	live := applied(withRef(buildSecret(ns, "h1-tokens", "h1"), liveHost))
	kube := kubefake.NewClientset(live)
	i := kit.NewInformers(kube, hccfake.NewSimpleClientset())
	secrets := i.Secrets(ns)
	cachedInformers(t, i, secrets.Informer().HasSynced)
	cached, err := secrets.Lister().Secrets(ns).Get("h1-tokens")
	require.NoError(t, err)
	assert.NotContains(t, cached.Annotations, "team.example/owner", "the digest keeps HCC's annotations only")
	assert.True(t, i.Dropped(cached))

	desired := buildSecret(ns, "h1-tokens", "h1")
	desired.Data["bootstrap-credential"] = []byte("c2") // a refreshed credential
	kube.ClearActions()
	_, action, err := kit.Ensure(context.Background(), kit.NewChildren(kube, i, "hcc-host", record.NewFakeRecorder(16), nil),
		kit.Secrets, owner, cached, desired)
	require.NoError(t, err)
	assert.Equal(t, kit.ActionUpdate, action)
	sent := updateOf[*corev1.Secret](t, kube.Actions())
	assert.Equal(t, "a", sent.Annotations["team.example/owner"])
	assert.Equal(t, lastApplied, sent.Annotations[kit.LastAppliedAnnotation])
	assert.Equal(t, []byte("c2"), sent.Data["bootstrap-credential"])
}

// A child the server replaced since the cache saw it is not updated from
// the read: the cache is behind.
func TestEnsureDoesNotUpdateAChildReplacedSinceTheCacheSawIt(t *testing.T) {
	live := applied(withRef(buildDeployment(ns, "h1", "h1"), liveHost))
	live.Spec.Replicas = ptr.To[int32](3)
	kube := kubefake.NewClientset(live)
	i := kit.NewInformers(kube, hccfake.NewSimpleClientset())
	deployments := i.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	cachedInformers(t, i, deployments.Informer().HasSynced)
	cached, err := deployments.Lister().Deployments(ns).Get("h1")
	require.NoError(t, err)

	replaced := live.DeepCopy()
	replaced.UID = "another-uid"
	require.NoError(t, kube.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), replaced, ns))
	kube.ClearActions()
	_, _, err = kit.Ensure(context.Background(), kit.NewChildren(kube, i, "hcc-host", record.NewFakeRecorder(16), nil),
		kit.Deployments, owner, cached, buildDeployment(ns, "h1", "h1"))
	require.ErrorIs(t, err, kit.ErrCacheBehind)
	assert.Equal(t, []string{"get"}, verbs(kube.Actions()), "no update")
}

// What StripUnread drops; a NetworkPolicy keeps its last-applied
// annotation, since the NetworkPolicy operator updates policies from their
// cached copies.
func TestStripUnread(t *testing.T) {
	d := applied(buildDeployment(ns, "h1", "h1"))
	out, err := kit.StripUnread(d)
	require.NoError(t, err)
	got := out.(*appsv1.Deployment)
	assert.Empty(t, got.ManagedFields)
	assert.Equal(t, map[string]string{"clerum.io/builder": "test", "team.example/owner": "a"}, got.Annotations)
	again, err := kit.StripUnread(got.DeepCopy())
	require.NoError(t, err)
	assert.Equal(t, got, again, "idempotent")

	bare := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{kit.LastAppliedAnnotation: "{}"}}}
	out, err = kit.StripUnread(bare)
	require.NoError(t, err)
	assert.Nil(t, out.(*corev1.ConfigMap).Annotations, "no annotation left: none at all")

	p := applied(buildNetworkPolicy(ns, "h1", "h1"))
	out, err = kit.StripUnread(p)
	require.NoError(t, err)
	assert.Empty(t, out.(*networkingv1.NetworkPolicy).ManagedFields)
	assert.Contains(t, out.(*networkingv1.NetworkPolicy).Annotations, kit.LastAppliedAnnotation)

	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/x"}
	out, err = kit.StripUnread(tombstone)
	require.NoError(t, err)
	assert.Equal(t, tombstone, out)
}

// A child's dropped annotations are forgotten once its informer sees it
// deleted.
func TestDroppedForgetsADeletedChild(t *testing.T) {
	live := applied(withRef(buildDeployment(ns, "h1", "h1"), liveHost))
	kube := kubefake.NewClientset(live)
	i := kit.NewInformers(kube, hccfake.NewSimpleClientset())
	deployments := i.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	cachedInformers(t, i, deployments.Informer().HasSynced)
	cached, err := deployments.Lister().Deployments(ns).Get("h1")
	require.NoError(t, err)
	require.True(t, i.Dropped(cached))

	require.NoError(t, kube.AppsV1().Deployments(ns).Delete(context.Background(), "h1", metav1.DeleteOptions{}))
	assert.Eventually(t, func() bool { return !i.Dropped(cached) }, 10*time.Second, 10*time.Millisecond)
}
