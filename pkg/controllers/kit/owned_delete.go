package kit

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/clerum/hcc/pkg/names"
)

// identityWriters maps each identity label to the NetworkPolicy writer
// whose children carry it.
var identityWriters = map[string]names.PolicyWriter{
	names.LabelHost:             names.WriterHost,
	names.LabelSharedFileSystem: names.WriterFileSystem,
	names.LabelGlobalFileSystem: names.WriterFileSystem,
}

// DeleteChild deletes live, a child of the owner named ownerName (of kind
// ownerGVK, whose identity label is identityLabel) that has gone, if and
// only if it is that owner's by the ownership rule: managed by HCC, the
// identity label naming the owner, and no controller reference to anything
// but an object of that kind and name (any UID: the owner is gone). Anything
// else is left alone and reported as not deleted. The delete carries the
// UID and resourceVersion the caller judged, so an object replaced or
// relabelled since is never deleted. A child already gone is no error.
func DeleteChild[T Child](ctx context.Context, c *Children, kind Kind[T], ownerGVK schema.GroupVersionKind,
	ownerName, identityLabel string, live T) (deleted bool, err error) {
	l := live.GetLabels()
	if l[names.LabelManagedBy] != names.ManagedByValue || l[identityLabel] != names.Label(ownerName) {
		return false, nil
	}
	if kind.policyTyped {
		// A NetworkPolicy is its writer's by policy type: the per-server
		// policies of the NetworkPolicy operator carry clerum.io/mcpserver
		// too, and are never another writer's to delete.
		// One with no policy type on a name the writer reserves is the
		// repairable class (docs/ownership.md): the writer's to relabel or
		// sweep.
		writer, ok := identityWriters[identityLabel]
		typ := l[names.LabelPolicyType]
		if typ == "" {
			_, reserved := names.ReservedPolicyType(writer, live.GetName())
			ok = ok && reserved
		} else {
			ok = ok && contains(names.WriterPolicyTypes(writer), typ)
		}
		if !ok {
			return false, nil
		}
	}
	if ref := metav1.GetControllerOfNoCopy(live); ref != nil {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != ownerGVK.Group || ref.Kind != ownerGVK.Kind || ref.Name != ownerName {
			return false, nil
		}
	}
	uid, rv := live.GetUID(), live.GetResourceVersion()
	// Background propagation: the garbage collector removes what the child
	// owns (a Job's pods, whose kind otherwise orphans them) after it.
	background := metav1.DeletePropagationBackground
	err = kind.client(c.kube, live.GetNamespace()).Delete(ctx, live.GetName(), metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
		PropagationPolicy: &background,
	})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("deleting %s %s/%s: %w", kind.Name, live.GetNamespace(), live.GetName(), err)
	}
	return true, nil
}
