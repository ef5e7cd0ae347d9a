// Package workload is the hardened baseline every pod HCC builds starts
// from (docs/containers.md). It is pure: objects in, objects out, no
// clients, so every reconciler's builders and render share it.
package workload

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// Container is a container of image with the API server's defaults written
// out, so the built object compares equal to the one the server returns,
// and the hardened security context: no privilege escalation, a read-only
// root file system, a non-root user and every capability dropped.
func Container(name, image string, pull corev1.PullPolicy) corev1.Container {
	return corev1.Container{
		Name:                     name,
		Image:                    image,
		ImagePullPolicy:          pull,
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			RunAsNonRoot:             ptr.To(true),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// PodSecurity is the pod security context: every container runs as user
// and group, non-root, volumes are group-owned by group, and the runtime's
// default seccomp profile applies.
func PodSecurity(user, group int64) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(user),
		RunAsGroup:     ptr.To(group),
		FSGroup:        ptr.To(group),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// Object is a Kubernetes object as the builders return it.
type Object interface {
	runtime.Object
	metav1.Object
}

// ControlledBy sets on each of objs a controller reference to the owner
// name of kind gvk, with an empty uid, and returns them as render prints
// them: in render's offline plan the owner has no uid, which only the
// cluster assigns (the controller's kit.Ensure fills it in).
func ControlledBy(gvk schema.GroupVersionKind, name string, objs ...Object) []runtime.Object {
	ref := []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: name,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	out := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		o.SetOwnerReferences(ref)
		out = append(out, o)
	}
	return out
}
