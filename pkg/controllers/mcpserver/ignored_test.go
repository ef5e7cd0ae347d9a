package mcpserver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources/resourcestest"
	"github.com/clerum/hcc/pkg/reasons"
)

// atlassian is a remote server whose one binding covers its URL, so the
// only event it can give is FieldsIgnored.
func atlassian(opts ...func(*clerumv1alpha1.McpServer)) *clerumv1alpha1.McpServer {
	s := resourcestest.NewServer("atlassian", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
		s.Spec.Image, s.Spec.Remote = "", &clerumv1alpha1.Remote{URL: "https://mcp.atlassian.com/v1/sse"}
		s.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "api", Host: "mcp.atlassian.com", Port: ptr.To[int32](443)}}
	})
	for _, o := range opts {
		o(s)
	}
	return s
}

// The container fields a remote server sets, one each: what servers written
// for earlier controllers carry.
var ignoredFields = []struct {
	field string
	set   func(*clerumv1alpha1.McpServer)
}{
	{"spec.image", func(s *clerumv1alpha1.McpServer) { s.Spec.Image = "ghcr.io/evenfire-ai/atlassian:1" }},
	{"spec.command", func(s *clerumv1alpha1.McpServer) { s.Spec.Command = []string{"node", "index.js"} }},
	{"spec.args", func(s *clerumv1alpha1.McpServer) { s.Spec.Args = []string{"--readonly"} }},
	{"spec.env", func(s *clerumv1alpha1.McpServer) {
		// Even one that reads a Secret, which a local server may not.
		s.Spec.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "jira"}, Key: "token"}}}}
	}},
	{"spec.envSecret", func(s *clerumv1alpha1.McpServer) {
		// Its Secret does not exist: it is ignored, not waited for.
		s.Spec.EnvSecret = &clerumv1alpha1.EnvSecret{Name: "jira", Keys: []clerumv1alpha1.EnvSecretKey{{SecretKey: "token", EnvName: "TOKEN"}}}
	}},
}

// A remote server that sets a container field deploys as any remote server
// does — the proxy, its ConfigMap and the Service — and says the field is
// ignored.
func TestARemoteServerDeploysWhateverContainerFieldsItSets(t *testing.T) {
	plain := newFixture(t, false, atlassian())
	plain.sync()
	want := plain.deployment().Spec
	for _, tc := range ignoredFields {
		t.Run(tc.field, func(t *testing.T) {
			f := newFixture(t, false, atlassian(tc.set))
			f.sync()
			assert.Equal(t, []string{"create configmaps/atlassian", "create deployments/atlassian", "create services/atlassian",
				"patch mcpservers/atlassian/status"}, f.Writes())
			assert.Equal(t, want, f.deployment().Spec, "the proxy's pod, nothing of the field in it")
			assert.Equal(t, reasons.Progressing, f.condition(clerumv1alpha1.ConditionReady).Reason)
			assert.True(t, f.last().Deployed)
			assert.Equal(t, metav1.ConditionTrue, f.condition(clerumv1alpha1.ConditionSecretsResolved).Status)
			c := f.condition(clerumv1alpha1.ConditionFieldsIgnored)
			require.NotNil(t, c)
			assert.Equal(t, metav1.ConditionTrue, c.Status)
			assert.Equal(t, reasons.RemoteFieldsIgnored, c.Reason)
			assert.Equal(t, "remote server: "+tc.field+" is ignored", c.Message)
			assert.Equal(t, []string{"Normal FieldsIgnored remote server: " + tc.field + " is ignored"}, f.Events())
		})
	}
}

func TestTheFieldsIgnoredCondition(t *testing.T) {
	t.Run("every field set, named in spec order", func(t *testing.T) {
		f := newFixture(t, false, atlassian(func(s *clerumv1alpha1.McpServer) {
			for i := len(ignoredFields) - 1; i >= 0; i-- {
				ignoredFields[i].set(s)
			}
		}))
		f.sync()
		c := f.condition(clerumv1alpha1.ConditionFieldsIgnored)
		require.NotNil(t, c)
		assert.Equal(t, metav1.ConditionTrue, c.Status)
		assert.Equal(t, reasons.RemoteFieldsIgnored, c.Reason)
		assert.Equal(t, "remote server: spec.image, spec.command, spec.args, spec.env, spec.envSecret are ignored", c.Message)
		assert.Equal(t, int64(1), c.ObservedGeneration)
	})
	t.Run("a remote server that sets none", func(t *testing.T) {
		f := newFixture(t, false, atlassian())
		f.sync()
		c := f.condition(clerumv1alpha1.ConditionFieldsIgnored)
		require.NotNil(t, c)
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, reasons.NoFieldsIgnored, c.Reason)
		assert.Empty(t, f.Events())
	})
	t.Run("a server that is not remote has none", func(t *testing.T) {
		f := newFixture(t, false, mongodb(), secret("atlas", map[string]string{"uri": "x"}))
		f.sync()
		assert.Nil(t, f.condition(clerumv1alpha1.ConditionFieldsIgnored))
		assert.Empty(t, f.Events())
	})
	t.Run("a remote server turned local drops it", func(t *testing.T) {
		f := newFixture(t, false, atlassian(ignoredFields[0].set))
		f.sync()
		f.SyncCaches()
		f.showStatus()
		local := f.server.DeepCopy()
		local.Spec.Remote, local.Generation = nil, 2
		f.server = local
		f.Index(local)
		f.sync()
		assert.Nil(t, f.condition(clerumv1alpha1.ConditionFieldsIgnored))
	})
	t.Run("one a server should not have is removed, though nothing else changed", func(t *testing.T) {
		f := newFixture(t, false, mongodb(), secret("atlas", map[string]string{"uri": "x"}))
		f.sync()
		f.SyncCaches()
		f.showStatus()
		f.ClearWrites()
		stale := f.server.DeepCopy()
		stale.Status.Conditions = append(stale.Status.Conditions, metav1.Condition{Type: clerumv1alpha1.ConditionFieldsIgnored,
			Status: metav1.ConditionTrue, Reason: reasons.RemoteFieldsIgnored, Message: "remote server: spec.image is ignored", ObservedGeneration: 1})
		f.server = stale
		f.Index(stale)
		f.sync()
		assert.Equal(t, []string{"patch mcpservers/mongodb/status"}, f.Writes(), "the apply that drops it is made")
		assert.Nil(t, f.condition(clerumv1alpha1.ConditionFieldsIgnored))
	})
}

// The FieldsIgnored event is given once per generation: not again on a
// resync, again when the spec changes, and not by a restarted controller
// whose server's status already says it for this generation.
func TestTheFieldsIgnoredEventIsGivenOncePerGeneration(t *testing.T) {
	event := "Normal FieldsIgnored remote server: spec.image is ignored"
	f := newFixture(t, false, atlassian(ignoredFields[0].set))
	f.sync()
	assert.Equal(t, []string{event}, f.Events())
	f.sync() // before its status reaches the cache
	assert.Empty(t, f.Events(), "not again before the status shows")
	f.SyncCaches()
	f.showStatus()
	f.sync()
	assert.Empty(t, f.Events(), "not again on a resync")

	// A new generation is told again.
	bumped := f.server.DeepCopy()
	bumped.Spec.Command, bumped.Generation = []string{"run"}, 2
	bumped, err := f.HCC.ClerumV1alpha1().McpServers("mcp-server").Update(context.Background(), bumped, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.server = bumped
	f.Index(bumped)
	f.sync()
	assert.Equal(t, []string{"Normal FieldsIgnored remote server: spec.image, spec.command are ignored"}, f.Events())
	f.SyncCaches()
	f.showStatus()
	said := meta.FindStatusCondition(f.server.Status.Conditions, clerumv1alpha1.ConditionFieldsIgnored)
	require.NotNil(t, said)
	require.Equal(t, int64(2), said.ObservedGeneration, "the status says it for generation 2")

	// A restarted controller, its memory empty, reads the status: said.
	f.restart(false, testPrefixes)
	f.sync()
	assert.Empty(t, f.Events(), "a restart does not repeat it")

	// A status that said it for an older generation does not count.
	stale := f.server.DeepCopy()
	stale.Generation = 3
	f.server = stale
	f.restart(false, testPrefixes)
	f.sync()
	assert.Equal(t, []string{"Normal FieldsIgnored remote server: spec.image, spec.command are ignored"}, f.Events())
}

// An envSecret a remote server ignores gates nothing: not even a Secret no
// server may read blocks it or stops it, and its Secret's changes re-queue
// it not. Its auth.secretRef still counts.
func TestARemoteServersEnvSecretIsNotChecked(t *testing.T) {
	envSecret := func(s *clerumv1alpha1.McpServer) {
		s.Spec.EnvSecret = &clerumv1alpha1.EnvSecret{Name: "sa", Keys: []clerumv1alpha1.EnvSecretKey{{SecretKey: "token", EnvName: "TOKEN"}}}
	}
	sa := secret("sa", map[string]string{"token": "x"})
	sa.Type = corev1.SecretTypeServiceAccountToken
	f := newFixture(t, false, atlassian(envSecret), sa)
	f.sync()
	assert.Contains(t, f.Writes(), "create deployments/atlassian")
	assert.Equal(t, metav1.ConditionTrue, f.condition(clerumv1alpha1.ConditionSecretsResolved).Status)
	assert.Empty(t, f.deployment().Spec.Template.Annotations[resources.AnnotationSecretDigest], "its values roll nothing")
	dependents, err := f.c.serverIndex.ByIndex(secretIndex, "sa")
	require.NoError(t, err)
	assert.Empty(t, dependents)

	f = newFixture(t, false, atlassian(envSecret, func(s *clerumv1alpha1.McpServer) {
		s.Spec.Auth = &clerumv1alpha1.Auth{SecretRef: clerumv1alpha1.SecretKeyReference{Name: "jira", Key: "token"}}
	}))
	f.sync()
	assert.Equal(t, []string{"patch mcpservers/atlassian/status"}, f.Writes(), "its auth Secret is still waited for")
	assert.Equal(t, "Secret jira does not exist", f.condition(clerumv1alpha1.ConditionSecretsResolved).Message)
	assert.Equal(t, reasons.SecretsMissing, f.condition(clerumv1alpha1.ConditionReady).Reason)
}

// The FieldsIgnored event is remembered apart from the remote warnings: a
// server warned about in the same sync is told both.
func TestTheFieldsIgnoredEventComesWithTheRemoteWarnings(t *testing.T) {
	f := newFixture(t, false, atlassian(ignoredFields[0].set, func(s *clerumv1alpha1.McpServer) { s.Spec.EgressBindings = nil }))
	f.sync()
	assert.Equal(t, []string{
		"Warning RemoteUnreachable no egress binding of this server covers mcp.atlassian.com:443: its proxy cannot reach the upstream",
		"Normal FieldsIgnored remote server: spec.image is ignored",
	}, f.Events())
}
