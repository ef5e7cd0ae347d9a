package kit

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	applymetav1 "k8s.io/client-go/applyconfigurations/meta/v1"
)

// Condition is one condition a field manager owns, as it wants it now.
type Condition struct {
	Type    string
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// Conditions is the whole set of conditions one field manager applies to an
// object's status by server-side apply. Under server-side apply a condition
// the manager stops sending is removed, so a manager sends all of its
// conditions on every write: Conditions builds that set, keeping each
// lastTransitionTime while its status holds and stamping observedGeneration,
// and says whether it differs from what the object shows, so an unchanged
// status is never written. Conditions of other managers in the object are
// neither compared nor sent.
type Conditions struct {
	// Apply is the set to send, in the order the manager listed them.
	Apply []*applymetav1.ConditionApplyConfiguration
	// Changed reports whether any of them differs from the object's: a
	// status, reason, message or observedGeneration, or a missing one.
	Changed bool
}

// BuildConditions returns the set for want, given have (the object's current
// conditions), the object's generation and the time of this write.
func BuildConditions(have []metav1.Condition, generation int64, now time.Time, want ...Condition) Conditions {
	return BuildOwnedConditions(have, nil, generation, now, want...)
}

// BuildOwnedConditions is BuildConditions for a manager whose set of
// conditions varies (RemoteReachable only for remote servers): owned lists
// every type the manager may write, and one that have shows but want no
// longer holds is a change, so the write that drops it is made.
func BuildOwnedConditions(have []metav1.Condition, owned []string, generation int64, now time.Time, want ...Condition) Conditions {
	var out Conditions
	for _, typ := range owned {
		if meta.FindStatusCondition(have, typ) != nil && !slices.ContainsFunc(want, func(w Condition) bool { return w.Type == typ }) {
			out.Changed = true
		}
	}
	for _, w := range want {
		cur := meta.FindStatusCondition(have, w.Type)
		transition := metav1.NewTime(now)
		if cur != nil && cur.Status == w.Status {
			transition = cur.LastTransitionTime
		}
		if cur == nil || cur.Status != w.Status || cur.Reason != w.Reason || cur.Message != w.Message ||
			cur.ObservedGeneration != generation {
			out.Changed = true
		}
		out.Apply = append(out.Apply, applymetav1.Condition().
			WithType(w.Type).WithStatus(w.Status).WithReason(w.Reason).WithMessage(w.Message).
			WithObservedGeneration(generation).WithLastTransitionTime(transition))
	}
	return out
}
