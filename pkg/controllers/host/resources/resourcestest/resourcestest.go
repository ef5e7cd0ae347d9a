// Package resourcestest holds the fixtures of the Host builders' tests and
// the Host reconciler's tests, which cannot share a _test file: the options
// and the Hosts both build from. It is test helpers, imported only by tests.
package resourcestest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/mark"
)

// HMACSecret stands for INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET.
const HMACSecret = "a-test-hmac-secret"

// Options are the builders' options of the tests.
var Options = resources.Options{
	HostNamespace:     "mcp-host",
	ChannelsNamespace: "channels",
	RPCProxyNamespace: "rpc-proxy",
	ClusterDomain:     "cluster.local",

	Image:           "clerum/mcp-host:0.9.5",
	ImagePullPolicy: corev1.PullAlways,
	ImagePullSecret: "clerum",
	Port:            8080,
	ConfigMapName:   "mcp-host-config",
	Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("100m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi"), corev1.ResourceCPU: resource.MustParse("500m")},
	},
	WorkspaceStorageClass: "do-block-storage-retain",
	WorkspaceSize:         resource.MustParse("10Gi"),
	WorkspacePath:         "/workspace",

	DesktopImage: "clerum/mcp-host-desktop:latest",
	DesktopPort:  3000,
	DesktopResources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi"), corev1.ResourceCPU: resource.MustParse("250m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourceCPU: resource.MustParse("1")},
	},

	ChannelReaderImage:       "clerum/channel-reader:0.9.5",
	ChannelReaderPullPolicy:  corev1.PullAlways,
	ChannelReaderHandoffPort: 8099,

	GatewayURL: "http://nginx-workflow-approval-gateway.control-plane.svc:8092",
	HCCAPIURL:  "http://host-context-controller-api-gateway.control-plane.svc.cluster.local:8081",

	RuntimeTokenMark: mark.NewKey(HMACSecret, mark.PurposeRuntimeToken),
	ClaimMark:        mark.NewKey(HMACSecret, mark.PurposeClaim),
}

// NewHost is Host name in mcp-host on context1, generation 1, with opts
// applied.
func NewHost(name string, opts ...func(*clerumv1alpha1.Host)) *clerumv1alpha1.Host {
	h := &clerumv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec:       clerumv1alpha1.HostSpec{ContextRef: "context1"},
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

// WithDesktop enables h's desktop.
func WithDesktop(h *clerumv1alpha1.Host) { h.Spec.Desktop = &clerumv1alpha1.DesktopSpec{Enabled: true} }

// WithSecretRef sets h's secretRef to name.
func WithSecretRef(name string) func(*clerumv1alpha1.Host) {
	return func(h *clerumv1alpha1.Host) { h.Spec.SecretRef = &clerumv1alpha1.LocalObjectReference{Name: name} }
}
