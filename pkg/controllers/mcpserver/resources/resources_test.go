package resources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest/golden"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources/resourcestest"
)

// pinned is what the golden files pin.
const pinned = "the container interface is pinned (docs/containers.md)"

// The golden files pin the pods HCC runs: the container interfaces other
// images rely on (docs/containers.md) change only on purpose.
func TestBuildersGolden(t *testing.T) {
	withSecrets := func(s *clerumv1alpha1.McpServer) {
		s.Spec.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}}
		s.Spec.EnvSecret = &clerumv1alpha1.EnvSecret{Name: "atlas", Keys: []clerumv1alpha1.EnvSecretKey{{SecretKey: "uri", EnvName: "MONGODB_URI"}}}
		s.Spec.Command = []string{"node", "dist/index.js"}
		s.Spec.Args = []string{"--readonly"}
	}
	cases := []struct {
		name   string
		server *clerumv1alpha1.McpServer
		digest string
	}{
		{"sse", resourcestest.NewServer("mongodb", clerumv1alpha1.TransportSSE, withSecrets), "sha256:0123"},
		{"streamable-http", resourcestest.NewServer("search", clerumv1alpha1.TransportStreamableHTTP), ""},
		{"stdio", resourcestest.NewServer("files", clerumv1alpha1.TransportStdio, withSecrets), "sha256:4567"},
		{"remote", resourcestest.NewServer("atlassian", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Image = ""
			s.Spec.Remote = &clerumv1alpha1.Remote{URL: "https://mcp.atlassian.com/v1/sse"}
		}), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := resources.BuildDeployment(tc.server, "mcp-server", resourcestest.Options, tc.digest)
			require.NoError(t, err)
			golden.YAML(t, "testdata/"+tc.name+".deployment.yaml", d, pinned)
			golden.YAML(t, "testdata/"+tc.name+".service.yaml", resources.BuildService(tc.server, "mcp-server"), pinned)
			cm, err := resources.BuildProxyConfig(tc.server, "mcp-server")
			require.NoError(t, err)
			if tc.server.Spec.Remote != nil {
				golden.YAML(t, "testdata/"+tc.name+".configmap.yaml", cm, pinned)
			} else {
				assert.Nil(t, cm)
			}
		})
	}
}

func TestBuildDeployment(t *testing.T) {
	t.Run("the server's own container comes first", func(t *testing.T) {
		for _, typ := range []clerumv1alpha1.TransportType{clerumv1alpha1.TransportSSE, clerumv1alpha1.TransportStdio} {
			s := resourcestest.NewServer("s", typ, func(s *clerumv1alpha1.McpServer) { s.Spec.Command = []string{"run"} })
			d, err := resources.BuildDeployment(s, "mcp-server", resourcestest.Options, "")
			require.NoError(t, err)
			assert.Equal(t, resources.ContainerServer, d.Spec.Template.Spec.Containers[0].Name)
			assert.Equal(t, s.Spec.Image, d.Spec.Template.Spec.Containers[0].Image, "the allowlist judges spec.image, which is what runs")
		}
	})
	t.Run("a stdio server gets the bridge as the second container on the transport port", func(t *testing.T) {
		s := resourcestest.NewServer("s", clerumv1alpha1.TransportStdio, func(s *clerumv1alpha1.McpServer) { s.Spec.Command = []string{"npx", "server"} })
		d, err := resources.BuildDeployment(s, "mcp-server", resourcestest.Options, "")
		require.NoError(t, err)
		c := d.Spec.Template.Spec.Containers
		require.Len(t, c, 2)
		assert.Equal(t, resources.ContainerStdioBridge, c[1].Name)
		assert.Equal(t, int32(3000), c[1].Ports[0].ContainerPort)
		assert.Empty(t, c[0].Ports, "the server itself listens on nothing")
		assert.Equal(t, []string{resources.StdioShim, "--socket", resources.StdioSocket, "--", "npx", "server"}, c[0].Command)
	})
	t.Run("a stdio server without a command is refused", func(t *testing.T) {
		_, err := resources.BuildDeployment(resourcestest.NewServer("s", clerumv1alpha1.TransportStdio), "mcp-server", resourcestest.Options, "")
		assert.ErrorIs(t, err, resources.ErrStdioCommand)
	})
	t.Run("stdio replicas are capped at one", func(t *testing.T) {
		s := resourcestest.NewServer("s", clerumv1alpha1.TransportStdio, func(s *clerumv1alpha1.McpServer) { s.Spec.Replicas = ptr.To[int32](3) })
		r, capped := resources.Replicas(s)
		assert.Equal(t, int32(1), r)
		assert.True(t, capped)
		r, capped = resources.Replicas(resourcestest.NewServer("s", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) { s.Spec.Replicas = ptr.To[int32](3) }))
		assert.Equal(t, int32(3), r)
		assert.False(t, capped)
	})
	t.Run("a disabled server runs no replicas", func(t *testing.T) {
		r, _ := resources.Replicas(resourcestest.NewServer("s", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) { s.Spec.Enabled = ptr.To(false) }))
		assert.Zero(t, r)
	})
	t.Run("spec.env may not read Secrets or ConfigMaps", func(t *testing.T) {
		for _, src := range []*corev1.EnvVarSource{
			{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "other-servers-auth"}, Key: "token"}},
			{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Key: "k"}},
		} {
			s := resourcestest.NewServer("s", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
				s.Spec.Env = []corev1.EnvVar{{Name: "T", ValueFrom: src}}
			})
			_, err := resources.BuildDeployment(s, "mcp-server", resourcestest.Options, "")
			assert.ErrorIs(t, err, resources.ErrEnvSecretRef)
		}
	})
	t.Run("a Secret value is never inlined", func(t *testing.T) {
		s := resourcestest.NewServer("s", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
			s.Spec.EnvSecret = &clerumv1alpha1.EnvSecret{Name: "creds", Keys: []clerumv1alpha1.EnvSecretKey{{SecretKey: "k", EnvName: "E"}}}
		})
		d, err := resources.BuildDeployment(s, "mcp-server", resourcestest.Options, "sha256:x")
		require.NoError(t, err)
		e := d.Spec.Template.Spec.Containers[0].Env[0]
		assert.Empty(t, e.Value)
		assert.Equal(t, "creds", e.ValueFrom.SecretKeyRef.Name)
		assert.Equal(t, "sha256:x", d.Spec.Template.Annotations[resources.AnnotationSecretDigest])
	})
	t.Run("the pod is hardened", func(t *testing.T) {
		s := resourcestest.NewServer("s", clerumv1alpha1.TransportStdio, func(s *clerumv1alpha1.McpServer) { s.Spec.Command = []string{"run"} })
		d, err := resources.BuildDeployment(s, "mcp-server", resourcestest.Options, "")
		require.NoError(t, err)
		pod := d.Spec.Template.Spec
		assert.False(t, *pod.AutomountServiceAccountToken)
		assert.True(t, *pod.SecurityContext.RunAsNonRoot)
		assert.Equal(t, resources.PodUser, *pod.SecurityContext.RunAsUser)
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
		for _, c := range append(pod.InitContainers, pod.Containers...) {
			assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation, c.Name)
			assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, c.Name)
			assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, c.Name)
		}
	})
}

func TestRemoteServers(t *testing.T) {
	remote := func(url string) *clerumv1alpha1.McpServer {
		return resourcestest.NewServer("r", clerumv1alpha1.TransportStreamableHTTP, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Image = ""
			s.Spec.Remote = &clerumv1alpha1.Remote{URL: url}
		})
	}
	t.Run("the proxy, not spec.image, runs", func(t *testing.T) {
		d, err := resources.BuildDeployment(remote("https://mcp.example.com/mcp"), "mcp-server", resourcestest.Options, "")
		require.NoError(t, err)
		require.Len(t, d.Spec.Template.Spec.Containers, 1)
		assert.Equal(t, resourcestest.Options.EgressProxyImage, d.Spec.Template.Spec.Containers[0].Image)
	})
	t.Run("the host the proxy must reach", func(t *testing.T) {
		host, port, err := resources.RemoteHost(remote("https://mcp.example.com/mcp"))
		require.NoError(t, err)
		assert.Equal(t, "mcp.example.com", host)
		assert.Equal(t, int32(443), port)
		host, port, err = resources.RemoteHost(remote("http://mcp.example.com:8080/"))
		require.NoError(t, err)
		assert.Equal(t, "mcp.example.com", host)
		assert.Equal(t, int32(8080), port)
	})
	for _, bad := range []string{
		"ftp://mcp.example.com/", "https://user:pw@mcp.example.com/", "https://mcp.example.com/a;b",
		"https://mcp.example.com/?q=1", "https://mcp.example.com/#f", "https://mcp.example.com:99999/", "mcp.example.com/path",
		"https://mcp.example.com/$host",
	} {
		t.Run("a URL nginx could misread is refused: "+bad, func(t *testing.T) {
			_, err := resources.BuildProxyConfig(remote(bad), "mcp-server")
			assert.ErrorIs(t, err, resources.ErrRemoteURL)
			_, err = resources.BuildDeployment(remote(bad), "mcp-server", resourcestest.Options, "")
			assert.ErrorIs(t, err, resources.ErrRemoteURL)
		})
	}
	t.Run("characters nginx reads are escaped in the path", func(t *testing.T) {
		cm, err := resources.BuildProxyConfig(remote("https://mcp.example.com/{x}"), "mcp-server")
		require.NoError(t, err)
		assert.Contains(t, cm.Data[resources.ProxyConfigKey], "proxy_pass https://mcp.example.com:443/%7Bx%7D;")
		assert.Contains(t, cm.Data[resources.ProxyConfigKey], "location = /mcp {", "the served path maps to the remote URL")
	})
	t.Run("the Host header names a port that is not the scheme's default", func(t *testing.T) {
		for url, header := range map[string]string{
			"https://mcp.example.com/mcp":      "proxy_set_header Host mcp.example.com;",
			"https://mcp.example.com:443/mcp":  "proxy_set_header Host mcp.example.com;",
			"https://mcp.example.com:8443/mcp": "proxy_set_header Host mcp.example.com:8443;",
			"http://mcp.example.com:8080/":     "proxy_set_header Host mcp.example.com:8080;",
			"http://mcp.example.com:443/":      "proxy_set_header Host mcp.example.com:443;",
			"https://[2001:db8::1]/mcp":        "proxy_set_header Host [2001:db8::1];",
		} {
			cm, err := resources.BuildProxyConfig(remote(url), "mcp-server")
			require.NoError(t, err, url)
			assert.Contains(t, cm.Data[resources.ProxyConfigKey], header, url)
		}
	})
	t.Run("a remote server's container fields are ignored, not run", func(t *testing.T) {
		plain, err := resources.BuildDeployment(remote("https://mcp.example.com/mcp"), "mcp-server", resourcestest.Options, "")
		require.NoError(t, err)
		s := withContainerFields(remote("https://mcp.example.com/mcp"))
		d, err := resources.BuildDeployment(s, "mcp-server", resourcestest.Options, "")
		require.NoError(t, err)
		assert.Equal(t, plain, d, "the pod is the proxy's alone")
		assert.Equal(t, []string{"spec.image", "spec.command", "spec.args", "spec.env", "spec.envSecret"}, resources.IgnoredFields(s), "in spec order")
	})
}

// withContainerFields sets every field a remote server ignores.
func withContainerFields(s *clerumv1alpha1.McpServer) *clerumv1alpha1.McpServer {
	s.Spec.Image = "evil/image:1"
	s.Spec.Command, s.Spec.Args = []string{"node"}, []string{"--readonly"}
	s.Spec.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "other"}, Key: "token"}}}}
	s.Spec.EnvSecret = &clerumv1alpha1.EnvSecret{Name: "atlas", Keys: []clerumv1alpha1.EnvSecretKey{{SecretKey: "uri", EnvName: "URI"}}}
	return s
}

func TestIgnoredFields(t *testing.T) {
	remote := func(opts ...func(*clerumv1alpha1.McpServer)) *clerumv1alpha1.McpServer {
		return resourcestest.NewServer("r", clerumv1alpha1.TransportSSE, append([]func(*clerumv1alpha1.McpServer){func(s *clerumv1alpha1.McpServer) {
			s.Spec.Image, s.Spec.Remote = "", &clerumv1alpha1.Remote{URL: "https://mcp.example.com/sse"}
		}}, opts...)...)
	}
	for _, tc := range []struct {
		name   string
		server *clerumv1alpha1.McpServer
		want   string
	}{
		{"a remote server that sets none", remote(), ""},
		{"one field", remote(func(s *clerumv1alpha1.McpServer) { s.Spec.Args = []string{"-v"} }), "remote server: spec.args is ignored"},
		{"two, in spec order", remote(func(s *clerumv1alpha1.McpServer) { s.Spec.Command, s.Spec.Image = []string{"run"}, "x/y:1" }),
			"remote server: spec.image, spec.command are ignored"},
		{"all five", withContainerFields(remote()), "remote server: spec.image, spec.command, spec.args, spec.env, spec.envSecret are ignored"},
		{"a server that is not remote uses them all", withContainerFields(resourcestest.NewServer("l", clerumv1alpha1.TransportSSE)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, resources.IgnoredMessage(tc.server))
		})
	}
}

func TestServedTransport(t *testing.T) {
	for _, tc := range []struct {
		typ      clerumv1alpha1.TransportType
		path     string
		wantType clerumv1alpha1.TransportType
		wantPath string
	}{
		{clerumv1alpha1.TransportSSE, "", clerumv1alpha1.TransportSSE, "/sse"},
		{clerumv1alpha1.TransportStreamableHTTP, "", clerumv1alpha1.TransportStreamableHTTP, "/mcp"},
		{clerumv1alpha1.TransportStdio, "", clerumv1alpha1.TransportStreamableHTTP, "/mcp"},
		{clerumv1alpha1.TransportStdio, "/rpc", clerumv1alpha1.TransportStreamableHTTP, "/rpc"},
	} {
		s := resourcestest.NewServer("s", tc.typ, func(s *clerumv1alpha1.McpServer) { s.Spec.Transport.Path = tc.path })
		typ, path := resources.ServedTransport(s)
		assert.Equal(t, tc.wantType, typ)
		assert.Equal(t, tc.wantPath, path)
	}
}
