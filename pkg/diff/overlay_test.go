package diff

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// The reconcilers write with optimistic concurrency: kit's updates carry
// the cached object's resourceVersion, the Host finalizer's merge patch
// carries it, and kit's and the NetworkPolicy operator's deletes carry a
// UID and resourceVersion precondition. The API server answers a stale
// one with a Conflict; so must the overlay, or diff shows a write
// succeeding (and overwriting another writer's change) that the leader
// sees refused.
func TestAStaleWriteConflictsAsOnTheAPIServer(t *testing.T) {
	o := liveCluster(t, secret("s", managed))
	ctx := context.Background()
	secrets := o.kube.CoreV1().Secrets("mcp-host")
	stale, err := secrets.Get(ctx, "s", metav1.GetOptions{})
	require.NoError(t, err)

	fresh := stale.DeepCopy()
	fresh.Labels["a"] = "1"
	updated, err := secrets.Update(ctx, fresh, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, stale.ResourceVersion, updated.ResourceVersion)

	stale.Labels["b"] = "2"
	_, err = secrets.Update(ctx, stale, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "an update from a stale resourceVersion: %v", err)

	patch := []byte(`{"metadata":{"finalizers":["x"],"resourceVersion":"` + stale.ResourceVersion + `"}}`)
	_, err = secrets.Patch(ctx, "s", types.MergePatchType, patch, metav1.PatchOptions{})
	assert.True(t, apierrors.IsConflict(err), "a merge patch carrying a stale resourceVersion: %v", err)

	staleRV, uid, wrongUID := stale.ResourceVersion, updated.UID, types.UID("someone-else")
	err = secrets.Delete(ctx, "s", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &staleRV}})
	assert.True(t, apierrors.IsConflict(err), "a delete whose resourceVersion precondition is stale: %v", err)
	err = secrets.Delete(ctx, "s", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
	assert.True(t, apierrors.IsConflict(err), "a delete whose UID precondition names another object: %v", err)

	got, err := secrets.Get(ctx, "s", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, updated.ResourceVersion, got.ResourceVersion, "no refused write changed the object")
	assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, "a": "1"}, got.Labels)
	for _, w := range o.recorded()[1:] {
		assert.True(t, apierrors.IsConflict(w.err), "the refused %s is recorded with its error", w.verb)
	}

	// Current preconditions pass.
	rv := got.ResourceVersion
	require.NoError(t, secrets.Delete(ctx, "s", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}))
}

// A patch is a write: the object gets a new resourceVersion, as from any
// other write, so a later write from the object before the patch is stale.
func TestAPatchGivesANewResourceVersion(t *testing.T) {
	o := liveCluster(t, secret("s", managed))
	ctx := context.Background()
	secrets := o.kube.CoreV1().Secrets("mcp-host")
	before, err := secrets.Get(ctx, "s", metav1.GetOptions{})
	require.NoError(t, err)
	patch := []byte(`{"metadata":{"finalizers":["x"],"resourceVersion":"` + before.ResourceVersion + `"}}`)
	patched, err := secrets.Patch(ctx, "s", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"x"}, patched.Finalizers)
	assert.NotEqual(t, before.ResourceVersion, patched.ResourceVersion)
	got, err := secrets.Get(ctx, "s", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, patched.ResourceVersion, got.ResourceVersion, "the object stored is the one returned")

	before.Labels["b"] = "2"
	_, err = secrets.Update(ctx, before, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "an update from before the patch: %v", err)
}

// A watch tells only what its selectors select, as the API server's: an
// informer of HCC's objects never sees another's, and an object that stops
// matching leaves it as a deletion.
func TestAWatchSeesWhatItsSelectorsSelect(t *testing.T) {
	o := liveCluster(t)
	ctx := context.Background()
	secrets := o.kube.CoreV1().Secrets("mcp-host")
	w, err := secrets.Watch(ctx, metav1.ListOptions{LabelSelector: names.LabelManagedBy + "=" + names.ManagedByValue})
	require.NoError(t, err)
	defer w.Stop()

	_, err = secrets.Create(ctx, secret("theirs", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	ours, err := secrets.Create(ctx, secret("ours", map[string]string{names.LabelManagedBy: names.ManagedByValue}), metav1.CreateOptions{})
	require.NoError(t, err)
	ours.Labels = nil
	_, err = secrets.Update(ctx, ours, metav1.UpdateOptions{})
	require.NoError(t, err)

	var seen []string
	for len(seen) < 2 {
		select {
		case e := <-w.ResultChan():
			m, err := meta.Accessor(e.Object)
			require.NoError(t, err)
			seen = append(seen, string(e.Type)+" "+m.GetName())
		case <-time.After(2 * time.Second):
			t.Fatalf("the watch told only %v", seen)
		}
	}
	assert.Equal(t, []string{"ADDED ours", "DELETED ours"}, seen, "theirs is never told; ours leaves the selector as a deletion")
}

// A delete of an object with finalizers leaves it being deleted, as the
// API server does, until a write removes its last finalizer: the Host
// reconciler counts a child with a finalizer of its own as still on its
// way out, and lets its Host go only once none is.
func TestAnObjectWithFinalizersGoesWithTheLast(t *testing.T) {
	claim := &corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "h1-workspace", UID: "claim-uid", ResourceVersion: "5",
			Finalizers: []string{"kubernetes.io/pvc-protection"}}}
	o := liveCluster(t, claim)
	ctx := context.Background()
	claims := o.kube.CoreV1().PersistentVolumeClaims("mcp-host")
	w, err := claims.Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()

	require.NoError(t, claims.Delete(ctx, "h1-workspace", metav1.DeleteOptions{}))
	terminating, err := claims.Get(ctx, "h1-workspace", metav1.GetOptions{})
	require.NoError(t, err, "a claim with a finalizer stays")
	assert.NotNil(t, terminating.DeletionTimestamp)
	assert.NotEqual(t, "5", terminating.ResourceVersion)
	_, err = claims.Create(ctx, claim.DeepCopy(), metav1.CreateOptions{})
	assert.True(t, apierrors.IsAlreadyExists(err), "its name is still taken: %v", err)
	require.NoError(t, claims.Delete(ctx, "h1-workspace", metav1.DeleteOptions{}), "deleting it again is no error")

	terminating.Finalizers = nil
	_, err = claims.Update(ctx, terminating, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = claims.Get(ctx, "h1-workspace", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "gone with its last finalizer: %v", err)
	list, err := claims.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, list.Items, "and never read from the live cluster again")

	var seen []watch.EventType
	for len(seen) < 4 {
		select {
		case e := <-w.ResultChan():
			seen = append(seen, e.Type)
		case <-time.After(2 * time.Second):
			t.Fatalf("the watch told only %v", seen)
		}
	}
	assert.Equal(t, []watch.EventType{watch.Added, watch.Modified, watch.Modified, watch.Deleted}, seen,
		"read through, being deleted, its finalizer removed, gone")

	// A Host being deleted goes when the merge patch that removes HCC's
	// finalizer is served.
	h := &clerumv1alpha1.Host{TypeMeta: metav1.TypeMeta{APIVersion: "clerum.io/v1alpha1", Kind: "Host"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "h1", ResourceVersion: "8",
			DeletionTimestamp: &metav1.Time{Time: time.Now()}, Finalizers: []string{clerumv1alpha1.FinalizerHostCleanup}}}
	o = liveCluster(t, h)
	hosts := o.hcc.ClerumV1alpha1().Hosts("mcp-host")
	_, err = hosts.Patch(ctx, "h1", types.MergePatchType, []byte(`{"metadata":{"finalizers":[],"resourceVersion":"8"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = hosts.Get(ctx, "h1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Host went with HCC's finalizer: %v", err)
}

// A reflector lists, then watches from the list's resourceVersion: a write
// between the two (another reconciler's, whose caches synced first) is in
// the watch, as the API server's watch starts where the list ended.
func TestAWatchFromAListSeesTheWritesBetween(t *testing.T) {
	o := liveCluster(t, secret("ours", managed))
	ctx := context.Background()
	secrets := o.kube.CoreV1().Secrets("mcp-host")
	sel := names.LabelManagedBy + "=" + names.ManagedByValue
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: sel})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)

	_, err = secrets.Create(ctx, secret("between", managed), metav1.CreateOptions{})
	require.NoError(t, err)
	w, err := secrets.Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	select {
	case e := <-w.ResultChan():
		m, err := meta.Accessor(e.Object)
		require.NoError(t, err)
		assert.Equal(t, "ADDED between", string(e.Type)+" "+m.GetName(), "the write after the list, and nothing the list had")
	case <-time.After(2 * time.Second):
		t.Fatal("the watch lost the write made between the list and it")
	}
}
