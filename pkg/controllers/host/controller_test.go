package host

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
	"github.com/clerum/hcc/pkg/secretdigest"
)

// The namespaces of the fixture: Hosts and their children in resourcestest.Options'
// HostNamespace, channel-reader objects in its ChannelsNamespace, Contexts
// in contextNS.
const (
	hostNS    = "mcp-host"
	readerNS  = "channels"
	contextNS = "mcp-server"
	targetNS  = "clerum-prod"

	// credentialValue is what the fake Control API issues; it must never
	// reach a log line, an event or a status.
	credentialValue = "s3cr3t-credential"
	lifetime        = time.Hour
	refreshBefore   = 15 * time.Minute
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// fakeIssuer is the Control API: it counts calls, records requests and
// issues credentialValue valid for lifetime from the fixture's clock, or
// fails with err.
type fakeIssuer struct {
	mu       sync.Mutex
	clock    clock.Clock
	requests []controlapi.BootstrapRequest
	value    string
	lifetime time.Duration
	err      error
}

func (i *fakeIssuer) BootstrapCredential(_ context.Context, req controlapi.BootstrapRequest) (controlapi.Credential, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.requests = append(i.requests, req)
	if i.err != nil {
		return controlapi.Credential{}, i.err
	}
	return controlapi.Credential{Value: i.value, ExpiresAt: i.clock.Now().Add(i.lifetime)}, nil
}

func (i *fakeIssuer) calls() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return len(i.requests)
}

func (i *fakeIssuer) fail(err error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.err = err
}

// fixture is the Host operator over kittest's fake API server and caches;
// syncHost and sweep are called directly and the exact writes asserted.
type fixture struct {
	*kittest.Fixture
	t      *testing.T
	c      *Controller
	issuer *fakeIssuer
}

// newFixture returns the operator over a fake API server holding objs and
// the platform's mcp-host-config, its caches showing them.
func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, objs...)
}

// newFixtureWith is newFixture with the operator's Config changed by
// configure first.
func newFixtureWith(t *testing.T, configure func(*Config), objs ...runtime.Object) *fixture {
	t.Helper()
	kf := kittest.NewFixture(t, append([]runtime.Object{hostConfigMap()}, objs...)...)
	f := &fixture{Fixture: kf, t: t, issuer: &fakeIssuer{clock: kf.Clock, value: credentialValue, lifetime: lifetime}}
	cfg := Config{
		ContextNamespace: contextNS, TargetNamespace: targetNS, Build: resourcestest.Options,
		RefreshBefore: refreshBefore, Resync: 10 * time.Minute, Caps: kit.Caps{Absolute: 10, Percent: 20}, Workers: 1,
	}
	if configure != nil {
		configure(&cfg)
	}
	f.c = New(kf.Deps(), f.issuer, cfg)
	f.SyncCaches()
	return f
}

// hostConfigMap is the ConfigMap resourcestest.Options names, which every Host pod
// loads.
func hostConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: resourcestest.Options.ConfigMapName, UID: "uid-config", ResourceVersion: "1"}}
}

// cached is what the Secret informer caches of s: its digest.
func cached(s *corev1.Secret) *corev1.Secret {
	d, _ := secretdigest.Digest(s.DeepCopy())
	return d.(*corev1.Secret)
}

var hostsResource = clerumv1alpha1.Resource("hosts").WithVersion("v1alpha1")

// addHost stores h in the fake API server and the cache.
func (f *fixture) addHost(h *clerumv1alpha1.Host) {
	require.NoError(f.t, f.HCC.Tracker().Add(h.DeepCopy()))
	f.Index(h)
}

// setHost replaces h in the fake API server and the cache.
func (f *fixture) setHost(h *clerumv1alpha1.Host) {
	require.NoError(f.t, f.HCC.Tracker().Update(hostsResource, h.DeepCopy(), h.Namespace))
	f.Index(h)
}

// removeHost deletes h from the fake API server and the cache, as a
// deletion this process did not see.
func (f *fixture) removeHost(name string) {
	h := f.host(name)
	require.NoError(f.t, f.HCC.Tracker().Delete(hostsResource, hostNS, name))
	f.Unindex(h)
}

// setContext creates or replaces c in the fake API server and the cache.
func (f *fixture) setContext(c *clerumv1alpha1.Context) {
	gvr := clerumv1alpha1.Resource("contexts").WithVersion("v1alpha1")
	if err := f.HCC.Tracker().Update(gvr, c.DeepCopy(), c.Namespace); apierrors.IsNotFound(err) {
		require.NoError(f.t, f.HCC.Tracker().Add(c.DeepCopy()))
	} else {
		require.NoError(f.t, err)
	}
	f.Index(c)
}

// removeContext deletes c from the fake API server and the cache.
func (f *fixture) removeContext(c *clerumv1alpha1.Context) {
	require.NoError(f.t, f.HCC.Tracker().Delete(clerumv1alpha1.Resource("contexts").WithVersion("v1alpha1"), c.Namespace, c.Name))
	f.Unindex(c)
}

// host returns the Host as the fake API server holds it.
func (f *fixture) host(name string) *clerumv1alpha1.Host {
	h, err := f.HCC.ClerumV1alpha1().Hosts(hostNS).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return h
}

func (f *fixture) sync(name string) (kit.Result, error) {
	return f.c.syncHost(context.Background(), cache.ObjectName{Namespace: hostNS, Name: name})
}

func (f *fixture) mustSync(name string) kit.Result {
	f.t.Helper()
	res, err := f.sync(name)
	require.NoError(f.t, err)
	return res
}

func (f *fixture) sweep() error {
	_, err := f.c.sweep(context.Background(), sweepKey)
	return err
}

// statuses are the statuses applied to host, in order.
func (f *fixture) statuses(host string) []clerumv1alpha1.HostStatus {
	var out []clerumv1alpha1.HostStatus
	for _, h := range kittest.Applied[*clerumv1alpha1.Host](f.Fixture, hostNS, host) {
		out = append(out, h.Status)
	}
	return out
}

func (f *fixture) statusWrites(host string) int { return len(f.statuses(host)) }

// status returns the last status applied to host.
func (f *fixture) status(host string) clerumv1alpha1.HostStatus {
	f.t.Helper()
	s := f.statuses(host)
	require.NotEmpty(f.t, s, "no status applied for %s", host)
	return s[len(s)-1]
}

// condition returns condition typ of the last status applied to host.
func (f *fixture) condition(host, typ string) metav1.Condition {
	f.t.Helper()
	c := meta.FindStatusCondition(f.status(host).Conditions, typ)
	require.NotNil(f.t, c, "no %s condition", typ)
	return *c
}

func (f *fixture) service(ns, name string) *corev1.Service {
	f.t.Helper()
	s, err := f.Kube.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return s
}

func (f *fixture) deployment(ns, name string) *appsv1.Deployment {
	f.t.Helper()
	d, err := f.Kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return d
}

func (f *fixture) secret(name string) *corev1.Secret {
	f.t.Helper()
	s, err := f.Kube.CoreV1().Secrets(hostNS).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return s
}

// exists reports whether the fake API server holds an object of kind in ns.
func (f *fixture) exists(kind kit.Kind[*appsv1.Deployment], ns, name string) bool {
	_, err := kind.Client(f.Kube, ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(f.t, err)
	return true
}

func newContext(name, id string, created time.Time) *clerumv1alpha1.Context {
	return &clerumv1alpha1.Context{
		ObjectMeta: metav1.ObjectMeta{Namespace: contextNS, Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(created), ResourceVersion: "1"},
		Spec: clerumv1alpha1.ContextSpec{ContextID: id},
	}
}

// context1 is the Context resourcestest.NewHost's Hosts refer to.
func context1() *clerumv1alpha1.Context { return newContext("context1", "ctx-1", t0.Add(-time.Hour)) }

// created lists the writes of a first sync of Host h without desktop.
func created(h string) []string {
	w := []string{
		"create deployments/" + h,
		"create services/" + h,
		"create serviceaccounts/host-" + h,
		"create roles/host-" + h,
		"create rolebindings/host-" + h,
		"create persistentvolumeclaims/" + h + "-workspace",
		"update persistentvolumeclaims/" + h + "-workspace", // its mark
		"create secrets/host-" + h + "-mcp-host-runtime-tokens",
		"create deployments/channel-reader-" + h,
		"create services/channel-reader-" + h,
		"create networkpolicies/channel-reader-" + h + "-egress",
		"patch hosts/" + h,
		"patch hosts/" + h + "/status",
	}
	sort.Strings(w)
	return w
}

// deleted lists the deletes of every child of Host h without desktop.
func deleted(h string) []string {
	w := []string{
		"delete deployments/" + h,
		"delete services/" + h,
		"delete serviceaccounts/host-" + h,
		"delete roles/host-" + h,
		"delete rolebindings/host-" + h,
		"delete persistentvolumeclaims/" + h + "-workspace",
		"delete secrets/host-" + h + "-mcp-host-runtime-tokens",
		"delete deployments/channel-reader-" + h,
		"delete services/channel-reader-" + h,
		"delete networkpolicies/channel-reader-" + h + "-egress",
	}
	sort.Strings(w)
	return w
}

func without(list []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return slices.Contains(drop, s) })
}

func with(list []string, add ...string) []string {
	out := append(slices.Clone(list), add...)
	sort.Strings(out)
	return out
}

// deployed returns a fixture whose Host h1 has been created and whose
// caches show everything, status included.
func deployed(t *testing.T, opts ...func(*clerumv1alpha1.Host)) *fixture {
	f := newFixture(t, resourcestest.NewHost("h1", opts...), context1())
	f.mustSync("h1")
	f.SyncCaches()
	f.Events()
	return f
}

// 1. create.
func TestCreate(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1"), context1())
	res := f.mustSync("h1")
	assert.Equal(t, created("h1"), f.Writes())
	assert.Equal(t, 45*time.Minute, res.RequeueAfter, "looked at again when the credential is due")

	assert.Equal(t, []string{clerumv1alpha1.FinalizerHostCleanup}, f.host("h1").Finalizers)

	require.Equal(t, 1, f.issuer.calls())
	assert.Equal(t, controlapi.BootstrapRequest{Namespace: targetNS, HostRef: "h1", HostUID: "uid-h1"}, f.issuer.requests[0])

	s := f.secret("host-h1-mcp-host-runtime-tokens")
	expiry := t0.Add(lifetime).Format(time.RFC3339)
	assert.Equal(t, credentialValue, string(s.Data[resources.KeyBootstrapCredential]))
	assert.Equal(t, expiry, string(s.Data[resources.KeyExpiresAt]))
	assert.Equal(t, "uid-h1", s.Annotations[resources.AnnotationIssuedForUID])
	assert.Equal(t, expiry, s.Annotations[resources.AnnotationExpiresAt])

	d := f.deployment(hostNS, "h1")
	require.Len(t, d.OwnerReferences, 1)
	assert.Equal(t, types.UID("uid-h1"), d.OwnerReferences[0].UID)
	assert.Equal(t, "ctx-1", d.Spec.Template.Labels[names.LabelContext])
	assert.Equal(t, "host-h1", d.Spec.Template.Spec.ServiceAccountName)
	assert.Equal(t, []string{resources.ContainerMcpHost}, containerNames(d))
	reader := f.deployment(readerNS, "channel-reader-h1")
	assert.Empty(t, reader.OwnerReferences, "no owner reference crosses namespaces")

	st := f.status("h1")
	assert.Equal(t, int64(1), st.ObservedGeneration)
	assert.Equal(t, "ctx-1", st.ContextID)
	assert.Equal(t, resourcestest.Options.Image, st.Image)
	require.NotNil(t, st.CredentialExpiresAt)
	assert.True(t, st.CredentialExpiresAt.Time.Equal(t0.Add(lifetime)))
	auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
	assert.Equal(t, metav1.ConditionTrue, auth.Status)
	assert.Equal(t, reasons.CredentialIssued, auth.Reason)
	assert.Equal(t, metav1.ConditionTrue, f.condition("h1", clerumv1alpha1.ConditionSecretsResolved).Status)
	ready := f.condition("h1", clerumv1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status, "no pod is available yet")
	assert.Equal(t, reasons.Progressing, ready.Reason)
	assert.Empty(t, f.Events())
}

func containerNames(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

// 2. no-op resync.
func TestResyncWritesNothing(t *testing.T) {
	f := deployed(t)
	applied := f.statusWrites("h1")
	res := f.mustSync("h1")
	assert.Empty(t, f.Writes())
	assert.Equal(t, 1, f.issuer.calls())
	assert.Equal(t, applied, f.statusWrites("h1"), "no status write")
	assert.Equal(t, 45*time.Minute, res.RequeueAfter)

	// A periodic resync later, the credential not due yet: still nothing.
	f.Clock.Step(10 * time.Minute)
	res = f.mustSync("h1")
	assert.Empty(t, f.Writes())
	assert.Equal(t, 1, f.issuer.calls())
	assert.Equal(t, applied, f.statusWrites("h1"))
	assert.Equal(t, 35*time.Minute, res.RequeueAfter)
	assert.Empty(t, f.Events())
}

// The pod becoming available flows back into Ready.
func TestReadyFollowsTheDeployment(t *testing.T) {
	f := deployed(t)
	d := f.deployment(hostNS, "h1")
	d.Generation, d.Status.ObservedGeneration, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = 1, 1, 1, 1
	f.Index(d)
	f.mustSync("h1")
	assert.Equal(t, []string{"patch hosts/h1/status"}, f.Writes())
	ready := f.condition("h1", clerumv1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, reasons.Available, ready.Reason)
}

// 3. desktop on, off and on again.
func TestDesktopOnAndOff(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1", resourcestest.WithDesktop), context1())
	f.mustSync("h1")
	assert.Equal(t, with(created("h1"), "create networkpolicies/allow-rpc-proxy-desktop-h1"), f.Writes())
	assert.Equal(t, []string{resources.ContainerMcpHost, resources.ContainerDesktop}, containerNames(f.deployment(hostNS, "h1")))
	f.SyncCaches()
	f.mustSync("h1")
	assert.Empty(t, f.Writes())

	off := f.host("h1")
	off.Spec.Desktop, off.Generation = nil, 2
	f.setHost(off)
	f.mustSync("h1")
	assert.Equal(t, []string{"delete networkpolicies/allow-rpc-proxy-desktop-h1", "patch hosts/h1/status",
		"update deployments/h1", "update services/h1"}, f.Writes())
	assert.Equal(t, []string{resources.ContainerMcpHost}, containerNames(f.deployment(hostNS, "h1")))
	assert.Equal(t, int64(2), f.status("h1").ObservedGeneration)
	f.SyncCaches()
	f.mustSync("h1")
	assert.Empty(t, f.Writes())

	on := f.host("h1")
	on.Spec.Desktop, on.Generation = &clerumv1alpha1.DesktopSpec{Enabled: true}, 3
	f.setHost(on)
	f.mustSync("h1")
	assert.Equal(t, []string{"create networkpolicies/allow-rpc-proxy-desktop-h1", "patch hosts/h1/status",
		"update deployments/h1", "update services/h1"}, f.Writes())
	assert.Equal(t, 1, f.issuer.calls(), "a spec change is no reason for a new credential")
}

// 4. a contextId change replaces the pods.
func TestAContextIDChangeUpdatesThePodLabel(t *testing.T) {
	f := deployed(t)
	selector := f.deployment(hostNS, "h1").Spec.Selector.DeepCopy()
	relabelled := context1()
	relabelled.Spec.ContextID, relabelled.ResourceVersion = "ctx-2", "2"
	f.setContext(relabelled)
	f.mustSync("h1")
	assert.Equal(t, []string{"patch hosts/h1/status", "update deployments/h1"}, f.Writes())
	d := f.deployment(hostNS, "h1")
	assert.Equal(t, "ctx-2", d.Spec.Template.Labels[names.LabelContext])
	assert.Equal(t, selector, d.Spec.Selector, "the selector is immutable and carries no contextId")
	assert.Equal(t, "ctx-2", f.status("h1").ContextID)
	assert.Equal(t, 1, f.issuer.calls())
}

// 5. the Context missing or conflicted: fail closed.
func TestContextMissing(t *testing.T) {
	t.Run("nothing is created", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1"))
		f.mustSync("h1")
		assert.Equal(t, []string{"patch hosts/h1", "patch hosts/h1/status"}, f.Writes())
		ready := f.condition("h1", clerumv1alpha1.ConditionReady)
		assert.Equal(t, metav1.ConditionFalse, ready.Status)
		assert.Equal(t, reasons.ContextMissing, ready.Reason)
		assert.Equal(t, []string{"Warning Blocked ContextMissing: Context context1 does not exist in mcp-server; the Host is not deployed and its pods are stopped"}, f.Events())
		assert.Zero(t, f.issuer.calls())
		assert.Empty(t, f.status("h1").ContextID)

		// No second event for the same block.
		f.SyncCaches()
		f.mustSync("h1")
		assert.Empty(t, f.Writes())
		assert.Empty(t, f.Events())
	})
	t.Run("a running Deployment is scaled to zero, and back once the Context returns", func(t *testing.T) {
		f := deployed(t)
		f.removeContext(context1())
		f.mustSync("h1")
		assert.Equal(t, []string{"patch hosts/h1/status", "update deployments/h1"}, f.Writes())
		d := f.deployment(hostNS, "h1")
		assert.Equal(t, int32(0), *d.Spec.Replicas)
		assert.Equal(t, reasons.ContextMissing, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
		assert.Empty(t, f.status("h1").ContextID, "no pod runs with a contextId")
		assert.Len(t, f.Events(), 1)

		f.SyncCaches()
		f.mustSync("h1")
		assert.Empty(t, f.Writes(), "already stopped")

		f.setContext(context1())
		f.mustSync("h1")
		assert.Equal(t, []string{"patch hosts/h1/status", "update deployments/h1"}, f.Writes())
		assert.Equal(t, int32(1), *f.deployment(hostNS, "h1").Spec.Replicas)
		assert.Equal(t, []string{"Normal Released no longer blocked (was ContextMissing)"}, f.Events())
		assert.Equal(t, 1, f.issuer.calls())
	})
}

func TestContextConflict(t *testing.T) {
	t.Run("the younger Context's Host is not deployed, the older one's is", func(t *testing.T) {
		older := newContext("context0", "ctx-1", t0.Add(-2*time.Hour))
		f := newFixture(t, resourcestest.NewHost("h1"), resourcestest.NewHost("h0", func(h *clerumv1alpha1.Host) { h.Spec.ContextRef = "context0" }), context1(), older)
		f.mustSync("h1")
		assert.Equal(t, []string{"patch hosts/h1", "patch hosts/h1/status"}, f.Writes())
		ready := f.condition("h1", clerumv1alpha1.ConditionReady)
		assert.Equal(t, reasons.ContextConflict, ready.Reason)
		assert.Contains(t, ready.Message, "held by the older Context context0")
		ev := f.Events()
		require.Len(t, ev, 1)
		assert.True(t, strings.HasPrefix(ev[0], "Warning Blocked ContextConflict: "), ev[0])
		assert.Zero(t, f.issuer.calls())

		f.ClearWrites()
		f.mustSync("h0")
		assert.Equal(t, created("h0"), f.Writes())
		assert.Equal(t, "ctx-1", f.deployment(hostNS, "h0").Spec.Template.Labels[names.LabelContext])
	})
	t.Run("a deployed Host whose Context turns to a contextId an older Context holds is stopped", func(t *testing.T) {
		f := deployed(t)
		f.setContext(newContext("context0", "ctx-0", t0.Add(-2*time.Hour)))
		taken := context1()
		taken.Spec.ContextID, taken.ResourceVersion = "ctx-0", "2"
		f.setContext(taken)
		f.mustSync("h1")
		assert.Equal(t, []string{"patch hosts/h1/status", "update deployments/h1"}, f.Writes())
		d := f.deployment(hostNS, "h1")
		assert.Equal(t, int32(0), *d.Spec.Replicas)
		assert.NotEqual(t, "ctx-0", d.Spec.Template.Labels[names.LabelContext], "never the other tenant's contextId")
		assert.Equal(t, reasons.ContextConflict, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
	})
}

// 6. spec.secretRef.
func TestSecretRef(t *testing.T) {
	t.Run("missing, then created", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1", resourcestest.WithSecretRef("h1-env")), context1())
		f.mustSync("h1")
		assert.Equal(t, []string{"patch hosts/h1", "patch hosts/h1/status"}, f.Writes())
		sr := f.condition("h1", clerumv1alpha1.ConditionSecretsResolved)
		assert.Equal(t, metav1.ConditionFalse, sr.Status)
		assert.Equal(t, "Secret h1-env does not exist", sr.Message)
		assert.Equal(t, reasons.SecretsMissing, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
		assert.Equal(t, []string{"Warning Blocked SecretsMissing: Secret h1-env does not exist; the Host is not deployed or rolled"}, f.Events())
		assert.Zero(t, f.issuer.calls())

		f.SyncCaches()
		env := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "h1-env", UID: "uid-h1-env", ResourceVersion: "1",
			Labels: map[string]string{resources.LabelSecretForHost: "h1"}},
			Data: map[string][]byte{"TOKEN": []byte("x")}}
		_, err := f.Kube.CoreV1().Secrets(hostNS).Create(context.Background(), env, metav1.CreateOptions{})
		require.NoError(t, err)
		f.Index(env)
		f.ClearWrites()
		f.mustSync("h1")
		assert.Equal(t, without(created("h1"), "patch hosts/h1"), f.Writes())
		assert.Equal(t, metav1.ConditionTrue, f.condition("h1", clerumv1alpha1.ConditionSecretsResolved).Status)
		assert.Equal(t, []string{"Normal Released no longer blocked (was SecretsMissing)"}, f.Events())
		role, err := f.Kube.RbacV1().Roles(hostNS).Get(context.Background(), "host-h1", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"host-h1-mcp-host-runtime-tokens", "h1-env"}, role.Rules[1].ResourceNames)
	})
	// The pod's Role grants the Secret: no Host may name one of these, in
	// either mode of HCC_HOST_SECRET_REQUIRE_LABEL.
	strict := func(c *Config) { c.Build.SecretRequireLabel = true }
	for name, other := range map[string]*corev1.Secret{
		"another Host's Secret": {ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "h2-env", ResourceVersion: "1",
			Labels: map[string]string{resources.LabelSecretForHost: "h2"}}},
		"a service-account token, labelled": {ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "sa-token", ResourceVersion: "1",
			Labels: map[string]string{resources.LabelSecretForHost: "h1"}}, Type: corev1.SecretTypeServiceAccountToken},
		"a registry credential, labelled": {ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "pull", ResourceVersion: "1",
			Labels: map[string]string{resources.LabelSecretForHost: "h1"}}, Type: corev1.SecretTypeDockerConfigJson},
		"an HCC-managed Secret, labelled": {ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "managed", ResourceVersion: "1",
			Labels: map[string]string{resources.LabelSecretForHost: "h1", names.LabelManagedBy: names.ManagedByValue}}},
	} {
		for mode, configure := range map[string]func(*Config){"by default": nil, "under HCC_HOST_SECRET_REQUIRE_LABEL=true": strict} {
			t.Run(name+" is refused "+mode, func(t *testing.T) {
				f := newFixtureWith(t, configure, resourcestest.NewHost("h1", resourcestest.WithSecretRef(other.Name)), context1(), other)
				f.mustSync("h1")
				assert.Equal(t, []string{"patch hosts/h1", "patch hosts/h1/status"}, f.Writes(), "nothing is created, no Role grants it")
				assert.Equal(t, metav1.ConditionFalse, f.condition("h1", clerumv1alpha1.ConditionSecretsResolved).Status)
				assert.Zero(t, f.issuer.calls())
				ev := f.Events()
				require.Len(t, ev, 1)
				assert.Regexp(t, `^Warning Blocked (InvalidSpec: Secret \S+ may not be a Host's: it is |SecretsMissing: Secret h2-env is labelled clerum.io/secret-for-host="h2": it was made for another Host)`, ev[0],
					"the message names the rule")
			})
		}
	}
	// An unlabelled Secret: the seed's rule admits it by default, and the
	// Role grants it; the strict rule refuses it.
	unlabelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "plain", ResourceVersion: "1"},
		Data: map[string][]byte{"TOKEN": []byte("x")}}
	t.Run("an unlabelled Secret is admitted by default", func(t *testing.T) {
		f := newFixture(t, resourcestest.NewHost("h1", resourcestest.WithSecretRef("plain")), context1(), unlabelled)
		f.mustSync("h1")
		assert.Equal(t, created("h1"), f.Writes())
		sr := f.condition("h1", clerumv1alpha1.ConditionSecretsResolved)
		assert.Equal(t, metav1.ConditionTrue, sr.Status)
		assert.Contains(t, sr.Message, "HCC_HOST_SECRET_REQUIRE_LABEL=false")
		assert.Equal(t, []string{"host-h1-mcp-host-runtime-tokens", "plain"}, f.secretRule())
	})
	t.Run("an unlabelled Secret is refused under HCC_HOST_SECRET_REQUIRE_LABEL=true", func(t *testing.T) {
		f := newFixtureWith(t, strict, resourcestest.NewHost("h1", resourcestest.WithSecretRef("plain")), context1(), unlabelled)
		f.mustSync("h1")
		assert.Equal(t, []string{"patch hosts/h1", "patch hosts/h1/status"}, f.Writes(), "nothing is created, no Role grants it")
		assert.Equal(t, reasons.SecretsMissing, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
		assert.Equal(t, []string{"Warning Blocked SecretsMissing: Secret plain is not labelled clerum.io/secret-for-host=h1, " +
			"which HCC_HOST_SECRET_REQUIRE_LABEL=true requires of a Host's Secret; the Host is not deployed or rolled"}, f.Events())
		assert.Zero(t, f.issuer.calls())
	})
	t.Run("a Secret labelled for the Host is admitted under HCC_HOST_SECRET_REQUIRE_LABEL=true", func(t *testing.T) {
		mine := unlabelled.DeepCopy()
		mine.Labels = map[string]string{resources.LabelSecretForHost: "h1"}
		f := newFixtureWith(t, strict, resourcestest.NewHost("h1", resourcestest.WithSecretRef("plain")), context1(), mine)
		f.mustSync("h1")
		assert.Equal(t, created("h1"), f.Writes())
		assert.Equal(t, metav1.ConditionTrue, f.condition("h1", clerumv1alpha1.ConditionSecretsResolved).Status)
		assert.Equal(t, []string{"host-h1-mcp-host-runtime-tokens", "plain"}, f.secretRule())
	})
	for _, name := range []string{"host-h2-mcp-host-runtime-tokens", resourcestest.Options.ImagePullSecret} {
		t.Run("a reserved Secret "+name+" is an invalid spec", func(t *testing.T) {
			reserved := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: name, ResourceVersion: "1"}}
			f := newFixture(t, resourcestest.NewHost("h1", resourcestest.WithSecretRef(name)), context1(), reserved)
			f.mustSync("h1")
			assert.Equal(t, []string{"patch hosts/h1", "patch hosts/h1/status"}, f.Writes())
			assert.Equal(t, reasons.InvalidSpec, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
			assert.Equal(t, metav1.ConditionFalse, f.condition("h1", clerumv1alpha1.ConditionSecretsResolved).Status)
			assert.Zero(t, f.issuer.calls())
		})
	}
}

// 7. deletion in both namespaces.
func TestDeletion(t *testing.T) {
	deleting := func(f *fixture) {
		h := f.host("h1")
		now := metav1.NewTime(t0)
		h.DeletionTimestamp = &now
		f.setHost(h)
	}
	t.Run("every child is deleted, the claim included, and the finalizer removed", func(t *testing.T) {
		f := deployed(t)
		deleting(f)
		f.mustSync("h1")
		// Every delete succeeded, none is left on its way out: the
		// finalizer goes in the same pass.
		assert.Equal(t, with(deleted("h1"), "patch hosts/h1"), f.Writes())
		assert.Empty(t, f.host("h1").Finalizers)
		assert.False(t, f.exists(kit.Deployments, readerNS, "channel-reader-h1"))
		_, err := f.Kube.CoreV1().PersistentVolumeClaims(hostNS).Get(context.Background(), "h1-workspace", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err))
		assert.Equal(t, 1, f.issuer.calls())
	})
	t.Run("a child the caches do not show yet is found on the server before the finalizer goes", func(t *testing.T) {
		f := deployed(t)
		// The channel-reader Service was written an instant before the
		// deletion and has not reached the cache.
		f.Unindex(f.service(readerNS, "channel-reader-h1"))
		deleting(f)
		f.mustSync("h1")
		assert.Equal(t, with(deleted("h1"), "patch hosts/h1"), f.Writes(), "deleted through the live read")
		_, err := f.Kube.CoreV1().Services(readerNS).Get(context.Background(), "channel-reader-h1", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err))
		assert.Empty(t, f.host("h1").Finalizers)
	})
	t.Run("the finalizer waits for a child on its way out; a protected claim counts as gone", func(t *testing.T) {
		f := deployed(t)
		// The claim is held by pvc-protection, the reader by a finalizer of
		// its own: both already deleted once.
		ctx := context.Background()
		now := metav1.NewTime(t0)
		claim, err := f.Kube.CoreV1().PersistentVolumeClaims(hostNS).Get(ctx, "h1-workspace", metav1.GetOptions{})
		require.NoError(t, err)
		claim.DeletionTimestamp, claim.Finalizers = &now, []string{"kubernetes.io/pvc-protection"}
		require.NoError(t, f.Kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), claim, hostNS))
		reader := f.deployment(readerNS, "channel-reader-h1")
		reader.DeletionTimestamp, reader.Finalizers = &now, []string{"foregroundDeletion"}
		require.NoError(t, f.Kube.Tracker().Update(appsv1.SchemeGroupVersion.WithResource("deployments"), reader, readerNS))
		f.SyncCaches()
		deleting(f)

		_, err = f.sync("h1")
		require.ErrorIs(t, err, kit.ErrBeingDeleted)
		assert.Equal(t, without(deleted("h1"), "delete persistentvolumeclaims/h1-workspace", "delete deployments/channel-reader-h1"), f.Writes())
		assert.Equal(t, []string{clerumv1alpha1.FinalizerHostCleanup}, f.host("h1").Finalizers, "kept while the reader is on its way out")

		// The reader goes; the claim is still held by pvc-protection.
		require.NoError(t, f.Kube.Tracker().Delete(appsv1.SchemeGroupVersion.WithResource("deployments"), readerNS, "channel-reader-h1"))
		f.SyncCaches()
		f.mustSync("h1")
		assert.Equal(t, []string{"patch hosts/h1"}, f.Writes())
		assert.Empty(t, f.host("h1").Finalizers)
	})
	t.Run("leftovers of a Host seen going are deleted when it is gone", func(t *testing.T) {
		f := deployed(t)
		h := f.host("h1")
		f.c.hostHandlers(func(cache.ObjectName) {}).OnDelete(h)
		f.removeHost("h1")
		f.mustSync("h1")
		assert.Equal(t, deleted("h1"), f.Writes())
	})
	t.Run("children of a Host not seen going are left to the sweep", func(t *testing.T) {
		f := deployed(t)
		f.removeHost("h1")
		f.ClearWrites()
		f.mustSync("h1")
		assert.Empty(t, f.Writes())
	})
}

// 8. the orphan sweep.
func TestOrphanSweep(t *testing.T) {
	// fleet returns a fixture with live Hosts and gone Hosts whose
	// children (10 each, claim included) are left, and a policy of another
	// writer labelled for the first gone Host.
	fleet := func(t *testing.T, live, gone []string) *fixture {
		var objs []runtime.Object
		for _, h := range append(slices.Clone(live), gone...) {
			objs = append(objs, resourcestest.NewHost(h))
		}
		foreign := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "ctx-ctx-1-someserver",
			ResourceVersion: "1", Labels: map[string]string{names.LabelManagedBy: names.ManagedByValue,
				names.LabelHost: gone[0], names.LabelPolicyType: names.PolicyTypeContextAllow}}}
		objs = append(objs, context1(), foreign)
		f := newFixture(t, objs...)
		for _, h := range append(slices.Clone(live), gone...) {
			f.mustSync(h)
		}
		f.SyncCaches()
		for _, h := range gone {
			f.removeHost(h)
		}
		f.ClearWrites()
		return f
	}
	claims := func(gone ...string) []string {
		var out []string
		for _, h := range gone {
			out = append(out, "delete persistentvolumeclaims/"+h+"-workspace")
		}
		return out
	}
	trips := func(f *fixture) float64 { return counter(t, f.Registry, "clerum_hcc_host_orphan_cap_trips_total", nil) }

	// The caps count Hosts (HCC_HOST_ORPHAN_DELETE_CAP 10, …_PERCENT 20 of
	// the Hosts with objects), not objects: one Host leaves ten.
	t.Run("within the caps: deleted, the claim kept, another writer's policy kept", func(t *testing.T) {
		// 6 Hosts with objects, 1 of them orphaned: within 10 and 20 %.
		f := fleet(t, []string{"a1", "a2", "a3", "a4", "a5"}, []string{"gone1"})
		require.NoError(t, f.sweep())
		assert.Equal(t, without(deleted("gone1"), claims("gone1")...), f.Writes())
		assert.Zero(t, trips(f))
		assert.Equal(t, 9.0, counter(t, f.Registry, "clerum_hcc_host_orphans_deleted_total", map[string]string{"class": "unexplained"}))
		assert.Equal(t, 5, f.c.queue.Len(), "every Host is queued")
	})
	t.Run("above the absolute cap: none deleted", func(t *testing.T) {
		f := fleet(t, []string{"a1", "a2", "a3", "a4", "a5"}, []string{"gone1", "gone2"})
		f.c.cfg.Caps = kit.Caps{Absolute: 1, Percent: 100} // 2 orphaned Hosts > 1
		require.NoError(t, f.sweep())
		assert.Empty(t, f.Writes())
		assert.Equal(t, 1.0, trips(f))
	})
	t.Run("above the percent cap: none deleted", func(t *testing.T) {
		f := fleet(t, []string{"a1", "a2", "a3", "a4"}, []string{"gone1", "gone2"}) // 2 of 6 Hosts > 20 %
		require.NoError(t, f.sweep())
		assert.Empty(t, f.Writes())
		assert.Equal(t, 1.0, trips(f))
	})
	t.Run("a Host seen deleted is cleaned up whatever the cap, its claim included", func(t *testing.T) {
		// gone1 was seen going, gone2 not, and the cap allows no
		// unexplained delete at all.
		f := fleet(t, []string{"a1"}, []string{"gone1", "gone2"})
		f.c.cfg.Caps = kit.Caps{Absolute: 0, Percent: 20}
		f.c.hostHandlers(func(cache.ObjectName) {}).OnDelete(resourcestest.NewHost("gone1"))
		require.NoError(t, f.sweep())
		assert.Equal(t, deleted("gone1"), f.Writes(), "gone2's are held back, and the foreign policy is never deleted")
		assert.Equal(t, 1.0, trips(f))
		_, err := f.Kube.NetworkingV1().NetworkPolicies(hostNS).Get(context.Background(), "ctx-ctx-1-someserver", metav1.GetOptions{})
		assert.NoError(t, err)
	})
	t.Run("a Host seen deleted through state.deleted.Observe alone", func(t *testing.T) {
		f := fleet(t, []string{"a1"}, []string{"gone1"})
		f.c.state.deleted.Observe("gone1", "uid-gone1")
		require.NoError(t, f.sweep())
		assert.Equal(t, deleted("gone1"), f.Writes())
	})
}

// counter returns the value of the series name with labels in reg (0 when
// absent).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	m := series(t, reg, name, labels)
	if m == nil {
		return 0
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.GetGauge().GetValue()
}

func series(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	metrics:
		for _, m := range fam.Metric {
			for k, v := range labels {
				found := false
				for _, l := range m.Label {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

// 9. an unmanaged object holding a per-Host name is not adopted.
func TestUnmanagedObjectsAreNotAdopted(t *testing.T) {
	readerWrites := []string{"create deployments/channel-reader-h1", "create services/channel-reader-h1",
		"create networkpolicies/channel-reader-h1-egress"}
	for _, tc := range []struct {
		name     string
		obj      runtime.Object
		kind     string
		issuance int
	}{
		{"ServiceAccount", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "host-h1", UID: "foreign", ResourceVersion: "1"}},
			"ServiceAccount mcp-host/host-h1", 1},
		{"Secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "host-h1-mcp-host-runtime-tokens", UID: "foreign", ResourceVersion: "1"},
			Data: map[string][]byte{resources.KeyBootstrapCredential: []byte("someone else's")}},
			"Secret mcp-host/host-h1-mcp-host-runtime-tokens", 0},
		{"PersistentVolumeClaim", &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: hostNS, Name: "h1-workspace", UID: "foreign", ResourceVersion: "1"}},
			"PersistentVolumeClaim mcp-host/h1-workspace", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.obj.DeepCopyObject()
			f := newFixture(t, resourcestest.NewHost("h1"), context1(), tc.obj)
			res, err := f.sync("h1")
			require.NoError(t, err, "a refusal is reported, not retried")
			w := f.Writes()
			// The create of the refused name is sent (the managed-objects
			// cache cannot show an unmanaged object) and fails; the
			// Secret cache shows every Secret, so none is sent for it.
			want := without(created("h1"), "create deployments/h1")
			if tc.name == "Secret" {
				want = without(want, "create secrets/host-h1-mcp-host-runtime-tokens")
			}
			if tc.name == "PersistentVolumeClaim" {
				want = without(want, "update persistentvolumeclaims/h1-workspace") // no claim of HCC's to mark
			}
			assert.Equal(t, want, w)
			assert.NotContains(t, w, "create deployments/h1", "no pod runs with someone else's identity, volume or credential")
			assert.Subset(t, w, readerWrites)
			for _, x := range without(w, "update persistentvolumeclaims/h1-workspace") { // the mark of the claim HCC created
				assert.False(t, strings.HasPrefix(x, "update ") || strings.HasPrefix(x, "delete "), "nothing is adopted or deleted: %s", x)
			}
			assert.Equal(t, tc.issuance, f.issuer.calls())
			ready := f.condition("h1", clerumv1alpha1.ConditionReady)
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Equal(t, reasons.NotOwned, ready.Reason)
			assert.Equal(t, refusedRetry, res.RequeueAfter)
			ev := f.Events()
			require.NotEmpty(t, ev)
			for _, e := range ev {
				assert.True(t, strings.HasPrefix(e, "Warning UnmanagedConflict "+tc.kind+" is not written"), e)
			}
			// The object is as it was.
			switch o := tc.obj.(type) {
			case *corev1.ServiceAccount:
				got, err := f.Kube.CoreV1().ServiceAccounts(hostNS).Get(context.Background(), o.Name, metav1.GetOptions{})
				require.NoError(t, err)
				assert.Empty(t, got.Labels)
			case *corev1.Secret:
				assert.Equal(t, before.(*corev1.Secret).Data, f.secret(o.Name).Data)
				assert.Equal(t, metav1.ConditionFalse, f.condition("h1", clerumv1alpha1.ConditionAuthReady).Status)
			case *corev1.PersistentVolumeClaim:
				got, err := f.Kube.CoreV1().PersistentVolumeClaims(hostNS).Get(context.Background(), o.Name, metav1.GetOptions{})
				require.NoError(t, err)
				assert.Empty(t, got.Labels)
			}
			assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_hosts", map[string]string{"state": "not-owned"}))
		})
	}
}

// 10. Control API failures.
func TestControlAPIFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		reason string
	}{
		{"unavailable", fmt.Errorf("control API POST /bootstrap: HTTP 503 after 3 attempts: %w", controlapi.ErrUnavailable), reasons.ControlAPIUnavailable},
		{"rejected", fmt.Errorf("control API POST /bootstrap: HTTP 401: %w", controlapi.ErrRejected), reasons.CredentialRefused},
		{"invalid response", fmt.Errorf("malformed body: %w", controlapi.ErrInvalidResponse), reasons.CredentialRefused},
		{"expires too soon", fmt.Errorf("expiresAt in the past: %w", controlapi.ErrExpiresTooSoon), reasons.CredentialRefused},
	} {
		t.Run(tc.name+": no credential yet", func(t *testing.T) {
			f := newFixture(t, resourcestest.NewHost("h1"), context1())
			f.issuer.fail(tc.err)
			_, err := f.sync("h1")
			require.Error(t, err, "retried by the loop")
			assert.ErrorIs(t, err, tc.err)
			assert.Equal(t, without(created("h1"), "create deployments/h1", "create secrets/host-h1-mcp-host-runtime-tokens"), f.Writes())
			auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
			assert.Equal(t, metav1.ConditionFalse, auth.Status)
			assert.Equal(t, tc.reason, auth.Reason)
			assert.Equal(t, reasons.CredentialPending, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
			assert.Nil(t, f.status("h1").CredentialExpiresAt)
			ev := f.Events()
			require.Len(t, ev, 1)
			assert.True(t, strings.HasPrefix(ev[0], "Warning CredentialFailed "), ev[0])

			// The Control API recovers: the retry deploys.
			f.SyncCaches()
			f.issuer.fail(nil)
			f.mustSync("h1")
			assert.Equal(t, []string{"create deployments/h1", "create secrets/host-h1-mcp-host-runtime-tokens", "patch hosts/h1/status"}, f.Writes())
			assert.Equal(t, reasons.CredentialIssued, f.condition("h1", clerumv1alpha1.ConditionAuthReady).Reason)
		})
		t.Run(tc.name+": a valid credential due for refresh", func(t *testing.T) {
			f := deployed(t)
			// The Deployment went meanwhile: the failed refresh must not
			// keep it from being ensured.
			require.NoError(t, f.Kube.AppsV1().Deployments(hostNS).Delete(context.Background(), "h1", metav1.DeleteOptions{}))
			f.SyncCaches()
			f.Clock.Step(50 * time.Minute) // due at 45, expires at 60
			f.issuer.fail(tc.err)
			_, err := f.sync("h1")
			require.Error(t, err, "retried by the loop")
			assert.Equal(t, 2, f.issuer.calls())
			auth := f.condition("h1", clerumv1alpha1.ConditionAuthReady)
			assert.Equal(t, metav1.ConditionTrue, auth.Status, "degraded, not down: the credential still works")
			assert.Equal(t, tc.reason, auth.Reason)
			assert.Contains(t, f.Writes(), "create deployments/h1", "the Deployment is still ensured")
			st := f.status("h1")
			assert.Equal(t, "ctx-1", st.ContextID, "the status still shows the pods' contextId")
			assert.Equal(t, resourcestest.Options.Image, st.Image)
			require.NotNil(t, st.CredentialExpiresAt)
			assert.True(t, st.CredentialExpiresAt.Time.Equal(t0.Add(lifetime)))
		})
	}
}

// 11. refresh timing.
func TestRefreshTiming(t *testing.T) {
	f := deployed(t)
	res := f.mustSync("h1")
	assert.Equal(t, 45*time.Minute, res.RequeueAfter)
	assert.Equal(t, 1, f.issuer.calls())

	f.Clock.Step(46 * time.Minute)
	res = f.mustSync("h1")
	assert.Equal(t, 2, f.issuer.calls())
	assert.Equal(t, []string{"patch hosts/h1/status", "update secrets/host-h1-mcp-host-runtime-tokens"}, f.Writes(),
		"a refresh never rolls the pods")
	assert.Equal(t, 45*time.Minute, res.RequeueAfter)
	expiry := t0.Add(46*time.Minute + lifetime)
	assert.Equal(t, expiry.Format(time.RFC3339), f.secret("host-h1-mcp-host-runtime-tokens").Annotations[resources.AnnotationExpiresAt])
	assert.True(t, f.status("h1").CredentialExpiresAt.Time.Equal(expiry))

	f.SyncCaches()
	f.mustSync("h1")
	assert.Empty(t, f.Writes())
	assert.Equal(t, 2, f.issuer.calls())
}

// An expired credential is replaced at once.
func TestAnExpiredCredentialIsReplaced(t *testing.T) {
	f := deployed(t)
	f.Clock.Step(2 * time.Hour)
	f.mustSync("h1")
	assert.Equal(t, 2, f.issuer.calls())
	assert.Equal(t, []string{"patch hosts/h1/status", "update secrets/host-h1-mcp-host-runtime-tokens"}, f.Writes())
}

// 12. a Host re-created under its name.
func TestARecreatedHostGetsANewCredentialAtOnce(t *testing.T) {
	f := deployed(t)
	f.removeHost("h1")
	again := resourcestest.NewHost("h1", func(h *clerumv1alpha1.Host) { h.UID = "uid-h1-again" })
	f.addHost(again)
	f.ClearWrites()
	f.mustSync("h1")
	require.Equal(t, 2, f.issuer.calls())
	assert.Equal(t, "uid-h1-again", f.issuer.requests[1].HostUID)
	s := f.secret("host-h1-mcp-host-runtime-tokens")
	assert.Equal(t, "uid-h1-again", s.Annotations[resources.AnnotationIssuedForUID])
	assert.Contains(t, f.Writes(), "update secrets/host-h1-mcp-host-runtime-tokens")
	assert.Equal(t, types.UID("uid-h1-again"), s.OwnerReferences[0].UID)
	assert.Equal(t, types.UID("uid-h1-again"), f.deployment(hostNS, "h1").OwnerReferences[0].UID)
}

// 13. cache lag never costs a second credential.
func TestCacheLagCallsTheControlAPIOnce(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1"), context1())
	f.mustSync("h1")
	f.ClearWrites()
	f.Clock.Step(5 * time.Second)
	f.mustSync("h1") // the caches show nothing written yet
	assert.Equal(t, 1, f.issuer.calls())
	for _, w := range f.Writes() {
		assert.False(t, strings.HasPrefix(w, "update "), "nothing is rewritten: %s", w)
	}
}

// 14. no credential in logs, events or status.
func TestNoCredentialIsLoggedOrPosted(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1"), context1())
	f.mustSync("h1")
	require.Equal(t, credentialValue, string(f.secret("host-h1-mcp-host-runtime-tokens").Data[resources.KeyBootstrapCredential]))
	f.SyncCaches()
	f.Clock.Step(50 * time.Minute)
	f.issuer.fail(fmt.Errorf("HTTP 503: %w", controlapi.ErrUnavailable))
	_, err := f.sync("h1")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), credentialValue)
	// The loop logs the error of a failed sync: the operator's own loop,
	// not a line the test writes.
	f.c.queue.Add(cache.ObjectName{Namespace: hostNS, Name: "h1"})
	require.True(t, f.c.base.Loop().ProcessNext(t.Context()))
	f.issuer.fail(nil)
	f.Clock.Step(time.Minute)
	f.mustSync("h1")

	// What the check below reads holds the lines that could leak: the
	// credential stored, and the failed sync's error.
	logs := f.Log()
	require.Contains(t, logs, "bootstrap credential stored")
	require.Contains(t, logs, "sync failed; retrying with backoff")
	require.Contains(t, logs, "HTTP 503")
	assert.NotContains(t, logs, credentialValue)
	events := f.Events()
	require.NotEmpty(t, events)
	for _, e := range events {
		assert.NotContains(t, e, credentialValue)
	}
	for _, s := range f.statuses("h1") {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		assert.NotContains(t, string(b), credentialValue)
	}
}

// 15. metrics.
func TestMetrics(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1"), resourcestest.NewHost("h2", resourcestest.WithSecretRef("missing")), resourcestest.NewHost("h3", func(h *clerumv1alpha1.Host) {
		h.Spec.ContextRef = "nope"
	}), context1())
	gauge := func(name, label, value string) float64 {
		return counter(t, f.Registry, name, map[string]string{label: value})
	}
	for _, h := range []string{"h1", "h2", "h3"} {
		f.mustSync(h)
	}
	assert.Equal(t, 1.0, gauge("clerum_hcc_host_hosts", "state", "deployed"))
	assert.Equal(t, 2.0, gauge("clerum_hcc_host_hosts", "state", "blocked"))
	assert.Equal(t, 1.0, gauge("clerum_hcc_host_blocked", "reason", reasons.SecretsMissing))
	assert.Equal(t, 1.0, gauge("clerum_hcc_host_blocked", "reason", reasons.ContextMissing))
	assert.Zero(t, gauge("clerum_hcc_host_blocked", "reason", reasons.ContextConflict))
	assert.Equal(t, 3600.0, counter(t, f.Registry, "clerum_hcc_host_credential_expiry_seconds", nil))

	f.SyncCaches()
	f.Clock.Step(10 * time.Minute)
	f.mustSync("h1")
	assert.Equal(t, 3000.0, counter(t, f.Registry, "clerum_hcc_host_credential_expiry_seconds", nil))

	// The pod becomes available: ready.
	d := f.deployment(hostNS, "h1")
	d.Generation, d.Status.ObservedGeneration, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = 1, 1, 1, 1
	f.Index(d)
	f.mustSync("h1")
	assert.Equal(t, 1.0, gauge("clerum_hcc_host_hosts", "state", "ready"))
	assert.Zero(t, gauge("clerum_hcc_host_hosts", "state", "deployed"))

	// The Context of h3 appears; h2's Secret stays missing.
	f.setContext(newContext("nope", "ctx-3", t0))
	f.mustSync("h3")
	assert.Equal(t, 1.0, gauge("clerum_hcc_host_hosts", "state", "blocked"))
	assert.Zero(t, gauge("clerum_hcc_host_blocked", "reason", reasons.ContextMissing))
	assert.Equal(t, 3000.0, counter(t, f.Registry, "clerum_hcc_host_credential_expiry_seconds", nil), "the soonest expiry")

	// h1 goes: it leaves the gauges.
	f.c.hostHandlers(func(cache.ObjectName) {}).OnDelete(f.host("h1"))
	f.removeHost("h1")
	f.mustSync("h1")
	assert.Zero(t, gauge("clerum_hcc_host_hosts", "state", "ready"))
	assert.Equal(t, 3600.0, counter(t, f.Registry, "clerum_hcc_host_credential_expiry_seconds", nil), "h3's, issued at +10 min")
	f.removeHost("h2")
	f.mustSync("h2")
	assert.Zero(t, gauge("clerum_hcc_host_blocked", "reason", reasons.SecretsMissing))
	assert.Zero(t, gauge("clerum_hcc_host_hosts", "state", "blocked"))
}

// Every line about a Host names the operator and the Host as namespace/name
// under kit.LogObject, and no other key names the Host
// (docs/reconcilers.md#logs): its block and release, its credential, its
// pods stopped on the fast path.
func TestLogLinesNameTheHost(t *testing.T) {
	f := newFixture(t, resourcestest.NewHost("h1"))
	f.mustSync("h1") // blocked: no Context
	f.setContext(context1())
	f.SyncCaches()
	f.mustSync("h1") // released, a credential stored, deployed
	f.removeContext(context1())
	f.SyncCaches()
	_, err := f.c.syncStop(t.Context(), cache.ObjectName{Namespace: hostNS, Name: "h1"})
	require.NoError(t, err)

	seen := map[string]bool{}
	for line := range strings.Lines(f.Log()) {
		var fields map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &fields), line)
		seen[fields["message"].(string)] = true
		assert.Equal(t, "host", fields[kit.LogController], line)
		assert.Equal(t, hostNS+"/h1", fields[kit.LogObject], line)
		assert.NotContains(t, fields, "host", line)
	}
	for _, msg := range []string{"host blocked", "host released", "bootstrap credential stored",
		"stopping the Host's pods: its Context no longer holds the contextId they carry"} {
		assert.True(t, seen[msg], "logged: %s", msg)
	}
}
