package host

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

const runtimeTokensH1 = "host-h1-mcp-host-runtime-tokens"

// forgedSecret is a runtime-token Secret for h1 that someone other than HCC
// pre-created with HCC's labels: the attacker's credential, valid for a
// day by its annotations, with the given mark ("" for none).
func forgedSecret(markValue string) *corev1.Secret {
	h1 := resourcestest.NewHost("h1")
	s := resources.BuildEmptyRuntimeTokenSecret(h1, resourcestest.Options)
	s.UID, s.ResourceVersion = "uid-forged", "1"
	expiry := t0.Add(24 * time.Hour).Format(time.RFC3339)
	s.Annotations = map[string]string{resources.AnnotationIssuedForUID: "uid-h1", resources.AnnotationExpiresAt: expiry}
	if markValue != "" {
		s.Annotations[mark.Annotation] = markValue
	}
	s.Data = map[string][]byte{resources.KeyBootstrapCredential: []byte("attacker-credential"), resources.KeyExpiresAt: []byte(expiry)}
	return s
}

// A runtime-token Secret with HCC's labels is believed only under HCC's
// mark: a forged one (forged annotations, no mark; a forged mark; a mark
// made under another HMAC secret) has a new credential issued and written
// over it before any pod mounts it, a ForgedCredential event and a count.
func TestAForgedRuntimeTokenSecretIsReissued(t *testing.T) {
	other := resourcestest.Options
	other.RuntimeTokenMark = mark.NewKey("not-hcc's-secret", mark.PurposeRuntimeToken)
	byOtherKey := resources.BuildRuntimeTokenSecret(resourcestest.NewHost("h1"), other, "attacker-credential", t0.Add(24*time.Hour))
	byOtherKey.UID, byOtherKey.ResourceVersion = "uid-forged", "1"
	for name, tc := range map[string]struct {
		s     *corev1.Secret
		trust string
	}{
		"forged annotations, no mark": {forgedSecret(""), "unmarked"},
		"a forged mark":               {forgedSecret("v1:" + strings.Repeat("ab", 32)), "mismatch"},
		"a mark under another secret": {byOtherKey, "mismatch"},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, resourcestest.NewHost("h1"), context1(), tc.s)
			f.mustSync("h1")
			assert.Equal(t, 1, f.issuer.calls(), "the Control API is asked")
			s := f.secret(runtimeTokensH1)
			assert.Equal(t, credentialValue, string(s.Data[resources.KeyBootstrapCredential]), "the attacker's credential is overwritten")
			assert.Equal(t, t0.Add(lifetime).Format(time.RFC3339), s.Annotations[resources.AnnotationExpiresAt])
			assert.Equal(t, resources.Marked, resources.ReadIssuance(cached(s), resourcestest.Options.RuntimeTokenMark).Trust,
				"what HCC wrote verifies from the cache")
			assert.Equal(t, with(without(created("h1"), "create secrets/"+runtimeTokensH1), "update secrets/"+runtimeTokensH1), f.Writes())
			ev := eventsWithPrefix(f.Events(), "Warning "+EventForgedCredential)
			require.Len(t, ev, 1)
			assert.NotContains(t, ev[0], "attacker-credential")
			assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_forged_credentials_total", map[string]string{"trust": tc.trust}))
			assert.Equal(t, reasons.CredentialIssued, f.condition("h1", clerumv1alpha1.ConditionAuthReady).Reason)

			// The next pass, the cache showing HCC's Secret: nothing.
			f.SyncCaches()
			f.mustSync("h1")
			assert.Empty(t, f.Writes())
			assert.Equal(t, 1, f.issuer.calls())
			assert.Empty(t, f.Events())
		})
	}
}

// While no new credential can be had, a forged Secret's credential is
// never mounted: no Deployment is created, and the forgery is reported
// once, not on every retry.
func TestAForgedCredentialIsNeverMounted(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1"), context1(), forgedSecret(""))
	f.issuer.fail(fmt.Errorf("HTTP 503: %w", controlapi.ErrUnavailable))
	_, err := f.sync("h1")
	require.Error(t, err)
	assert.False(t, f.exists(kit.Deployments, hostNS, "h1"), "no pod mounts the forged credential")
	assert.Equal(t, "attacker-credential", string(f.secret(runtimeTokensH1).Data[resources.KeyBootstrapCredential]))
	auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
	assert.Equal(t, metav1.ConditionFalse, auth.Status)
	assert.Contains(t, auth.Message, "carries no mark")
	assert.Equal(t, reasons.CredentialPending, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
	_, _ = f.sync("h1")
	assert.Len(t, eventsWithPrefix(f.Events(), "Warning "+EventForgedCredential), 1, "one event per Secret version")
	assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_forged_credentials_total", map[string]string{"trust": "unmarked"}))
}

// The upgrade: Secrets written by an HCC from before marks carry none, so
// the first pass re-issues each Host's credential once, and never again;
// the pods keep running meanwhile (the Deployment is not touched).
func TestUpgradeReissuesEachCredentialOnce(t *testing.T) {
	const hosts = 3
	var hostNames []string
	for i := range hosts {
		hostNames = append(hostNames, fmt.Sprintf("h%d", i+1))
	}
	f := newFixture(t, context1())
	for _, n := range hostNames {
		f.addHost(resourcestest.NewHost(n))
	}
	for _, n := range hostNames {
		f.mustSync(n)
	}
	f.SyncCaches()
	require.Equal(t, hosts, f.issuer.calls())

	// The previous HCC's Secrets: the same, without the mark.
	for _, n := range hostNames {
		s := f.secret("host-" + n + "-mcp-host-runtime-tokens")
		delete(s.Annotations, mark.Annotation)
		_, err := f.Kube.CoreV1().Secrets(hostNS).Update(t.Context(), s, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	f.SyncCaches()
	f.Clock.Step(2 * cacheGrace) // a new process remembers no issuance
	for pass := range 3 {
		for _, n := range hostNames {
			f.mustSync(n)
		}
		f.SyncCaches()
		assert.Equal(t, 2*hosts, f.issuer.calls(), "pass %d: one issuance per Host, once", pass)
	}
	assert.Equal(t, float64(hosts), counter(t, f.Registry, "clerum_hcc_host_forged_credentials_total", map[string]string{"trust": "unmarked"}))
	for _, n := range hostNames {
		assert.Equal(t, int32(1), *f.deployment(hostNS, n).Spec.Replicas, "no outage")
	}
}

// Rotating INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET: one issuance per Host, no
// outage.
func TestRotatingTheHMACSecretReissuesOnce(t *testing.T) {
	f := deployed(t)
	require.Equal(t, 1, f.issuer.calls())
	// The controller restarts with the new secret.
	f.c.cfg.Build.RuntimeTokenMark = mark.NewKey("the-rotated-secret", mark.PurposeRuntimeToken)
	f.Clock.Step(2 * cacheGrace)
	for range 3 {
		f.mustSync("h1")
		f.SyncCaches()
	}
	assert.Equal(t, 2, f.issuer.calls())
	assert.Equal(t, int32(1), *f.deployment(hostNS, "h1").Spec.Replicas)
	assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_forged_credentials_total", map[string]string{"trust": "mismatch"}))
}

// channel-reader-H-egress alone isolates the reader: the reader is created
// only once that policy is HCC's. A failed write holds the reader back
// (retried); a name held by an object HCC does not own also stops a
// running reader.
func TestTheReaderWaitsForItsEgressPolicy(t *testing.T) {
	readerPolicy := "channel-reader-h1-egress"
	t.Run("the policy fails to write", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"), context1())
		f.Kube.PrependReactor("create", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is sulking"))
		})
		_, err := f.sync("h1")
		require.Error(t, err, "retried")
		assert.False(t, f.exists(kit.Deployments, readerNS, "channel-reader-h1"), "no reader without its policy")
		assert.NotContains(t, f.Writes(), "create deployments/channel-reader-h1")
		assert.True(t, f.exists(kit.Deployments, hostNS, "h1"), "the Host itself is not held back")
	})
	t.Run("the policy's name is held by an unmanaged object", func(t *testing.T) {
		foreign := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: readerNS, Name: readerPolicy, UID: "foreign", ResourceVersion: "1"}}
		f := newFixture(t, resourcestest.NewHost("h1"), context1(), foreign)
		res, err := f.sync("h1")
		require.NoError(t, err, "a refusal is reported, not retried")
		assert.False(t, f.exists(kit.Deployments, readerNS, "channel-reader-h1"), "no reader confined by someone else's policy")
		assert.Equal(t, reasons.NotOwned, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
		assert.Equal(t, refusedRetry, res.RequeueAfter)
	})
	t.Run("a running reader stops when someone else holds its policy's name", func(t *testing.T) {
		f := deployed(t)
		require.Equal(t, int32(1), *f.deployment(readerNS, "channel-reader-h1").Spec.Replicas)
		// HCC's policy is replaced by an unmanaged one of the same name.
		require.NoError(t, f.Kube.NetworkingV1().NetworkPolicies(readerNS).Delete(t.Context(), readerPolicy, metav1.DeleteOptions{}))
		_, err := f.Kube.NetworkingV1().NetworkPolicies(readerNS).Create(t.Context(),
			&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: readerNS, Name: readerPolicy}}, metav1.CreateOptions{})
		require.NoError(t, err)
		f.SyncCaches()
		_, err = f.sync("h1")
		require.NoError(t, err)
		assert.Equal(t, int32(0), *f.deployment(readerNS, "channel-reader-h1").Spec.Replicas, "stopped")
		assert.Equal(t, int32(1), *f.deployment(hostNS, "h1").Spec.Replicas, "the Host runs on")
		assert.Empty(t, f.deployment(readerNS, "channel-reader-h1").OwnerReferences, "still no reference across namespaces")
	})
}

// With the desktop on, allow-rpc-proxy-desktop-H is written before the Host
// pods start: the Deployment waits for it.
func TestTheHostWaitsForItsDesktopPolicy(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1", resourcestest.WithDesktop), context1())
	f.Kube.PrependReactor("create", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
		if a.(core.CreateAction).GetObject().(metav1.Object).GetName() == "allow-rpc-proxy-desktop-h1" {
			return true, nil, apierrors.NewInternalError(errors.New("etcd is sulking"))
		}
		return false, nil, nil
	})
	_, err := f.sync("h1")
	require.Error(t, err)
	assert.False(t, f.exists(kit.Deployments, hostNS, "h1"), "no desktop pod before its policy")
	f.Kube.ReactionChain = f.Kube.ReactionChain[1:]
	f.SyncCaches()
	f.mustSync("h1")
	assert.True(t, f.exists(kit.Deployments, hostNS, "h1"))
}

// A Retry-After beyond the refresh window (4294967295 s) puts the Host off
// for the window at most.
func TestARetryAfterIsCappedAtTheRefreshWindow(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1"), context1())
	f.issuer.fail(&controlapi.StatusError{Route: controlapi.RouteBootstrapCredentials, Code: 429, RetryAfter: 4294967295 * time.Second})
	res, err := f.sync("h1")
	require.NoError(t, err, "the Control API said when")
	assert.Equal(t, refreshBefore, res.RequeueAfter)
}

// mcp-host-config holds every Host's trust anchors: a Host whose ConfigMap
// is missing is Ready=False/ConfigMissing and gets no Deployment, and
// recovers when the ConfigMap appears.
func TestAMissingHostConfigMapHoldsTheDeployment(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1"), context1())
	configMaps := corev1.SchemeGroupVersion.WithResource("configmaps")
	require.NoError(t, f.Kube.Tracker().Delete(configMaps, hostNS, resourcestest.Options.ConfigMapName))
	f.SyncCaches()
	f.mustSync("h1")
	assert.False(t, f.exists(kit.Deployments, hostNS, "h1"), "no pod starts without its configuration")
	ready := f.condition("h1", clerumv1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, reasons.ConfigMissing, ready.Reason)
	assert.Contains(t, ready.Message, "ConfigMap mcp-host-config does not exist in mcp-host")
	assert.Equal(t, 1, f.issuer.calls(), "the credential is obtained meanwhile")

	// The ConfigMap appears: its event queues the Host, which deploys.
	require.NoError(t, f.Kube.Tracker().Add(hostConfigMap()))
	f.SyncCaches()
	f.c.queueAllHosts()
	require.Equal(t, 1, f.c.queue.Len())
	f.mustSync("h1")
	assert.True(t, f.exists(kit.Deployments, hostNS, "h1"))
}

// The operator caches that one ConfigMap, by name, and none of its data.
func TestTheConfigMapInformerSelectsOneConfigMap(t *testing.T) {
	f := newFixture(t)
	var selectors []string
	f.Kube.PrependReactor("list", "configmaps", func(a core.Action) (bool, runtime.Object, error) {
		selectors = append(selectors, a.(core.ListAction).GetListRestrictions().Fields.String())
		return false, nil, nil
	})
	stop := make(chan struct{})
	f.Deps().Informers.Start(stop)
	defer f.Deps().Informers.Shutdown()
	defer close(stop)
	require.True(t, cache.WaitForCacheSync(stop, f.c.configMaps.HasSynced))
	require.NotEmpty(t, selectors)
	for _, s := range selectors {
		assert.Equal(t, "metadata.name=mcp-host-config", s)
	}
	out, err := existenceOnly(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mcp-host-config"},
		Data: map[string]string{"HTTPS_PROXY": "http://proxy"}})
	require.NoError(t, err)
	assert.Empty(t, out.(*corev1.ConfigMap).Data)
}

// When a contextId changes holder, the old holder's Host pods are stopped
// on a fast path of their own: queued by the Context event beside the main
// sync, judged from the listers, never behind a Control API call.
func TestAContextIDHolderChangeStopsPodsOnTheFastPath(t *testing.T) {
	stopped := func(t *testing.T, f *fixture, host string) {
		t.Helper()
		calls := f.issuer.calls()
		// The Control API hangs: the fast path never asks it.
		f.issuer.fail(fmt.Errorf("HTTP 503: %w", controlapi.ErrUnavailable))
		require.Equal(t, 1, f.c.stops.Len(), "the Context event queued the stop")
		k, _ := f.c.stops.Get()
		_, err := f.c.syncStop(t.Context(), k)
		f.c.stops.Done(k)
		require.NoError(t, err)
		assert.Equal(t, int32(0), *f.deployment(hostNS, host).Spec.Replicas)
		assert.Equal(t, calls, f.issuer.calls(), "no Control API call on the fast path")
		assert.Equal(t, []string{"update deployments/" + host}, f.Writes(), "the stop and nothing else")
	}
	t.Run("the holder's Context is deleted; a younger one holds the contextId now", func(t *testing.T) {
		younger := newContext("context2", "ctx-1", t0)
		f := newFixture(t, resourcestest.NewHost("h1"), context1(), younger)
		f.mustSync("h1")
		f.SyncCaches()
		require.Equal(t, int32(1), *f.deployment(hostNS, "h1").Spec.Replicas)
		f.removeContext(context1())
		f.c.contextHandlers().OnDelete(context1())
		stopped(t, f, "h1")
	})
	t.Run("the Context turns to a contextId an older Context holds", func(t *testing.T) {
		f := deployed(t)
		older := newContext("context0", "ctx-0", t0.Add(-2*time.Hour))
		f.setContext(older)
		taken := context1()
		taken.Spec.ContextID, taken.ResourceVersion = "ctx-0", "2"
		f.setContext(taken)
		f.c.contextHandlers().OnUpdate(context1(), taken)
		stopped(t, f, "h1")
	})
	t.Run("the Context's contextId changes: the old label's pods stop at once", func(t *testing.T) {
		f := deployed(t)
		relabelled := context1()
		relabelled.Spec.ContextID, relabelled.ResourceVersion = "ctx-2", "2"
		f.setContext(relabelled)
		f.c.contextHandlers().OnUpdate(context1(), relabelled)
		stopped(t, f, "h1")
		// The main sync then starts them again under the new label.
		f.issuer.fail(nil)
		f.SyncCaches()
		f.mustSync("h1")
		d := f.deployment(hostNS, "h1")
		assert.Equal(t, "ctx-2", d.Spec.Template.Labels[names.LabelContext])
		assert.Equal(t, int32(1), *d.Spec.Replicas)
	})
	t.Run("a Host being deleted whose Context is deleted and its contextId taken stops at once", func(t *testing.T) {
		f := deployed(t)
		require.Equal(t, int32(1), *f.deployment(hostNS, "h1").Spec.Replicas)
		h := f.host("h1")
		now := metav1.NewTime(t0)
		h.DeletionTimestamp = &now // its finalizer keeps it; the main sync has not run
		f.setHost(h)
		f.ClearWrites()
		f.removeContext(context1())
		f.setContext(newContext("other-tenant", "ctx-1", t0.Add(time.Hour)))
		f.c.contextHandlers().OnDelete(context1())
		stopped(t, f, "h1")
	})
	t.Run("a Host being deleted stops even while its Context still vouches for it", func(t *testing.T) {
		f := deployed(t)
		h := f.host("h1")
		now := metav1.NewTime(t0)
		h.DeletionTimestamp = &now
		f.setHost(h)
		f.ClearWrites()
		f.c.stops.Add(cache.ObjectName{Namespace: hostNS, Name: "h1"})
		stopped(t, f, "h1")
		// Stopped: the next pass writes nothing.
		f.SyncCaches()
		f.c.stops.Add(cache.ObjectName{Namespace: hostNS, Name: "h1"})
		k, _ := f.c.stops.Get()
		_, err := f.c.syncStop(t.Context(), k)
		f.c.stops.Done(k)
		require.NoError(t, err)
		assert.Empty(t, f.Writes())
	})
	t.Run("a Host still vouched for is left alone, a Secret block included", func(t *testing.T) {
		f := deployed(t)
		require.Equal(t, int32(1), *f.deployment(hostNS, "h1").Spec.Replicas)
		f.setHost(resourcestest.NewHost("h1", resourcestest.WithSecretRef("gone")))
		f.ClearWrites()
		f.c.stops.Add(cache.ObjectName{Namespace: hostNS, Name: "h1"})
		k, _ := f.c.stops.Get()
		_, err := f.c.syncStop(t.Context(), k)
		f.c.stops.Done(k)
		require.NoError(t, err)
		assert.Empty(t, f.Writes())
	})
}

// An older credential of HCC's put back in the Host's runtime-token Secret —
// validly marked, for the same Host UID — after HCC replaced it is not
// believed: the cache at or past HCC's write shows a credential other than
// the one HCC wrote last, so a new one is issued and written over it, with
// a ForgedCredential event and a count under trust="replayed". Re-creating
// the Secret with it (delete, then create) is the same.
func TestAnOlderMarkedCredentialPutBackIsReplaced(t *testing.T) {
	for name, putBack := range map[string]func(t *testing.T, f *fixture, old *corev1.Secret){
		"over HCC's Secret": func(t *testing.T, f *fixture, old *corev1.Secret) {
			s := f.secret(runtimeTokensH1)
			s.Annotations, s.Data = old.Annotations, old.Data
			_, err := f.Kube.CoreV1().Secrets(hostNS).Update(t.Context(), s, metav1.UpdateOptions{})
			require.NoError(t, err)
		},
		"in a re-created Secret": func(t *testing.T, f *fixture, old *corev1.Secret) {
			gone := f.secret(runtimeTokensH1)
			require.NoError(t, f.Kube.CoreV1().Secrets(hostNS).Delete(t.Context(), runtimeTokensH1, metav1.DeleteOptions{}))
			f.c.secretHandlers(func(metav1.Object) (cache.ObjectName, bool) { return cache.ObjectName{}, false }).OnDelete(cached(gone))
			again := old.DeepCopy()
			again.ResourceVersion = ""
			_, err := f.Kube.CoreV1().Secrets(hostNS).Create(t.Context(), again, metav1.CreateOptions{})
			require.NoError(t, err)
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, resourcestest.NewHost("h1"), context1())
			f.mustSync("h1")
			f.SyncCaches()
			old := f.secret(runtimeTokensH1).DeepCopy() // C1, under its valid mark
			require.Equal(t, 1, f.issuer.calls())

			// Its mark broken once: HCC issues C2 and writes it.
			f.Clock.Step(5 * time.Minute)
			f.issuer.value = "C2-credential"
			s := f.secret(runtimeTokensH1)
			s.Annotations[mark.Annotation] = "v1:00"
			_, err := f.Kube.CoreV1().Secrets(hostNS).Update(t.Context(), s, metav1.UpdateOptions{})
			require.NoError(t, err)
			f.SyncCaches()
			f.mustSync("h1")
			require.Equal(t, 2, f.issuer.calls())
			f.SyncCaches()
			f.mustSync("h1")
			require.Empty(t, f.Writes(), "the cache shows C2: nothing to do")
			require.Equal(t, 2, f.issuer.calls())
			f.Events() // the broken mark's event

			// C1 put back, with its old annotations and mark.
			f.issuer.value = "C3-credential"
			putBack(t, f, old)
			f.SyncCaches()
			f.mustSync("h1")
			assert.Equal(t, 3, f.issuer.calls(), "a new credential is issued")
			assert.Equal(t, "C3-credential", string(f.secret(runtimeTokensH1).Data[resources.KeyBootstrapCredential]),
				"the older credential is not left mounted")
			assert.Contains(t, f.Writes(), "update secrets/"+runtimeTokensH1)
			ev := eventsWithPrefix(f.Events(), "Warning "+EventForgedCredential)
			require.Len(t, ev, 1)
			assert.Contains(t, ev[0], "older credential")
			assert.NotContains(t, ev[0], credentialValue)
			assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_forged_credentials_total", map[string]string{"trust": "replayed"}))
			assert.Equal(t, reasons.CredentialIssued, f.condition("h1", clerumv1alpha1.ConditionAuthReady).Reason)

			// The cache showing C3: nothing more.
			f.SyncCaches()
			f.mustSync("h1")
			assert.Empty(t, f.Writes())
			assert.Equal(t, 3, f.issuer.calls())
		})
	}
}

// The limit of the rule above (docs/host.md): a process that did not write
// the Host's last credential — a new leader, a restart — remembers nothing
// to compare with, and believes a replayed, still-valid credential that
// HCC marked for this Host's UID.
func TestANewProcessBelievesAnOlderMarkedCredential(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1"), context1())
	f.mustSync("h1")
	f.SyncCaches()
	old := f.secret(runtimeTokensH1).DeepCopy()
	f.Clock.Step(5 * time.Minute)
	f.issuer.value = "C2-credential"
	s := f.secret(runtimeTokensH1)
	s.Annotations[mark.Annotation] = "v1:00"
	_, err := f.Kube.CoreV1().Secrets(hostNS).Update(t.Context(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.SyncCaches()
	f.mustSync("h1")
	require.Equal(t, 2, f.issuer.calls())

	f.c.state = newHostState() // a new process
	s = f.secret(runtimeTokensH1)
	s.Annotations, s.Data = old.Annotations, old.Data
	_, err = f.Kube.CoreV1().Secrets(hostNS).Update(t.Context(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.SyncCaches()
	f.mustSync("h1")
	assert.Equal(t, 2, f.issuer.calls())
	assert.Equal(t, credentialValue, string(f.secret(runtimeTokensH1).Data[resources.KeyBootstrapCredential]))
}
