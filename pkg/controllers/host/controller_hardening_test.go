package host

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// The hardening behaviours of docs/host.md ("The Host operator"): the
// Control API breaker, an immutable runtime-token Secret, an issued
// credential whose write failed, the Secret informer's delete, a dependency
// found not HCC's or unchangeable while the pods run, a Secret block over
// running pods, the Context changing during a sync, the sweep's UID check,
// the expiry gauge and Retry-After.

const runtimeTokens = "host-h1-mcp-host-runtime-tokens"

// envSecret is a Secret opted in as spec.secretRef of Host forHost.
func envSecret(name, forHost string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: name, UID: ktypes.UID("uid-" + name), ResourceVersion: "1",
		Labels: map[string]string{resources.LabelSecretForHost: forHost}},
		Data: map[string][]byte{"TOKEN": []byte("x")}}
}

// secretRule returns the resource names the Role host-h1 grants on Secrets,
// as the fake API server holds it.
func (f *fixture) secretRule() []string {
	f.t.Helper()
	role, err := f.Kube.RbacV1().Roles(hostNS).Get(context.Background(), "host-h1", metav1.GetOptions{})
	require.NoError(f.t, err)
	for _, r := range role.Rules {
		if len(r.Resources) == 1 && r.Resources[0] == "secrets" {
			return r.ResourceNames
		}
	}
	f.t.Fatalf("role host-h1 has no secrets rule: %+v", role.Rules)
	return nil
}

// setSecret replaces s in the fake API server and the Secret cache.
func (f *fixture) setSecret(s *corev1.Secret) {
	f.t.Helper()
	require.NoError(f.t, f.Kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), s.DeepCopy(), s.Namespace))
	f.Index(s)
}

// removeSecret deletes Secret name from the fake API server and the cache.
func (f *fixture) removeSecret(name string) {
	f.t.Helper()
	s := f.secret(name)
	require.NoError(f.t, f.Kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("secrets"), hostNS, name))
	f.Unindex(s)
}

func eventsWithPrefix(events []string, prefix string) []string {
	var out []string
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// 1. the Control API breaker.
func TestBreaker(t *testing.T) {
	unavailable := fmt.Errorf("control API POST /bootstrap: HTTP 503 after 3 attempts: %w", controlapi.ErrUnavailable)
	rejected := fmt.Errorf("control API POST /bootstrap: HTTP 401: %w", controlapi.ErrRejected)

	t.Run("three unavailable failures open it for 15 s; the probe after reopens it, doubled; a success closes it", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), resourcestest.NewHost("h2"), resourcestest.NewHost("h3"), context1())
		// clerum_hcc_host_control_api_breaker_open, which exists from the
		// start (an alert reads it: docs/monitoring.md).
		breakerOpen := func() float64 {
			t.Helper()
			require.NotNil(t, series(t, f.Registry, "clerum_hcc_host_control_api_breaker_open", nil))
			return counter(t, f.Registry, "clerum_hcc_host_control_api_breaker_open", nil)
		}
		assert.Equal(t, 0.0, breakerOpen(), "closed at the start")
		f.issuer.fail(unavailable)
		for i := 1; i <= breakerThreshold; i++ {
			require.Equal(t, 0.0, breakerOpen(), "closed before failure %d", i)
			_, err := f.sync("h1")
			require.Error(t, err)
			require.Equal(t, i, f.issuer.calls(), "failure %d is a call", i)
		}
		assert.Equal(t, 1.0, breakerOpen(), "open after three failures in a row")

		// Open: another Host needing a credential is not sent either.
		f.ClearWrites()
		f.Events()
		_, err := f.sync("h2")
		require.Error(t, err, "retried by the loop")
		assert.ErrorIs(t, err, controlapi.ErrUnavailable)
		assert.Equal(t, 3, f.issuer.calls(), "no call while the breaker is open")
		auth := f.condition("h2", clerumv1alpha1.ConditionAuthReady)
		assert.Equal(t, metav1.ConditionFalse, auth.Status)
		assert.Equal(t, reasons.ControlAPIUnavailable, auth.Reason)
		assert.Equal(t, reasons.CredentialPending, f.condition("h2", clerumv1alpha1.ConditionReady).Reason)
		assert.Equal(t, without(created("h2"), "create deployments/h2", "create secrets/host-h2-mcp-host-runtime-tokens"), f.Writes())
		assert.Len(t, eventsWithPrefix(f.Events(), "Warning CredentialFailed "), 1)

		f.Clock.Step(breakerBase - time.Second)
		_, err = f.sync("h1")
		require.Error(t, err)
		assert.Equal(t, 3, f.issuer.calls(), "still open at 14 s")
		assert.Equal(t, reasons.ControlAPIUnavailable, f.condition("h1", clerumv1alpha1.ConditionAuthReady).Reason)

		// 15 s: one probe, which fails and reopens it for 30 s.
		f.Clock.Step(time.Second)
		assert.Equal(t, 1.0, breakerOpen(), "open while a probe is allowed: the metric does not blink between pauses")
		_, err = f.sync("h1")
		require.Error(t, err)
		assert.Equal(t, 4, f.issuer.calls(), "one probe once the pause is over")
		_, err = f.sync("h2")
		require.Error(t, err)
		assert.Equal(t, 4, f.issuer.calls(), "the failed probe reopens it")
		f.Clock.Step(2*breakerBase - time.Second)
		_, err = f.sync("h2")
		require.Error(t, err)
		assert.Equal(t, 4, f.issuer.calls(), "the second pause is doubled: still open at 29 s")

		// 30 s: the probe succeeds and closes it.
		f.Clock.Step(time.Second)
		f.issuer.fail(nil)
		f.ClearWrites()
		f.mustSync("h2")
		assert.Equal(t, 5, f.issuer.calls())
		assert.Equal(t, 0.0, breakerOpen(), "a success closes it")
		assert.Contains(t, f.Writes(), "create deployments/h2")
		assert.Equal(t, reasons.CredentialIssued, f.condition("h2", clerumv1alpha1.ConditionAuthReady).Reason)
		f.mustSync("h1")
		assert.Equal(t, 6, f.issuer.calls(), "closed: every Host is served")

		// The count starts again: two failures do not open it.
		f.issuer.fail(unavailable)
		for i := 7; i <= 8; i++ {
			_, err := f.sync("h3")
			require.Error(t, err)
			assert.Equal(t, i, f.issuer.calls())
		}
		assert.Equal(t, 0.0, breakerOpen(), "two failures do not open it")
	})
	t.Run("the pause doubles to at most 5 minutes", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), context1())
		f.issuer.fail(unavailable)
		for range breakerThreshold {
			_, _ = f.sync("h1")
		}
		pause := breakerBase
		for range 8 {
			calls := f.issuer.calls()
			f.Clock.Step(pause - time.Second)
			_, _ = f.sync("h1")
			require.Equal(t, calls, f.issuer.calls(), "open for %s", pause)
			f.Clock.Step(time.Second)
			_, _ = f.sync("h1")
			require.Equal(t, calls+1, f.issuer.calls(), "a probe after %s", pause)
			pause = min(2*pause, breakerMax)
		}
		assert.Equal(t, breakerMax, pause)
	})
	t.Run("a refusal does not open it, and breaks a run of unavailable failures", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), context1())
		f.issuer.fail(rejected)
		for i := 1; i <= 5; i++ {
			_, err := f.sync("h1")
			require.Error(t, err)
			require.Equal(t, i, f.issuer.calls(), "a refusal is the Control API answering")
			assert.Equal(t, reasons.CredentialRefused, f.condition("h1", clerumv1alpha1.ConditionAuthReady).Reason)
		}
		// unavailable, unavailable, rejected, unavailable, unavailable: no
		// three in a row.
		for i, err := range []error{unavailable, unavailable, rejected, unavailable, unavailable} {
			f.issuer.fail(err)
			_, _ = f.sync("h1")
			require.Equal(t, 6+i, f.issuer.calls())
		}
		// The third in a row is still sent, and opens it.
		_, _ = f.sync("h1")
		assert.Equal(t, 11, f.issuer.calls())
		_, _ = f.sync("h1")
		assert.Equal(t, 11, f.issuer.calls(), "open after three in a row")
	})
	t.Run("a 429 counts as unavailable", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), context1())
		f.issuer.fail(&controlapi.StatusError{Route: "/bootstrap", Code: 429, Attempts: 3})
		for range breakerThreshold {
			_, _ = f.sync("h1")
		}
		require.Equal(t, 3, f.issuer.calls())
		_, _ = f.sync("h1")
		assert.Equal(t, 3, f.issuer.calls())
	})
}

// 2. an immutable runtime-token Secret of HCC's.
func TestAnImmutableRuntimeTokenSecretIsFoundBeforeAsking(t *testing.T) {
	h1 := resourcestest.NewHost("h1")
	base := func() *corev1.Secret {
		s := resources.BuildEmptyRuntimeTokenSecret(h1, resourcestest.Options)
		s.UID, s.ResourceVersion = "uid-secret", "1"
		s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(h1, gvk)}
		s.Immutable = ptr.To(true)
		return s
	}
	for name, s := range map[string]*corev1.Secret{
		"holding an old credential without issuance annotations": func() *corev1.Secret {
			s := base()
			s.Data = map[string][]byte{resources.KeyBootstrapCredential: []byte("old")}
			return s
		}(),
		"holding a credential due for refresh": func() *corev1.Secret {
			s := resources.BuildRuntimeTokenSecret(h1, resourcestest.Options, "old", t0.Add(10*time.Minute))
			b := base()
			b.Data, b.Annotations = s.Data, s.Annotations
			return b
		}(),
		"holding nothing": base(),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, resourcestest.NewHost("h1"), context1(), s)
			res, err := f.sync("h1")
			require.NoError(t, err, "a refusal is reported, not retried")
			assert.Zero(t, f.issuer.calls(), "a credential that cannot be stored is never issued")
			auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
			assert.Equal(t, metav1.ConditionFalse, auth.Status)
			assert.Equal(t, reasons.CredentialRefused, auth.Reason)
			assert.Contains(t, auth.Message, "marked immutable")
			if name == "holding a credential due for refresh" {
				// The credential there is this Host's and still valid: the
				// pods may use it while the Secret cannot take a new one.
				assert.Equal(t, without(created("h1"), "create secrets/"+runtimeTokens), f.Writes(), "the Secret is not written")
				assert.True(t, f.exists(kit.Deployments, hostNS, "h1"))
			} else {
				assert.Equal(t, without(created("h1"), "create deployments/h1", "create secrets/"+runtimeTokens), f.Writes(),
					"no Deployment without a credential, and the Secret is not written")
				assert.Equal(t, reasons.CredentialPending, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
				assert.False(t, f.exists(kit.Deployments, hostNS, "h1"))
			}
			ev := f.Events()
			assert.Len(t, eventsWithPrefix(ev, "Warning ChangeRefused Secret mcp-host/"+runtimeTokens+" is not written"), 1, "%v", ev)
			assert.Empty(t, eventsWithPrefix(ev, "Warning CredentialFailed"), "the Control API was not asked")
			assert.Equal(t, s.Data, f.secret(runtimeTokens).Data, "left as it is")
			assert.Equal(t, time.Duration(0), res.RequeueAfter)
		})
	}
}

// 3. a credential issued but not stored is stored by the retry, not
// issued again.
func TestAnUnstoredCredentialIsStoredWithoutAskingAgain(t *testing.T) {
	failOnce := func(f *fixture, verb string) *int {
		n := 0
		f.Kube.PrependReactor(verb, "secrets", func(a core.Action) (bool, runtime.Object, error) {
			if n > 0 {
				return false, nil, nil
			}
			n++
			return true, nil, apierrors.NewInternalError(fmt.Errorf("etcd is sulking"))
		})
		return &n
	}
	t.Run("the first credential", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), context1())
		failed := failOnce(f, "create")
		_, err := f.sync("h1")
		require.Error(t, err, "retried by the loop")
		require.Equal(t, 1, *failed)
		assert.Equal(t, 1, f.issuer.calls())
		assert.NotContains(t, err.Error(), credentialValue)
		assert.NotContains(t, f.Writes(), "create deployments/h1", "no Deployment without a stored credential")
		_, err = f.Kube.CoreV1().Secrets(hostNS).Get(context.Background(), runtimeTokens, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err))
		assert.Equal(t, metav1.ConditionFalse, f.condition("h1", clerumv1alpha1.ConditionAuthReady).Status)

		// Another credential would be a different value.
		f.issuer.value = "another-credential"
		f.SyncCaches()
		f.Clock.Step(2 * time.Second)
		f.mustSync("h1")
		assert.Equal(t, 1, f.issuer.calls(), "the held credential is stored, not asked for again")
		assert.Equal(t, []string{"create deployments/h1", "create secrets/" + runtimeTokens, "patch hosts/h1/status"}, f.Writes())
		s := f.secret(runtimeTokens)
		assert.Equal(t, credentialValue, string(s.Data[resources.KeyBootstrapCredential]))
		assert.Equal(t, t0.Add(lifetime).Format(time.RFC3339), s.Annotations[resources.AnnotationExpiresAt])
		assert.Equal(t, reasons.CredentialIssued, f.condition("h1", clerumv1alpha1.ConditionAuthReady).Reason)
		require.Contains(t, f.Log(), "bootstrap credential stored", "the line that could leak it")
		assert.NotContains(t, f.Log(), credentialValue)

		// Stored once: the next sync after the cache caught up asks nothing.
		f.SyncCaches()
		f.mustSync("h1")
		assert.Empty(t, f.Writes())
		assert.Equal(t, 1, f.issuer.calls())
	})
	t.Run("a refresh", func(t *testing.T) {
		f := deployed(t)
		f.Clock.Step(50 * time.Minute)
		f.issuer.value = "refreshed-1"
		failOnce(f, "update")
		_, err := f.sync("h1")
		require.Error(t, err)
		assert.Equal(t, 2, f.issuer.calls())
		assert.Equal(t, credentialValue, string(f.secret(runtimeTokens).Data[resources.KeyBootstrapCredential]), "the write failed")

		f.issuer.value = "refreshed-2"
		f.SyncCaches()
		f.Clock.Step(2 * time.Second)
		f.mustSync("h1")
		assert.Equal(t, 2, f.issuer.calls(), "stored without asking again")
		assert.Equal(t, []string{"patch hosts/h1/status", "update secrets/" + runtimeTokens}, f.Writes())
		assert.Equal(t, "refreshed-1", string(f.secret(runtimeTokens).Data[resources.KeyBootstrapCredential]))
	})
	t.Run("a held credential of an earlier Host of the name is not stored for the new one", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), context1())
		failOnce(f, "create")
		_, err := f.sync("h1")
		require.Error(t, err)
		f.removeHost("h1")
		f.addHost(resourcestest.NewHost("h1", func(h *clerumv1alpha1.Host) { h.UID = "uid-h1-again" }))
		f.issuer.value = "for-the-new-host"
		f.ClearWrites()
		f.mustSync("h1")
		assert.Equal(t, 2, f.issuer.calls())
		assert.Equal(t, "for-the-new-host", string(f.secret(runtimeTokens).Data[resources.KeyBootstrapCredential]))
		assert.Equal(t, "uid-h1-again", f.secret(runtimeTokens).Annotations[resources.AnnotationIssuedForUID])
	})
}

// 4. the Secret informer's delete forgets the remembered issuance.
func TestDeletingTheRuntimeTokenSecretForgetsTheIssuance(t *testing.T) {
	noOwner := func(metav1.Object) (cache.ObjectName, bool) { return cache.ObjectName{}, false }
	for name, forget := range map[string]func(f *fixture, s *corev1.Secret){
		"OnDelete": func(f *fixture, s *corev1.Secret) { f.c.secretHandlers(noOwner).OnDelete(s) },
		"a tombstone": func(f *fixture, s *corev1.Secret) {
			f.c.secretHandlers(noOwner).OnDelete(cache.DeletedFinalStateUnknown{Key: hostNS + "/" + s.Name, Obj: s})
		},
		"an update with a deletionTimestamp": func(f *fixture, s *corev1.Secret) {
			old := s.DeepCopy()
			now := metav1.NewTime(t0)
			s.DeletionTimestamp, s.ResourceVersion = &now, s.ResourceVersion+"1"
			f.c.secretHandlers(noOwner).OnUpdate(old, s)
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, resourcestest.NewHost("h1"), context1())
			f.mustSync("h1")
			require.Equal(t, 1, f.issuer.calls())
			// The caches are not refreshed: they never showed the Secret.
			s := f.secret(runtimeTokens)
			require.NoError(t, f.Kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("secrets"), hostNS, runtimeTokens))
			cachedSecret := cached(s)
			forget(f, cachedSecret)
			f.ClearWrites()
			f.Clock.Step(5 * time.Second)
			f.mustSync("h1")
			assert.Equal(t, 2, f.issuer.calls(), "the Secret is gone: a new credential, not the remembered one")
			assert.Contains(t, f.Writes(), "create secrets/"+runtimeTokens)
			assert.Equal(t, credentialValue, string(f.secret(runtimeTokens).Data[resources.KeyBootstrapCredential]))
		})
	}
	t.Run("another Secret's delete forgets nothing", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), context1())
		f.mustSync("h1")
		other := envSecret("h1-env", "h1")
		other.Labels[names.LabelHost] = "h1"
		f.c.forgetIssuanceOf(other)
		f.Clock.Step(5 * time.Second)
		f.mustSync("h1")
		assert.Equal(t, 1, f.issuer.calls(), "the cache-lag guard still holds")
	})
}

// 5. a dependency found not HCC's while the Deployment runs stops the pods.
func TestADependencyNotOwnedStopsRunningPods(t *testing.T) {
	for _, tc := range []struct {
		name  string
		swap  func(f *fixture)
		write []string
	}{
		{"an unmanaged ServiceAccount", func(f *fixture) {
			sa, err := f.Kube.CoreV1().ServiceAccounts(hostNS).Get(context.Background(), "host-h1", metav1.GetOptions{})
			require.NoError(t, err)
			f.Unindex(sa) // the managed-objects informer never shows an unmanaged one
			require.NoError(t, f.Kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("serviceaccounts"), hostNS, "host-h1"))
			require.NoError(t, f.Kube.Tracker().Add(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "host-h1",
				UID: "foreign", ResourceVersion: "7"}}))
			// This process created the account: it reads the foreign one in
			// its place rather than creating it again.
		}, []string{"patch hosts/h1/status", "update deployments/h1"}},
		{"a Role labelled for another Host", func(f *fixture) {
			r, err := f.Kube.RbacV1().Roles(hostNS).Get(context.Background(), "host-h1", metav1.GetOptions{})
			require.NoError(t, err)
			r.Labels[names.LabelHost] = "h2"
			r.OwnerReferences, r.ResourceVersion = nil, "7"
			require.NoError(t, f.Kube.Tracker().Update(rbacRoles, r, hostNS))
			f.Index(r)
		}, []string{"patch hosts/h1/status", "update deployments/h1"}},
		{"an unmanaged runtime-token Secret", func(f *fixture) {
			s := f.secret(runtimeTokens)
			s.Labels, s.OwnerReferences, s.ResourceVersion = nil, nil, "7"
			f.setSecret(s)
		}, []string{"patch hosts/h1/status", "update deployments/h1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := deployed(t)
			require.Equal(t, int32(1), *f.deployment(hostNS, "h1").Spec.Replicas)
			tc.swap(f)
			f.ClearWrites()
			res, err := f.sync("h1")
			require.NoError(t, err, "a refusal is reported, not retried")
			assert.Equal(t, tc.write, f.Writes())
			d := f.deployment(hostNS, "h1")
			assert.Equal(t, int32(0), *d.Spec.Replicas, "no pod runs with someone else's account, Role or credential")
			assert.Equal(t, "ctx-1", d.Spec.Template.Labels[names.LabelContext], "the template is kept")
			ready := f.condition("h1", clerumv1alpha1.ConditionReady)
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Equal(t, reasons.NotOwned, ready.Reason)
			assert.Equal(t, refusedRetry, res.RequeueAfter)
			assert.Equal(t, 1, f.issuer.calls())
			assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_hosts", map[string]string{"state": "not-owned"}))

			// Stopped once: the next sync does not scale it back up.
			f.SyncCaches()
			f.mustSync("h1")
			assert.NotContains(t, f.Writes(), "update deployments/h1")
			assert.Equal(t, int32(0), *f.deployment(hostNS, "h1").Spec.Replicas)
		})
	}
}

var rbacRoles = rbacv1.SchemeGroupVersion.WithResource("roles")

// 6. a Secret block over running pods: they keep running, lose the grant,
// and keep a fresh credential.
func TestASecretBlockKeepsRunningPods(t *testing.T) {
	setup := func(t *testing.T) *fixture {
		f := newFixture(t, resourcestest.NewHost("h1", resourcestest.WithSecretRef("h1-env")), context1(), envSecret("h1-env", "h1"))
		f.mustSync("h1")
		require.Contains(t, f.Writes(), "create deployments/h1")
		f.SyncCaches()
		f.Events()
		require.Equal(t, []string{runtimeTokens, "h1-env"}, f.secretRule())
		return f
	}
	t.Run("the Secret removed", func(t *testing.T) {
		f := setup(t)
		f.removeSecret("h1-env")
		f.ClearWrites()
		f.Clock.Step(50 * time.Minute) // due at 45
		res := f.mustSync("h1")
		assert.Equal(t, []string{"patch hosts/h1/status", "update roles/host-h1", "update secrets/" + runtimeTokens}, f.Writes(),
			"no scale-down, no roll; the Role is rewritten and the credential refreshed")
		assert.Equal(t, 2, f.issuer.calls())
		assert.Equal(t, []string{runtimeTokens}, f.secretRule(), "the grant of the missing Secret is revoked")
		d := f.deployment(hostNS, "h1")
		assert.Equal(t, int32(1), *d.Spec.Replicas, "the pods keep running")
		assert.Equal(t, reasons.SecretsMissing, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
		auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
		assert.Equal(t, metav1.ConditionTrue, auth.Status)
		assert.Equal(t, reasons.CredentialIssued, auth.Reason)
		st := f.status("h1")
		assert.Equal(t, "ctx-1", st.ContextID, "the contextId of the pods still running")
		assert.Equal(t, resourcestest.Options.Image, st.Image)
		assert.Equal(t, 45*time.Minute, res.RequeueAfter, "back when the new credential is due")
		assert.Equal(t, []string{"Warning Blocked SecretsMissing: Secret h1-env does not exist; the Host is not deployed or rolled"}, f.Events())

		// Nothing more while blocked.
		f.SyncCaches()
		f.mustSync("h1")
		assert.Empty(t, f.Writes())
		assert.Equal(t, 2, f.issuer.calls())
	})
	t.Run("the Secret removed, and the Control API answers 429 with Retry-After", func(t *testing.T) {
		f := setup(t)
		f.removeSecret("h1-env")
		f.ClearWrites()
		f.Clock.Step(50 * time.Minute)
		f.issuer.fail(&controlapi.StatusError{Route: "/bootstrap", Code: 429, Attempts: 1, RetryAfter: 2 * time.Minute})
		res, err := f.sync("h1")
		require.NoError(t, err, "the Control API said when")
		assert.Equal(t, 2, f.issuer.calls())
		assert.Equal(t, 2*time.Minute, res.RequeueAfter, "the refresh is retried when the Control API said, not at the next resync")
		auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
		assert.Equal(t, metav1.ConditionTrue, auth.Status, "the old credential still works")
		assert.Equal(t, reasons.ControlAPIUnavailable, auth.Reason)
	})
}

// 7. the spec.secretRef opt-in label, relabelled.
func TestSecretRefRelabelled(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1", resourcestest.WithSecretRef("h1-env")), context1(), envSecret("h1-env", "h1"))
	f.mustSync("h1")
	assert.Equal(t, created("h1"), f.Writes(), "labelled for h1: admitted")
	assert.Equal(t, []string{runtimeTokens, "h1-env"}, f.secretRule())
	f.SyncCaches()
	f.Events()

	moved := envSecret("h1-env", "h2")
	moved.ResourceVersion = "2"
	f.setSecret(moved)
	f.mustSync("h1")
	assert.Equal(t, []string{"patch hosts/h1/status", "update roles/host-h1"}, f.Writes())
	assert.Equal(t, []string{runtimeTokens}, f.secretRule(), "the Role loses the grant of a Secret now another Host's")
	sr := f.condition("h1", clerumv1alpha1.ConditionSecretsResolved)
	assert.Equal(t, metav1.ConditionFalse, sr.Status)
	assert.Contains(t, sr.Message, "is labelled "+resources.LabelSecretForHost+`="h2": it was made for another Host`)
	assert.Equal(t, reasons.SecretsMissing, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
	assert.Equal(t, int32(1), *f.deployment(hostNS, "h1").Spec.Replicas)
	ev := f.Events()
	require.Len(t, ev, 1)
	assert.True(t, strings.HasPrefix(ev[0], "Warning Blocked SecretsMissing: Secret h1-env is labelled "+resources.LabelSecretForHost+`="h2"`), ev[0])

	f.SyncCaches()
	back := envSecret("h1-env", "h1")
	back.ResourceVersion = "3"
	f.setSecret(back)
	f.mustSync("h1")
	assert.Equal(t, []string{"patch hosts/h1/status", "update roles/host-h1"}, f.Writes())
	assert.Equal(t, []string{runtimeTokens, "h1-env"}, f.secretRule())
	assert.Equal(t, []string{"Normal Released no longer blocked (was SecretsMissing)"}, f.Events())
	assert.Equal(t, 1, f.issuer.calls())
}

// 8. a claim change HCC cannot make blocks nothing.
func TestAClaimChangeRefusedBlocksNothing(t *testing.T) {
	for name, change := range map[string]func(*resources.Options){
		"a smaller size":        func(o *resources.Options) { o.WorkspaceSize = resource.MustParse("5Gi") },
		"another storage class": func(o *resources.Options) { o.WorkspaceStorageClass = "another-class" },
	} {
		t.Run(name, func(t *testing.T) {
			f := deployed(t)
			claim := func() *corev1.PersistentVolumeClaim {
				c, err := f.Kube.CoreV1().PersistentVolumeClaims(hostNS).Get(context.Background(), "h1-workspace", metav1.GetOptions{})
				require.NoError(t, err)
				return c
			}
			before := claim().Spec.DeepCopy()
			change(&f.c.cfg.Build)
			f.c.cfg.Build.Image = "clerum/mcp-host:0.9.6"
			res, err := f.sync("h1")
			require.NoError(t, err)
			assert.Equal(t, []string{"patch hosts/h1/status", "update deployments/h1"}, f.Writes(),
				"the Deployment is still rolled; the claim is left as it is")
			assert.Equal(t, "clerum/mcp-host:0.9.6", resources.DeployedImage(f.deployment(hostNS, "h1")))
			assert.Equal(t, *before, claim().Spec)
			ready := f.condition("h1", clerumv1alpha1.ConditionReady)
			assert.NotEqual(t, reasons.NotOwned, ready.Reason)
			assert.Equal(t, reasons.Progressing, ready.Reason)
			assert.Equal(t, "clerum/mcp-host:0.9.6", f.status("h1").Image)
			assert.Equal(t, 45*time.Minute, res.RequeueAfter, "no refusal retry: the credential decides")
			ev := f.Events()
			require.Len(t, ev, 1)
			assert.True(t, strings.HasPrefix(ev[0], "Warning ChangeRefused PersistentVolumeClaim mcp-host/h1-workspace is not written"), ev[0])
			assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_children_refused_total", nil))
			assert.Zero(t, counter(t, f.Registry, "clerum_hcc_host_hosts", map[string]string{"state": "not-owned"}))

			// Reported once per state of the claim.
			f.SyncCaches()
			f.mustSync("h1")
			assert.Empty(t, f.Writes())
			assert.Empty(t, f.Events())
		})
	}
}

// 9. the Context changing during a sync: the Deployment is not written with
// the contextId decided before.
func TestTheContextChangingDuringASync(t *testing.T) {
	for name, change := range map[string]func(f *fixture){
		"relabelled": func(f *fixture) {
			c := context1()
			c.Spec.ContextID, c.ResourceVersion = "ctx-2", "2"
			f.setContext(c)
		},
		"deleted": func(f *fixture) { f.removeContext(context1()) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, resourcestest.NewHost("h1"), context1())
			// The Context changes while the children are written: just as
			// the runtime-token Secret is created.
			changed := false
			f.Kube.PrependReactor("create", "secrets", func(core.Action) (bool, runtime.Object, error) {
				if !changed {
					changed = true
					change(f)
				}
				return false, nil, nil
			})
			_, err := f.sync("h1")
			require.True(t, changed)
			require.Error(t, err)
			assert.ErrorIs(t, err, kit.ErrCacheBehind)
			assert.Equal(t, without(created("h1"), "create deployments/h1"), f.Writes(),
				"never a pod with the contextId decided before")
			assert.False(t, f.exists(kit.Deployments, hostNS, "h1"))
			assert.Equal(t, 1, f.issuer.calls())
		})
	}
	t.Run("relabelled: the next sync deploys with the new contextId", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), context1())
		changed := false
		f.Kube.PrependReactor("create", "secrets", func(core.Action) (bool, runtime.Object, error) {
			if !changed {
				changed = true
				c := context1()
				c.Spec.ContextID, c.ResourceVersion = "ctx-2", "2"
				f.setContext(c)
			}
			return false, nil, nil
		})
		_, err := f.sync("h1")
		require.Error(t, err)
		f.SyncCaches()
		f.mustSync("h1")
		assert.Equal(t, []string{"create deployments/h1", "patch hosts/h1/status"}, f.Writes())
		assert.Equal(t, "ctx-2", f.deployment(hostNS, "h1").Spec.Template.Labels[names.LabelContext])
		assert.Equal(t, "ctx-2", f.status("h1").ContextID)
		assert.Equal(t, 1, f.issuer.calls())
	})
}

// 10. the sweep tells a deleted Host from a later one of the same name.
func TestSweepChecksTheOwnerUID(t *testing.T) {
	// gone1's children name the Host of UID uid-new; the deletion seen was
	// of uid-old.
	setup := func(t *testing.T) *fixture {
		f := newFixture(t, resourcestest.NewHost("gone1", func(h *clerumv1alpha1.Host) { h.UID = "uid-new" }), context1())
		f.mustSync("gone1")
		f.SyncCaches()
		f.removeHost("gone1")
		f.ClearWrites()
		f.c.cfg.Caps = kit.Caps{Absolute: 0, Percent: 100}
		return f
	}
	readers := []string{"delete deployments/channel-reader-gone1", "delete networkpolicies/channel-reader-gone1-egress",
		"delete services/channel-reader-gone1"}
	t.Run("a deletion of another UID explains none of the owned children", func(t *testing.T) {
		f := setup(t)
		f.c.state.deleted.Observe("gone1", "uid-old")
		require.NoError(t, f.sweep())
		w := f.Writes()
		for _, x := range w {
			assert.True(t, strings.Contains(x, "channel-reader-"), "a child of the later Host is not taken for the deleted one's: %s", x)
		}
		// The channels-namespace children carry no owner reference: the
		// name is all there is to go by.
		assert.Equal(t, readers, w)
		assert.NotContains(t, w, "delete persistentvolumeclaims/gone1-workspace", "the claim above all")
		assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_orphan_cap_trips_total", nil), "unexplained, and over the cap of 0")
		assert.Zero(t, counter(t, f.Registry, "clerum_hcc_host_orphans_deleted_total", map[string]string{"class": "unexplained"}))
		_, err := f.Kube.CoreV1().PersistentVolumeClaims(hostNS).Get(context.Background(), "gone1-workspace", metav1.GetOptions{})
		assert.NoError(t, err)
	})
	t.Run("a deletion of that UID explains them all, the claim included", func(t *testing.T) {
		f := setup(t)
		f.c.state.deleted.Observe("gone1", "uid-new")
		require.NoError(t, f.sweep())
		assert.Equal(t, deleted("gone1"), f.Writes())
		assert.Zero(t, counter(t, f.Registry, "clerum_hcc_host_orphan_cap_trips_total", nil))
		assert.Equal(t, 10.0, counter(t, f.Registry, "clerum_hcc_host_orphans_deleted_total", map[string]string{"class": "explained"}))
	})
}

// 11. the expiry gauge.
func TestExpiryGauge(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1"), resourcestest.NewHost("h2", resourcestest.WithSecretRef("missing")), context1())
	expiry := func() float64 { return counter(t, f.Registry, "clerum_hcc_host_credential_expiry_seconds", nil) }
	require.NotNil(t, series(t, f.Registry, "clerum_hcc_host_credential_expiry_seconds", nil))
	assert.True(t, math.IsInf(expiry(), 1), "no credential: +Inf, got %v", expiry())
	f.mustSync("h2")
	assert.True(t, math.IsInf(expiry(), 1), "a blocked Host has no credential: %v", expiry())
	f.mustSync("h1")
	assert.Equal(t, 3600.0, expiry())
	f.Clock.Step(90 * time.Second)
	assert.Equal(t, 3510.0, expiry(), "at scrape time")
	assert.Positive(t, expiry())

	// The Host goes: no credential again.
	f.c.hostHandlers(func(cache.ObjectName) {}).OnDelete(f.host("h1"))
	f.removeHost("h1")
	f.mustSync("h1")
	assert.True(t, math.IsInf(expiry(), 1), "%v", expiry())
}

// 12. a Retry-After from the Control API.
func TestRetryAfterIsHonoured(t *testing.T) {
	tooMany := &controlapi.StatusError{Route: "/bootstrap", Code: 429, Attempts: 1, RetryAfter: 2 * time.Minute}
	require.ErrorIs(t, tooMany, controlapi.ErrUnavailable)
	t.Run("no credential yet", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), context1())
		f.issuer.fail(tooMany)
		res, err := f.sync("h1")
		require.NoError(t, err, "the queue comes back when the Control API said, not with backoff")
		assert.Equal(t, 2*time.Minute, res.RequeueAfter)
		assert.Equal(t, 1, f.issuer.calls())
		auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
		assert.Equal(t, metav1.ConditionFalse, auth.Status)
		assert.Equal(t, reasons.ControlAPIUnavailable, auth.Reason)
		assert.Contains(t, auth.Message, "Retry-After 2m0s")
		assert.NotContains(t, f.Writes(), "create deployments/h1")
		assert.Len(t, eventsWithPrefix(f.Events(), "Warning CredentialFailed "), 1)
	})
	t.Run("a credential due for refresh", func(t *testing.T) {
		f := deployed(t)
		f.Clock.Step(50 * time.Minute)
		f.issuer.fail(tooMany)
		res, err := f.sync("h1")
		require.NoError(t, err)
		assert.Equal(t, 2*time.Minute, res.RequeueAfter, "sooner than the refresh would be")
		auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
		assert.Equal(t, metav1.ConditionTrue, auth.Status)
		assert.Equal(t, reasons.ControlAPIUnavailable, auth.Reason)
	})
	t.Run("a 503 without Retry-After is an error, for backoff", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), context1())
		f.issuer.fail(&controlapi.StatusError{Route: "/bootstrap", Code: 503, Attempts: 3})
		res, err := f.sync("h1")
		require.Error(t, err)
		assert.ErrorIs(t, err, controlapi.ErrUnavailable)
		assert.Equal(t, time.Duration(0), res.RequeueAfter)
	})
}

// An informer the operator cannot wire — one already stopped takes neither
// a handler nor an indexer — fails Run before anything syncs: the operator
// must not run deaf to Host events or without the indexes it reads.
func TestAnInformerThatCannotBeWiredFailsRun(t *testing.T) {
	f := newFixture(t)
	hosts := f.Deps().Informers.HCC(hostNS).Clerum().V1alpha1().Hosts().Informer()
	stop := make(chan struct{})
	close(stop)
	hosts.Run(stop) // returns at once: the informer has stopped

	d := f.Deps() // a second operator over the same informers
	d.Registry = prometheus.NewRegistry()
	d.Queues = kit.NewQueues(d.Registry, f.Clock)
	build := resourcestest.Options
	build.ConfigMapName = "" // its one informer is the first operator's
	c := New(d, f.issuer, Config{ContextNamespace: contextNS, TargetNamespace: targetNS, Build: build, Workers: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := c.Run(ctx) // without the check, it would wait for caches nobody started
	require.Error(t, err)
	assert.Contains(t, err.Error(), "host: wiring")
	assert.Contains(t, err.Error(), "adding an event handler")
	assert.Contains(t, err.Error(), "adding indexers")
	assert.NoError(t, ctx.Err(), "Run failed at once, not at the deadline")
	// The Context indexer conflicts with the first operator's: a third.
	assert.Equal(t, 3.0, counter(t, d.Registry.(*prometheus.Registry), "clerum_hcc_host_reconcile_errors_total",
		map[string]string{"controller": "host"}), "each wiring error is counted")
	assert.Zero(t, f.issuer.calls())
	assert.True(t, c.sweeps.ShuttingDown() && c.stops.ShuttingDown(), "no queue is left running")
}
