package kit

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// KeyOf returns the namespace/name of obj, or of the object a deletion
// tombstone (cache.DeletedFinalStateUnknown) stands for.
func KeyOf(obj any) (cache.ObjectName, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		key, err := cache.ParseObjectName(t.Key)
		return key, err == nil
	}
	o, err := meta.Accessor(obj)
	if err != nil {
		return cache.ObjectName{}, false
	}
	return cache.ObjectName{Namespace: o.GetNamespace(), Name: o.GetName()}, true
}

// Unwrap returns the object a deletion tombstone stands for, or obj itself.
// The tombstone's object may be stale or missing (nil).
func Unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// OwnHandlers enqueue the key of every added, changed or deleted object of
// a reconciler's own kind, except updates that change only status: the
// reconciler's own status writes must not wake it again.
func OwnHandlers(enqueue func(cache.ObjectName)) cache.ResourceEventHandler {
	add := func(obj any) {
		if key, ok := KeyOf(obj); ok {
			enqueue(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: add,
		UpdateFunc: func(old, cur any) {
			if !StatusOnly(old, cur) {
				add(cur)
			}
		},
		DeleteFunc: add,
	}
}

// ChildHandlers enqueue the owner of every added, changed (status included:
// a child's readiness is what flows back to its owner's status) or deleted
// child object. owner names it; children it cannot attribute are ignored.
func ChildHandlers(owner func(metav1.Object) (cache.ObjectName, bool), enqueue func(cache.ObjectName)) cache.ResourceEventHandler {
	add := func(obj any) {
		o, err := meta.Accessor(Unwrap(obj))
		if err != nil {
			return
		}
		if key, ok := owner(o); ok {
			enqueue(key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, cur any) { add(cur) },
		DeleteFunc: add,
	}
}

// OwnerByRefOrLabel returns an owner lookup for children of kind (in group
// version apiVersion) living in ownerNamespace: the name of the child's
// controller reference to that kind, or else the value of identityLabel (the
// only way to name an owner in another namespace, where owner references
// cannot point).
func OwnerByRefOrLabel(apiVersion, kind, ownerNamespace, identityLabel string) func(metav1.Object) (cache.ObjectName, bool) {
	return func(o metav1.Object) (cache.ObjectName, bool) {
		if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
			if ref.APIVersion == apiVersion && ref.Kind == kind && o.GetNamespace() == ownerNamespace {
				return cache.ObjectName{Namespace: ownerNamespace, Name: ref.Name}, true
			}
			return cache.ObjectName{}, false
		}
		if name := o.GetLabels()[identityLabel]; name != "" {
			return cache.ObjectName{Namespace: ownerNamespace, Name: name}, true
		}
		return cache.ObjectName{}, false
	}
}
