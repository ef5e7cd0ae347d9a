package host

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/kit"
	applyv1alpha1 "github.com/clerum/hcc/pkg/generated/applyconfiguration/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// status is what one sync found, as the status hcc-host owns: the
// conditions Ready, SecretsResolved and AuthReady, observedGeneration,
// contextId, image and credentialExpiresAt.
type status struct {
	host *clerumv1alpha1.Host

	ready, secretsResolved, authReady kit.Condition
	contextID, image                  string
	expiresAt                         time.Time

	contextMessage string
	secretsMessage string
}

func newStatus(h *clerumv1alpha1.Host) *status {
	return &status{
		host:            h,
		ready:           kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasons.Progressing, Message: "not reconciled yet"},
		secretsResolved: kit.Condition{Type: clerumv1alpha1.ConditionSecretsResolved, Status: metav1.ConditionUnknown, Reason: reasons.Progressing, Message: "not checked: the Host is blocked before its Secrets are"},
		authReady:       kit.Condition{Type: clerumv1alpha1.ConditionAuthReady, Status: metav1.ConditionUnknown, Reason: reasons.CredentialPending, Message: "no credential is obtained for a blocked Host"},
	}
}

func (st *status) secrets(ok bool, message string) {
	st.secretsMessage = message
	st.secretsResolved = kit.Condition{Type: clerumv1alpha1.ConditionSecretsResolved, Status: metav1.ConditionTrue, Reason: reasons.SecretsFound, Message: message}
	if !ok {
		st.secretsResolved.Status, st.secretsResolved.Reason = metav1.ConditionFalse, reasons.SecretsMissing
	}
}

func (st *status) auth(s metav1.ConditionStatus, reason, message string, expiresAt time.Time) {
	st.authReady = kit.Condition{Type: clerumv1alpha1.ConditionAuthReady, Status: s, Reason: reason, Message: message}
	st.expiresAt = expiresAt
}

func (st *status) blockMessage(reason string) string {
	switch reason {
	case reasons.ContextMissing, reasons.ContextConflict:
		return st.contextMessage + "; the Host is not deployed and its pods are stopped"
	}
	return st.secretsMessage + "; the Host is not deployed or rolled"
}

// blocked records a Host kept from deploying; the image it shows is that
// of the pods it may still run (a Secret block leaves them running).
func (st *status) blocked(reason string, live *appsv1.Deployment) {
	st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: st.blockMessage(reason)}
	if reason != reasons.ContextMissing && reason != reasons.ContextConflict && live != nil {
		st.image = resources.DeployedImage(live)
		st.contextID = live.Spec.Template.Labels[names.LabelContext]
	}
}

func (st *status) notOwned(message string) {
	st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasons.NotOwned, Message: message}
}

// configMissing records a Host whose Deployment waits for the ConfigMap
// its container loads.
func (st *status) configMissing(message string) {
	st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasons.ConfigMissing, Message: message}
}

func (st *status) waitingForCredential() {
	st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasons.CredentialPending,
		Message: "waiting for a bootstrap credential from the Control API (see AuthReady); the Deployment is not created without one"}
}

// deployed records the Deployment written for the Host.
func (st *status) deployed(contextID string, live *appsv1.Deployment) {
	if live == nil {
		return
	}
	st.contextID, st.image = contextID, resources.DeployedImage(live)
	if kit.DeploymentAvailable(live) {
		st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reasons.Available,
			Message: "the mcp-host pod is available"}
		return
	}
	st.ready = kit.Condition{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reasons.Progressing,
		Message: "waiting for the mcp-host pod to be available"}
}

// Host states, for clerum_hcc_host_hosts.
var hostStates = []string{"ready", "deployed", "blocked", "not-owned"}

// Block reasons, for clerum_hcc_host_blocked.
var blockReasons = []string{reasons.ContextMissing, reasons.ContextConflict, reasons.SecretsMissing, reasons.InvalidSpec}

func (st *status) stateOf() string {
	switch st.ready.Reason {
	case reasons.Available:
		return "ready"
	case reasons.NotOwned:
		return "not-owned"
	case reasons.ContextMissing, reasons.ContextConflict, reasons.SecretsMissing, reasons.InvalidSpec:
		return "blocked"
	}
	return "deployed"
}

// build returns the status to apply and whether it differs from the
// Host's.
func (st *status) build(now time.Time) (*applyv1alpha1.HostApplyConfiguration, bool) {
	h := st.host
	conds := kit.BuildConditions(h.Status.Conditions, h.Generation, now, st.ready, st.secretsResolved, st.authReady)
	var expires *metav1.Time
	if !st.expiresAt.IsZero() {
		expires = &metav1.Time{Time: st.expiresAt.UTC().Truncate(time.Second)}
	}
	changed := conds.Changed || h.Status.ObservedGeneration != h.Generation || h.Status.ContextID != st.contextID ||
		h.Status.Image != st.image || !timesEqual(h.Status.CredentialExpiresAt, expires)
	s := applyv1alpha1.HostStatus().WithObservedGeneration(h.Generation).WithConditions(conds.Apply...)
	if st.contextID != "" {
		s.WithContextID(st.contextID)
	}
	if st.image != "" {
		s.WithImage(st.image)
	}
	if expires != nil {
		s.WithCredentialExpiresAt(*expires)
	}
	return applyv1alpha1.Host(h.Name, h.Namespace).WithStatus(s), changed
}

func timesEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Time.Equal(b.Time)
}

// applyStatus writes st by server-side apply when it changed.
func (c *Controller) applyStatus(ctx context.Context, h *clerumv1alpha1.Host, st *status) error {
	apply, changed := st.build(c.clock.Now())
	if !changed {
		return nil
	}
	err := kit.ApplyStatus(c.statusWrites, h, apply, func() (metav1.Object, error) {
		return c.hcc.ClerumV1alpha1().Hosts(h.Namespace).ApplyStatus(ctx, apply,
			metav1.ApplyOptions{FieldManager: clerumv1alpha1.FieldManagerHost, Force: true})
	})
	if err != nil {
		return fmt.Errorf("applying the status of Host %s: %w", h.Name, err)
	}
	return nil
}

// issuance is the credential this process stored last for a Host, kept
// while the Host lives: it stands in for a cache that does not show the
// write yet, and tells a replayed older credential of HCC's — validly
// marked, for the same UID — from the one HCC wrote last (docs/host.md).
type issuance struct {
	uid       types.UID
	expiresAt time.Time
	at        time.Time
	// digest is secretdigest.ValueDigest of the credential written, as the Secret
	// cache shows it: which credential it was, never its value.
	digest string
	// basis is the resourceVersion of the cached Secret the write was
	// computed from ("" when there was none), written that of the Secret
	// the write returned.
	basis, written string
	// gone: the Secret was deleted since; the issuance no longer stands in
	// for a cache that shows none, and still names the credential written
	// last.
	gone bool
}

// behind reports whether s, the cached runtime-token Secret (nil: none),
// predates the write. resourceVersions are etcd revisions, so an older
// object has a smaller one; where they do not parse as numbers, only the
// object the write was computed from counts as older (kit.CacheBehind). A
// Secret deleted since the write is never behind it.
func (i issuance) behind(s *corev1.Secret) bool {
	if i.gone {
		return false
	}
	if s == nil {
		return true
	}
	return kit.CacheBehind(s.ResourceVersion, i.basis, i.written)
}

func (s *hostState) issued(host string, i issuance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.issuances == nil {
		s.issuances = map[string]issuance{}
	}
	s.issuances[host] = i
}

func (s *hostState) issuedFor(host string) (issuance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.issuances[host]
	return i, ok
}
