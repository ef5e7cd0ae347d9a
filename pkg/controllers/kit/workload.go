package kit

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

// DeploymentAvailable reports whether d has observed its current generation
// and has at least its desired replicas available, desired being more than
// zero, and at least that many of them run the current pod template.
// Available replicas alone count the old pods of a rollout too: a workload
// whose new template has not reached a single pod yet is not ready.
func DeploymentAvailable(d *appsv1.Deployment) bool {
	desired := ptr.Deref(d.Spec.Replicas, 1)
	return desired > 0 && d.Status.ObservedGeneration >= d.Generation &&
		d.Status.AvailableReplicas >= desired && d.Status.UpdatedReplicas >= desired
}
