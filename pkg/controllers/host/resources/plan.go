package resources

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/workload"
)

// GVK is the kind of the children's owner, for controller references.
var GVK = schema.GroupVersion(clerumv1alpha1.GroupVersion).WithKind("Host")

// Children are the per-Host objects the controller writes for an admitted
// Host, as MakeChildren plans them: the one list that both the
// controller's sync and render take them from. None carries an owner
// reference (the kit sets it from the live owner; Plan prints one with an
// empty uid).
type Children struct {
	// In the host namespace.
	ServiceAccount *corev1.ServiceAccount
	Role           *rbacv1.Role
	RoleBinding    *rbacv1.RoleBinding
	WorkspaceClaim *corev1.PersistentVolumeClaim
	// RuntimeTokenSecret holds no credential and no issuance annotations:
	// only the Control API issues credentials, so the controller writes
	// BuildRuntimeTokenSecret with what it was issued instead.
	RuntimeTokenSecret *corev1.Secret
	// DesktopPolicy is nil when the Host has no desktop; the controller
	// then deletes one it finds.
	DesktopPolicy *networkingv1.NetworkPolicy
	// Deployment is nil when it cannot be built (MakeChildren's error).
	Deployment *appsv1.Deployment
	Service    *corev1.Service

	// In the channels namespace, which no owner reference reaches.
	ChannelReaderPolicy     *networkingv1.NetworkPolicy
	ChannelReaderDeployment *appsv1.Deployment
	ChannelReaderService    *corev1.Service
}

// MakeChildren plans the children of h, admitted by a (a.Block empty), under
// opts. The error is the Deployment's (ErrContextID): every other child is
// planned regardless, and the Deployment is left nil.
func MakeChildren(h *clerumv1alpha1.Host, a Admission, opts Options) (Children, error) {
	d, err := BuildDeployment(h, a.ContextID, opts)
	// The Role grants spec.secretRef's Secret only when Admit admitted it
	// (SecretRefRule): an admitted Host's always is.
	granted := h
	if !a.SecretsOK {
		granted = h.DeepCopy()
		granted.Spec.SecretRef = nil
	}
	return Children{
		ServiceAccount:     BuildServiceAccount(h, opts),
		Role:               BuildRole(granted, opts),
		RoleBinding:        BuildRoleBinding(h, opts),
		WorkspaceClaim:     BuildWorkspaceClaim(h, opts),
		RuntimeTokenSecret: BuildEmptyRuntimeTokenSecret(h, opts),
		DesktopPolicy:      BuildDesktopPolicy(h, opts),
		Deployment:         d,
		Service:            BuildService(h, opts),

		ChannelReaderPolicy:     BuildChannelReaderPolicy(h, opts),
		ChannelReaderDeployment: BuildChannelReaderDeployment(h, opts),
		ChannelReaderService:    BuildChannelReaderService(h, opts),
	}, err
}

// Plan returns, for render, every per-Host object the controller would
// write for h in an empty cluster (the runtime-token Secret without data:
// only the Control API issues credentials), or why it writes none: the
// children of MakeChildren, those in the host namespace with an owner
// reference naming the Host with an empty uid.
func Plan(h *clerumv1alpha1.Host, a Admission, opts Options) (children []runtime.Object, err error) {
	if a.Block != "" {
		return nil, nil
	}
	c, err := MakeChildren(h, a, opts)
	if err != nil {
		return nil, err
	}
	own := []workload.Object{c.ServiceAccount, c.Role, c.RoleBinding, c.WorkspaceClaim, c.RuntimeTokenSecret, c.Deployment, c.Service}
	if c.DesktopPolicy != nil {
		own = append(own, c.DesktopPolicy)
	}
	children = workload.ControlledBy(GVK, h.Name, own...)
	// No owner reference reaches the channels namespace.
	children = append(children, c.ChannelReaderDeployment, c.ChannelReaderService, c.ChannelReaderPolicy)
	return children, nil
}
