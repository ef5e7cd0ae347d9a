package host

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/reasons"
)

// The migration of docs/host.md, "Adopting credentials across an upgrade":
// the Host was created at hostCreated, the seed wrote its runtime-token
// Secret at seedCreated, and HCC was started with the cutoff after both.
var (
	hostCreated = t0.Add(-72 * time.Hour)
	seedCreated = t0.Add(-48 * time.Hour)
	cutoff      = t0.Add(-time.Hour)
)

const (
	seedCredential = "seed-credential"
	maxLifetime    = 24 * time.Hour
)

// seedHost is h1 as the API server holds it: with its creation time.
func seedHost() *clerumv1alpha1.Host {
	h := resourcestest.NewHost("h1")
	h.CreationTimestamp = metav1.NewTime(hostCreated)
	return h
}

// seedSecret is h1's runtime-token Secret as the seed left it: HCC's
// labels, the credential and its expiry (valid for 6 hours), no
// annotations, no mark, no owner reference; change adjusts it.
func seedSecret(change func(*corev1.Secret)) *corev1.Secret {
	s := resources.BuildEmptyRuntimeTokenSecret(seedHost(), resourcestest.Options)
	s.UID, s.ResourceVersion = "uid-seed-secret", "1"
	s.CreationTimestamp = metav1.NewTime(seedCreated)
	s.Data = map[string][]byte{
		resources.KeyBootstrapCredential: []byte(seedCredential),
		resources.KeyExpiresAt:           []byte(t0.Add(6 * time.Hour).Format(time.RFC3339)),
	}
	if change != nil {
		change(s)
	}
	return s
}

// adopting configures the operator as HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE
// set to cutoff does, under a 24-hour HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC.
func adopting(c *Config) {
	c.AdoptCreatedBefore = cutoff
	c.MaxLifetime = maxLifetime
}

func TestASeedCredentialIsAdoptedWhenOptedIn(t *testing.T) {
	f := newFixtureWith(t, adopting, seedHost(), context1(), seedSecret(nil))
	f.mustSync("h1")
	assert.Zero(t, f.issuer.calls(), "the Control API is not called")
	assert.Equal(t, with(without(created("h1"), "create secrets/"+runtimeTokensH1), "update secrets/"+runtimeTokensH1), f.Writes(),
		"one update of the Secret")

	s := f.secret(runtimeTokensH1)
	assert.Equal(t, seedCredential, string(s.Data[resources.KeyBootstrapCredential]), "the credential is kept")
	iss := resources.ReadIssuance(cached(s), resourcestest.Options.RuntimeTokenMark)
	assert.Equal(t, resources.Marked, iss.Trust, "marked as HCC marks a Secret it wrote: the mark verifies from the cache")
	assert.Equal(t, seedHost().UID, iss.UID)
	assert.True(t, t0.Add(6*time.Hour).Equal(iss.ExpiresAt))
	require.NotNil(t, metav1.GetControllerOf(s))
	assert.Equal(t, seedHost().UID, metav1.GetControllerOf(s).UID)

	ev := eventsWithPrefix(f.Events(), "Normal "+reasons.EventCredentialAdopted)
	require.Len(t, ev, 1)
	assert.NotContains(t, ev[0], seedCredential)
	assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_credentials_adopted_total", nil))
	assert.Zero(t, counter(t, f.Registry, "clerum_hcc_host_forged_credentials_total", map[string]string{"trust": "unmarked"}))
	auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
	assert.Equal(t, metav1.ConditionTrue, auth.Status)
	assert.Equal(t, reasons.CredentialIssued, auth.Reason)
	assert.Equal(t, int32(1), ptr.Deref(f.deployment(hostNS, "h1").Spec.Replicas, 0), "the pods run on the adopted credential")

	// The next pass, the cache showing the adopted Secret: nothing.
	f.SyncCaches()
	f.mustSync("h1")
	assert.Empty(t, f.Writes())
	assert.Zero(t, f.issuer.calls())
	assert.Empty(t, f.Events())
}

// A Host HCC has looked at only while it was blocked (AuthReady pending)
// has had no credential judged: its first pass that looks adopts.
func TestASeedCredentialIsAdoptedAfterABlock(t *testing.T) {
	h := seedHost()
	h.Status.Conditions = []metav1.Condition{{Type: clerumv1alpha1.ConditionAuthReady, Status: metav1.ConditionUnknown,
		Reason: reasons.CredentialPending, Message: "no credential is obtained for a blocked Host", LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
	f := newFixtureWith(t, adopting, h, context1(), seedSecret(nil))
	f.mustSync("h1")
	assert.Zero(t, f.issuer.calls())
	assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_credentials_adopted_total", nil))
}

// A pass over a cache that does not show the adoption yet neither reads
// the Secret again nor re-issues.
func TestAnAdoptionIsNotRepeatedOverABehindCache(t *testing.T) {
	f := newFixtureWith(t, adopting, seedHost(), context1(), seedSecret(nil))
	f.mustSync("h1")
	f.ClearWrites()
	f.Events()
	f.mustSync("h1")
	assert.Zero(t, f.issuer.calls())
	assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_credentials_adopted_total", nil))
	assert.NotContains(t, f.Writes(), "update secrets/"+runtimeTokensH1)
}

// Everything but the one case above stays the contract's re-issue: the
// Control API is asked, its credential written over the Secret's, and the
// Secret reported as not believed.
func TestASeedCredentialIsReissuedUnlessEveryRuleHolds(t *testing.T) {
	for name, tc := range map[string]struct {
		configure func(*Config)
		secret    *corev1.Secret
		host      *clerumv1alpha1.Host
		trust     string
	}{
		"the cutoff is unset": {configure: func(c *Config) { c.MaxLifetime = maxLifetime }},
		"the Secret was created after the cutoff": {secret: seedSecret(func(s *corev1.Secret) {
			s.CreationTimestamp = metav1.NewTime(cutoff.Add(time.Second))
		})},
		"the Secret was created at the cutoff": {secret: seedSecret(func(s *corev1.Secret) {
			s.CreationTimestamp = metav1.NewTime(cutoff)
		})},
		"the Host is newer than the Secret (re-created under its name)": {host: func() *clerumv1alpha1.Host {
			h := seedHost()
			h.CreationTimestamp = metav1.NewTime(seedCreated.Add(time.Minute))
			return h
		}()},
		"its controller reference names another owner UID": {secret: seedSecret(func(s *corev1.Secret) {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "clerum.io/v1alpha1", Kind: "Host", Name: "h1", UID: "uid-earlier-h1",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		})},
		"it says it was issued for another Host UID": {secret: seedSecret(func(s *corev1.Secret) {
			s.Annotations = map[string]string{resources.AnnotationIssuedForUID: "uid-earlier-h1"}
		})},
		"HCC has judged the Host's credential before (a later process, the mark stripped since)": {host: func() *clerumv1alpha1.Host {
			h := seedHost()
			h.Status.Conditions = []metav1.Condition{{Type: clerumv1alpha1.ConditionAuthReady, Status: metav1.ConditionTrue,
				Reason: reasons.CredentialIssued, Message: "bootstrap credential valid until …", LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}
			return h
		}()},
		"its expiry lies inside the refresh window": {secret: seedSecret(func(s *corev1.Secret) {
			s.Data[resources.KeyExpiresAt] = []byte(t0.Add(refreshBefore).Format(time.RFC3339))
		})},
		"its expiry lies beyond the maximum lifetime": {secret: seedSecret(func(s *corev1.Secret) {
			s.Data[resources.KeyExpiresAt] = []byte(t0.Add(maxLifetime + time.Second).Format(time.RFC3339))
		})},
		"its expiry does not parse": {secret: seedSecret(func(s *corev1.Secret) {
			s.Data[resources.KeyExpiresAt] = []byte("tomorrow")
		})},
		"it holds no credential": {secret: seedSecret(func(s *corev1.Secret) {
			s.Data[resources.KeyBootstrapCredential] = nil
		})},
		"it carries a mark that does not verify": {trust: "mismatch", secret: seedSecret(func(s *corev1.Secret) {
			s.Annotations = map[string]string{mark.Annotation: "v1:" + strings.Repeat("ab", 32)}
		})},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.configure == nil {
				tc.configure = adopting
			}
			if tc.secret == nil {
				tc.secret = seedSecret(nil)
			}
			if tc.host == nil {
				tc.host = seedHost()
			}
			if tc.trust == "" {
				tc.trust = "unmarked"
			}
			f := newFixtureWith(t, tc.configure, tc.host, context1(), tc.secret)
			f.mustSync("h1")
			assert.Equal(t, 1, f.issuer.calls(), "the Control API is asked")
			s := f.secret(runtimeTokensH1)
			assert.Equal(t, credentialValue, string(s.Data[resources.KeyBootstrapCredential]), "the seed's credential is overwritten")
			assert.Equal(t, with(without(created("h1"), "create secrets/"+runtimeTokensH1), "update secrets/"+runtimeTokensH1), f.Writes())
			events := f.Events()
			assert.Empty(t, eventsWithPrefix(events, "Normal "+reasons.EventCredentialAdopted))
			assert.Len(t, eventsWithPrefix(events, "Warning "+EventForgedCredential), 1)
			assert.Zero(t, counter(t, f.Registry, "clerum_hcc_host_credentials_adopted_total", nil))
			assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_forged_credentials_total", map[string]string{"trust": tc.trust}))
		})
	}
}

// A Secret the cache shows unmarked but the API server shows marked (the
// cache is behind a write) is judged again once the cache shows it: no
// adoption, no issuance.
func TestAnAdoptionCandidateMarkedSinceWaitsForTheCache(t *testing.T) {
	f := newFixtureWith(t, adopting, seedHost(), context1(), seedSecret(nil))
	marked := resources.BuildRuntimeTokenSecret(seedHost(), resourcestest.Options, seedCredential, t0.Add(6*time.Hour))
	live := f.secret(runtimeTokensH1)
	live.Annotations, live.Data = marked.Annotations, marked.Data
	_, err := f.Kube.CoreV1().Secrets(hostNS).Update(t.Context(), live, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.ClearWrites()
	_, err = f.sync("h1")
	require.Error(t, err)
	assert.Zero(t, f.issuer.calls())
	assert.NotContains(t, f.Writes(), "update secrets/"+runtimeTokensH1)
	assert.Zero(t, counter(t, f.Registry, "clerum_hcc_host_credentials_adopted_total", nil))
}
