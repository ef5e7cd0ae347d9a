package kit

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Deletions remembers the owners of one kind this process saw deleted,
// until their children are gone, so a child left behind is told from a
// child of a later owner of the same name (docs/reconcilers.md#memory).
// It is safe for concurrent use.
type Deletions struct {
	kind string
	mu   sync.Mutex
	uids map[string]types.UID
}

// NewDeletions returns the memory of deleted owners of kind (their
// children's controller references name it).
func NewDeletions(kind string) *Deletions {
	return &Deletions{kind: kind, uids: map[string]types.UID{}}
}

// Observe records that the owner name, of uid, was deleted.
func (d *Deletions) Observe(name string, uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.uids[name] = uid
}

// Seen reports whether an owner of that name was seen deleted and not yet
// settled.
func (d *Deletions) Seen(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.uids[name]
	return ok
}

// Leftover reports whether o is a leftover of the owner name seen deleted:
// o's controller reference, if it has one of the kind, names that very
// owner (UID), not a later one of the same name.
func (d *Deletions) Leftover(name string, o metav1.Object) bool {
	d.mu.Lock()
	uid, ok := d.uids[name]
	d.mu.Unlock()
	if !ok {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(o)
	return ref == nil || ref.Kind != d.kind || ref.UID == uid
}

// Settle forgets a deletion once nothing of the owner is left.
func (d *Deletions) Settle(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.uids, name)
}

// Reasons remembers one reason per object ("" for none: a block, a
// conflict), so that a block and its release are each one event, not one
// per sync, and counts the objects by reason for a gauge without a walk
// over every object. It is safe for concurrent use.
type Reasons struct {
	mu       sync.Mutex
	reason   map[string]string
	byReason map[string]int
}

// NewReasons returns an empty memory.
func NewReasons() *Reasons {
	return &Reasons{reason: map[string]string{}, byReason: map[string]int{}}
}

// Set records name's reason ("" for none) and returns the previous one
// ("" for none, or never set).
func (r *Reasons) Set(name, reason string) (previous string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	previous = r.reason[name]
	if previous != "" {
		r.byReason[previous]--
	}
	if reason == "" {
		delete(r.reason, name)
	} else {
		r.reason[name] = reason
		r.byReason[reason]++
	}
	return previous
}

// Get returns name's reason, "" for none.
func (r *Reasons) Get(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reason[name]
}

// Count returns how many objects hold reason.
func (r *Reasons) Count(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byReason[reason]
}

// Forget drops name (an object that is gone).
func (r *Reasons) Forget(name string) { r.Set(name, "") }
