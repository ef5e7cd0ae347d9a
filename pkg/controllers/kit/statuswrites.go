package kit

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// statusWriteTTL bounds how long a status write is remembered. The
// informer normally delivers a write within milliseconds; past this, a
// sync compares with the cache as if nothing had been written.
const statusWriteTTL = time.Minute

// StatusWrites remembers the status this process last applied to each
// object until the informer shows that write, so that a sync which runs
// before then — a requeue, or another writer's event racing the watch —
// does not apply the same status a second time. A reconciler's "changed?"
// test compares with the cache; without this, a cache one write behind
// makes it write one change twice. Once the cache shows the write or
// anything after it (another writer overwriting our fields included), the
// cache is compared with as usual. It is safe for concurrent use.
type StatusWrites struct {
	clock clock.PassiveClock

	mu        sync.Mutex
	writes    map[types.UID]statusWrite
	lastPrune time.Time
}

type statusWrite struct {
	digest [sha256.Size]byte
	// basis is the resourceVersion of the cached object the write was
	// computed from, written that of the object the write returned.
	basis, written string
	at             time.Time
}

// NewStatusWrites returns an empty memory; nil clk means the real clock.
func NewStatusWrites(clk clock.PassiveClock) *StatusWrites {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &StatusWrites{clock: clk, writes: map[types.UID]statusWrite{}}
}

// Repeats reports whether apply (a status apply configuration) is the
// status last written to cached's object while the cache does not show
// that write yet: the caller then skips the write. Conditions'
// lastTransitionTime is ignored, since a sync computing from an older
// object stamps a transition again.
func (w *StatusWrites) Repeats(cached metav1.Object, apply any) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.writes[cached.GetUID()]
	if !ok {
		return false
	}
	if !last.behind(cached.GetResourceVersion()) || w.clock.Since(last.at) > statusWriteTTL {
		// The cache shows the write or something newer (or never will):
		// compare with it.
		delete(w.writes, cached.GetUID())
		return false
	}
	digest, ok := statusDigest(apply)
	return ok && digest == last.digest
}

// behind reports whether a cached object of resourceVersion rv predates
// the write.
func (last statusWrite) behind(rv string) bool { return CacheBehind(rv, last.basis, last.written) }

// CacheBehind reports whether a cached object of resourceVersion cached
// predates a write that returned resourceVersion written, computed from
// the object of resourceVersion basis. resourceVersions are etcd
// revisions, so an older object has a smaller one; where they do not parse
// as numbers, only the object the write was computed from counts as older.
func CacheBehind(cached, basis, written string) bool {
	cachedRV, err1 := strconv.ParseUint(cached, 10, 64)
	writtenRV, err2 := strconv.ParseUint(written, 10, 64)
	if err1 != nil || err2 != nil {
		return cached == basis
	}
	return cachedRV < writtenRV
}

// Wrote records that apply, computed from cached, was written; written is
// the object the server returned.
func (w *StatusWrites) Wrote(cached, written metav1.Object, apply any) {
	digest, ok := statusDigest(apply)
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.clock.Now()
	if now.Sub(w.lastPrune) > statusWriteTTL {
		for uid, last := range w.writes {
			if now.Sub(last.at) > statusWriteTTL {
				delete(w.writes, uid)
			}
		}
		w.lastPrune = now
	}
	if !ok || cached.GetUID() == "" || written == nil {
		return
	}
	w.writes[cached.GetUID()] = statusWrite{digest: digest, basis: cached.GetResourceVersion(),
		written: written.GetResourceVersion(), at: now}
}

// statusDigest hashes apply's JSON with every lastTransitionTime removed.
func statusDigest(apply any) ([sha256.Size]byte, bool) {
	raw, err := json.Marshal(apply)
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return [sha256.Size]byte{}, false
	}
	dropTransitionTimes(doc)
	raw, err = json.Marshal(doc) // map keys sorted: canonical
	if err != nil {
		return [sha256.Size]byte{}, false
	}
	return sha256.Sum256(raw), true
}

func dropTransitionTimes(v any) {
	switch v := v.(type) {
	case map[string]any:
		delete(v, "lastTransitionTime")
		for _, child := range v {
			dropTransitionTimes(child)
		}
	case []any:
		for _, child := range v {
			dropTransitionTimes(child)
		}
	}
}

// ApplyStatus runs write, a server-side apply of the status apply
// computed from cached, unless w says it repeats a write the cache does
// not show yet, and records it. A NotFound (the object is gone) is
// no error.
func ApplyStatus(w *StatusWrites, cached metav1.Object, apply any, write func() (metav1.Object, error)) error {
	if w.Repeats(cached, apply) {
		return nil
	}
	written, err := write()
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	w.Wrote(cached, written, apply)
	return nil
}
