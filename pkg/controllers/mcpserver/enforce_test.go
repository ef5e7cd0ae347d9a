package mcpserver

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources/resourcestest"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// restart replaces the operator by a fresh one over the same fake API
// server, as a rollout of hcc-controller with another configuration would:
// fresh memory and metrics, and caches filled from what the cluster holds
// (the server as the test last put it). It shares the fixture's
// informers, which SyncCaches fills as a fresh list would fill new ones;
// their Secret index is there already, a wiring error the new operator's
// Run would report, but the test only syncs.
func (f *fixture) restart(enforce bool, prefixes []string) {
	f.t.Helper()
	d := f.Deps()
	d.Registry = prometheus.NewRegistry()
	d.Queues = kit.NewQueues(d.Registry, f.Clock)
	f.Clock.SetTime(kittest.T0.Add(time.Hour))
	f.c = f.newController(d, enforce, prefixes)
	f.SyncCaches()
	f.Index(f.server)
	f.Events()
}

// running makes the live Deployment report its replicas available.
func (f *fixture) running() {
	d := f.deployment()
	d.Generation, d.Status.ObservedGeneration = 1, 1
	d.Status.Replicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas = *d.Spec.Replicas, *d.Spec.Replicas, *d.Spec.Replicas
	_, err := f.Kube.AppsV1().Deployments("mcp-server").UpdateStatus(context.Background(), d, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.SyncCaches()
}

var testPrefixes = []string{"ghcr.io/evenfire-ai/", "mongodb/"}

// Enforce mode switched on stops a server deployed in audit mode: scaled
// to zero, its template untouched, blocked as ImageNotAllowed with
// deployed and ready false; switched off again it scales back up with the
// very same template, so no new rollout starts.
func TestEnforceModeSwitchedOnAndOff(t *testing.T) {
	f := newFixture(t, false, mongodb(func(s *clerumv1alpha1.McpServer) {
		s.Spec.Image, s.Spec.EnvSecret, s.Spec.Replicas = "evil.io/x:1", nil, ptr.To[int32](2)
	}))
	f.sync()
	require.Contains(t, f.Writes(), "create deployments/mongodb", "audit mode deploys the refused image")
	f.SyncCaches()
	f.showStatus()
	f.running()
	before := f.deployment().Spec.Template.DeepCopy()

	f.restart(true, testPrefixes)
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/mongodb/status", "update deployments/mongodb"}, f.Writes(), "scaled down, not deleted")
	d := f.deployment()
	assert.Equal(t, int32(0), *d.Spec.Replicas)
	assert.Equal(t, *before, d.Spec.Template, "the pod template is kept as it was")
	ready := f.condition(clerumv1alpha1.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, reasons.ImageNotAllowed, ready.Reason)
	assert.Contains(t, ready.Message, "scaled to zero")
	last := f.last()
	assert.False(t, last.Deployed)
	assert.False(t, last.Ready)
	assert.Equal(t, []string{"Warning Blocked ImageNotAllowed: image evil.io/x:1 is under no allowed prefix"}, f.Events())

	// A resync changes nothing more.
	f.SyncCaches()
	f.showStatus()
	f.sync()
	assert.Empty(t, f.Writes())

	// Back to audit mode: the same Deployment scales back up; its template
	// is byte for byte the one it had, so no new ReplicaSet is rolled.
	f.restart(false, testPrefixes)
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/mongodb/status", "update deployments/mongodb"}, f.Writes())
	d = f.deployment()
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	assert.Equal(t, *before, d.Spec.Template, "restored without a rollout")
}

// An allowlist edit that newly refuses a running server stops it, in
// enforce mode, like the switch to enforce mode does.
func TestAnAllowlistEditRefusesARunningServer(t *testing.T) {
	f := newFixture(t, true, mongodb(func(s *clerumv1alpha1.McpServer) { s.Spec.EnvSecret = nil }))
	f.sync()
	require.Contains(t, f.Writes(), "create deployments/mongodb", "mongodb/ is allowed")
	f.SyncCaches()
	f.showStatus()
	f.running()
	before := f.deployment().Spec.Template.DeepCopy()

	f.restart(true, []string{"ghcr.io/evenfire-ai/"}) // mongodb/ taken out
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/mongodb/status", "update deployments/mongodb"}, f.Writes())
	assert.Equal(t, int32(0), *f.deployment().Spec.Replicas)
	assert.Equal(t, *before, f.deployment().Spec.Template)
	assert.Equal(t, reasons.ImageNotAllowed, f.condition(clerumv1alpha1.ConditionReady).Reason)
	assert.False(t, f.last().Deployed)
}

// A Secret that goes missing reports SecretsMissing first, but must not
// keep a refused image running: enforce mode judges the image on its own
// (found by an attacker review: the author deletes a Secret, then enforce
// mode is switched on).
func TestAMissingSecretDoesNotKeepARefusedImageRunning(t *testing.T) {
	f := newFixture(t, false, mongodb(func(s *clerumv1alpha1.McpServer) {
		s.Spec.Image, s.Spec.EnvSecret, s.Spec.Replicas = "evil.io/x:1", nil, ptr.To[int32](2)
	}))
	f.sync()
	f.SyncCaches()
	f.showStatus()
	f.running()
	before := f.deployment().Spec.Template.DeepCopy()

	s := f.server.DeepCopy()
	s.Spec.EnvSecret = &clerumv1alpha1.EnvSecret{Name: "nope", Keys: []clerumv1alpha1.EnvSecretKey{{SecretKey: "k", EnvName: "K"}}}
	s.Generation++
	f.server = s
	f.restart(true, testPrefixes)
	f.sync()
	assert.Equal(t, int32(0), *f.deployment().Spec.Replicas, "a refused image is scaled to zero in enforce mode, whatever else blocks it")
	assert.Equal(t, *before, f.deployment().Spec.Template, "the template is kept")
	assert.Equal(t, reasons.SecretsMissing, f.condition(clerumv1alpha1.ConditionReady).Reason)
}

// A Secret no server may read blocks as SecretsMissing, says why, and
// stops pods started before the rule.
func TestForbiddenSecrets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secret func(*corev1.Secret)
		why    string
	}{
		{"a service-account token", func(s *corev1.Secret) { s.Type = corev1.SecretTypeServiceAccountToken }, "is a service-account token"},
		{"a dockerconfigjson", func(s *corev1.Secret) { s.Type = corev1.SecretTypeDockerConfigJson }, "is a registry credential (kubernetes.io/dockerconfigjson)"},
		{"a dockercfg", func(s *corev1.Secret) { s.Type = corev1.SecretTypeDockercfg }, "is a registry credential (kubernetes.io/dockercfg)"},
		{"an HCC-managed Secret", func(s *corev1.Secret) {
			s.Labels = map[string]string{names.LabelManagedBy: names.ManagedByValue}
		}, "is managed by HCC (label clerum.io/managed-by)"},
	} {
		t.Run(tc.name+" in envSecret", func(t *testing.T) {
			bad := secret("atlas", map[string]string{"uri": "x"})
			tc.secret(bad)
			f := newFixture(t, false, mongodb(), bad)
			f.sync()
			assert.Equal(t, []string{"patch mcpservers/mongodb/status"}, f.Writes(), "nothing is deployed")
			want := "Secret atlas may not be read by an McpServer: it " + tc.why
			c := f.condition(clerumv1alpha1.ConditionSecretsResolved)
			assert.Equal(t, metav1.ConditionFalse, c.Status)
			assert.Equal(t, reasons.SecretsMissing, c.Reason)
			assert.Equal(t, want, c.Message)
			assert.Equal(t, reasons.SecretsMissing, f.condition(clerumv1alpha1.ConditionReady).Reason)
		})
		t.Run(tc.name+" in auth", func(t *testing.T) {
			bad := secret("token", map[string]string{"key": "x"})
			tc.secret(bad)
			f := newFixture(t, false, mongodb(func(s *clerumv1alpha1.McpServer) {
				s.Spec.EnvSecret = nil
				s.Spec.Auth = &clerumv1alpha1.Auth{SecretRef: clerumv1alpha1.SecretKeyReference{Name: "token", Key: "key"}}
			}), bad)
			f.sync()
			assert.Equal(t, []string{"patch mcpservers/mongodb/status"}, f.Writes())
			assert.Equal(t, "Secret token may not be read by an McpServer: it "+tc.why,
				f.condition(clerumv1alpha1.ConditionSecretsResolved).Message)
		})
	}

	// A server deployed before the rule, whose Secret becomes (or always
	// was) a forbidden one, is scaled to zero with its template kept.
	good := secret("atlas", map[string]string{"uri": "x"})
	f := newFixture(t, false, mongodb(), good)
	f.sync()
	f.SyncCaches()
	f.showStatus()
	f.running()
	before := f.deployment().Spec.Template.DeepCopy()
	bad := good.DeepCopy()
	bad.Type, bad.ResourceVersion = corev1.SecretTypeServiceAccountToken, "2"
	f.Index(bad)
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/mongodb/status", "update deployments/mongodb"}, f.Writes())
	assert.Equal(t, int32(0), *f.deployment().Spec.Replicas)
	assert.Equal(t, *before, f.deployment().Spec.Template)
	assert.False(t, f.last().Deployed)
}

// An McpServer holding a platform app value predates the CRD rule: it is
// InvalidSpec and gets no workload; one already running loses it.
func TestAReservedNameGetsNoWorkload(t *testing.T) {
	for _, name := range names.ReservedMcpServerNames {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, false, resourcestest.NewServer(name, clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
				s.Spec.Image = "ghcr.io/evenfire-ai/x:1"
			}))
			f.sync()
			assert.Equal(t, []string{"patch mcpservers/" + name + "/status"}, f.Writes(), "no workload")
			ready := f.condition(clerumv1alpha1.ConditionReady)
			assert.Equal(t, reasons.InvalidSpec, ready.Reason)
			assert.Contains(t, ready.Message, "reserved for a platform workload")
			assert.False(t, f.last().Deployed)
		})
	}

	// Children written by an HCC from before the rule are deleted.
	s := resourcestest.NewServer("mcp-proxy", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) { s.Spec.Image = "ghcr.io/evenfire-ai/x:1" })
	b, err := resources.Build(resourcestest.NewServer("mcp-proxyy", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) { s.Spec.Image = "ghcr.io/evenfire-ai/x:1" }), resourcestest.Options, "")
	require.NoError(t, err)
	for _, o := range []metav1.Object{b.Deployment, b.Service} {
		o.SetName("mcp-proxy")
		o.SetLabels(map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelMcpServer: "mcp-proxy", names.LabelApp: "mcp-proxy"})
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: resources.GVK.GroupVersion().String(), Kind: resources.GVK.Kind, Name: "mcp-proxy", UID: s.UID, Controller: ptr.To(true)}})
	}
	f := newFixture(t, false, s, b.Deployment, b.Service)
	f.sync()
	assert.Equal(t, []string{"delete deployments/mcp-proxy", "delete services/mcp-proxy", "patch mcpservers/mcp-proxy/status"}, f.Writes())
}

// The container runs the normalized reference the allowlist judged, not
// the author's spelling.
func TestTheContainerRunsTheJudgedReference(t *testing.T) {
	f := newFixture(t, true, mongodb(func(s *clerumv1alpha1.McpServer) {
		s.Spec.Image, s.Spec.EnvSecret = "mongodb/mongodb-mcp-server:1.2", nil
	}))
	f.sync()
	assert.Equal(t, "docker.io/mongodb/mongodb-mcp-server:1.2", f.deployment().Spec.Template.Spec.Containers[0].Image)

	// In audit mode an image that does not normalize has no reference to
	// run: InvalidSpec, no workload.
	f = newFixture(t, false, mongodb(func(s *clerumv1alpha1.McpServer) { s.Spec.Image, s.Spec.EnvSecret = "Evil.io//X", nil }))
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/mongodb/status"}, f.Writes())
	assert.Equal(t, reasons.InvalidSpec, f.condition(clerumv1alpha1.ConditionReady).Reason)
}
