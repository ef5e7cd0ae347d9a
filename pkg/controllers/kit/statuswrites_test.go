package kit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func objectAt(rv string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: "s", UID: "uid-1", ResourceVersion: rv}
}

func statusApply(reason string, transition time.Time) map[string]any {
	return map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "reason": reason, "lastTransitionTime": transition.Format(time.RFC3339)},
	}}}
}

func TestStatusWrites(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(now)
	w := NewStatusWrites(clk)
	ready := statusApply("Available", now)

	assert.False(t, w.Repeats(objectAt("4"), ready), "nothing written yet")
	w.Wrote(objectAt("4"), ready)
	assert.True(t, w.Repeats(objectAt("4"), ready), "the cache still shows the object the write was computed from")
	assert.True(t, w.Repeats(objectAt("4"), statusApply("Available", now.Add(time.Second))), "a transition stamped again is the same status")
	assert.False(t, w.Repeats(objectAt("4"), statusApply("Progressing", now)), "another status is written")

	assert.False(t, w.Repeats(objectAt("5"), ready), "the cache moved on (our write, or another writer's): compare with it")
	assert.False(t, w.Repeats(objectAt("4"), ready), "and the write is forgotten")

	w.Wrote(objectAt("6"), ready)
	clk.Step(statusWriteTTL + time.Second)
	assert.False(t, w.Repeats(objectAt("6"), ready), "a write the cache never showed is forgotten after a minute")

	other := &metav1.ObjectMeta{Name: "s", UID: "uid-2", ResourceVersion: "8"}
	w.Wrote(objectAt("8"), ready)
	assert.False(t, w.Repeats(other, ready), "a recreated object (another UID) is compared with the cache")
}
