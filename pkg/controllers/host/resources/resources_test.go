package resources_test

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
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/secretdigest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func deployment(t *testing.T, h *clerumv1alpha1.Host, opts resources.Options) *appsv1.Deployment {
	t.Helper()
	d, err := resources.BuildDeployment(h, "ctx-1", opts)
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
	plain := resourcestest.NewHost("alice", resourcestest.WithSecretRef("alice-env"))
	desktop := resourcestest.NewHost("bob", resourcestest.WithDesktop)
	d, err := resources.BuildDeployment(plain, "context1", resourcestest.Options)
	require.NoError(t, err)
	golden(t, "host.deployment.yaml", d)
	d, err = resources.BuildDeployment(desktop, "context1", resourcestest.Options)
	require.NoError(t, err)
	golden(t, "host-desktop.deployment.yaml", d)
	golden(t, "host-desktop.service.yaml", resources.BuildService(desktop, resourcestest.Options))
	golden(t, "host-desktop.networkpolicy.yaml", resources.BuildDesktopPolicy(desktop, resourcestest.Options))
	golden(t, "host.role.yaml", resources.BuildRole(plain, resourcestest.Options))
	golden(t, "channel-reader.deployment.yaml", resources.BuildChannelReaderDeployment(plain, resourcestest.Options))
	golden(t, "channel-reader.service.yaml", resources.BuildChannelReaderService(plain, resourcestest.Options))
	golden(t, "channel-reader.networkpolicy.yaml", resources.BuildChannelReaderPolicy(plain, resourcestest.Options))
}

func TestBuildDeployment(t *testing.T) {
	t.Run("mcp-host is the first container and runs the configured image", func(t *testing.T) {
		for _, h := range []*clerumv1alpha1.Host{resourcestest.NewHost("h"), resourcestest.NewHost("h", resourcestest.WithDesktop)} {
			c := deployment(t, h, resourcestest.Options).Spec.Template.Spec.Containers
			assert.Equal(t, resources.ContainerMcpHost, c[0].Name)
			assert.Equal(t, resourcestest.Options.Image, c[0].Image)
			assert.Equal(t, resourcestest.Options.ImagePullPolicy, c[0].ImagePullPolicy)
			assert.Equal(t, resourcestest.Options.Resources, c[0].Resources)
			assert.Equal(t, []corev1.ContainerPort{{Name: resources.PortHTTP, ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}, c[0].Ports)
		}
	})
	t.Run("the image stamped on the pods is read back from the Deployment", func(t *testing.T) {
		assert.Equal(t, resourcestest.Options.Image, resources.DeployedImage(deployment(t, resourcestest.NewHost("h", resourcestest.WithDesktop), resourcestest.Options)))
		assert.Empty(t, resources.DeployedImage(nil))
		assert.Empty(t, resources.DeployedImage(&appsv1.Deployment{}))
	})
	t.Run("the contextId is on the pods but not in the immutable selector", func(t *testing.T) {
		d, err := resources.BuildDeployment(resourcestest.NewHost("h"), "tenant-a", resourcestest.Options)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{
			names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h", names.LabelContext: "tenant-a",
		}, d.Spec.Template.Labels)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h"}, d.Spec.Selector.MatchLabels)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h"}, d.Labels)
		other, err := resources.BuildDeployment(resourcestest.NewHost("h"), "tenant-b", resourcestest.Options)
		require.NoError(t, err)
		assert.Equal(t, d.Spec.Selector, other.Spec.Selector, "a contextId change must not touch the selector")
	})
	t.Run("a missing or malformed contextId builds nothing", func(t *testing.T) {
		for _, id := range []string{"", "Not A Label", strings.Repeat("x", 64)} {
			_, err := resources.BuildDeployment(resourcestest.NewHost("h"), id, resourcestest.Options)
			assert.ErrorIs(t, err, resources.ErrContextID, "%q", id)
		}
	})
	t.Run("Recreate, one replica, and the API server's defaults", func(t *testing.T) {
		d := deployment(t, resourcestest.NewHost("h"), resourcestest.Options)
		assert.Equal(t, appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}, d.Spec.Strategy)
		assert.Equal(t, int32(1), *d.Spec.Replicas)
		assert.Equal(t, int32(10), *d.Spec.RevisionHistoryLimit)
		assert.Equal(t, int32(600), *d.Spec.ProgressDeadlineSeconds)
		assert.Empty(t, d.OwnerReferences, "the kit sets owner references")
	})
	t.Run("the mcp-host environment", func(t *testing.T) {
		env := envMap(deployment(t, resourcestest.NewHost("h"), resourcestest.Options).Spec.Template.Spec.Containers[0])
		assert.Equal(t, map[string]string{
			resources.EnvHostName:         "h",
			resources.EnvHostNamespace:    "mcp-host",
			resources.EnvHostPort:         "8080",
			resources.EnvWorkspacePath:    "/workspace",
			resources.EnvGatewayURL:       resourcestest.Options.GatewayURL,
			resources.EnvHCCAPIURL:        resourcestest.Options.HCCAPIURL,
			resources.EnvRuntimeTokensDir: resources.RuntimeTokensDir,
		}, env)
	})
	t.Run("no Secret value and no Secret reference reaches the environment", func(t *testing.T) {
		d := deployment(t, resourcestest.NewHost("h", resourcestest.WithDesktop, resourcestest.WithSecretRef("creds")), resourcestest.Options)
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
		pod := deployment(t, resourcestest.NewHost("h"), resourcestest.Options).Spec.Template.Spec
		mount := findMount(t, pod.Containers[0], resources.RuntimeTokensDir)
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
		opts := resourcestest.Options
		opts.WorkspacePath = "/data/ws"
		pod := deployment(t, resourcestest.NewHost("h"), opts).Spec.Template.Spec
		v := findVolume(t, pod, findMount(t, pod.Containers[0], "/data/ws").Name)
		require.NotNil(t, v.PersistentVolumeClaim)
		assert.Equal(t, "h-workspace", v.PersistentVolumeClaim.ClaimName)
		assert.Equal(t, "/data/ws", envMap(pod.Containers[0])[resources.EnvWorkspacePath])
	})
	t.Run("the pod runs as the Host's own account, its token in mcp-host alone", func(t *testing.T) {
		pod := deployment(t, resourcestest.NewHost("h", resourcestest.WithDesktop), resourcestest.Options).Spec.Template.Spec
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
		assert.Contains(t, mounts(pod.Containers[0]), resources.ServiceAccountDir)
		assert.NotContains(t, mounts(pod.Containers[1]), resources.ServiceAccountDir, "the desktop gets no API token")
		assert.NotContains(t, mounts(pod.Containers[1]), resources.RuntimeTokensDir, "nor the credential")
	})
	t.Run("the pod is hardened", func(t *testing.T) {
		for _, d := range []*appsv1.Deployment{
			deployment(t, resourcestest.NewHost("h", resourcestest.WithDesktop), resourcestest.Options),
			resources.BuildChannelReaderDeployment(resourcestest.NewHost("h"), resourcestest.Options),
		} {
			pod := d.Spec.Template.Spec
			assert.True(t, *pod.SecurityContext.RunAsNonRoot)
			assert.Equal(t, resources.PodUser, *pod.SecurityContext.RunAsUser)
			assert.Equal(t, resources.PodGroup, *pod.SecurityContext.RunAsGroup)
			assert.Equal(t, resources.PodGroup, *pod.SecurityContext.FSGroup)
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
			assert.False(t, *pod.EnableServiceLinks)
			for _, c := range append(pod.InitContainers, pod.Containers...) {
				assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation, c.Name)
				assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, c.Name)
				assert.True(t, *c.SecurityContext.RunAsNonRoot, c.Name)
				assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, c.Name)
				findMount(t, c, resources.TmpDir) // every container has somewhere to write
			}
		}
	})
}

func TestDesktop(t *testing.T) {
	t.Run("off: one container, no desktop port, no policy", func(t *testing.T) {
		for _, h := range []*clerumv1alpha1.Host{
			resourcestest.NewHost("h"),
			resourcestest.NewHost("h", func(h *clerumv1alpha1.Host) { h.Spec.Desktop = &clerumv1alpha1.DesktopSpec{Enabled: false} }),
		} {
			pod := deployment(t, h, resourcestest.Options).Spec.Template.Spec
			require.Len(t, pod.Containers, 1)
			assert.NotContains(t, envMap(pod.Containers[0]), resources.EnvDesktopURL)
			assert.Len(t, resources.BuildService(h, resourcestest.Options).Spec.Ports, 1)
			assert.Nil(t, resources.BuildDesktopPolicy(h, resourcestest.Options))
		}
	})
	t.Run("on: the sidecar second, on the desktop port with the desktop resources", func(t *testing.T) {
		h := resourcestest.NewHost("h", resourcestest.WithDesktop)
		pod := deployment(t, h, resourcestest.Options).Spec.Template.Spec
		require.Len(t, pod.Containers, 2)
		desktop := pod.Containers[1]
		assert.Equal(t, resources.ContainerDesktop, desktop.Name)
		assert.Equal(t, resourcestest.Options.DesktopImage, desktop.Image)
		assert.Equal(t, resourcestest.Options.DesktopResources, desktop.Resources)
		assert.Equal(t, []corev1.ContainerPort{{Name: resources.PortDesktop, ContainerPort: 3000, Protocol: corev1.ProtocolTCP}}, desktop.Ports)
		assert.Equal(t, map[string]string{resources.EnvDesktopPort: "3000", resources.EnvDesktopWorkspacePath: "/workspace"}, envMap(desktop))
		assert.Equal(t, "http://127.0.0.1:3000", envMap(pod.Containers[0])[resources.EnvDesktopURL])
		for _, m := range desktop.VolumeMounts {
			assert.NotEqual(t, resources.RuntimeTokensDir, m.MountPath, "the desktop never sees the credential")
		}
		ports := resources.BuildService(h, resourcestest.Options).Spec.Ports
		require.Len(t, ports, 2)
		assert.Equal(t, int32(3000), ports[1].Port)
	})
	t.Run("the desktop policy admits rpc-proxy to the desktop port of this Host only", func(t *testing.T) {
		opts := resourcestest.Options
		opts.DesktopPort = 5900
		p := resources.BuildDesktopPolicy(resourcestest.NewHost("h", resourcestest.WithDesktop), opts)
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
		opts := resourcestest.Options
		opts.ImagePullSecret = ""
		assert.Nil(t, deployment(t, resourcestest.NewHost("h"), opts).Spec.Template.Spec.ImagePullSecrets)
	})
	t.Run("a pull secret is named on the Host pod", func(t *testing.T) {
		assert.Equal(t, []corev1.LocalObjectReference{{Name: "clerum"}},
			deployment(t, resourcestest.NewHost("h"), resourcestest.Options).Spec.Template.Spec.ImagePullSecrets)
	})
	t.Run("no ConfigMap: no envFrom", func(t *testing.T) {
		opts := resourcestest.Options
		opts.ConfigMapName = ""
		assert.Nil(t, deployment(t, resourcestest.NewHost("h"), opts).Spec.Template.Spec.Containers[0].EnvFrom)
	})
	t.Run("a ConfigMap is loaded through a required envFrom", func(t *testing.T) {
		from := deployment(t, resourcestest.NewHost("h"), resourcestest.Options).Spec.Template.Spec.Containers[0].EnvFrom
		require.Len(t, from, 1)
		assert.Equal(t, "mcp-host-config", from[0].ConfigMapRef.Name)
		assert.False(t, ptr.Deref(from[0].ConfigMapRef.Optional, false), "no pod starts without its trust anchors")
	})
	t.Run("no storage class: the cluster's default", func(t *testing.T) {
		opts := resourcestest.Options
		opts.WorkspaceStorageClass = ""
		assert.Nil(t, resources.BuildWorkspaceClaim(resourcestest.NewHost("h"), opts).Spec.StorageClassName)
	})
	t.Run("a storage class and size from the configuration", func(t *testing.T) {
		opts := resourcestest.Options
		opts.WorkspaceSize = resource.MustParse("25Gi")
		c := resources.BuildWorkspaceClaim(resourcestest.NewHost("h"), opts)
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
		s := resources.BuildRuntimeTokenSecret(resourcestest.NewHost("h"), resourcestest.Options, "bootstrap-value", expires)
		assert.Equal(t, "host-h-mcp-host-runtime-tokens", s.Name)
		assert.Equal(t, "mcp-host", s.Namespace)
		assert.Equal(t, corev1.SecretTypeOpaque, s.Type)
		assert.Equal(t, map[string][]byte{
			resources.KeyBootstrapCredential: []byte("bootstrap-value"),
			resources.KeyExpiresAt:           []byte("2026-07-01T10:30:45Z"),
		}, s.Data)
		assert.Equal(t, "uid-h", s.Annotations[resources.AnnotationIssuedForUID])
		assert.Equal(t, "2026-07-01T10:30:45Z", s.Annotations[resources.AnnotationExpiresAt])
		assert.Regexp(t, `^v1:[0-9a-f]{64}$`, s.Annotations[mark.Annotation])
		assert.Len(t, s.Annotations, 3)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h"}, s.Labels)
		for _, v := range s.Annotations {
			assert.NotContains(t, v, "bootstrap-value", "annotations are cached; the credential is not")
		}
	})
	t.Run("the issuance and its mark verify from the Secret as the informer caches it", func(t *testing.T) {
		s := resources.BuildRuntimeTokenSecret(resourcestest.NewHost("h"), resourcestest.Options, "v", expires)
		// The informer's own transform: values replaced by their digests.
		d, err := secretdigest.Digest(s)
		require.NoError(t, err)
		cachedCopy := d.(*corev1.Secret)
		require.NotEqual(t, "v", string(cachedCopy.Data[resources.KeyBootstrapCredential]))
		iss := resources.ReadIssuance(cachedCopy, resourcestest.Options.RuntimeTokenMark)
		assert.Equal(t, resources.Marked, iss.Trust)
		assert.Equal(t, types.UID("uid-h"), iss.UID)
		assert.True(t, iss.ExpiresAt.Equal(time.Date(2026, 7, 1, 10, 30, 45, 0, time.UTC)), "rounded down: refresh early, not late")
		// Digesting twice (as an informer may) changes nothing.
		again, _ := secretdigest.Digest(cachedCopy)
		assert.Equal(t, resources.Marked, resources.ReadIssuance(again.(*corev1.Secret), resourcestest.Options.RuntimeTokenMark).Trust)
	})
	t.Run("a Secret HCC did not mark, or whose mark does not cover what it holds, is not believed", func(t *testing.T) {
		h := resourcestest.NewHost("h")
		digest := func(s *corev1.Secret) *corev1.Secret {
			d, _ := secretdigest.Digest(s)
			return d.(*corev1.Secret)
		}
		good := resources.BuildRuntimeTokenSecret(h, resourcestest.Options, "v", expires)
		unmarked := good.DeepCopy()
		delete(unmarked.Annotations, mark.Annotation)
		otherKey := resourcestest.Options
		otherKey.RuntimeTokenMark = mark.NewKey("another-secret", mark.PurposeRuntimeToken)
		otherPurpose := resourcestest.Options
		otherPurpose.RuntimeTokenMark = mark.NewKey(resourcestest.HMACSecret, mark.PurposeSeedJob)
		edited := func(f func(*corev1.Secret)) *corev1.Secret {
			s := good.DeepCopy()
			f(s)
			return s
		}
		cases := map[string]struct {
			s    *corev1.Secret
			want resources.Trust
		}{
			"forged annotations, no mark": {withAnnotations(resources.BuildEmptyRuntimeTokenSecret(h, resourcestest.Options),
				resources.AnnotationIssuedForUID, "uid-h", resources.AnnotationExpiresAt, "2099-01-01T00:00:00Z"), resources.Unmarked},
			"an earlier HCC's Secret":           {unmarked, resources.Unmarked},
			"a credential and nothing else":     {edited(func(s *corev1.Secret) { s.Annotations = nil }), resources.Unmarked},
			"a forged mark":                     {edited(func(s *corev1.Secret) { s.Annotations[mark.Annotation] = "v1:" + strings.Repeat("0", 64) }), resources.Mismatch},
			"another credential under the mark": {edited(func(s *corev1.Secret) { s.Data[resources.KeyBootstrapCredential] = []byte("attacker") }), resources.Mismatch},
			"a later expiry under the mark":     {edited(func(s *corev1.Secret) { s.Annotations[resources.AnnotationExpiresAt] = "2099-01-01T00:00:00Z" }), resources.Mismatch},
			"another expires-at file":           {edited(func(s *corev1.Secret) { s.Data[resources.KeyExpiresAt] = []byte("2099-01-01T00:00:00Z") }), resources.Mismatch},
			"another UID under the mark":        {edited(func(s *corev1.Secret) { s.Annotations[resources.AnnotationIssuedForUID] = "uid-x" }), resources.Mismatch},
			"marked under another secret":       {resources.BuildRuntimeTokenSecret(h, otherKey, "v", expires), resources.Mismatch},
			"marked for another purpose":        {resources.BuildRuntimeTokenSecret(h, otherPurpose, "v", expires), resources.Mismatch},
		}
		for name, tc := range cases {
			assert.Equal(t, tc.want, resources.ReadIssuance(digest(tc.s), resourcestest.Options.RuntimeTokenMark).Trust, name)
		}
		var zero mark.Key
		assert.Equal(t, resources.Mismatch, resources.ReadIssuance(digest(good), zero).Trust, "without a key nothing is believed")
	})
	t.Run("a Secret that claims no credential holds none", func(t *testing.T) {
		assert.Equal(t, resources.Issuance{}, resources.ReadIssuance(nil, resourcestest.Options.RuntimeTokenMark))
		assert.Equal(t, resources.Issuance{}, resources.ReadIssuance(resources.BuildEmptyRuntimeTokenSecret(resourcestest.NewHost("h"), resourcestest.Options), resourcestest.Options.RuntimeTokenMark))
	})
	t.Run("render's Secret has the name and labels but no data", func(t *testing.T) {
		s := resources.BuildEmptyRuntimeTokenSecret(resourcestest.NewHost("h"), resourcestest.Options)
		assert.Equal(t, "host-h-mcp-host-runtime-tokens", s.Name)
		assert.Empty(t, s.Data)
		assert.Empty(t, s.StringData)
		assert.Empty(t, s.Annotations)
		assert.Equal(t, "h", s.Labels[names.LabelHost])
	})
}

func TestIdentity(t *testing.T) {
	t.Run("the Role reads the Host's own object and Secrets by name, and writes nothing", func(t *testing.T) {
		r := resources.BuildRole(resourcestest.NewHost("h", resourcestest.WithSecretRef("h-env")), resourcestest.Options)
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
		r := resources.BuildRole(resourcestest.NewHost("h"), resourcestest.Options)
		assert.Equal(t, []string{"host-h-mcp-host-runtime-tokens"}, r.Rules[1].ResourceNames)
	})
	t.Run("a secretRef naming a Secret HCC reserves is refused and not granted", func(t *testing.T) {
		for _, ref := range []string{"host-other-mcp-host-runtime-tokens", "clerum"} {
			h := resourcestest.NewHost("h", resourcestest.WithSecretRef(ref))
			assert.ErrorIs(t, resources.ValidateSecretRef(h, resourcestest.Options), resources.ErrReservedSecretRef, ref)
			assert.Equal(t, []string{"host-h-mcp-host-runtime-tokens"}, resources.BuildRole(h, resourcestest.Options).Rules[1].ResourceNames, ref)
		}
		assert.NoError(t, resources.ValidateSecretRef(resourcestest.NewHost("h", resourcestest.WithSecretRef("host-h-mcp-host-runtime-tokens")), resourcestest.Options))
		assert.NoError(t, resources.ValidateSecretRef(resourcestest.NewHost("h", resourcestest.WithSecretRef("h-env")), resourcestest.Options))
		opts := resourcestest.Options
		opts.ImagePullSecret = ""
		assert.NoError(t, resources.ValidateSecretRef(resourcestest.NewHost("h"), opts))
	})
	t.Run("the binding gives the Role to the Host's ServiceAccount", func(t *testing.T) {
		b := resources.BuildRoleBinding(resourcestest.NewHost("h"), resourcestest.Options)
		assert.Equal(t, "host-h", b.Name)
		require.Len(t, b.Subjects, 1)
		assert.Equal(t, "ServiceAccount", b.Subjects[0].Kind)
		assert.Equal(t, "host-h", b.Subjects[0].Name)
		assert.Equal(t, "mcp-host", b.Subjects[0].Namespace)
		assert.Equal(t, "Role", b.RoleRef.Kind)
		assert.Equal(t, "host-h", b.RoleRef.Name)
	})
	t.Run("the ServiceAccount mounts no token unless a pod asks", func(t *testing.T) {
		sa := resources.BuildServiceAccount(resourcestest.NewHost("h"), resourcestest.Options)
		assert.Equal(t, "host-h", sa.Name)
		assert.False(t, *sa.AutomountServiceAccountToken)
	})
}

func TestChannelReader(t *testing.T) {
	h := resourcestest.NewHost("h", resourcestest.WithDesktop)
	t.Run("the Deployment lives in the channels namespace, its pods do not carry clerum.io/host", func(t *testing.T) {
		d := resources.BuildChannelReaderDeployment(h, resourcestest.Options)
		assert.Equal(t, "channels", d.Namespace)
		assert.Equal(t, "channel-reader-h", d.Name)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelHost: "h"}, d.Labels)
		assert.NotContains(t, d.Spec.Template.Labels, names.LabelHost, "among pods only Host pods carry clerum.io/host")
		assert.NotContains(t, d.Spec.Template.Labels, names.LabelContext)
		assert.Equal(t, map[string]string{
			names.LabelManagedBy: names.ManagedByValue, resources.LabelChannelReader: "h", names.LabelApp: resources.AppChannelReader,
		}, d.Spec.Template.Labels)
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, resources.LabelChannelReader: "h"}, d.Spec.Selector.MatchLabels)
		assert.Equal(t, appsv1.RecreateDeploymentStrategyType, d.Spec.Strategy.Type)
		assert.Empty(t, d.OwnerReferences)
	})
	t.Run("the container: image, pull policy, handoff port, environment, no token", func(t *testing.T) {
		opts := resourcestest.Options
		opts.ChannelReaderPullPolicy = corev1.PullIfNotPresent
		opts.ChannelReaderHandoffPort = 9099
		pod := resources.BuildChannelReaderDeployment(h, opts).Spec.Template.Spec
		require.Len(t, pod.Containers, 1)
		c := pod.Containers[0]
		assert.Equal(t, resources.ContainerChannelReader, c.Name)
		assert.Equal(t, opts.ChannelReaderImage, c.Image)
		assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
		assert.Equal(t, []corev1.ContainerPort{{Name: resources.PortHandoff, ContainerPort: 9099, Protocol: corev1.ProtocolTCP}}, c.Ports)
		assert.Equal(t, map[string]string{
			resources.EnvReaderHostName:      "h",
			resources.EnvReaderHostNamespace: "mcp-host",
			resources.EnvReaderHostURL:       "http://h.mcp-host.svc.cluster.local:8080",
			resources.EnvReaderHandoffPort:   "9099",
		}, envMap(c))
		assert.False(t, *pod.AutomountServiceAccountToken)
		assert.Empty(t, pod.ServiceAccountName)
		assert.Nil(t, pod.ImagePullSecrets, "the Host's pull secret lives in the host namespace")
	})
	t.Run("the Service selects the reader's pods on the handoff port", func(t *testing.T) {
		s := resources.BuildChannelReaderService(h, resourcestest.Options)
		assert.Equal(t, "channels", s.Namespace)
		assert.Equal(t, "channel-reader-h", s.Name)
		assert.Equal(t, resources.BuildChannelReaderDeployment(h, resourcestest.Options).Spec.Selector.MatchLabels, s.Spec.Selector)
		require.Len(t, s.Spec.Ports, 1)
		assert.Equal(t, int32(8099), s.Spec.Ports[0].Port)
	})
	t.Run("the egress policy allows DNS and this Host's mcp-host port, nothing else", func(t *testing.T) {
		p := resources.BuildChannelReaderPolicy(h, resourcestest.Options)
		assert.Equal(t, "channel-reader-h-egress", p.Name)
		assert.Equal(t, "channels", p.Namespace)
		assert.Equal(t, names.PolicyTypeHost, p.Labels[names.LabelPolicyType])
		assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, p.Spec.PolicyTypes)
		assert.Equal(t, resources.BuildChannelReaderDeployment(h, resourcestest.Options).Spec.Selector.MatchLabels, p.Spec.PodSelector.MatchLabels)
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
		opts := resourcestest.Options
		opts.NodeLocalDNSCIDR = netip.MustParsePrefix("169.254.20.10/32")
		p := resources.BuildChannelReaderPolicy(h, opts)
		require.Len(t, p.Spec.Egress, 3)
		assert.Equal(t, "169.254.20.10/32", p.Spec.Egress[1].To[0].IPBlock.CIDR)
		assert.Equal(t, int32(53), p.Spec.Egress[1].Ports[0].Port.IntVal)
	})
}

func TestLongHostNames(t *testing.T) {
	long := strings.Repeat("h", 63) // the longest Host name the CRD admits
	h := resourcestest.NewHost(long, resourcestest.WithDesktop, resourcestest.WithSecretRef("env"))
	d := deployment(t, h, resourcestest.Options)
	reader := resources.BuildChannelReaderDeployment(h, resourcestest.Options)
	objects := []metav1.Object{
		d, resources.BuildService(h, resourcestest.Options), resources.BuildWorkspaceClaim(h, resourcestest.Options),
		resources.BuildRuntimeTokenSecret(h, resourcestest.Options, "c", time.Now()), resources.BuildServiceAccount(h, resourcestest.Options),
		resources.BuildRole(h, resourcestest.Options), resources.BuildRoleBinding(h, resourcestest.Options), resources.BuildDesktopPolicy(h, resourcestest.Options),
		reader, resources.BuildChannelReaderService(h, resourcestest.Options), resources.BuildChannelReaderPolicy(h, resourcestest.Options),
	}
	for _, o := range objects {
		assert.Empty(t, validation.IsDNS1123Subdomain(o.GetName()), o.GetName())
		assertLabelValues(t, o.GetName(), o.GetLabels())
		assert.Equal(t, names.Label(long), o.GetLabels()[names.LabelHost], o.GetName())
	}
	for _, name := range []string{resources.BuildService(h, resourcestest.Options).Name, resources.BuildChannelReaderService(h, resourcestest.Options).Name, reader.Name} {
		assert.Empty(t, validation.IsDNS1123Label(name), "Services (and the reader's Deployment, which shares its name) fit a label: %s", name)
	}
	assert.Equal(t, names.ChannelReader(long), reader.Name)
	assert.Len(t, reader.Name, names.MaxLabel, "channel-reader-<63 characters> is shortened to a label")
	assert.Regexp(t, `-[0-9a-f]{10}$`, reader.Name)
	assertLabelValues(t, "host pod", d.Spec.Template.Labels)
	assertLabelValues(t, "reader pod", reader.Spec.Template.Labels)
	assert.Equal(t, names.HostWorkspace(long), findVolume(t, d.Spec.Template.Spec, resources.VolumeWorkspace).PersistentVolumeClaim.ClaimName)
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
	opts := resources.OptionsFrom(cfg)
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
