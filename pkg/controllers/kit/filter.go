// Package kit holds what HCC's reconcilers share. It starts with the event
// filters; the queue, worker loop and status helpers join it as the
// reconcilers move onto it.
package kit

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
)

// StatusOnly reports whether an update of one object changed nothing but
// its status: the same generation (the API server bumps it on every spec
// change of a kind with a status subresource), labels, annotations and
// deletion timestamp. A reconciler drops such updates of its own kind, so
// its own status writes do not wake it again. Child informers must not use
// it: a child's status (a Deployment's readiness) is what flows back.
func StatusOnly(old, cur any) bool {
	o, errOld := meta.Accessor(old)
	n, errNew := meta.Accessor(cur)
	if errOld != nil || errNew != nil {
		return false
	}
	return o.GetGeneration() == n.GetGeneration() &&
		maps.Equal(o.GetLabels(), n.GetLabels()) &&
		maps.Equal(o.GetAnnotations(), n.GetAnnotations()) &&
		o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}
