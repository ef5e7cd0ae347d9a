package host

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/reasons"
	"github.com/clerum/hcc/pkg/secretdigest"
)

// adoptCredential is the opt-in migration from a controller that never
// marked its runtime-token Secrets (docs/host.md, "Adopting credentials
// across an upgrade"). By default such an unmarked Secret holds nothing HCC
// believes and is re-issued; with Config.AdoptCreatedBefore set, live — the
// cached Secret of h, unmarked — is adopted instead when the API server
// created it before the cutoff, not before h (a Host re-created since gets
// a new credential), under no controller but h, HCC has not judged h's
// credential before (credentialJudged), and it holds a credential not due
// for refresh and not beyond HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC.
//
// The cache holds digests, so the values are read from the API server, once
// per candidate, and the candidate judged again on what it returned.
// Adopting is one update writing HCC's issuance annotations and its mark
// over the credential as it stands — what BuildRuntimeTokenSecret writes
// for an issued one — without calling the Control API. adopted is false
// when live is no candidate: the caller re-issues as the contract says.
func (c *Controller) adoptCredential(ctx context.Context, h *clerumv1alpha1.Host, owner kit.Owner, live *corev1.Secret,
	now time.Time, st *status) (cred credential, adopted bool, err error) {
	cutoff := c.cfg.AdoptCreatedBefore
	if cutoff.IsZero() || live == nil || !c.cfg.Build.RuntimeTokenMark.Usable() || adoptionRefused(h, live, cutoff) != "" {
		return credential{}, false, nil
	}
	fresh, err := c.kube.CoreV1().Secrets(live.Namespace).Get(ctx, live.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return credential{}, false, fmt.Errorf("runtime-token Secret %s/%s: %w", live.Namespace, live.Name, kit.ErrCacheBehind)
	case err != nil:
		return credential{}, false, fmt.Errorf("reading runtime-token Secret %s/%s to adopt it: %w", live.Namespace, live.Name, err)
	}
	if _, marked := fresh.Annotations[mark.Annotation]; marked {
		// Marked since the cache saw it: judge it once the cache shows it.
		return credential{}, false, fmt.Errorf("runtime-token Secret %s/%s: %w", live.Namespace, live.Name, kit.ErrCacheBehind)
	}
	why := adoptionRefused(h, fresh, cutoff)
	var value string
	var expiresAt time.Time
	if why == "" {
		value, expiresAt, why = adoptableCredential(fresh, now, c.cfg.RefreshBefore, c.cfg.MaxLifetime)
	}
	if why != "" {
		c.logFor(h).Info().Str("secret", live.Name).Str("why", why).Msg("runtime-token Secret not adopted; re-issuing its credential")
		return credential{}, false, nil
	}

	desired := resources.BuildRuntimeTokenSecret(h, c.cfg.Build, value, expiresAt)
	written, _, err := kit.Ensure(ctx, c.children, kit.Secrets, owner, fresh, desired)
	if err != nil {
		return credential{}, false, err
	}
	// Remembered as a credential this process stored: a cache that does
	// not show the update yet is not judged again.
	last := issuance{uid: h.UID, expiresAt: expiresAt, at: now, digest: string(secretdigest.ValueDigest([]byte(value))),
		basis: live.ResourceVersion}
	if written != nil {
		last.written = written.ResourceVersion
	}
	c.state.issued(h.Name, last)
	c.metrics.Adopted.Inc()
	c.logFor(h).Info().Str("secret", live.Name).Time("createdAt", fresh.CreationTimestamp.Time).Time("expiresAt", expiresAt).
		Msg("bootstrap credential adopted: marked and kept, the Control API not called")
	c.recorder.Eventf(h, corev1.EventTypeNormal, reasons.EventCredentialAdopted,
		"adopted the credential of the runtime-token Secret %s, created %s, before HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE (%s): marked for this Host, valid until %s",
		live.Name, fresh.CreationTimestamp.UTC().Format(time.RFC3339), cutoff.UTC().Format(time.RFC3339), expiresAt.Format(time.RFC3339))
	st.auth(metav1.ConditionTrue, reasons.CredentialIssued, fmt.Sprintf("bootstrap credential valid until %s", expiresAt.Format(time.RFC3339)), expiresAt)
	return credential{present: true, refreshIn: max(expiresAt.Add(-c.cfg.RefreshBefore).Sub(now), minRefreshIn)}, true, nil
}

// adoptionRefused says why s, h's unmarked runtime-token Secret, is not
// one adoptCredential may adopt, judged on what the cache holds too (no
// values), or "" when it may be: what the API server says of its creation,
// whom it names, and whether HCC has judged h's credential before.
func adoptionRefused(h *clerumv1alpha1.Host, s *corev1.Secret, cutoff time.Time) string {
	created := s.CreationTimestamp
	switch ref := metav1.GetControllerOfNoCopy(s); {
	case credentialJudged(h):
		return "HCC has judged this Host's credential before (its AuthReady condition): what the Secret holds now was written since"
	case created.IsZero() || h.CreationTimestamp.IsZero():
		return "no creation time to judge it by"
	case !created.Time.Before(cutoff):
		return "it was created at or after HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE"
	case created.Before(&h.CreationTimestamp):
		return "it is older than the Host: it was written for an earlier Host of this name"
	case ref != nil && ref.UID != h.UID:
		return "its controller reference names another owner"
	case s.Annotations[resources.AnnotationIssuedForUID] != "" && s.Annotations[resources.AnnotationIssuedForUID] != string(h.UID):
		return "it says it was issued for another Host UID"
	}
	return ""
}

// adoptableCredential returns the credential s (read from the API server)
// holds and its expiry, whole seconds rounded down as HCC stores it, or why
// it cannot be adopted: none, an expiry that does not parse, one within
// the refresh window (it would be re-issued at once anyway) or beyond the
// longest lifetime HCC accepts from the Control API.
func adoptableCredential(s *corev1.Secret, now time.Time, refreshBefore, maxLifetime time.Duration) (value string, expiresAt time.Time, why string) {
	value = string(s.Data[resources.KeyBootstrapCredential])
	if value == "" {
		return "", time.Time{}, "it holds no bootstrap credential"
	}
	parsed, err := time.Parse(time.RFC3339, string(s.Data[resources.KeyExpiresAt]))
	if err != nil {
		return "", time.Time{}, "its expires-at is not an RFC 3339 time"
	}
	expiresAt = parsed.UTC().Truncate(time.Second)
	switch {
	case !expiresAt.After(now.Add(refreshBefore)):
		return "", time.Time{}, "its credential expires within the refresh window"
	case expiresAt.After(now.Add(maxLifetime)):
		return "", time.Time{}, "its credential expires beyond HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC"
	}
	return value, expiresAt, ""
}

// credentialJudged reports whether h's status shows that HCC has judged its
// credential: an AuthReady condition with a reason other than the pending
// one a Host gets before any credential is looked at. The seed wrote no
// Host status, and a Secret writer cannot write a Host's, so a Secret
// stripped of HCC's mark after HCC's first pass over the Host — adopted or
// re-issued — is not adopted again by a later process.
func credentialJudged(h *clerumv1alpha1.Host) bool {
	c := meta.FindStatusCondition(h.Status.Conditions, clerumv1alpha1.ConditionAuthReady)
	return c != nil && c.Reason != reasons.CredentialPending
}
