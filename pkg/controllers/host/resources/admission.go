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

// LabelSecretForHost marks a Secret as made for one Host: its value is the
// Host's name. A Secret labelled for one Host is never another Host's
// spec.secretRef, and with HCC_HOST_SECRET_REQUIRE_LABEL=true only a Secret
// labelled for a Host may be its spec.secretRef (SecretRefRule).
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
	a.Block, a.SecretsMessage = SecretRefRule(h, secret(ref.Name), opts)
	a.SecretsOK = a.Block == ""
	return a
}

// SecretRefRule judges s, the Secret h's spec.secretRef names (nil when it
// does not exist), and returns why h may not read it — the block reason and
// a message naming the rule — or "" and what was found (docs/host.md,
// "Identity and hardening"). The Host's Role grants its pod read access to that
// Secret, so:
//
//   - whatever the mode, it must exist (else SecretsMissing), and must not
//     be a service-account token, a registry credential or a Secret HCC
//     manages (InvalidSpec: no Host may read one), nor labelled
//     LabelSecretForHost for another Host (SecretsMissing: it was made for
//     that Host);
//   - with opts.SecretRequireLabel (HCC_HOST_SECRET_REQUIRE_LABEL=true) it
//     must also be labelled LabelSecretForHost=<h's name> (SecretsMissing).
//
// The default is the rule Hosts ran under before HCC, which asked only that
// the Secret exist: the kinds refused in both modes are what it must never
// have granted.
func SecretRefRule(h *clerumv1alpha1.Host, s *corev1.Secret, opts Options) (block, message string) {
	name := h.Spec.SecretRef.Name
	if s == nil {
		return reasons.SecretsMissing, fmt.Sprintf("Secret %s does not exist", name)
	}
	if why := forbiddenToHosts(s); why != "" {
		// The kind is the rule: none may be any Host's, in either mode.
		return reasons.InvalidSpec, fmt.Sprintf("Secret %s may not be a Host's: it %s", name, why)
	}
	forHost, labelled := s.Labels[LabelSecretForHost]
	switch {
	case labelled && forHost != h.Name:
		return reasons.SecretsMissing, fmt.Sprintf("Secret %s is labelled %s=%q: it was made for another Host, which is refused whatever HCC_HOST_SECRET_REQUIRE_LABEL says",
			name, LabelSecretForHost, forHost)
	case labelled:
		return "", fmt.Sprintf("Secret %s exists and is labelled for this Host", name)
	case opts.SecretRequireLabel:
		return reasons.SecretsMissing, fmt.Sprintf("Secret %s is not labelled %s=%s, which HCC_HOST_SECRET_REQUIRE_LABEL=true requires of a Host's Secret",
			name, LabelSecretForHost, h.Name)
	}
	return "", fmt.Sprintf("Secret %s exists and is labelled for no Host, which HCC_HOST_SECRET_REQUIRE_LABEL=false allows", name)
}

// forbiddenToHosts says why no Host may read s, or "": it is a
// service-account token or a registry credential (names.ForbiddenSecret),
// or one of HCC's own Secrets (labelled clerum.io/managed-by with HCC's
// value), such as another Host's runtime credential.
func forbiddenToHosts(s *corev1.Secret) string {
	if why := names.ForbiddenSecret(string(s.Type), nil); why != "" {
		return why
	}
	if s.Labels[names.LabelManagedBy] == names.ManagedByValue {
		return "is managed by HCC (label " + names.LabelManagedBy + "=" + names.ManagedByValue + ")"
	}
	return ""
}

func holderOf(context *clerumv1alpha1.Context, sameID []*clerumv1alpha1.Context) *clerumv1alpha1.Context {
	if context == nil {
		return nil
	}
	return netpol.ContextIDHolder(sameID, context.Spec.ContextID)
}
