package kit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/reasons"
)

var claimKey = mark.NewKey("a-real-hmac-secret-for-tests", mark.PurposeClaim)

// claimFixture is an ensureFixture whose API server assigns UIDs on create,
// as a real one does: the claim mark is over the UID.
func claimFixture(objects ...runtime.Object) *ensureFixture {
	f := newEnsureFixture(objects...)
	var n atomic.Int32
	f.kube.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(clienttesting.CreateAction).GetObject().(metav1.Object); ok && o.GetUID() == "" {
			o.SetUID(types.UID(fmt.Sprintf("created-uid-%d", n.Add(1))))
		}
		return false, nil, nil
	})
	return f
}

func getClaim(t *testing.T, f *ensureFixture, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	c, err := f.kube.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return c
}

var claims = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")

// trackedClaim reads a claim from the fake's tracker, which (unlike the
// clientset, whose reactors hold its lock) a reactor may call.
func trackedClaim(t *testing.T, f *ensureFixture, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	o, err := f.kube.Tracker().Get(claims, ns, name)
	require.NoError(t, err)
	return o.(*corev1.PersistentVolumeClaim).DeepCopy()
}

// bindTo is the volume binder's write: spec.volumeName, once, on a claim
// that has none, and the annotation it leaves.
func bindTo(t *testing.T, f *ensureFixture, name, volume string) *corev1.PersistentVolumeClaim {
	t.Helper()
	c := trackedClaim(t, f, name)
	require.Empty(t, c.Spec.VolumeName, "the binder binds an unbound claim")
	c.Spec.VolumeName = volume
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, "pv.kubernetes.io/bind-completed", "yes")
	require.NoError(t, f.kube.Tracker().Update(claims, c, ns))
	return trackedClaim(t, f, name)
}

func requireForeignVolume(t *testing.T, err error) {
	t.Helper()
	refused, ok := errors.AsType[*kit.RefusedError](err)
	require.True(t, ok, "want a RefusedError, got %v", err)
	assert.Equal(t, kit.CauseForeignVolume, refused.Cause, refused.Detail)
	assert.ErrorIs(t, err, kit.ErrNotOwned)
}

// TestClaimMarks: HCC marks every claim it creates, and a marked claim's
// volume is the binder's, whatever its name (docs/ownership.md, "Claims").
// What carries no valid mark is judged by what it mounts.
func TestClaimMarks(t *testing.T) {
	ctx := context.Background()
	marked := func() kit.Kind[*corev1.PersistentVolumeClaim] {
		return kit.PersistentVolumeClaims.WithMarker(kit.NewMarker(claimKey))
	}

	t.Run("a claim HCC created and the binder bound to a static volume is accepted", func(t *testing.T) {
		f := claimFixture()
		kind := marked()
		created, action, err := kit.Ensure(ctx, f.children, kind, owner, nil, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionCreate, action)
		assert.Equal(t, []string{"create persistentvolumeclaims", "update persistentvolumeclaims"}, f.writes(), "created, then marked")
		assert.NotEmpty(t, created.Annotations[mark.Annotation])
		assert.True(t, kit.NewMarker(claimKey).Verify(owner, created), "the mark is over the UID the create gave it")

		bound := bindTo(t, f, "h1-workspace", "local-pv-17")
		f.kube.ClearActions()
		for name, k := range map[string]kit.Kind[*corev1.PersistentVolumeClaim]{
			"by the process that created it": kind,
			"by another process (a restart)": marked(),
		} {
			got, action, err := kit.Ensure(ctx, f.children, k, owner, bound, buildPVC(ns, "h1-workspace", "h1"))
			require.NoError(t, err, name)
			assert.Equal(t, kit.ActionNone, action, name)
			assert.Equal(t, "local-pv-17", got.Spec.VolumeName, name)
		}
		assert.Empty(t, f.writes())
		assert.Empty(t, f.refused)
	})

	t.Run("the mark is written after a Conflict, on the claim the binder bound meanwhile", func(t *testing.T) {
		f := claimFixture()
		var conflicts atomic.Int32
		f.kube.PrependReactor("update", "persistentvolumeclaims", func(clienttesting.Action) (bool, runtime.Object, error) {
			if conflicts.Add(1) > 1 {
				return false, nil, nil
			}
			bindTo(t, f, "h1-workspace", "local-pv-03")
			return true, nil, apierrors.NewConflict(corev1.Resource("persistentvolumeclaims"), "h1-workspace", errors.New("the object has been modified"))
		})
		got, action, err := kit.Ensure(ctx, f.children, marked(), owner, nil, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionCreate, action)
		assert.Equal(t, int32(2), conflicts.Load(), "one Conflict, one retry")
		live := getClaim(t, f, "h1-workspace")
		assert.Equal(t, "local-pv-03", live.Spec.VolumeName, "the binder's write is kept")
		assert.True(t, kit.NewMarker(claimKey).Verify(owner, live), "and the claim is marked")
		assert.Equal(t, live.Annotations, got.Annotations)

		_, action, err = kit.Ensure(ctx, f.children, marked(), owner, live, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionNone, action)
	})

	t.Run("a claim replaced before the mark is not marked", func(t *testing.T) {
		f := claimFixture()
		f.kube.PrependReactor("update", "persistentvolumeclaims", func(clienttesting.Action) (bool, runtime.Object, error) {
			c := trackedClaim(t, f, "h1-workspace")
			c.UID = "someone-elses"
			require.NoError(t, f.kube.Tracker().Update(claims, c, ns))
			return true, nil, apierrors.NewConflict(corev1.Resource("persistentvolumeclaims"), "h1-workspace", errors.New("modified"))
		})
		_, action, err := kit.Ensure(ctx, f.children, marked(), owner, nil, buildPVC(ns, "h1-workspace", "h1"))
		assert.Equal(t, kit.ActionCreate, action)
		require.ErrorIs(t, err, kit.ErrCacheBehind)
		assert.Empty(t, getClaim(t, f, "h1-workspace").Annotations[mark.Annotation])
	})

	t.Run("a cache that shows the created claim before its mark does not get it refused or rewritten", func(t *testing.T) {
		f := claimFixture()
		kind := marked()
		created, _, err := kit.Ensure(ctx, f.children, kind, owner, nil, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		// The binder bound it before the mark: the cache may hold that
		// copy, bound and unmarked.
		stale := created.DeepCopy()
		delete(stale.Annotations, mark.Annotation)
		stale.Spec.VolumeName = "local-pv-09"
		f.kube.ClearActions()
		_, action, err := kit.Ensure(ctx, f.children, kind, owner, stale, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err, "this process marked this very claim")
		assert.Equal(t, kit.ActionNone, action)
		assert.Empty(t, f.writes(), "no update from the stale copy")

		_, _, err = kit.Ensure(ctx, f.children, marked(), owner, stale, buildPVC(ns, "h1-workspace", "h1"))
		requireForeignVolume(t, err) // another process has only what the copy says
	})

	t.Run("a claim whose mark failed after the create is marked by the next Ensure, though the binder bound it", func(t *testing.T) {
		f := claimFixture()
		kind := marked()
		var fail atomic.Bool
		fail.Store(true)
		f.kube.PrependReactor("update", "persistentvolumeclaims", func(clienttesting.Action) (bool, runtime.Object, error) {
			if fail.Load() {
				return true, nil, apierrors.NewInternalError(errors.New("overloaded"))
			}
			return false, nil, nil
		})
		_, action, err := kit.Ensure(ctx, f.children, kind, owner, nil, buildPVC(ns, "h1-workspace", "h1"))
		assert.Equal(t, kit.ActionCreate, action)
		require.ErrorContains(t, err, "marking PersistentVolumeClaim")
		// The binder binds it to a static volume before the retry.
		bound := bindTo(t, f, "h1-workspace", "local-pv-21")
		require.Empty(t, bound.Annotations[mark.Annotation])

		_, _, err = kit.Ensure(ctx, f.children, kind, owner, bound, buildPVC(ns, "h1-workspace", "h1"))
		require.ErrorContains(t, err, "overloaded", "still unmarked, still owed")
		assert.Empty(t, f.refused, "a claim this process created is not refused")

		fail.Store(false)
		f.kube.ClearActions()
		got, action, err := kit.Ensure(ctx, f.children, kind, owner, bound, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionUpdate, action)
		assert.Equal(t, []string{"update persistentvolumeclaims"}, f.writes(), "the owed mark, in one update")
		assert.Equal(t, "local-pv-21", got.Spec.VolumeName, "the binder's write is kept")
		live := getClaim(t, f, "h1-workspace")
		assert.True(t, kit.NewMarker(claimKey).Verify(owner, live), "the claim is marked")

		// Marked now: a stale copy without the mark sends nothing.
		f.kube.ClearActions()
		_, action, err = kit.Ensure(ctx, f.children, kind, owner, bound, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionNone, action)
		assert.Empty(t, f.writes())

		// Another process (a restart before the mark) has only what the
		// claim says: unmarked with a static volume is refused.
		_, _, err = kit.Ensure(ctx, f.children, marked(), owner, bound, buildPVC(ns, "h1-workspace", "h1"))
		requireForeignVolume(t, err)
	})

	t.Run("a claim is created and marked under one hold, and not created when none is given", func(t *testing.T) {
		f := claimFixture()
		var log []string
		var mu sync.Mutex
		note := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
		f.kube.PrependReactor("*", "persistentvolumeclaims", func(a clienttesting.Action) (bool, runtime.Object, error) {
			note(a.GetVerb())
			return false, nil, nil
		})
		var refuse bool
		f.children.WithHold(func(ctx context.Context) (context.Context, func(), error) {
			if refuse {
				return ctx, func() {}, errors.New("the lease is not held")
			}
			note("hold")
			return context.WithoutCancel(ctx), func() { note("done") }, nil
		})
		_, _, err := kit.Ensure(ctx, f.children, marked(), owner, nil, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Equal(t, []string{"hold", "create", "update", "done"}, log, "the mark is written before the hold is let go")

		refuse, log = true, nil
		_, _, err = kit.Ensure(ctx, f.children, marked(), owner, nil, buildPVC(ns, "h1-data", "h1"))
		require.ErrorContains(t, err, "the lease is not held")
		assert.Empty(t, log, "no create without the hold")
	})

	t.Run("a forged claim pre-created with HCC's labels and a volume is refused", func(t *testing.T) {
		forged := withRef(buildPVC(ns, "h1-workspace", "h1"), liveHost)
		forged.Spec.VolumeName = "another-pv"
		forged.Status.Phase = corev1.ClaimBound
		f := claimFixture(forged)
		_, _, err := kit.Ensure(ctx, f.children, marked(), owner, forged, buildPVC(ns, "h1-workspace", "h1"))
		requireForeignVolume(t, err)
		assert.Contains(t, err.Error(), "it names volume another-pv and carries no valid mark of HCC's")
		assert.Empty(t, f.writes(), "never taken over")
		assert.Equal(t, []string{"PersistentVolumeClaim/ForeignVolume"}, f.refused)
		events := f.events()
		require.NotEmpty(t, events)
		assert.Contains(t, events[0], "Warning "+reasons.EventUnmanagedConflict)
	})

	t.Run("a mark copied from another claim does not verify", func(t *testing.T) {
		m := kit.NewMarker(claimKey)
		original := withRef(buildPVC(ns, "h1-workspace", "h1"), liveHost)
		original.UID = "hccs-own-claim"
		copied := m.Sign(owner, original)
		for name, edit := range map[string]func(c *corev1.PersistentVolumeClaim){
			"onto a claim of another UID (re-created under the name)": func(c *corev1.PersistentVolumeClaim) { c.UID = "forged-uid" },
			"onto a claim of another name":                            func(c *corev1.PersistentVolumeClaim) { c.Name = "h2-workspace"; c.UID = "hccs-own-claim" },
			"for another owner of the same name":                      func(c *corev1.PersistentVolumeClaim) { c.UID = "hccs-own-claim"; c.OwnerReferences = nil },
		} {
			forged := original.DeepCopy()
			edit(forged)
			forged.Spec.VolumeName = "another-pv"
			metav1.SetMetaDataAnnotation(&forged.ObjectMeta, mark.Annotation, copied)
			o := owner
			if name == "for another owner of the same name" {
				o = ownerOf(newHost(ns, "h1", "uid-2"))
			}
			f := claimFixture(forged)
			_, _, err := kit.Ensure(ctx, f.children, marked(), o, forged, buildPVC(ns, forged.Name, "h1"))
			requireForeignVolume(t, err)
			assert.Empty(t, f.writes(), name)
		}
	})

	t.Run("a claim with a data source is refused, marked or not", func(t *testing.T) {
		m := kit.NewMarker(claimKey)
		for _, withMark := range []bool{false, true} {
			clone := withRef(buildPVC(ns, "h1-workspace", "h1"), liveHost)
			clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "victim-workspace"}
			clone.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "victim-workspace"}
			if withMark {
				metav1.SetMetaDataAnnotation(&clone.ObjectMeta, mark.Annotation, m.Sign(owner, clone))
			}
			f := claimFixture(clone)
			_, _, err := kit.Ensure(ctx, f.children, marked(), owner, clone, buildPVC(ns, "h1-workspace", "h1"))
			requireForeignVolume(t, err)
			assert.Contains(t, err.Error(), "it is filled from PersistentVolumeClaim victim-workspace")
			assert.Empty(t, f.writes())
		}
	})

	t.Run("an unmarked claim without a volume is taken over and marked in one update", func(t *testing.T) {
		// Written by an earlier HCC, under an owner since re-created.
		old := withRef(buildPVC(ns, "h1-workspace", "h1"), newHost(ns, "h1", "uid-0"))
		f := claimFixture(old)
		got, action, err := kit.Ensure(ctx, f.children, marked(), owner, old, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionTakeOver, action)
		assert.Equal(t, []string{"update persistentvolumeclaims"}, f.writes())
		assert.True(t, kit.NewMarker(claimKey).Verify(owner, got))
		assert.True(t, kit.NewMarker(claimKey).Verify(owner, getClaim(t, f, "h1-workspace")))
	})

	t.Run("a legacy claim bound to the volume provisioned for it is accepted and marked", func(t *testing.T) {
		legacy := withRef(buildPVC(ns, "h1-workspace", "h1"), liveHost)
		legacy.Spec.VolumeName = kit.ProvisionedVolumeName(legacy)
		legacy.Status.Phase = corev1.ClaimBound
		f := claimFixture(legacy)
		got, action, err := kit.Ensure(ctx, f.children, marked(), owner, legacy, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionUpdate, action)
		assert.Equal(t, []string{"update persistentvolumeclaims"}, f.writes(), "one update: the mark")
		assert.Equal(t, "pvc-child-uid", got.Spec.VolumeName)
		assert.True(t, kit.NewMarker(claimKey).Verify(owner, got))
	})

	t.Run("a legacy claim bound to a static volume is refused", func(t *testing.T) {
		legacy := withRef(buildPVC(ns, "h1-workspace", "h1"), liveHost)
		legacy.Spec.VolumeName = "local-pv-17"
		f := claimFixture(legacy)
		_, _, err := kit.Ensure(ctx, f.children, marked(), owner, legacy, buildPVC(ns, "h1-workspace", "h1"))
		requireForeignVolume(t, err)
		assert.Empty(t, f.writes())
	})

	t.Run("without a key nothing is marked, and only the provisioned volume is trusted", func(t *testing.T) {
		f := claimFixture()
		kind := kit.PersistentVolumeClaims.WithMarker(kit.NewMarker(mark.Key{}))
		created, _, err := kit.Ensure(ctx, f.children, kind, owner, nil, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Equal(t, []string{"create persistentvolumeclaims"}, f.writes())
		assert.Empty(t, created.Annotations[mark.Annotation])
		bound := bindTo(t, f, "h1-workspace", "local-pv-17")
		_, _, err = kit.Ensure(ctx, f.children, kind, owner, bound, buildPVC(ns, "h1-workspace", "h1"))
		requireForeignVolume(t, err)
	})

	t.Run("Plan marks nothing it refuses and leaves its arguments alone", func(t *testing.T) {
		live := withRef(buildPVC(ns, "h1-workspace", "h1"), liveHost)
		before := live.DeepCopy()
		write, action, err := kit.Plan(marked(), owner, live, buildPVC(ns, "h1-workspace", "h1"))
		require.NoError(t, err)
		assert.Equal(t, kit.ActionUpdate, action)
		assert.NotEmpty(t, write.Annotations[mark.Annotation])
		assert.Equal(t, before, live)
	})
}
