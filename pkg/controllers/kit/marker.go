package kit

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/clerum/hcc/pkg/mark"
)

// Marker authenticates the children of one kind HCC created
// (docs/ownership.md, "Claims"): right after a create, Ensure writes
// mark.Annotation with an HMAC over the child's namespace, name and UID and
// its owner's UID. The UID is the API server's, assigned at the create, so
// a mark copied onto another object — another name, or the same name
// re-created — does not verify, and no one without the key can compute one.
//
// It also remembers, per name, the child this process marked: an informer
// can deliver the create before the update that marked it, and the child
// is not to be judged unmarked meanwhile. And it remembers a child this
// process created but could not mark (the update after the create failed):
// the UID is the one the create returned, so the child is HCC's, and the
// next Ensure writes its mark — without that memory, a claim the volume
// binder bound in between would be refused for good as an unmarked claim
// with a volume. A nil Marker, or one of a zero Key, marks nothing and
// finds nothing marked.
type Marker struct {
	key mark.Key

	mu sync.Mutex
	// marked is, per child name, the child UID and owner UID this process
	// marked, or created and has yet to mark (pending): one entry per name,
	// replaced when the name is created again.
	marked map[types.NamespacedName]markedPair
}

type markedPair struct {
	child, owner types.UID
	pending      bool
}

// NewMarker returns a Marker signing with key (mark.NewKey(secret,
// mark.PurposeClaim) for claims).
func NewMarker(key mark.Key) *Marker {
	return &Marker{key: key, marked: map[types.NamespacedName]markedPair{}}
}

func (m *Marker) usable() bool { return m != nil && m.key.Usable() }

// Sign returns the mark of obj under owner; "" from an unusable Marker.
func (m *Marker) Sign(owner Owner, obj metav1.Object) string {
	if !m.usable() {
		return ""
	}
	return m.key.Sign(markFields(owner, obj)...)
}

// Verify reports whether obj carries a valid mark under owner.
func (m *Marker) Verify(owner Owner, obj metav1.Object) bool {
	return m.usable() && m.key.Verify(obj.GetAnnotations()[mark.Annotation], markFields(owner, obj)...)
}

func markFields(owner Owner, obj metav1.Object) []string {
	return []string{obj.GetNamespace(), obj.GetName(), string(obj.GetUID()), string(owner.Object.GetUID())}
}

// Remembered reports whether this process marked obj (this UID) for owner,
// whatever the copy in hand shows of the mark.
func (m *Marker) Remembered(owner Owner, obj metav1.Object) bool {
	p, ok := m.lookup(owner, obj)
	return ok && !p.pending
}

// Unmarked reports whether this process created obj (this UID) for owner
// and has not marked it yet: the child is HCC's, and its mark is owed.
func (m *Marker) Unmarked(owner Owner, obj metav1.Object) bool {
	p, ok := m.lookup(owner, obj)
	return ok && p.pending
}

func (m *Marker) lookup(owner Owner, obj metav1.Object) (markedPair, bool) {
	if !m.usable() || obj.GetUID() == "" {
		return markedPair{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.marked[types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}]
	return p, ok && p.child == obj.GetUID() && p.owner == owner.Object.GetUID()
}

// remember records that this process marked obj for owner.
func (m *Marker) remember(owner Owner, obj metav1.Object) { m.record(owner, obj, false) }

// rememberCreated records that this process created obj for owner and
// could not mark it.
func (m *Marker) rememberCreated(owner Owner, obj metav1.Object) { m.record(owner, obj, true) }

func (m *Marker) record(owner Owner, obj metav1.Object, pending bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.marked[types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}] = markedPair{
		child: obj.GetUID(), owner: owner.Object.GetUID(), pending: pending}
}

// WithMarker returns k whose children Ensure marks right after creating
// them, and whose rule (PersistentVolumeClaims: the claim's volume) trusts
// what a child carrying a valid mark says.
func (k Kind[T]) WithMarker(m *Marker) Kind[T] {
	k.marker = m
	return k
}

// MarkCreated writes sign(obj) into mark.Annotation of created, the object
// a create just returned, and returns the object as updated. The update
// names created's UID (from created itself, or after a Conflict from a read
// of the name that must show the same UID), so it never marks another
// object that took the name since. On a Conflict — a controller that wrote
// the object in between (the volume binder binding a claim) — it reads the
// object again and retries. Ensure calls it for a kind WithMarker; a
// reconciler whose mark covers more than the identity (the GlobalFileSystem
// seed Job's) calls it with its own sign.
func MarkCreated[T Child](ctx context.Context, c *Children, kind Kind[T], created T, sign func(T) string) (T, error) {
	var zero T
	ns, name, uid := created.GetNamespace(), created.GetName(), created.GetUID()
	client := kind.client(c.kube, ns)
	obj := created
	var marked T
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if obj == zero {
			live, err := client.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("%s %s/%s went before HCC could mark it: %w", kind.Name, ns, name, ErrCacheBehind)
			}
			if err != nil {
				return err
			}
			if live.GetUID() != uid {
				return fmt.Errorf("%s %s/%s was replaced before HCC could mark it: %w", kind.Name, ns, name, ErrCacheBehind)
			}
			obj = live
		}
		write := obj.DeepCopyObject().(T)
		obj = zero // a retry reads the object again
		annotations := overlay(write.GetAnnotations(), nil)
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[mark.Annotation] = sign(write)
		write.SetAnnotations(annotations)
		updated, err := client.Update(ctx, write, metav1.UpdateOptions{FieldManager: c.fieldManager})
		if err != nil {
			return err
		}
		marked = updated
		return nil
	})
	if err != nil {
		return zero, fmt.Errorf("marking %s %s/%s: %w", kind.Name, ns, name, err)
	}
	return marked, nil
}
