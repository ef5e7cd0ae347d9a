package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/netpol"
	"github.com/clerum/hcc/pkg/reasons"
)

// Admission is whether a Host may be deployed, decided from its Context and
// its spec.secretRef before anything is written. The controller and render
// share it.
type Admission struct {
	// ContextID is what the Host's pods carry; empty when blocked on the
	// Context.
	ContextID string
	// Block is the reason the Host is not deployed (reasons.ContextMissing,
	// ReasonContextConflict, ReasonInvalidSpec, ReasonSecretsMissing), empty
	// when it may be.
	Block string
	// ContextMessage and SecretsMessage say what was found.
	ContextMessage, SecretsMessage string
	// SecretsChecked is false when the Context blocked the Host first.
	SecretsChecked, SecretsOK bool
}

// LabelSecretForHost opts a Secret in to being a Host's spec.secretRef: its
// value must be the Host's name. The Host's Role grants its pod read access
// to that Secret, so a Host may name only a Secret made for it — not another
// tenant's, nor a service-account token, a registry credential or an object
// HCC manages (docs/host.md).
const LabelSecretForHost = "clerum.io/secret-for-host"

// Admit decides h's admission. context is h's Context (nil when missing);
// sameID returns every Context holding context's contextId; secret returns a
// Secret of h's namespace (values digested or absent), or nil. The holder of a
// contextId is computed with the planner's own rule (the oldest Context
// wins), not read from the ContextIDConflict condition, which comes later:
// a Host's pods never carry a contextId its Context does not hold.
func Admit(h *clerumv1alpha1.Host, context *clerumv1alpha1.Context, sameID []*clerumv1alpha1.Context,
	secret func(name string) *corev1.Secret, namespace string, opts Options) Admission {
	var a Admission
	switch holder := holderOf(context, sameID); {
	case context == nil:
		a.Block, a.ContextMessage = reasons.ContextMissing, fmt.Sprintf("Context %s does not exist in %s", h.Spec.ContextRef, namespace)
		return a
	case holder == nil:
		a.Block, a.ContextMessage = reasons.ContextConflict, fmt.Sprintf("Context %s holds no valid contextId (%q)", context.Name, context.Spec.ContextID)
		return a
	case holder.UID != context.UID || holder.Name != context.Name:
		a.Block = reasons.ContextConflict
		a.ContextMessage = fmt.Sprintf("contextId %s of Context %s is held by the older Context %s", context.Spec.ContextID, context.Name, holder.Name)
		return a
	}
	a.ContextID = context.Spec.ContextID
	a.ContextMessage = fmt.Sprintf("Context %s holds contextId %s", context.Name, context.Spec.ContextID)
	a.SecretsChecked = true
	if err := ValidateSecretRef(h, opts); err != nil {
		a.Block, a.SecretsMessage = reasons.InvalidSpec, err.Error()
		return a
	}
	ref := h.Spec.SecretRef
	if ref == nil || ref.Name == "" {
		a.SecretsOK, a.SecretsMessage = true, "the Host references no Secret"
		return a
	}
	s := secret(ref.Name)
	var forbidden string
	if s != nil {
		forbidden = names.ForbiddenSecret(string(s.Type), s.Labels)
	}
	switch {
	case s == nil:
		a.Block, a.SecretsMessage = reasons.SecretsMissing, fmt.Sprintf("Secret %s does not exist", ref.Name)
	case forbidden != "":
		a.Block = reasons.InvalidSpec
		a.SecretsMessage = fmt.Sprintf("Secret %s may not be a Host's: it %s", ref.Name, forbidden)
	case s.Labels[LabelSecretForHost] != h.Name:
		a.Block = reasons.SecretsMissing
		a.SecretsMessage = fmt.Sprintf("Secret %s is not labelled %s=%s: a Host may read only a Secret made for it", ref.Name, LabelSecretForHost, h.Name)
	default:
		a.SecretsOK, a.SecretsMessage = true, fmt.Sprintf("Secret %s exists and is labelled for this Host", ref.Name)
	}
	return a
}

func holderOf(context *clerumv1alpha1.Context, sameID []*clerumv1alpha1.Context) *clerumv1alpha1.Context {
	if context == nil {
		return nil
	}
	return netpol.ContextIDHolder(sameID, context.Spec.ContextID)
}
