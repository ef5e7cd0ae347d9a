package mcpserver

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources/resourcestest"
	"github.com/clerum/hcc/pkg/secretdigest"
)

// The controller's sync and render (resources.Plan) must give a server the
// same children: render's output is what the controller would create. For
// each server, sync runs against fake clientsets of an empty cluster and
// what it created is read back from the fake API server; Plan gets the same
// server, configuration, Secrets and gate. Both sides are normalised alike
// (children), so only what a builder decides is compared.
func TestSyncAndRenderProduceTheSameChildren(t *testing.T) {
	atlas := secret("atlas", map[string]string{"uri": "mongodb+srv://secret"})
	cases := []struct {
		name    string
		server  *clerumv1alpha1.McpServer
		secrets []*corev1.Secret
		enforce bool
		gated   bool // the egress gate is closed
		want    int  // children created
	}{
		{name: "sse with an env secret", server: mongodb(func(s *clerumv1alpha1.McpServer) {
			s.Spec.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}}
		}), secrets: []*corev1.Secret{atlas}, want: 2},
		{name: "streamable-http", server: resourcestest.NewServer("search", clerumv1alpha1.TransportStreamableHTTP), want: 2},
		{name: "stdio", server: resourcestest.NewServer("files", clerumv1alpha1.TransportStdio, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Command, s.Spec.Args, s.Spec.Replicas = []string{"npx", "server"}, []string{"--readonly"}, ptr.To[int32](3)
		}), want: 2},
		{name: "remote with its proxy config", server: resourcestest.NewServer("atlassian", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Image, s.Spec.Remote = "", &clerumv1alpha1.Remote{URL: "https://mcp.atlassian.com/v1/sse"}
			s.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "api", Host: "mcp.atlassian.com", Port: ptr.To[int32](443)}}
		}), want: 3},
		{name: "remote, its container fields ignored and its envSecret's Secret missing", server: atlassian(func(s *clerumv1alpha1.McpServer) {
			for _, f := range ignoredFields {
				f.set(s)
			}
		}), want: 3},
		{name: "disabled", server: resourcestest.NewServer("off", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Enabled = ptr.To(false)
		}), want: 2},
		{name: "enforce mode, allowed image", server: mongodb(), secrets: []*corev1.Secret{atlas}, enforce: true, want: 2},
		// Blocked: neither side creates anything.
		{name: "its Secret is missing", server: mongodb()},
		{name: "enforce mode, refused image", server: resourcestest.NewServer("x", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Image = "docker.io/evil/x:1"
		}), enforce: true},
		{name: "its egress gate is closed", server: resourcestest.NewServer("search", clerumv1alpha1.TransportSSE), gated: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{tc.server}
			for _, s := range tc.secrets {
				objs = append(objs, s)
			}
			f := newFixture(t, tc.enforce, objs...)
			f.gate.closed[tc.server.Name] = tc.gated
			f.sync()
			synced := f.created()
			require.Len(t, synced, tc.want)

			// What render does: the same inputs, Secrets digested as
			// render digests them.
			digested := map[string]*corev1.Secret{}
			for _, s := range tc.secrets {
				d, _ := secretdigest.Digest(s)
				digested[s.Name] = d.(*corev1.Secret)
			}
			lookup := func(name string) (*corev1.Secret, error) {
				if s, ok := digested[name]; ok {
					return s, nil
				}
				return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
			}
			cfg := f.c.cfg
			planned, block, why, err := resources.Plan(tc.server, cfg.Build, cfg.Images, cfg.Enforce, lookup, !tc.gated)
			require.NoError(t, err)
			t.Logf("plan: block %q %s", block, why)

			assert.Equal(t, children(t, planned...), synced)
		})
	}
}

// created returns, normalised, the Deployments, Services and ConfigMaps the
// fake API server holds in the fixture's namespace.
func (f *fixture) created() map[string]map[string]any {
	f.t.Helper()
	ctx := context.Background()
	var objs []runtime.Object
	ds, err := f.Kube.AppsV1().Deployments("mcp-server").List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	for i := range ds.Items {
		objs = append(objs, &ds.Items[i])
	}
	ss, err := f.Kube.CoreV1().Services("mcp-server").List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	for i := range ss.Items {
		objs = append(objs, &ss.Items[i])
	}
	cms, err := f.Kube.CoreV1().ConfigMaps("mcp-server").List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	for i := range cms.Items {
		objs = append(objs, &cms.Items[i])
	}
	return children(f.t, objs...)
}

// children normalises objects for comparison, keyed kind/namespace/name:
// labels, annotations, owner references without their UID (the live
// owner's, which Plan cannot know) and every top-level field but metadata,
// status and the type (spec, data, ...). Server-set metadata is dropped.
func children(t *testing.T, objs ...runtime.Object) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, obj := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		require.NoError(t, err)
		m := obj.(metav1.Object)
		kind := fmt.Sprintf("%T", obj)
		refs := []metav1.OwnerReference{}
		for _, r := range m.GetOwnerReferences() {
			r.UID = ""
			refs = append(refs, r)
		}
		child := map[string]any{
			"labels":          m.GetLabels(),
			"annotations":     m.GetAnnotations(),
			"ownerReferences": refs,
		}
		for k, v := range u {
			switch k {
			case "metadata", "status", "apiVersion", "kind":
			default:
				child[k] = v
			}
		}
		out[kind+"/"+m.GetNamespace()+"/"+m.GetName()] = child
	}
	return out
}
