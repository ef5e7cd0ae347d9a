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
	w.Wrote(objectAt("4"), objectAt("6"), ready) // another writer's 5 lands between
	assert.True(t, w.Repeats(objectAt("4"), ready), "the cache still shows the object the write was computed from")
	assert.True(t, w.Repeats(objectAt("5"), ready), "nor does the other writer's object hold our write")
	assert.True(t, w.Repeats(objectAt("5"), statusApply("Available", now.Add(time.Second))), "a transition stamped again is the same status")
	assert.False(t, w.Repeats(objectAt("5"), statusApply("Progressing", now)), "another status is written")

	assert.False(t, w.Repeats(objectAt("7"), ready), "an object after the write (an overwrite of our fields, say): compare with it")
	assert.False(t, w.Repeats(objectAt("5"), ready), "and the write is forgotten")

	w.Wrote(objectAt("8"), objectAt("9"), ready)
	assert.False(t, w.Repeats(objectAt("9"), ready), "the cache shows the write")

	w.Wrote(objectAt("10"), objectAt("11"), ready)
	clk.Step(statusWriteTTL + time.Second)
	assert.False(t, w.Repeats(objectAt("10"), ready), "a write the cache never showed is forgotten after a minute")

	other := &metav1.ObjectMeta{Name: "s", UID: "uid-2", ResourceVersion: "12"}
	w.Wrote(objectAt("12"), objectAt("13"), ready)
	assert.False(t, w.Repeats(other, ready), "a recreated object (another UID) is compared with the cache")

	opaque := NewStatusWrites(clk)
	opaque.Wrote(objectAt("a"), objectAt("c"), ready)
	assert.True(t, opaque.Repeats(objectAt("a"), ready), "unparsable versions: the basis object counts as older")
	assert.False(t, opaque.Repeats(objectAt("b"), ready), "and nothing else does")
}
