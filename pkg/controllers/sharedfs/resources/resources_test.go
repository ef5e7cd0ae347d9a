package resources

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest/golden"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
)

var testOptions = Options{
	HostNamespace:   "mcp-host",
	ClusterDomain:   "cluster.local",
	Image:           "clerum/workspace-files-controller:0.9.5",
	ImagePullPolicy: corev1.PullIfNotPresent,
	ImagePullSecret: "clerum",
	Port:            8086,
	InitImage:       "busybox:1.36",
	Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi"), corev1.ResourceCPU: resource.MustParse("50m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("200m")},
	},
	JWTConfigMap:        "mcp-host-config",
	JWTConfigMapKey:     "CLERUM_AUTH_JWT_PUBLIC_KEY",
	MaxUploadBytes:      104857600,
	MaxListEntries:      5000,
	MaxPathDepth:        32,
	DefaultSize:         resource.MustParse("10Gi"),
	DefaultStorageClass: "do-block-storage-retain",
	MaxSize:             resource.MustParse("100Gi"),
	ClaimMark:           mark.NewKey("a-test-hmac-secret", mark.PurposeClaim),
}

func newFS(name string, opts ...func(*clerumv1alpha1.SharedFileSystem)) *clerumv1alpha1.SharedFileSystem {
	fs := &clerumv1alpha1.SharedFileSystem{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: name, UID: types.UID("uid-" + name), Generation: 1},
	}
	for _, o := range opts {
		o(fs)
	}
	return fs
}

func withHosts(hosts ...string) func(*clerumv1alpha1.SharedFileSystem) {
	return func(fs *clerumv1alpha1.SharedFileSystem) { fs.Spec.HostRefs = hosts }
}

func withDirs(dirs ...string) func(*clerumv1alpha1.SharedFileSystem) {
	return func(fs *clerumv1alpha1.SharedFileSystem) { fs.Spec.Directories = dirs }
}

func withSize(size string) func(*clerumv1alpha1.SharedFileSystem) {
	return func(fs *clerumv1alpha1.SharedFileSystem) { fs.Spec.Size = ptr.To(resource.MustParse(size)) }
}

// The golden files pin the pod and policy HCC runs for a SharedFileSystem:
// the interface of an image HCC does not build changes only on purpose.
func TestBuildersGolden(t *testing.T) {
	fs := newFS("team", withHosts("bob", "alice"), withDirs("shared/docs", "inbox"), withSize("20Gi"))
	const pinned = "the WFC interface is pinned (docs/sharedfilesystem.md)"
	golden.YAML(t, "testdata/wfc.deployment.yaml", BuildDeployment(fs, KeyDigest("key"), testOptions), pinned)
	golden.YAML(t, "testdata/wfc.service.yaml", BuildService(fs, testOptions), pinned)
	golden.YAML(t, "testdata/wfc.persistentvolumeclaim.yaml", BuildClaim(fs, testOptions), pinned)
	golden.YAML(t, "testdata/wfc.networkpolicy.yaml", BuildIngressPolicy(fs, testOptions), pinned)
	golden.YAML(t, "testdata/wfc-closed.networkpolicy.yaml", BuildIngressPolicy(newFS("closed"), testOptions), pinned)
	golden.YAML(t, "testdata/wfc-egress.networkpolicy.yaml", BuildEgressPolicy(fs, testOptions), pinned)
}

func envMap(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

func TestBuildDeployment(t *testing.T) {
	t.Run("the WFC container comes first and gets every limit, the key file and the sorted Hosts", func(t *testing.T) {
		d := BuildDeployment(newFS("team", withHosts("carol", "alice", "carol")), "sha256:x", testOptions)
		pod := d.Spec.Template.Spec
		require.NotEmpty(t, pod.Containers)
		wfc := pod.Containers[0]
		assert.Equal(t, ContainerWFC, wfc.Name)
		assert.Equal(t, testOptions.Image, wfc.Image)
		assert.Equal(t, map[string]string{
			EnvName: "team", EnvNamespace: "mcp-host", EnvPort: "8086", EnvDataDir: DataDir,
			EnvMaxUploadBytes: "104857600", EnvMaxListEntries: "5000", EnvMaxPathDepth: "32",
			EnvJWTKeyFile: JWTKeyFile, EnvAllowedHosts: "alice,carol", EnvTmpDir: TmpDir,
		}, envMap(wfc))
		assert.Equal(t, "sha256:x", d.Spec.Template.Annotations[AnnotationJWTKeyDigest])
		assert.Equal(t, int32(8086), wfc.Ports[0].ContainerPort)
	})
	t.Run("the JWT key is one item of the named ConfigMap, mounted read-only", func(t *testing.T) {
		pod := BuildDeployment(newFS("team"), "d", testOptions).Spec.Template.Spec
		var found bool
		for _, v := range pod.Volumes {
			if v.ConfigMap != nil {
				found = true
				assert.Equal(t, "mcp-host-config", v.ConfigMap.Name)
				assert.Equal(t, []corev1.KeyToPath{{Key: "CLERUM_AUTH_JWT_PUBLIC_KEY", Path: "jwt-public-key.pem"}}, v.ConfigMap.Items)
				assert.Nil(t, v.ConfigMap.Optional)
			}
		}
		assert.True(t, found)
		assert.Equal(t, filepath.Join(JWTKeyDir, "jwt-public-key.pem"), JWTKeyFile)
	})
	t.Run("the pod is hardened and no container runs as root", func(t *testing.T) {
		pod := BuildDeployment(newFS("team", withDirs("a")), "d", testOptions).Spec.Template.Spec
		sc := pod.SecurityContext
		assert.True(t, *sc.RunAsNonRoot)
		assert.Equal(t, PodUser, *sc.RunAsUser)
		assert.Equal(t, PodGroup, *sc.FSGroup)
		assert.Equal(t, corev1.FSGroupChangeOnRootMismatch, *sc.FSGroupChangePolicy)
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type)
		assert.False(t, *pod.AutomountServiceAccountToken)
		for _, c := range append(pod.InitContainers, pod.Containers...) {
			assert.True(t, *c.SecurityContext.RunAsNonRoot, c.Name)
			assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, c.Name)
			assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation, c.Name)
			assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, c.Name)
			assert.Empty(t, c.SecurityContext.Capabilities.Add, c.Name)
		}
	})
	t.Run("the init container gets the directories as arguments, sorted, never in the script", func(t *testing.T) {
		pod := BuildDeployment(newFS("team", withDirs("z/y", "a", "a")), "d", testOptions).Spec.Template.Spec
		require.Len(t, pod.InitContainers, 1)
		init := pod.InitContainers[0]
		assert.Equal(t, testOptions.InitImage, init.Image)
		assert.Equal(t, []string{"/bin/sh", "-c", initScript, "init-directories", "a", "z/y"}, init.Command)
		assert.NotContains(t, initScript, "z/y")
	})
	t.Run("no directories, no init container", func(t *testing.T) {
		assert.Empty(t, BuildDeployment(newFS("team"), "d", testOptions).Spec.Template.Spec.InitContainers)
	})
	t.Run("an empty pull secret means none", func(t *testing.T) {
		opts := testOptions
		opts.ImagePullSecret = ""
		assert.Empty(t, BuildDeployment(newFS("team"), "d", opts).Spec.Template.Spec.ImagePullSecrets)
		assert.Equal(t, []corev1.LocalObjectReference{{Name: "clerum"}},
			BuildDeployment(newFS("team"), "d", testOptions).Spec.Template.Spec.ImagePullSecrets)
	})
	t.Run("Recreate and one replica: the data volume is ReadWriteOnce", func(t *testing.T) {
		d := BuildDeployment(newFS("team"), "d", testOptions)
		assert.Equal(t, "Recreate", string(d.Spec.Strategy.Type))
		assert.Equal(t, int32(1), *d.Spec.Replicas)
	})
}

func TestLabelsAndNames(t *testing.T) {
	fs := newFS("team", withHosts("alice"))
	want := map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelSharedFileSystem: "team"}
	d := BuildDeployment(fs, "d", testOptions)
	assert.Equal(t, want, d.Labels)
	assert.Equal(t, want, d.Spec.Template.Labels)
	assert.Equal(t, want, d.Spec.Selector.MatchLabels)
	assert.Equal(t, "wfc-team", d.Name)
	s := BuildService(fs, testOptions)
	assert.Equal(t, want, s.Labels)
	assert.Equal(t, want, s.Spec.Selector)
	assert.Equal(t, "wfc-team", s.Name)
	c := BuildClaim(fs, testOptions)
	assert.Equal(t, want, c.Labels)
	assert.Equal(t, "wfc-team-data", c.Name)
	p := BuildIngressPolicy(fs, testOptions)
	assert.Equal(t, names.PolicyTypeFileSystem, p.Labels[names.LabelPolicyType])
	assert.Equal(t, "wfc-team-ingress", p.Name)
	assert.Equal(t, "http://wfc-team.mcp-host.svc.cluster.local:8086", Endpoint(fs, testOptions))
}

func TestBuildClaim(t *testing.T) {
	cases := []struct {
		name      string
		fs        *clerumv1alpha1.SharedFileSystem
		opts      func(*Options)
		wantSize  string
		wantClass *string
	}{
		{name: "the defaults are the host workspace's", fs: newFS("a"), wantSize: "10Gi", wantClass: ptr.To("do-block-storage-retain")},
		{name: "spec.size and spec.storageClassName win", fs: newFS("a", withSize("50Gi"), func(fs *clerumv1alpha1.SharedFileSystem) {
			fs.Spec.StorageClassName = ptr.To("fast")
		}), wantSize: "50Gi", wantClass: ptr.To("fast")},
		{name: "no class anywhere means the cluster's default", fs: newFS("a"), opts: func(o *Options) { o.DefaultStorageClass = "" }, wantSize: "10Gi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOptions
			if tc.opts != nil {
				tc.opts(&opts)
			}
			c := BuildClaim(tc.fs, opts)
			got := c.Spec.Resources.Requests[corev1.ResourceStorage]
			assert.Equal(t, tc.wantSize, got.String())
			assert.Equal(t, tc.wantClass, c.Spec.StorageClassName)
			assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, c.Spec.AccessModes)
		})
	}
}

func TestBuildIngressPolicy(t *testing.T) {
	t.Run("admits only the named Hosts' pods, on the WFC port", func(t *testing.T) {
		p := BuildIngressPolicy(newFS("team", withHosts("bob", "alice")), testOptions)
		require.Len(t, p.Spec.Ingress, 1)
		rule := p.Spec.Ingress[0]
		require.Len(t, rule.From, 1)
		assert.Nil(t, rule.From[0].NamespaceSelector, "the host namespace only")
		assert.Equal(t, []metav1.LabelSelectorRequirement{{Key: names.LabelHost, Operator: metav1.LabelSelectorOpIn, Values: []string{"alice", "bob"}}},
			rule.From[0].PodSelector.MatchExpressions)
		require.Len(t, rule.Ports, 1)
		assert.Equal(t, int32(8086), rule.Ports[0].Port.IntVal)
		assert.Equal(t, []string{"Ingress"}, []string{string(p.Spec.PolicyTypes[0])})
	})
	t.Run("no hostRefs admits nobody", func(t *testing.T) {
		p := BuildIngressPolicy(newFS("team"), testOptions)
		assert.Empty(t, p.Spec.Ingress)
		assert.Len(t, p.Spec.PolicyTypes, 1)
	})
}

func TestBuildEgressPolicy(t *testing.T) {
	t.Run("the named Hosts' pods may reach the WFC pods, on the WFC port", func(t *testing.T) {
		p := BuildEgressPolicy(newFS("team", withHosts("bob", "alice")), testOptions)
		require.NotNil(t, p)
		assert.Equal(t, "wfc-team-egress", p.Name)
		assert.Equal(t, names.PolicyTypeFileSystem, p.Labels[names.LabelPolicyType])
		assert.Equal(t, []metav1.LabelSelectorRequirement{{Key: names.LabelHost, Operator: metav1.LabelSelectorOpIn, Values: []string{"alice", "bob"}}},
			p.Spec.PodSelector.MatchExpressions)
		require.Len(t, p.Spec.Egress, 1)
		rule := p.Spec.Egress[0]
		require.Len(t, rule.To, 1)
		assert.Nil(t, rule.To[0].NamespaceSelector, "the host namespace only")
		assert.Equal(t, map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelSharedFileSystem: "team"}, rule.To[0].PodSelector.MatchLabels)
		require.Len(t, rule.Ports, 1)
		assert.Equal(t, int32(8086), rule.Ports[0].Port.IntVal)
		assert.Equal(t, []string{"Egress"}, []string{string(p.Spec.PolicyTypes[0])})
	})
	t.Run("no hostRefs, no egress policy", func(t *testing.T) {
		assert.Nil(t, BuildEgressPolicy(newFS("team"), testOptions))
	})
}

func TestLongNames(t *testing.T) {
	fs := newFS(strings.Repeat("f", 63))
	assert.LessOrEqual(t, len(BuildService(fs, testOptions).Name), 63)
	assert.LessOrEqual(t, len(BuildDeployment(fs, "d", testOptions).Spec.Template.Labels[names.LabelSharedFileSystem]), 63)
}

func TestOptionsFrom(t *testing.T) {
	cfg := &config.Config{}
	cfg.Namespaces.Host = "hosts"
	cfg.Core.ClusterDomain = "example.internal"
	cfg.WFC = config.WFC{Image: "wfc:1", ImagePullPolicy: corev1.PullAlways, Port: 9000, InitImage: "busybox:1",
		JWTPublicKeyConfigMap: "cm", JWTPublicKeyConfigMapKey: "k", MaxUploadBytes: 1, MaxListEntries: 2, MaxPathDepth: 3}
	cfg.Host.WorkspaceSize = resource.MustParse("3Gi")
	cfg.Host.WorkspaceStorageClass = "slow"
	o := OptionsFrom(cfg)
	assert.Equal(t, "hosts", o.HostNamespace)
	assert.Equal(t, "example.internal", o.ClusterDomain)
	assert.Equal(t, "wfc:1", o.Image)
	assert.Equal(t, int32(9000), o.Port)
	assert.Equal(t, "cm", o.JWTConfigMap)
	assert.Equal(t, "k", o.JWTConfigMapKey)
	assert.Equal(t, "3Gi", o.DefaultSize.String())
	assert.Equal(t, "slow", o.DefaultStorageClass)
}

// pemKey returns a PEM "PUBLIC KEY" of a fresh key.
func pemKey(t *testing.T, key any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func rsaKey(t *testing.T) string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return pemKey(t, &k.PublicKey)
}

func ecKey(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return pemKey(t, &k.PublicKey)
}

func TestValidatePublicKey(t *testing.T) {
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	rsaPEM := rsaKey(t)
	cases := []struct {
		name  string
		value string
		ok    bool
	}{
		{"an RSA key", rsaPEM, true},
		{"an EC key", ecKey(t), true},
		{"surrounding whitespace", "\n" + rsaPEM + "\n\n", true},
		{"an Ed25519 key", pemKey(t, edPub), false},
		{"not PEM", "hello", false},
		{"empty", "", false},
		{"a private-key block type", strings.ReplaceAll(rsaPEM, "PUBLIC KEY", "PRIVATE KEY"), false},
		{"garbage in the block", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", false},
		{"two blocks", rsaPEM + rsaPEM, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePublicKey(tc.value)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}
