package kit

import (
	"crypto/sha256"
	"encoding/json"
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
// object while the informer still shows the object that status was
// computed from, so that a sync which runs before the watch delivers the
// write — a requeue or another event racing it — does not apply the same
// status a second time. A reconciler's "changed?" test compares with the
// cache; without this, a cache one write behind makes it write every change
// twice. Once the cache shows anything newer (our write, or someone else's
// after it), the cache is compared with as usual. It is safe for concurrent
// use.
type StatusWrites struct {
	clock clock.PassiveClock

	mu        sync.Mutex
	writes    map[types.UID]statusWrite
	lastPrune time.Time
}

type statusWrite struct {
	digest [sha256.Size]byte
	// basis is the resourceVersion of the cached object the write was
	// computed from.
	basis string
	at    time.Time
}

// NewStatusWrites returns an empty memory; nil clk means the real clock.
func NewStatusWrites(clk clock.PassiveClock) *StatusWrites {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &StatusWrites{clock: clk, writes: map[types.UID]statusWrite{}}
}

// Repeats reports whether apply (a status apply configuration) is the
// status last written from the very object the cache still shows as
// cached: the caller then skips the write. Conditions' lastTransitionTime
// is ignored, since a sync computing from the same old object stamps a
// transition again.
func (w *StatusWrites) Repeats(cached metav1.Object, apply any) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.writes[cached.GetUID()]
	if !ok {
		return false
	}
	if cached.GetResourceVersion() != last.basis || w.clock.Since(last.at) > statusWriteTTL {
		// The cache has moved on (or never will): compare with it.
		delete(w.writes, cached.GetUID())
		return false
	}
	digest, ok := statusDigest(apply)
	return ok && digest == last.digest
}

// Wrote records that apply, computed from cached, was written.
func (w *StatusWrites) Wrote(cached metav1.Object, apply any) {
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
	if !ok || cached.GetUID() == "" {
		return
	}
	w.writes[cached.GetUID()] = statusWrite{digest: digest, basis: cached.GetResourceVersion(), at: now}
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
// computed from cached, unless w says it repeats a write made from the
// same cached object, and records it. A NotFound (the object is gone) is
// no error.
func ApplyStatus(w *StatusWrites, cached metav1.Object, apply any, write func() (metav1.Object, error)) error {
	if w.Repeats(cached, apply) {
		return nil
	}
	_, err := write()
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	w.Wrote(cached, apply)
	return nil
}
