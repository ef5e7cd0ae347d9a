package resources

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/secretdigest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var testOptions = Options{
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

	RuntimeTokenMark: mark.NewKey(testHMACSecret, mark.PurposeRuntimeToken),
	ClaimMark:        mark.NewKey(testHMACSecret, mark.PurposeClaim),
}

// testHMACSecret stands for INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET.
const testHMACSecret = "a-test-hmac-secret"

func newHost(name string, opts ...func(*clerumv1alpha1.Host)) *clerumv1alpha1.Host {
	h := &clerumv1alpha1.Host{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: name, UID: types.UID("uid-" + name), Generation: 1},
		Spec:       clerumv1alpha1.HostSpec{ContextRef: "context1"},
	}
	for _, o := range opts {
		o(h)
	}
	return h
}

func withDesktop(h *clerumv1alpha1.Host) { h.Spec.Desktop = &clerumv1alpha1.DesktopSpec{Enabled: true} }

func withSecretRef(name string) func(*clerumv1alpha1.Host) {
	return func(h *clerumv1alpha1.Host) { h.Spec.SecretRef = &clerumv1alpha1.LocalObjectReference{Name: name} }
}

func deployment(t *testing.T, h *clerumv1alpha1.Host, opts Options) *appsv1.Deployment {
	t.Helper()
	d, err := BuildDeployment(h, "ctx-1", opts)
	require.NoError(t, err)
	return d
}

// golden compares obj's YAML with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, obj any) {
	t.Helper()
	got, err := yaml.Marshal(obj)
	require.NoError(t, err)
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to write %s", path)
	assert.Equal(t, string(want), string(got), "%s: the container interface is pinned (docs/host.md); run go test -update only for an intended change", path)
}

// The golden files pin the pods and policies HCC runs for a Host: the
// interfaces of images HCC does not build (docs/host.md) change only on
// purpose.
func TestBuildersGolden(t *testing.T) {
	plain := newHost("alice", withSecretRef("alice-env"))
	desktop := newHost("bob", withDesktop)
	d, err := BuildDeployment(plain, "context1", testOptions)
	require.NoError(t, err)
	golden(t, "host.deployment.yaml", d)
	d, err = BuildDeployment(desktop, "context1", testOptions)
	require.NoError(t, err)
	golden(t, "host-desktop.deployment.yaml", d)
	golden(t, "host-desktop.service.yaml", BuildService(desktop, testOptions))
	golden(t, "host-desktop.networkpolicy.yaml", BuildDesktopPolicy(desktop, testOptions))
	golden(t, "host.role.yaml", BuildRole(plain, testOptions))
	golden(t, "channel-reader.deployment.yaml", BuildChannelReaderDeployment(plain, testOptions))
	golden(t, "channel-reader.service.yaml", BuildChannelReaderService(plain, testOptions))
	golden(t, "channel-reader.networkpolicy.yaml", BuildChannelReaderPolicy(plain, testOptions))
}

func TestBuildDeployment(t *testing.T) {
	t.Run("mcp-host is the first container and runs the configured image", func(t *testing.T) {
		for _, h := range []*clerumv1alpha1.Host{newHost("h"), newHost("h", withDesktop)} {
			c := deployment(t, h, testOptions).Spec.Template.Spec.Containers
			assert.Equal(t, ContainerMcpHost, c[0].Name)
			assert.Equal(t, testOptions.Image, c[0].Image)
			assert.Equal(t, testOptions.ImagePullPolicy, c[0].ImagePullPolicy)
			assert.Equal(t, testOptions.Resources, c[0].Resources)
			assert.Equal(t, []corev1.ContainerPort{{Name: PortHTTP, ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}, c[0].Ports)
		}
	})
	t.Run("the image stamped on the pods is read back from the Deployment", func(t *testing.T) {
		assert.Equal(t, testOptions.Image, DeployedImage(deployment(t, newHost("h", withDesktop), testOptions)))
		assert.Empty(t, DeployedImage(nil))
		assert.Empty(t, DeployedImage(&appsv1.Deployment{}))
	})
	t.Run("the contextId is on the pods but not in the immutable selector", func(t *testing.T) {
		d, err := BuildDeployment(newHost("h"), "tenant-a", testOptions)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{
			names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h", names.LabelContext: "tenant-a",
		}, d.Spec.Template.Labels)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h"}, d.Spec.Selector.MatchLabels)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h"}, d.Labels)
		other, err := BuildDeployment(newHost("h"), "tenant-b", testOptions)
		require.NoError(t, err)
		assert.Equal(t, d.Spec.Selector, other.Spec.Selector, "a contextId change must not touch the selector")
	})
	t.Run("a missing or malformed contextId builds nothing", func(t *testing.T) {
		for _, id := range []string{"", "Not A Label", strings.Repeat("x", 64)} {
			_, err := BuildDeployment(newHost("h"), id, testOptions)
			assert.ErrorIs(t, err, ErrContextID, "%q", id)
		}
	})
	t.Run("Recreate, one replica, and the API server's defaults", func(t *testing.T) {
		d := deployment(t, newHost("h"), testOptions)
		assert.Equal(t, appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, d.Spec.Strategy)
		assert.Equal(t, int32(1), *d.Spec.Replicas)
		assert.Equal(t, int32(10), *d.Spec.RevisionHistoryLimit)
		assert.Equal(t, int32(600), *d.Spec.ProgressDeadlineSeconds)
		assert.Empty(t, d.OwnerReferences, "the kit sets owner references")
	})
	t.Run("the mcp-host environment", func(t *testing.T) {
		env := envMap(deployment(t, newHost("h"), testOptions).Spec.Template.Spec.Containers[0])
		assert.Equal(t, map[string]string{
			EnvHostName:         "h",
			EnvHostNamespace:    "mcp-host",
			EnvHostPort:         "8080",
			EnvWorkspacePath:    "/workspace",
			EnvGatewayURL:       testOptions.GatewayURL,
			EnvHCCAPIURL:        testOptions.HCCAPIURL,
			EnvRuntimeTokensDir: RuntimeTokensDir,
		}, env)
	})
	t.Run("no Secret value and no Secret reference reaches the environment", func(t *testing.T) {
		d := deployment(t, newHost("h", withDesktop, withSecretRef("creds")), testOptions)
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				assert.Nil(t, e.ValueFrom, "%s %s", c.Name, e.Name)
				assert.NotContains(t, e.Name, "CREDENTIAL", c.Name)
			}
			for _, e := range c.EnvFrom {
				assert.Nil(t, e.SecretRef, c.Name)
			}
		}
	})
	t.Run("the runtime-token Secret is a whole read-only volume, without subPath", func(t *testing.T) {
		pod := deployment(t, newHost("h"), testOptions).Spec.Template.Spec
		mount := findMount(t, pod.Containers[0], RuntimeTokensDir)
		assert.True(t, mount.ReadOnly)
		assert.Empty(t, mount.SubPath)
		assert.Empty(t, mount.SubPathExpr)
		v := findVolume(t, pod, mount.Name)
		require.NotNil(t, v.Secret)
		assert.Equal(t, "host-h-mcp-host-runtime-tokens", v.Secret.SecretName)
		assert.Empty(t, v.Secret.Items, "every key, as the Secret has them")
		assert.Equal(t, int32(0o440), *v.Secret.DefaultMode)
	})
	t.Run("the workspace claim is mounted at the workspace path", func(t *testing.T) {
		opts := testOptions
		opts.WorkspacePath = "/data/ws"
		pod := deployment(t, newHost("h"), opts).Spec.Template.Spec
		v := findVolume(t, pod, findMount(t, pod.Containers[0], "/data/ws").Name)
		require.NotNil(t, v.PersistentVolumeClaim)
		assert.Equal(t, "h-workspace", v.PersistentVolumeClaim.ClaimName)
		assert.Equal(t, "/data/ws", envMap(pod.Containers[0])[EnvWorkspacePath])
	})
	t.Run("the pod runs as the Host's own account, its token in mcp-host alone", func(t *testing.T) {
		pod := deployment(t, newHost("h", withDesktop), testOptions).Spec.Template.Spec
		assert.Equal(t, "host-h", pod.ServiceAccountName)
		assert.False(t, *pod.AutomountServiceAccountToken, "automount would give the token to every container")
		mounts := func(c corev1.Container) []string {
			var out []string
			for _, m := range c.VolumeMounts {
				out = append(out, m.MountPath)
			}
			return out
		}
		require.Len(t, pod.Containers, 2)
		assert.Contains(t, mounts(pod.Containers[0]), ServiceAccountDir)
		assert.NotContains(t, mounts(pod.Containers[1]), ServiceAccountDir, "the desktop gets no API token")
		assert.NotContains(t, mounts(pod.Containers[1]), RuntimeTokensDir, "nor the credential")
	})
	t.Run("the pod is hardened", func(t *testing.T) {
		for _, d := range []*appsv1.Deployment{
			deployment(t, newHost("h", withDesktop), testOptions),
			BuildChannelReaderDeployment(newHost("h"), testOptions),
		} {
			pod := d.Spec.Template.Spec
			assert.True(t, *pod.SecurityContext.RunAsNonRoot)
			assert.Equal(t, PodUser, *pod.SecurityContext.RunAsUser)
			assert.Equal(t, PodGroup, *pod.SecurityContext.RunAsGroup)
			assert.Equal(t, PodGroup, *pod.SecurityContext.FSGroup)
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
			assert.False(t, *pod.EnableServiceLinks)
			for _, c := range append(pod.InitContainers, pod.Containers...) {
				assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation, c.Name)
				assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, c.Name)
				assert.True(t, *c.SecurityContext.RunAsNonRoot, c.Name)
				assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, c.Name)
				findMount(t, c, TmpDir) // every container has somewhere to write
			}
		}
	})
}

func TestDesktop(t *testing.T) {
	t.Run("off: one container, no desktop port, no policy", func(t *testing.T) {
		for _, h := range []*clerumv1alpha1.Host{
			newHost("h"),
			newHost("h", func(h *clerumv1alpha1.Host) { h.Spec.Desktop = &clerumv1alpha1.DesktopSpec{Enabled: false} }),
		} {
			pod := deployment(t, h, testOptions).Spec.Template.Spec
			require.Len(t, pod.Containers, 1)
			assert.NotContains(t, envMap(pod.Containers[0]), EnvDesktopURL)
			assert.Len(t, BuildService(h, testOptions).Spec.Ports, 1)
			assert.Nil(t, BuildDesktopPolicy(h, testOptions))
		}
	})
	t.Run("on: the sidecar second, on the desktop port with the desktop resources", func(t *testing.T) {
		h := newHost("h", withDesktop)
		pod := deployment(t, h, testOptions).Spec.Template.Spec
		require.Len(t, pod.Containers, 2)
		desktop := pod.Containers[1]
		assert.Equal(t, ContainerDesktop, desktop.Name)
		assert.Equal(t, testOptions.DesktopImage, desktop.Image)
		assert.Equal(t, testOptions.DesktopResources, desktop.Resources)
		assert.Equal(t, []corev1.ContainerPort{{Name: PortDesktop, ContainerPort: 3000, Protocol: corev1.ProtocolTCP}}, desktop.Ports)
		assert.Equal(t, map[string]string{EnvDesktopPort: "3000", EnvDesktopWorkspacePath: "/workspace"}, envMap(desktop))
		assert.Equal(t, "http://127.0.0.1:3000", envMap(pod.Containers[0])[EnvDesktopURL])
		for _, m := range desktop.VolumeMounts {
			assert.NotEqual(t, RuntimeTokensDir, m.MountPath, "the desktop never sees the credential")
		}
		ports := BuildService(h, testOptions).Spec.Ports
		require.Len(t, ports, 2)
		assert.Equal(t, int32(3000), ports[1].Port)
	})
	t.Run("the desktop policy admits rpc-proxy to the desktop port of this Host only", func(t *testing.T) {
		opts := testOptions
		opts.DesktopPort = 5900
		p := BuildDesktopPolicy(newHost("h", withDesktop), opts)
		require.NotNil(t, p)
		assert.Equal(t, "allow-rpc-proxy-desktop-h", p.Name)
		assert.Equal(t, "mcp-host", p.Namespace)
		assert.Equal(t, names.PolicyTypeHost, p.Labels[names.LabelPolicyType])
		assert.Equal(t, "h", p.Labels[names.LabelHost])
		assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, p.Spec.PolicyTypes)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h"}, p.Spec.PodSelector.MatchLabels)
		require.Len(t, p.Spec.Ingress, 1)
		rule := p.Spec.Ingress[0]
		require.Len(t, rule.From, 1)
		assert.Equal(t, map[string]string{names.NamespaceNameKey: "rpc-proxy"}, rule.From[0].NamespaceSelector.MatchLabels)
		assert.Equal(t, map[string]string{names.LabelApp: names.AppRPCProxy}, rule.From[0].PodSelector.MatchLabels)
		require.Len(t, rule.Ports, 1)
		assert.Equal(t, int32(5900), rule.Ports[0].Port.IntVal)
		assert.Equal(t, corev1.ProtocolTCP, *rule.Ports[0].Protocol)
	})
}

func TestOptionalSettings(t *testing.T) {
	t.Run("no pull secret: no imagePullSecrets", func(t *testing.T) {
		opts := testOptions
		opts.ImagePullSecret = ""
		assert.Nil(t, deployment(t, newHost("h"), opts).Spec.Template.Spec.ImagePullSecrets)
	})
	t.Run("a pull secret is named on the Host pod", func(t *testing.T) {
		assert.Equal(t, []corev1.LocalObjectReference{{Name: "clerum"}},
			deployment(t, newHost("h"), testOptions).Spec.Template.Spec.ImagePullSecrets)
	})
	t.Run("no ConfigMap: no envFrom", func(t *testing.T) {
		opts := testOptions
		opts.ConfigMapName = ""
		assert.Nil(t, deployment(t, newHost("h"), opts).Spec.Template.Spec.Containers[0].EnvFrom)
	})
	t.Run("a ConfigMap is loaded through a required envFrom", func(t *testing.T) {
		from := deployment(t, newHost("h"), testOptions).Spec.Template.Spec.Containers[0].EnvFrom
		require.Len(t, from, 1)
		assert.Equal(t, "mcp-host-config", from[0].ConfigMapRef.Name)
		assert.False(t, ptr.Deref(from[0].ConfigMapRef.Optional, false), "no pod starts without its trust anchors")
	})
	t.Run("no storage class: the cluster's default", func(t *testing.T) {
		opts := testOptions
		opts.WorkspaceStorageClass = ""
		assert.Nil(t, BuildWorkspaceClaim(newHost("h"), opts).Spec.StorageClassName)
	})
	t.Run("a storage class and size from the configuration", func(t *testing.T) {
		opts := testOptions
		opts.WorkspaceSize = resource.MustParse("25Gi")
		c := BuildWorkspaceClaim(newHost("h"), opts)
		assert.Equal(t, "do-block-storage-retain", *c.Spec.StorageClassName)
		assert.Equal(t, "h-workspace", c.Name)
		assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, c.Spec.AccessModes)
		q := c.Spec.Resources.Requests[corev1.ResourceStorage]
		assert.Equal(t, "25Gi", q.String())
		assert.Equal(t, corev1.PersistentVolumeFilesystem, *c.Spec.VolumeMode)
	})
}

func TestRuntimeTokenSecret(t *testing.T) {
	expires := time.Date(2026, 7, 1, 12, 30, 45, 999_000_000, time.FixedZone("CEST", 2*3600))
	t.Run("holds the credential under the contract's keys, and its issuance in annotations", func(t *testing.T) {
		s := BuildRuntimeTokenSecret(newHost("h"), testOptions, "bootstrap-value", expires)
		assert.Equal(t, "host-h-mcp-host-runtime-tokens", s.Name)
		assert.Equal(t, "mcp-host", s.Namespace)
		assert.Equal(t, corev1.SecretTypeOpaque, s.Type)
		assert.Equal(t, map[string][]byte{
			KeyBootstrapCredential: []byte("bootstrap-value"),
			KeyExpiresAt:           []byte("2026-07-01T10:30:45Z"),
		}, s.Data)
		assert.Equal(t, "uid-h", s.Annotations[AnnotationIssuedForUID])
		assert.Equal(t, "2026-07-01T10:30:45Z", s.Annotations[AnnotationExpiresAt])
		assert.Regexp(t, `^v1:[0-9a-f]{64}$`, s.Annotations[mark.Annotation])
		assert.Len(t, s.Annotations, 3)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h"}, s.Labels)
		for _, v := range s.Annotations {
			assert.NotContains(t, v, "bootstrap-value", "annotations are cached; the credential is not")
		}
	})
	t.Run("the issuance and its mark verify from the Secret as the informer caches it", func(t *testing.T) {
		s := BuildRuntimeTokenSecret(newHost("h"), testOptions, "v", expires)
		// The informer's own transform: values replaced by their digests.
		d, err := secretdigest.Digest(s)
		require.NoError(t, err)
		cachedCopy := d.(*corev1.Secret)
		require.NotEqual(t, "v", string(cachedCopy.Data[KeyBootstrapCredential]))
		iss := ReadIssuance(cachedCopy, testOptions.RuntimeTokenMark)
		assert.Equal(t, Marked, iss.Trust)
		assert.Equal(t, types.UID("uid-h"), iss.UID)
		assert.True(t, iss.ExpiresAt.Equal(time.Date(2026, 7, 1, 10, 30, 45, 0, time.UTC)), "rounded down: refresh early, not late")
		// Digesting twice (as an informer may) changes nothing.
		again, _ := secretdigest.Digest(cachedCopy)
		assert.Equal(t, Marked, ReadIssuance(again.(*corev1.Secret), testOptions.RuntimeTokenMark).Trust)
	})
	t.Run("a Secret HCC did not mark, or whose mark does not cover what it holds, is not believed", func(t *testing.T) {
		h := newHost("h")
		digest := func(s *corev1.Secret) *corev1.Secret {
			d, _ := secretdigest.Digest(s)
			return d.(*corev1.Secret)
		}
		good := BuildRuntimeTokenSecret(h, testOptions, "v", expires)
		unmarked := good.DeepCopy()
		delete(unmarked.Annotations, mark.Annotation)
		otherKey := testOptions
		otherKey.RuntimeTokenMark = mark.NewKey("another-secret", mark.PurposeRuntimeToken)
		otherPurpose := testOptions
		otherPurpose.RuntimeTokenMark = mark.NewKey(testHMACSecret, mark.PurposeSeedJob)
		edited := func(f func(*corev1.Secret)) *corev1.Secret {
			s := good.DeepCopy()
			f(s)
			return s
		}
		cases := map[string]struct {
			s    *corev1.Secret
			want Trust
		}{
			"forged annotations, no mark": {withAnnotations(BuildEmptyRuntimeTokenSecret(h, testOptions),
				AnnotationIssuedForUID, "uid-h", AnnotationExpiresAt, "2099-01-01T00:00:00Z"), Unmarked},
			"an earlier HCC's Secret":           {unmarked, Unmarked},
			"a credential and nothing else":     {edited(func(s *corev1.Secret) { s.Annotations = nil }), Unmarked},
			"a forged mark":                     {edited(func(s *corev1.Secret) { s.Annotations[mark.Annotation] = "v1:" + strings.Repeat("0", 64) }), Mismatch},
			"another credential under the mark": {edited(func(s *corev1.Secret) { s.Data[KeyBootstrapCredential] = []byte("attacker") }), Mismatch},
			"a later expiry under the mark":     {edited(func(s *corev1.Secret) { s.Annotations[AnnotationExpiresAt] = "2099-01-01T00:00:00Z" }), Mismatch},
			"another expires-at file":           {edited(func(s *corev1.Secret) { s.Data[KeyExpiresAt] = []byte("2099-01-01T00:00:00Z") }), Mismatch},
			"another UID under the mark":        {edited(func(s *corev1.Secret) { s.Annotations[AnnotationIssuedForUID] = "uid-x" }), Mismatch},
			"marked under another secret":       {BuildRuntimeTokenSecret(h, otherKey, "v", expires), Mismatch},
			"marked for another purpose":        {BuildRuntimeTokenSecret(h, otherPurpose, "v", expires), Mismatch},
		}
		for name, tc := range cases {
			assert.Equal(t, tc.want, ReadIssuance(digest(tc.s), testOptions.RuntimeTokenMark).Trust, name)
		}
		var zero mark.Key
		assert.Equal(t, Mismatch, ReadIssuance(digest(good), zero).Trust, "without a key nothing is believed")
	})
	t.Run("a Secret that claims no credential holds none", func(t *testing.T) {
		assert.Equal(t, Issuance{}, ReadIssuance(nil, testOptions.RuntimeTokenMark))
		assert.Equal(t, Issuance{}, ReadIssuance(BuildEmptyRuntimeTokenSecret(newHost("h"), testOptions), testOptions.RuntimeTokenMark))
	})
	t.Run("render's Secret has the name and labels but no data", func(t *testing.T) {
		s := BuildEmptyRuntimeTokenSecret(newHost("h"), testOptions)
		assert.Equal(t, "host-h-mcp-host-runtime-tokens", s.Name)
		assert.Empty(t, s.Data)
		assert.Empty(t, s.StringData)
		assert.Empty(t, s.Annotations)
		assert.Equal(t, "h", s.Labels[names.LabelHost])
	})
}

func TestIdentity(t *testing.T) {
	t.Run("the Role reads the Host's own object and Secrets by name, and writes nothing", func(t *testing.T) {
		r := BuildRole(newHost("h", withSecretRef("h-env")), testOptions)
		require.Len(t, r.Rules, 2)
		assert.Equal(t, []string{"clerum.io"}, r.Rules[0].APIGroups)
		assert.Equal(t, []string{"hosts"}, r.Rules[0].Resources)
		assert.Equal(t, []string{"h"}, r.Rules[0].ResourceNames)
		assert.Equal(t, []string{""}, r.Rules[1].APIGroups)
		assert.Equal(t, []string{"secrets"}, r.Rules[1].Resources)
		assert.Equal(t, []string{"host-h-mcp-host-runtime-tokens", "h-env"}, r.Rules[1].ResourceNames)
		for _, rule := range r.Rules {
			assert.Equal(t, []string{"get", "list", "watch"}, rule.Verbs)
		}
	})
	t.Run("without a secretRef only the runtime-token Secret", func(t *testing.T) {
		r := BuildRole(newHost("h"), testOptions)
		assert.Equal(t, []string{"host-h-mcp-host-runtime-tokens"}, r.Rules[1].ResourceNames)
	})
	t.Run("a secretRef naming a Secret HCC reserves is refused and not granted", func(t *testing.T) {
		for _, ref := range []string{"host-other-mcp-host-runtime-tokens", "clerum"} {
			h := newHost("h", withSecretRef(ref))
			assert.ErrorIs(t, ValidateSecretRef(h, testOptions), ErrReservedSecretRef, ref)
			assert.Equal(t, []string{"host-h-mcp-host-runtime-tokens"}, BuildRole(h, testOptions).Rules[1].ResourceNames, ref)
		}
		assert.NoError(t, ValidateSecretRef(newHost("h", withSecretRef("host-h-mcp-host-runtime-tokens")), testOptions))
		assert.NoError(t, ValidateSecretRef(newHost("h", withSecretRef("h-env")), testOptions))
		opts := testOptions
		opts.ImagePullSecret = ""
		assert.NoError(t, ValidateSecretRef(newHost("h"), opts))
	})
	t.Run("the binding gives the Role to the Host's ServiceAccount", func(t *testing.T) {
		b := BuildRoleBinding(newHost("h"), testOptions)
		assert.Equal(t, "host-h", b.Name)
		require.Len(t, b.Subjects, 1)
		assert.Equal(t, "ServiceAccount", b.Subjects[0].Kind)
		assert.Equal(t, "host-h", b.Subjects[0].Name)
		assert.Equal(t, "mcp-host", b.Subjects[0].Namespace)
		assert.Equal(t, "Role", b.RoleRef.Kind)
		assert.Equal(t, "host-h", b.RoleRef.Name)
	})
	t.Run("the ServiceAccount mounts no token unless a pod asks", func(t *testing.T) {
		sa := BuildServiceAccount(newHost("h"), testOptions)
		assert.Equal(t, "host-h", sa.Name)
		assert.False(t, *sa.AutomountServiceAccountToken)
	})
}

func TestChannelReader(t *testing.T) {
	h := newHost("h", withDesktop)
	t.Run("the Deployment lives in the channels namespace, its pods do not carry clerum.io/host", func(t *testing.T) {
		d := BuildChannelReaderDeployment(h, testOptions)
		assert.Equal(t, "channels", d.Namespace)
		assert.Equal(t, "channel-reader-h", d.Name)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h"}, d.Labels)
		assert.NotContains(t, d.Spec.Template.Labels, names.LabelHost, "among pods only Host pods carry clerum.io/host")
		assert.NotContains(t, d.Spec.Template.Labels, names.LabelContext)
		assert.Equal(t, map[string]string{
			names.LabelManagedBy: names.ManagedByValue, LabelChannelReader: "h", names.LabelApp: AppChannelReader,
		}, d.Spec.Template.Labels)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, LabelChannelReader: "h"}, d.Spec.Selector.MatchLabels)
		assert.Equal(t, appsv1.RecreateDeploymentStrategyType, d.Spec.Strategy.Type)
		assert.Empty(t, d.OwnerReferences)
	})
	t.Run("the container: image, pull policy, handoff port, environment, no token", func(t *testing.T) {
		opts := testOptions
		opts.ChannelReaderPullPolicy = corev1.PullIfNotPresent
		opts.ChannelReaderHandoffPort = 9099
		pod := BuildChannelReaderDeployment(h, opts).Spec.Template.Spec
		require.Len(t, pod.Containers, 1)
		c := pod.Containers[0]
		assert.Equal(t, ContainerChannelReader, c.Name)
		assert.Equal(t, opts.ChannelReaderImage, c.Image)
		assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
		assert.Equal(t, []corev1.ContainerPort{{Name: PortHandoff, ContainerPort: 9099, Protocol: corev1.ProtocolTCP}}, c.Ports)
		assert.Equal(t, map[string]string{
			EnvReaderHostName:      "h",
			EnvReaderHostNamespace: "mcp-host",
			EnvReaderHostURL:       "http://h.mcp-host.svc.cluster.local:8080",
			EnvReaderHandoffPort:   "9099",
		}, envMap(c))
		assert.False(t, *pod.AutomountServiceAccountToken)
		assert.Empty(t, pod.ServiceAccountName)
		assert.Nil(t, pod.ImagePullSecrets, "the Host's pull secret lives in the host namespace")
	})
	t.Run("the Service selects the reader's pods on the handoff port", func(t *testing.T) {
		s := BuildChannelReaderService(h, testOptions)
		assert.Equal(t, "channels", s.Namespace)
		assert.Equal(t, "channel-reader-h", s.Name)
		assert.Equal(t, BuildChannelReaderDeployment(h, testOptions).Spec.Selector.MatchLabels, s.Spec.Selector)
		require.Len(t, s.Spec.Ports, 1)
		assert.Equal(t, int32(8099), s.Spec.Ports[0].Port)
	})
	t.Run("the egress policy allows DNS and this Host's mcp-host port, nothing else", func(t *testing.T) {
		p := BuildChannelReaderPolicy(h, testOptions)
		assert.Equal(t, "channel-reader-h-egress", p.Name)
		assert.Equal(t, "channels", p.Namespace)
		assert.Equal(t, names.PolicyTypeHost, p.Labels[names.LabelPolicyType])
		assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, p.Spec.PolicyTypes)
		assert.Equal(t, BuildChannelReaderDeployment(h, testOptions).Spec.Selector.MatchLabels, p.Spec.PodSelector.MatchLabels)
		require.Len(t, p.Spec.Egress, 2)
		dns := p.Spec.Egress[0]
		assert.Equal(t, map[string]string{names.NamespaceNameKey: "kube-system"}, dns.To[0].NamespaceSelector.MatchLabels)
		assert.Equal(t, map[string]string{"k8s-app": "kube-dns"}, dns.To[0].PodSelector.MatchLabels)
		assert.Len(t, dns.Ports, 2)
		toHost := p.Spec.Egress[1]
		require.Len(t, toHost.To, 1)
		assert.Equal(t, map[string]string{names.NamespaceNameKey: "mcp-host"}, toHost.To[0].NamespaceSelector.MatchLabels)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h"}, toHost.To[0].PodSelector.MatchLabels)
		require.Len(t, toHost.Ports, 1)
		assert.Equal(t, int32(8080), toHost.Ports[0].Port.IntVal)
		for _, rule := range p.Spec.Egress {
			assert.NotEmpty(t, rule.To, "a rule without peers would allow every destination")
			assert.NotEmpty(t, rule.Ports, "a rule without ports would allow every port")
		}
	})
	t.Run("NodeLocal DNSCache is a DNS destination when configured", func(t *testing.T) {
		opts := testOptions
		opts.NodeLocalDNSCIDR = netip.MustParsePrefix("169.254.20.10/32")
		p := BuildChannelReaderPolicy(h, opts)
		require.Len(t, p.Spec.Egress, 3)
		assert.Equal(t, "169.254.20.10/32", p.Spec.Egress[1].To[0].IPBlock.CIDR)
		assert.Equal(t, int32(53), p.Spec.Egress[1].Ports[0].Port.IntVal)
	})
}

func TestLongHostNames(t *testing.T) {
	long := strings.Repeat("h", 63) // the longest Host name the CRD admits
	h := newHost(long, withDesktop, withSecretRef("env"))
	d := deployment(t, h, testOptions)
	reader := BuildChannelReaderDeployment(h, testOptions)
	objects := []metav1.Object{
		d, BuildService(h, testOptions), BuildWorkspaceClaim(h, testOptions),
		BuildRuntimeTokenSecret(h, testOptions, "c", time.Now()), BuildServiceAccount(h, testOptions),
		BuildRole(h, testOptions), BuildRoleBinding(h, testOptions), BuildDesktopPolicy(h, testOptions),
		reader, BuildChannelReaderService(h, testOptions), BuildChannelReaderPolicy(h, testOptions),
	}
	for _, o := range objects {
		assert.Empty(t, validation.IsDNS1123Subdomain(o.GetName()), o.GetName())
		assertLabelValues(t, o.GetName(), o.GetLabels())
		assert.Equal(t, names.Label(long), o.GetLabels()[names.LabelHost], o.GetName())
	}
	for _, name := range []string{BuildService(h, testOptions).Name, BuildChannelReaderService(h, testOptions).Name, reader.Name} {
		assert.Empty(t, validation.IsDNS1123Label(name), "Services (and the reader's Deployment, which shares its name) fit a label: %s", name)
	}
	assert.Equal(t, names.ChannelReader(long), reader.Name)
	assert.Len(t, reader.Name, names.MaxLabel, "channel-reader-<63 characters> is shortened to a label")
	assert.Regexp(t, `-[0-9a-f]{10}$`, reader.Name)
	assertLabelValues(t, "host pod", d.Spec.Template.Labels)
	assertLabelValues(t, "reader pod", reader.Spec.Template.Labels)
	assert.Equal(t, names.HostWorkspace(long), findVolume(t, d.Spec.Template.Spec, volumeWorkspace).PersistentVolumeClaim.ClaimName)
	assert.Equal(t, names.HostIdentity(long), d.Spec.Template.Spec.ServiceAccountName)
}

func TestOptionsFrom(t *testing.T) {
	env := map[string]string{
		"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET":   strings.Repeat("s", 48),
		"CONTEXT_MAPPER_CONTROL_PLANE_NAMESPACE": "cp",
		"CONTEXT_MAPPER_CLUSTER_DOMAIN":          "example.internal",
		"CONTEXT_MAPPER_PORT":                    "9000",
		"CONTEXT_MAPPER_HOST_IMAGE_PULL_SECRET":  "",
	}
	cfg, err := config.LoadFrom(config.Controller, func(key string) (string, bool) {
		v, ok := env[key]
		return v, ok
	})
	require.NoError(t, err)
	opts := OptionsFrom(cfg)
	assert.Equal(t, "http://host-context-controller-api-gateway.cp.svc.example.internal:9000", opts.HCCAPIURL)
	assert.Equal(t, cfg.Namespaces.Host, opts.HostNamespace)
	assert.Equal(t, cfg.Namespaces.Channels, opts.ChannelsNamespace)
	assert.Equal(t, cfg.Namespaces.RPCProxy, opts.RPCProxyNamespace)
	assert.Equal(t, cfg.Host.Image, opts.Image)
	assert.Equal(t, cfg.Host.Port, opts.Port)
	assert.Empty(t, opts.ImagePullSecret, "an empty value means no pull secret")
	assert.Equal(t, cfg.Desktop.Port, opts.DesktopPort)
	assert.Equal(t, cfg.ChannelReader.HandoffPort, opts.ChannelReaderHandoffPort)
	assert.Equal(t, cfg.ControlAPI.GatewayURL, opts.GatewayURL)
	assert.Equal(t, 0, opts.WorkspaceSize.Cmp(cfg.Host.WorkspaceSize))
}

func envMap(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

func findMount(t *testing.T, c corev1.Container, path string) corev1.VolumeMount {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return m
		}
	}
	t.Fatalf("container %s mounts nothing at %s", c.Name, path)
	return corev1.VolumeMount{}
}

func findVolume(t *testing.T, pod corev1.PodSpec, name string) corev1.Volume {
	t.Helper()
	for _, v := range pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("the pod has no volume %s", name)
	return corev1.Volume{}
}

func assertLabelValues(t *testing.T, what string, l map[string]string) {
	t.Helper()
	for k, v := range l {
		assert.Empty(t, validation.IsValidLabelValue(v), "%s: label %s=%s", what, k, v)
	}
}

func withAnnotations(s *corev1.Secret, kv ...string) *corev1.Secret {
	s = s.DeepCopy()
	s.Annotations = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Annotations[kv[i]] = kv[i+1]
	}
	return s
}
