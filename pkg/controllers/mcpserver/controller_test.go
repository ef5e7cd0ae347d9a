package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources/resourcestest"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/reasons"
	"github.com/clerum/hcc/pkg/secretdigest"
)

// fakeGate is the egress coordinator's gate, open unless closed names a
// server.
type fakeGate struct {
	closed map[string]bool
	onGate func(string)
}

func (g *fakeGate) Ready(s *clerumv1alpha1.McpServer) bool { return !g.closed[s.Name] }
func (g *fakeGate) OnGate(f func(string))                  { g.onGate = f }
func (g *fakeGate) Settled() <-chan struct{} {
	settled := make(chan struct{})
	close(settled)
	return settled
}

// fixture is the operator over kittest's fake API server; syncMcpServer
// is called directly and the exact writes asserted.
type fixture struct {
	*kittest.Fixture
	t    *testing.T
	c    *Controller
	gate *fakeGate
	// server is the server the test syncs, as the test last put it in the
	// cache.
	server *clerumv1alpha1.McpServer
}

func newFixture(t *testing.T, enforce bool, objs ...runtime.Object) *fixture {
	f := &fixture{Fixture: kittest.NewFixture(t, objs...), t: t, gate: &fakeGate{closed: map[string]bool{}}}
	for _, o := range objs {
		if s, ok := o.(*clerumv1alpha1.McpServer); ok {
			f.server = s
		}
	}
	f.c = f.newController(f.Deps(), enforce, testPrefixes)
	f.SyncCaches()
	return f
}

func (f *fixture) newController(d kit.Deps, enforce bool, prefixes []string) *Controller {
	policy, err := imagepolicy.Parse(prefixes)
	require.NoError(f.t, err)
	return New(d, f.gate, Config{Namespace: "mcp-server", Build: resourcestest.Options, Images: policy, Enforce: enforce, Workers: 1})
}

func (f *fixture) sync() kit.Result {
	f.t.Helper()
	res, err := f.c.syncMcpServer(context.Background(), cache.MetaObjectToName(f.server))
	require.NoError(f.t, err)
	return res
}

// deployment is the server's Deployment as the fake API server holds it.
func (f *fixture) deployment() *appsv1.Deployment {
	d, err := f.Kube.AppsV1().Deployments("mcp-server").Get(context.Background(), f.server.Name, metav1.GetOptions{})
	require.NoError(f.t, err)
	return d
}

// statuses are the statuses applied to the server, in order.
func (f *fixture) statuses() []clerumv1alpha1.McpServerStatus {
	var out []clerumv1alpha1.McpServerStatus
	for _, s := range kittest.Applied[*clerumv1alpha1.McpServer](f.Fixture, "mcp-server", f.server.Name) {
		out = append(out, s.Status)
	}
	return out
}

// last is the last status applied to the server.
func (f *fixture) last() clerumv1alpha1.McpServerStatus {
	f.t.Helper()
	applied := f.statuses()
	require.NotEmpty(f.t, applied, "no status applied")
	return applied[len(applied)-1]
}

// condition returns condition typ of the last status applied.
func (f *fixture) condition(typ string) *metav1.Condition {
	f.t.Helper()
	return meta.FindStatusCondition(f.last().Conditions, typ)
}

// showStatus makes the cached server show the last applied status, as the
// fake API server holds it.
func (f *fixture) showStatus() {
	s, err := f.HCC.ClerumV1alpha1().McpServers("mcp-server").Get(context.Background(), f.server.Name, metav1.GetOptions{})
	require.NoError(f.t, err)
	f.server = s
	f.Index(s)
}

// cacheUnselected puts obj in the cache of its kind's managed objects,
// which would not list it (it lacks HCC's labels): the tests of foreign
// children pin that Ensure and DeleteChild judge ownership, whatever the
// cache holds.
func (f *fixture) cacheUnselected(obj runtime.Object) {
	f.t.Helper()
	var inf cache.SharedIndexInformer
	switch obj.(type) {
	case *appsv1.Deployment:
		inf = f.Deps().Informers.Kube("mcp-server", kit.ManagedObjects, "deployments").Apps().V1().Deployments().Informer()
	case *corev1.ConfigMap:
		inf = f.Deps().Informers.Kube("mcp-server", kit.ManagedObjects, "configmaps").Core().V1().ConfigMaps().Informer()
	default:
		f.t.Fatalf("cacheUnselected: %T", obj)
	}
	require.NoError(f.t, inf.GetIndexer().Add(obj))
}

// logLines returns the lines logged, decoded.
func (f *fixture) logLines() []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(f.Log()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(f.t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func mongodb(opts ...func(*clerumv1alpha1.McpServer)) *clerumv1alpha1.McpServer {
	s := resourcestest.NewServer("mongodb", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
		s.Spec.Image = "mongodb/mongodb-mcp-server:1.2"
		s.Spec.EnvSecret = &clerumv1alpha1.EnvSecret{Name: "atlas", Keys: []clerumv1alpha1.EnvSecretKey{{SecretKey: "uri", EnvName: "MDB_MCP_CONNECTION_STRING"}}}
	})
	for _, o := range opts {
		o(s)
	}
	return s
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestCreateThenNothingToWrite(t *testing.T) {
	f := newFixture(t, false, mongodb(), secret("atlas", map[string]string{"uri": "mongodb+srv://secret"}))
	f.sync()
	assert.Equal(t, []string{"create deployments/mongodb", "create services/mongodb", "patch mcpservers/mongodb/status"}, f.Writes())
	d := f.deployment()
	assert.NotContains(t, toJSON(t, d), "mongodb+srv://secret", "a Secret value is never written into a child")
	require.Len(t, d.OwnerReferences, 1)
	assert.Equal(t, "McpServer", d.OwnerReferences[0].Kind)
	assert.Equal(t, metav1.ConditionFalse, f.condition(clerumv1alpha1.ConditionReady).Status, "no replica is available yet")
	assert.True(t, f.statuses()[0].Deployed)

	// Resync over an unchanged cluster: zero writes, no status write.
	f.SyncCaches()
	f.showStatus()
	applied := len(f.statuses())
	f.sync()
	assert.Empty(t, f.Writes())
	assert.Len(t, f.statuses(), applied)
}

func TestReadinessFlowsBackFromTheDeployment(t *testing.T) {
	f := newFixture(t, false, mongodb(), secret("atlas", map[string]string{"uri": "x"}))
	f.sync()
	f.SyncCaches()
	f.showStatus()
	d := f.deployment()
	d.Generation, d.Status.ObservedGeneration, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = 1, 1, 1, 1
	f.Index(d)
	f.sync()
	assert.Equal(t, metav1.ConditionTrue, f.condition(clerumv1alpha1.ConditionReady).Status)
	assert.True(t, f.last().Ready)
}

func TestAMissingSecretBlocksTheServer(t *testing.T) {
	f := newFixture(t, false, mongodb())
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/mongodb/status"}, f.Writes(), "no Deployment before its Secret exists")
	c := f.condition(clerumv1alpha1.ConditionSecretsResolved)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "Secret atlas does not exist", c.Message)
	assert.Equal(t, reasons.SecretsMissing, f.condition(clerumv1alpha1.ConditionReady).Reason)
	assert.Equal(t, []string{"Warning Blocked SecretsMissing: Secret atlas does not exist"}, f.Events())

	// The Secret appears without the key: still blocked, one more event
	// is not needed for the same reason.
	f.showStatus()
	f.Index(secret("atlas", map[string]string{"other": "x"}))
	f.ClearWrites()
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/mongodb/status"}, f.Writes())
	assert.Equal(t, "Secret atlas has no key uri", f.condition(clerumv1alpha1.ConditionSecretsResolved).Message)
	assert.Empty(t, f.Events(), "the block reason did not change")

	// The key is added: the server deploys and is released.
	f.Index(secret("atlas", map[string]string{"uri": "x"}))
	f.ClearWrites()
	f.sync()
	assert.Equal(t, []string{"create deployments/mongodb", "create services/mongodb", "patch mcpservers/mongodb/status"}, f.Writes())
	assert.Equal(t, []string{"Normal Released no longer blocked (SecretsMissing)"}, f.Events())
}

func TestARotatedSecretRollsThePodsAndAnUnrelatedOneDoesNot(t *testing.T) {
	f := newFixture(t, false, mongodb(), secret("atlas", map[string]string{"uri": "one"}), secret("other", map[string]string{"k": "v"}))
	f.sync()
	f.SyncCaches()
	before := f.deployment().Spec.Template.Annotations[resources.AnnotationSecretDigest]
	require.NotEmpty(t, before)

	// An unrelated Secret changes: its event re-queues no server.
	handler := f.c.secretHandlers() // the Secret informer's
	changed := secret("other", map[string]string{"k": "w"})
	changed.ResourceVersion = "2"
	f.Index(changed)
	dependents, err := f.c.serverIndex.ByIndex(secretIndex, "other")
	require.NoError(t, err)
	assert.Empty(t, dependents)
	handler.OnUpdate(secret("other", map[string]string{"k": "v"}), changed)
	assert.Zero(t, f.c.queue.Len(), "the event re-queues no server")
	f.sync()
	assert.Empty(t, f.Writes())

	rotated := secret("atlas", map[string]string{"uri": "two"})
	rotated.ResourceVersion = "3"
	f.Index(rotated)
	dependents, err = f.c.serverIndex.ByIndex(secretIndex, "atlas")
	require.NoError(t, err)
	assert.Len(t, dependents, 1, "exactly its dependents are re-queued")
	handler.OnUpdate(secret("atlas", map[string]string{"uri": "one"}), rotated)
	require.Equal(t, 1, f.c.queue.Len(), "its dependent is re-queued")
	key, _ := f.c.queue.Get()
	assert.Equal(t, cache.ObjectName{Namespace: "mcp-server", Name: "mongodb"}, key)
	f.c.queue.Done(key)
	f.sync()
	assert.Equal(t, []string{"update deployments/mongodb"}, f.Writes())
	assert.NotEqual(t, before, f.deployment().Spec.Template.Annotations[resources.AnnotationSecretDigest])
}

func TestTheSecretCacheHoldsNoValue(t *testing.T) {
	obj, err := secretdigest.Digest(secret("atlas", map[string]string{"uri": "mongodb+srv://secret"}))
	require.NoError(t, err)
	s := obj.(*corev1.Secret)
	assert.NotContains(t, string(s.Data["uri"]), "secret")
	assert.Len(t, s.Data["uri"], 64)

	// What the operator's own Secret informer caches, listed from the API
	// server (not put in its cache by hand, as the fixture does).
	f := newFixture(t, false, secret("atlas", map[string]string{"uri": "mongodb+srv://secret"}))
	inf := f.Deps().Informers.Secrets("mcp-server").Informer()
	f.Unindex(s) // the fixture's copy
	stop := make(chan struct{})
	defer close(stop)
	go inf.Run(stop)
	require.Eventually(t, inf.HasSynced, 5*time.Second, 10*time.Millisecond)
	cached, err := f.c.secrets.Secrets("mcp-server").Get("atlas")
	require.NoError(t, err)
	assert.NotContains(t, string(cached.Data["uri"]), "secret")
	assert.Len(t, cached.Data["uri"], 64)
}

// The pod-template digest is keyed: a reader of Deployments cannot test
// guesses of a Secret value against it without the controller's key.
func TestTheSecretDigestIsKeyed(t *testing.T) {
	lookup := func(value string) func(string) (*corev1.Secret, error) {
		return func(string) (*corev1.Secret, error) {
			d, _ := secretdigest.Digest(secret("atlas", map[string]string{"uri": value}))
			return d.(*corev1.Secret), nil
		}
	}
	digest := func(key []byte, value string) string {
		check, err := resources.CheckSecrets(mongodb(), key, lookup(value))
		require.NoError(t, err)
		return check.Digest
	}
	a, b := resources.DigestKey("one"), resources.DigestKey("two")
	assert.NotEqual(t, a, b)
	assert.Regexp(t, `^hmac-sha256:[0-9a-f]{64}$`, digest(a, "1234"))
	assert.Equal(t, digest(a, "1234"), digest(a, "1234"), "stable for one key: no roll without a rotation")
	assert.NotEqual(t, digest(a, "1234"), digest(a, "1235"), "a rotated value rolls the pods")
	assert.NotEqual(t, digest(a, "1234"), digest(b, "1234"), "another key, another digest")
	// What a guesser could compute without the key: the same construction
	// unkeyed, and the plain SHA-256 of the value.
	unkeyed := sha256.New()
	fmt.Fprintf(unkeyed, "uri=%s\n", secretdigest.ValueDigest([]byte("1234")))
	plain := sha256.Sum256([]byte("1234"))
	for _, guess := range []string{hex.EncodeToString(unkeyed.Sum(nil)), hex.EncodeToString(plain[:])} {
		assert.NotContains(t, digest(a, "1234"), guess)
	}
}

func TestTheImageAllowlist(t *testing.T) {
	for _, tc := range []struct {
		name      string
		image     string
		enforce   bool
		deploys   bool
		reason    string
		condition metav1.ConditionStatus
	}{
		{name: "an allowed image deploys", image: "ghcr.io/evenfire-ai/x:1", deploys: true, reason: reasons.ImageAllowed, condition: metav1.ConditionTrue},
		{name: "audit mode deploys a refused image and says so", image: "evil.io/x:1", deploys: true, reason: reasons.AuditOnly, condition: metav1.ConditionFalse},
		{name: "enforce mode blocks a refused image", image: "evil.io/x:1", enforce: true, reason: reasons.ImageNotAllowed, condition: metav1.ConditionFalse},
		{name: "a look-alike registry is refused", image: "ghcr.io/evenfire-ai.evil.com/x", enforce: true, reason: reasons.ImageNotAllowed, condition: metav1.ConditionFalse},
		{name: "a look-alike path is refused", image: "evil.io/mongodb/x", enforce: true, reason: reasons.ImageNotAllowed, condition: metav1.ConditionFalse},
		{name: "a single name is library/, not mongodb/", image: "mongodb@sha256:" + strings.Repeat("a", 64), enforce: true, reason: reasons.ImageNotAllowed, condition: metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.enforce, mongodb(func(s *clerumv1alpha1.McpServer) {
				s.Spec.Image, s.Spec.EnvSecret = tc.image, nil
			}))
			f.sync()
			c := f.condition(clerumv1alpha1.ConditionImageAllowed)
			assert.Equal(t, tc.condition, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			if tc.deploys {
				assert.Contains(t, f.Writes(), "create deployments/mongodb")
			} else {
				assert.Equal(t, []string{"patch mcpservers/mongodb/status"}, f.Writes())
			}
		})
	}
}

func TestTheEgressGate(t *testing.T) {
	f := newFixture(t, false, mongodb(func(s *clerumv1alpha1.McpServer) { s.Spec.EnvSecret = nil }))
	f.gate.closed["mongodb"] = true
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/mongodb/status"}, f.Writes(), "no Deployment before the egress policies are in the cluster")
	assert.Equal(t, reasons.EgressPending, f.condition(clerumv1alpha1.ConditionReady).Reason)

	// The gate opens: the coordinator's callback re-queues the server.
	delete(f.gate.closed, "mongodb")
	f.gate.onGate("mongodb")
	assert.Equal(t, 1, f.c.queue.Len())
	f.sync()
	assert.Contains(t, f.Writes(), "create deployments/mongodb")
}

func TestADisabledServerRunsNoReplicas(t *testing.T) {
	f := newFixture(t, false, mongodb(func(s *clerumv1alpha1.McpServer) {
		s.Spec.EnvSecret, s.Spec.Enabled = nil, ptr.To(false)
	}))
	f.gate.closed["mongodb"] = true // a disabled server needs no gate: it runs nothing
	f.sync()
	assert.Equal(t, int32(0), *f.deployment().Spec.Replicas)
	assert.Equal(t, reasons.Disabled, f.condition(clerumv1alpha1.ConditionReady).Reason)
	assert.False(t, f.statuses()[0].Deployed)
}

func TestADeletedServersChildrenAreDeleted(t *testing.T) {
	f := newFixture(t, false, mongodb(func(s *clerumv1alpha1.McpServer) { s.Spec.EnvSecret = nil }))
	f.sync()
	f.SyncCaches()
	f.Unindex(f.server)
	f.sync()
	assert.Equal(t, []string{"delete deployments/mongodb", "delete services/mongodb"}, f.Writes())
}

func TestAnUnmanagedDeploymentIsNotAdopted(t *testing.T) {
	foreign := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "mongodb", ResourceVersion: "1"}}
	f := newFixture(t, false, mongodb(func(s *clerumv1alpha1.McpServer) { s.Spec.EnvSecret = nil }), foreign)
	f.cacheUnselected(foreign)
	res := f.sync()
	assert.Equal(t, []string{"patch mcpservers/mongodb/status"}, f.Writes(), "the Deployment is neither updated nor deleted, and no Service fronts pods HCC did not judge")
	assert.Equal(t, reasons.NotOwned, f.condition(clerumv1alpha1.ConditionReady).Reason)
	assert.Equal(t, refusedRetry, res.RequeueAfter)
	assert.Empty(t, f.deployment().Labels)

	// Nor is it deleted when the server goes.
	f.SyncCaches()
	f.cacheUnselected(foreign)
	f.Unindex(f.server)
	f.sync()
	assert.Empty(t, f.Writes())
}

func TestAForeignProxyConfigIsNeverMounted(t *testing.T) {
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "atlassian", ResourceVersion: "1"},
		Data: map[string]string{"nginx.conf": "someone else's upstream"}}
	f := newFixture(t, false, resourcestest.NewServer("atlassian", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
		s.Spec.Image, s.Spec.Remote = "", &clerumv1alpha1.Remote{URL: "https://mcp.atlassian.com/v1/sse"}
	}), foreign)
	f.cacheUnselected(foreign)
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/atlassian/status"}, f.Writes(), "no Deployment mounts a ConfigMap HCC did not write")
	assert.Equal(t, reasons.NotOwned, f.condition(clerumv1alpha1.ConditionReady).Reason)
}

func TestADisabledServerStopsEvenWhenBlocked(t *testing.T) {
	f := newFixture(t, true, mongodb(), secret("atlas", map[string]string{"uri": "x"}))
	f.sync()
	f.SyncCaches()
	// Disabled, and its Secret gone: it cannot be rebuilt, but it stops.
	disabled := f.server.DeepCopy()
	disabled.Spec.Enabled, disabled.Generation = ptr.To(false), 2
	f.server = disabled
	f.Index(disabled)
	f.Unindex(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "atlas"}})
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/mongodb/status", "update deployments/mongodb"}, f.Writes())
	assert.Equal(t, int32(0), *f.deployment().Spec.Replicas)
	assert.Equal(t, reasons.Disabled, f.condition(clerumv1alpha1.ConditionReady).Reason)
}

func TestABlockedServerIsNotReady(t *testing.T) {
	f := newFixture(t, false, mongodb(), secret("atlas", map[string]string{"uri": "x"}))
	f.sync()
	f.SyncCaches()
	f.showStatus()
	d := f.deployment()
	d.Generation, d.Status.ObservedGeneration, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = 1, 1, 1, 1
	f.Index(d)
	f.Unindex(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "atlas"}})
	f.sync()
	assert.False(t, f.last().Ready, "pods left running are not offered as ready")
	assert.Equal(t, []string{"patch mcpservers/mongodb/status"}, f.Writes(), "and are left as they are")
}

func TestARemoteServerTurnedLocalLosesItsProxyConfig(t *testing.T) {
	f := newFixture(t, false, resourcestest.NewServer("atlassian", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
		s.Spec.Image, s.Spec.Remote = "", &clerumv1alpha1.Remote{URL: "https://mcp.atlassian.com/v1/sse"}
	}))
	f.sync()
	f.SyncCaches()
	local := f.server.DeepCopy()
	local.Spec.Remote, local.Spec.Image, local.Generation = nil, "ghcr.io/evenfire-ai/atlassian:1", 2
	f.server = local
	f.Index(local)
	f.sync()
	assert.Contains(t, f.Writes(), "delete configmaps/atlassian")
}

func TestFieldRefEnvNeedsNoWritePerSync(t *testing.T) {
	f := newFixture(t, false, mongodb(func(s *clerumv1alpha1.McpServer) {
		s.Spec.EnvSecret = nil
		s.Spec.Env = []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	}))
	f.sync()
	assert.Equal(t, "v1", f.deployment().Spec.Template.Spec.Containers[0].Env[0].ValueFrom.FieldRef.APIVersion,
		"the builder spells the API server's default")
}

func TestStdioAndRemoteServers(t *testing.T) {
	t.Run("stdio replicas are capped and say so", func(t *testing.T) {
		f := newFixture(t, false, resourcestest.NewServer("files", clerumv1alpha1.TransportStdio, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Command, s.Spec.Replicas = []string{"run"}, ptr.To[int32](3)
		}))
		f.sync()
		assert.Equal(t, int32(1), *f.deployment().Spec.Replicas)
		assert.Equal(t, metav1.ConditionTrue, f.condition(clerumv1alpha1.ConditionReplicasCapped).Status)
	})
	t.Run("a remote server whose bindings do not cover its host is warned about", func(t *testing.T) {
		f := newFixture(t, false, resourcestest.NewServer("atlassian", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Image, s.Spec.Remote = "", &clerumv1alpha1.Remote{URL: "https://mcp.atlassian.com/v1/sse"}
		}))
		f.sync()
		assert.Equal(t, []string{"create configmaps/atlassian", "create deployments/atlassian", "create services/atlassian", "patch mcpservers/atlassian/status"}, f.Writes())
		assert.Equal(t, metav1.ConditionFalse, f.condition(clerumv1alpha1.ConditionRemoteReachable).Status)
		assert.Contains(t, f.Events(), "Warning RemoteUnreachable no egress binding of this server covers mcp.atlassian.com:443: its proxy cannot reach the upstream")
		assert.Equal(t, reasons.PlatformImage, f.condition(clerumv1alpha1.ConditionImageAllowed).Reason, "spec.image is not judged")
	})
	t.Run("a plain-http remote is warned about once per generation", func(t *testing.T) {
		f := newFixture(t, false, resourcestest.NewServer("legacy", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Image, s.Spec.Remote = "", &clerumv1alpha1.Remote{URL: "http://mcp.legacy.example:8080/sse"}
			s.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "api", Host: "mcp.legacy.example", Port: ptr.To[int32](8080)}}
		}))
		f.sync()
		assert.Equal(t, metav1.ConditionTrue, f.condition(clerumv1alpha1.ConditionRemoteReachable).Status)
		assert.Equal(t, []string{"Warning RemoteInsecure spec.remote.url is plain http: traffic to mcp.legacy.example:8080, credentials included, is not encrypted"}, f.Events())
		f.SyncCaches()
		f.showStatus()
		f.sync()
		assert.Empty(t, f.Events(), "not again on a resync")
	})
	t.Run("a covering binding makes it reachable", func(t *testing.T) {
		f := newFixture(t, false, resourcestest.NewServer("atlassian", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Image, s.Spec.Remote = "", &clerumv1alpha1.Remote{URL: "https://mcp.atlassian.com/v1/sse"}
			s.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "api", Host: "MCP.atlassian.com.", Port: ptr.To[int32](443)}}
		}))
		f.sync()
		assert.Equal(t, metav1.ConditionTrue, f.condition(clerumv1alpha1.ConditionRemoteReachable).Status)
	})
}

func TestInvalidSpecsAreBlocked(t *testing.T) {
	f := newFixture(t, false, resourcestest.NewServer("files", clerumv1alpha1.TransportStdio))
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/files/status"}, f.Writes())
	c := f.condition(clerumv1alpha1.ConditionReady)
	assert.Equal(t, reasons.InvalidSpec, c.Reason)
	assert.Equal(t, resources.ErrStdioCommand.Error(), c.Message)
}

func toJSON(t *testing.T, obj any) string {
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return string(b)
}

func TestTheGaugesFollowBlocksAndDeletions(t *testing.T) {
	f := newFixture(t, false, mongodb())
	gauge := func(g *prometheus.GaugeVec, label string) float64 {
		var m dto.Metric
		require.NoError(t, g.WithLabelValues(label).Write(&m))
		return m.GetGauge().GetValue()
	}
	f.sync()
	assert.Equal(t, 1.0, gauge(f.c.metrics.Blocked, reasons.SecretsMissing))
	assert.Equal(t, 1.0, gauge(f.c.metrics.Servers, "blocked"))
	f.Index(secret("atlas", map[string]string{"uri": "x"}))
	f.sync()
	assert.Zero(t, gauge(f.c.metrics.Blocked, reasons.SecretsMissing))
	assert.Zero(t, gauge(f.c.metrics.Servers, "blocked"))
	assert.Equal(t, 1.0, gauge(f.c.metrics.Servers, "deployed"))
	f.SyncCaches()
	f.Unindex(f.server)
	f.sync()
	assert.Zero(t, gauge(f.c.metrics.Servers, "deployed"), "a deleted server leaves the gauges")
}

func TestReadyNeedsTheCurrentTemplateAvailable(t *testing.T) {
	cases := []struct {
		name                 string
		replicas             int32
		generation, observed int64
		available, updated   int32
		want                 bool
	}{
		{"rolled out", 1, 2, 2, 1, 1, true},
		{"generation not observed yet", 1, 3, 2, 1, 1, false},
		{"mid-rollout: the old pod is available, the new one is not", 1, 2, 2, 1, 0, false},
		{"mid-rollout of two: one new pod", 2, 2, 2, 2, 1, false},
		{"new pods created, not available yet", 2, 2, 2, 1, 2, false},
		{"scaled to zero is never ready", 0, 2, 2, 0, 0, false},
		{"surge: more available than desired", 2, 2, 2, 3, 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: tc.generation},
				Spec:   appsv1.DeploymentSpec{Replicas: ptr.To(tc.replicas)},
				Status: appsv1.DeploymentStatus{ObservedGeneration: tc.observed, AvailableReplicas: tc.available, UpdatedReplicas: tc.updated}}
			assert.Equal(t, tc.want, kit.DeploymentAvailable(d))
		})
	}
}

// A delete that fails half-way leaves the rest attempted and the sync
// failed, so the loop retries it; the retry finishes the job.
func TestADeleteThatFailsHalfWayIsFinishedByTheRetry(t *testing.T) {
	f := newFixture(t, false, mongodb(func(s *clerumv1alpha1.McpServer) { s.Spec.EnvSecret = nil }))
	f.sync()
	f.SyncCaches()
	f.Unindex(f.server)
	failing := true
	f.Kube.PrependReactor("delete", "deployments", func(core.Action) (bool, runtime.Object, error) {
		if failing {
			return true, nil, apierrors.NewServiceUnavailable("etcd leader changed")
		}
		return false, nil, nil
	})
	_, err := f.c.syncMcpServer(context.Background(), cache.ObjectName{Namespace: "mcp-server", Name: "mongodb"})
	require.Error(t, err, "the failed delete fails the sync, so it is retried")
	assert.Equal(t, []string{"delete deployments/mongodb", "delete services/mongodb"}, f.Writes(),
		"the Service is deleted although the Deployment's delete failed")
	_, err = f.Kube.AppsV1().Deployments("mcp-server").Get(context.Background(), "mongodb", metav1.GetOptions{})
	require.NoError(t, err, "the Deployment is still there")

	// The retry: the Service is gone from the cache, the Deployment is not.
	f.Unindex(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "mongodb"}})
	f.ClearWrites()
	failing = false
	f.sync()
	assert.Equal(t, []string{"delete deployments/mongodb"}, f.Writes())
	_, err = f.Kube.AppsV1().Deployments("mcp-server").Get(context.Background(), "mongodb", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
}

// The McpServer informer already runs, so the Secret index can no longer be
// added to it: the operator must fail to start, not run without the index
// (a rotated Secret would re-queue no server).
func TestAnInformerThatCannotBeWiredFailsRun(t *testing.T) {
	f := newFixture(t, false)
	servers := f.Deps().Informers.HCC("mcp-server").Clerum().V1alpha1().McpServers().Informer()
	stop := make(chan struct{})
	defer close(stop)
	go servers.Run(stop)
	require.Eventually(t, servers.HasSynced, 5*time.Second, 10*time.Millisecond)

	d := f.Deps() // a second operator over the same informers
	d.Registry = prometheus.NewRegistry()
	d.Queues = kit.NewQueues(d.Registry, f.Clock)
	c := New(d, f.gate, Config{Namespace: "mcp-server", Build: resourcestest.Options, Workers: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := c.Run(ctx) // without the check, it would wait for caches nobody started
	require.Error(t, err)
	assert.Contains(t, err.Error(), "mcpserver: wiring: adding indexers")
	var m dto.Metric
	require.NoError(t, c.base.Errors().WithLabelValues("mcpserver").Write(&m))
	assert.Equal(t, 1.0, m.GetCounter().GetValue(), "the wiring error is counted with the failed syncs")
}

// Every line the operator logs about a server names the operator and the
// server, as namespace/name under "object" (docs/reconcilers.md#logs).
func TestLogLinesNameTheServer(t *testing.T) {
	f := newFixture(t, false, mongodb())
	f.sync() // blocked: its Secret is missing
	f.Index(secret("atlas", map[string]string{"uri": "x"}))
	f.sync() // released
	lines := f.logLines()
	require.Len(t, lines, 2)
	assert.Equal(t, "server blocked", lines[0]["message"])
	assert.Equal(t, reasons.SecretsMissing, lines[0]["reason"])
	assert.Equal(t, "server released", lines[1]["message"])
	assert.Equal(t, reasons.SecretsMissing, lines[1]["was"])

	f = newFixture(t, false, resourcestest.NewServer("legacy", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
		s.Spec.Image, s.Spec.Remote = "", &clerumv1alpha1.Remote{URL: "http://mcp.legacy.example:8080/sse"}
	}))
	f.sync()
	insecure := f.logLines()
	require.Len(t, insecure, 1)
	assert.Equal(t, "mcp.legacy.example", insecure[0]["host"])
	lines = append(lines, insecure...)

	for i, object := range []string{"mcp-server/mongodb", "mcp-server/mongodb", "mcp-server/legacy"} {
		l := lines[i]
		assert.Equal(t, "mcpserver", l[kit.LogController], l["message"])
		assert.Equal(t, object, l[kit.LogObject], l["message"])
		assert.NotContains(t, l, "name", "the object is named once, under object")
		assert.NotContains(t, l, "namespace")
	}
}
