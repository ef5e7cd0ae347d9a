//go:build integration

package resources_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources/resourcestest"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/names"
)

// cp is the one control plane this package's integration tests share.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}

// TestBuildersEmitWhatTheAPIServerKeeps creates every object the builders
// make for each kind of server and proves that a second ensure writes
// nothing: the builders emit the API server's defaults.
func TestBuildersEmitWhatTheAPIServerKeeps(t *testing.T) {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(cp.Config())
	hcc := clientset.NewForConfigOrDie(cp.Config())
	cases := map[string]*clerumv1alpha1.McpServer{
		"sse": resourcestest.NewServer("sse", clerumv1alpha1.TransportSSE, func(s *clerumv1alpha1.McpServer) {
			s.Spec.EnvSecret = &clerumv1alpha1.EnvSecret{Name: "creds", Keys: []clerumv1alpha1.EnvSecretKey{{SecretKey: "uri", EnvName: "URI"}}}
			s.Spec.Env = []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"},
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
			s.Spec.Resources = &corev1.ResourceRequirements{Limits: resourcestest.Options.StdioBridgeResources.Limits}
		}),
		"streamable-http": resourcestest.NewServer("http", clerumv1alpha1.TransportStreamableHTTP),
		"stdio": resourcestest.NewServer("stdio", clerumv1alpha1.TransportStdio, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Command = []string{"npx", "server"}
		}),
		"remote": resourcestest.NewServer("remote", clerumv1alpha1.TransportStreamableHTTP, func(s *clerumv1alpha1.McpServer) {
			s.Spec.Image = ""
			s.Spec.Remote = &clerumv1alpha1.Remote{URL: "https://mcp.example.com/mcp"}
		}),
	}
	i := 0
	for name, server := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			ns := fmt.Sprintf("mcp-server-%d", i)
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			require.NoError(t, err)
			s := server.DeepCopy()
			s.Namespace, s.UID, s.Generation = ns, "", 0
			live, err := hcc.ClerumV1alpha1().McpServers(ns).Create(ctx, s, metav1.CreateOptions{})
			require.NoError(t, err)
			owner := kit.Owner{Object: live, GVK: schema.GroupVersion(clerumv1alpha1.GroupVersion).WithKind("McpServer"),
				IdentityLabel: names.LabelMcpServer}

			d, err := resources.BuildDeployment(live, ns, resourcestest.Options, "sha256:digest")
			require.NoError(t, err)
			kittest.RoundTrip(t, cp.Config(), kit.Deployments, owner, d)
			kittest.RoundTrip(t, cp.Config(), kit.Services, owner, resources.BuildService(live, ns))
			if cm, err := resources.BuildProxyConfig(live, ns); cm != nil {
				require.NoError(t, err)
				kittest.RoundTrip(t, cp.Config(), kit.ConfigMaps, owner, cm)
			}
		})
	}
}
