// Package resourcestest holds the fixtures of the McpServer builders' tests
// and the reconciler's tests, which cannot share a _test file: the options
// and the servers both build from. It is test helpers, imported only by
// tests.
package resourcestest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
)

// Options are the builders' options of the tests.
var Options = resources.Options{
	PullPolicy:       corev1.PullIfNotPresent,
	StdioBridgeImage: "docker.io/clerum/stdio-bridge:0.9.5",
	StdioBridgeResources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("50m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("200m")},
	},
	EgressProxyImage: "clerum/nginx-egress-proxy:0.1.0",
	DigestKey:        resources.DigestKey("test-hmac-secret"),
}

// NewServer is McpServer name in mcp-server, of transport typ on port
// 3000, generation 1, with opts applied.
func NewServer(name string, typ clerumv1alpha1.TransportType, opts ...func(*clerumv1alpha1.McpServer)) *clerumv1alpha1.McpServer {
	s := &clerumv1alpha1.McpServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec: clerumv1alpha1.McpServerSpec{
			Image:     "ghcr.io/evenfire-ai/" + name + ":1.0",
			Transport: clerumv1alpha1.Transport{Type: typ, Port: ptr.To[int32](3000)},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}
