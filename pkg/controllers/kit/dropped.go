package kit

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/clerum/hcc/pkg/names"
)

// droppedAnnotations remembers, by UID, the annotations the transforms of
// the built-in kinds' informers removed from HCC's children: kubectl's
// last-applied-configuration (StripUnread), or any but HCC's own on a
// Secret (secretdigest.Digest). Those are still on the server, and an
// update built from the cached copy would erase them, since an update
// replaces metadata.annotations whole; Ensure reads such a child before
// updating it (Dropped). Only managed objects are remembered (Ensure
// updates nothing else), only when something was dropped (HCC creates its
// children without either annotation, so in a fleet HCC wrote this is
// empty), and each until its informer sees it deleted. It is safe for
// concurrent use.
type droppedAnnotations struct {
	mu   sync.Mutex
	keys map[types.UID][]string
}

func newDroppedAnnotations() *droppedAnnotations {
	return &droppedAnnotations{keys: map[types.UID][]string{}}
}

// track returns transform, recording what it drops from a managed
// object's annotations. A key is never unrecorded by a later pass: client-go
// may pass an object through the transform twice (the second time without
// what the first dropped), and a key recorded that the server no longer has
// costs one read before an update, never a lost annotation.
func (d *droppedAnnotations) track(transform cache.TransformFunc) cache.TransformFunc {
	return func(obj any) (any, error) {
		in, ok := obj.(metav1.Object)
		if !ok || len(in.GetAnnotations()) == 0 || in.GetLabels()[names.LabelManagedBy] != names.ManagedByValue {
			return transform(obj)
		}
		uid := in.GetUID()
		before := make([]string, 0, len(in.GetAnnotations()))
		for k := range in.GetAnnotations() {
			before = append(before, k)
		}
		out, err := transform(obj) // may change in in place
		if err != nil {
			return out, err
		}
		kept := map[string]string{}
		if o, ok := out.(metav1.Object); ok {
			kept = o.GetAnnotations()
		}
		var lost []string
		for _, k := range before {
			if _, ok := kept[k]; !ok {
				lost = append(lost, k)
			}
		}
		if len(lost) > 0 {
			d.add(uid, lost)
		}
		return out, nil
	}
}

func (d *droppedAnnotations) add(uid types.UID, keys []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	have := d.keys[uid]
	for _, k := range keys {
		if !contains(have, k) {
			have = append(have, k)
		}
	}
	d.keys[uid] = have
}

// forget is the informers' delete handler.
func (d *droppedAnnotations) forget(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		d.mu.Lock()
		defer d.mu.Unlock()
		delete(d.keys, o.GetUID())
	}
}

// lacks reports whether obj lacks an annotation a transform dropped from
// the object of its UID: obj is a cached copy, not what the server holds.
func (d *droppedAnnotations) lacks(obj metav1.Object) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range d.keys[obj.GetUID()] {
		if _, ok := obj.GetAnnotations()[k]; !ok {
			return true
		}
	}
	return false
}

// Dropped reports whether obj, a child read from one of i's caches, lacks
// annotations the server holds (droppedAnnotations): an update must be
// built from the object as the server has it instead. A nil i has
// dropped nothing.
func (i *Informers) Dropped(obj metav1.Object) bool {
	return i != nil && i.dropped.lacks(obj)
}
