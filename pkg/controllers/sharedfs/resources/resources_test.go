package resources_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest/golden"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources/resourcestest"
	"github.com/clerum/hcc/pkg/names"
)

// The golden files pin the pod and policy HCC runs for a SharedFileSystem:
// the interface of an image HCC does not build changes only on purpose.
func TestBuildersGolden(t *testing.T) {
	fs := resourcestest.NewFS("team", resourcestest.WithHosts("bob", "alice"), resourcestest.WithDirs("shared/docs", "inbox"), resourcestest.WithSize("20Gi"))
	const pinned = "the WFC interface is pinned (docs/sharedfilesystem.md)"
	golden.YAML(t, "testdata/wfc.deployment.yaml", resources.BuildDeployment(fs, resources.KeyDigest("key"), resourcestest.Options), pinned)
	golden.YAML(t, "testdata/wfc.service.yaml", resources.BuildService(fs, resourcestest.Options), pinned)
	golden.YAML(t, "testdata/wfc.persistentvolumeclaim.yaml", resources.BuildClaim(fs, resourcestest.Options), pinned)
	golden.YAML(t, "testdata/wfc.networkpolicy.yaml", resources.BuildIngressPolicy(fs, resourcestest.Options), pinned)
	golden.YAML(t, "testdata/wfc-closed.networkpolicy.yaml", resources.BuildIngressPolicy(resourcestest.NewFS("closed"), resourcestest.Options), pinned)
	golden.YAML(t, "testdata/wfc-egress.networkpolicy.yaml", resources.BuildEgressPolicy(fs, resourcestest.Options), pinned)
}

func TestBuildDeployment(t *testing.T) {
	t.Run("the WFC container comes first and gets every limit, the key file and the sorted Hosts", func(t *testing.T) {
		d := resources.BuildDeployment(resourcestest.NewFS("team", resourcestest.WithHosts("carol", "alice", "carol")), "sha256:x", resourcestest.Options)
		pod := d.Spec.Template.Spec
		require.NotEmpty(t, pod.Containers)
		wfc := pod.Containers[0]
		assert.Equal(t, resources.ContainerWFC, wfc.Name)
		assert.Equal(t, resourcestest.Options.Image, wfc.Image)
		assert.Equal(t, map[string]string{
			resources.EnvName: "team", resources.EnvNamespace: "mcp-host", resources.EnvPort: "8086", resources.EnvDataDir: resources.DataDir,
			resources.EnvMaxUploadBytes: "104857600", resources.EnvMaxListEntries: "5000", resources.EnvMaxPathDepth: "32",
			resources.EnvJWTKeyFile: resources.JWTKeyFile, resources.EnvAllowedHosts: "alice,carol", resources.EnvTmpDir: resources.TmpDir,
		}, resourcestest.EnvMap(wfc))
		assert.Equal(t, "sha256:x", d.Spec.Template.Annotations[resources.AnnotationJWTKeyDigest])
		assert.Equal(t, int32(8086), wfc.Ports[0].ContainerPort)
	})
	t.Run("the JWT key is one item of the named ConfigMap, mounted read-only", func(t *testing.T) {
		pod := resources.BuildDeployment(resourcestest.NewFS("team"), "d", resourcestest.Options).Spec.Template.Spec
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
		assert.Equal(t, filepath.Join(resources.JWTKeyDir, "jwt-public-key.pem"), resources.JWTKeyFile)
	})
	t.Run("the pod is hardened and no container runs as root", func(t *testing.T) {
		pod := resources.BuildDeployment(resourcestest.NewFS("team", resourcestest.WithDirs("a")), "d", resourcestest.Options).Spec.Template.Spec
		sc := pod.SecurityContext
		assert.True(t, *sc.RunAsNonRoot)
		assert.Equal(t, resources.PodUser, *sc.RunAsUser)
		assert.Equal(t, resources.PodGroup, *sc.FSGroup)
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
		pod := resources.BuildDeployment(resourcestest.NewFS("team", resourcestest.WithDirs("z/y", "a", "a")), "d", resourcestest.Options).Spec.Template.Spec
		require.Len(t, pod.InitContainers, 1)
		init := pod.InitContainers[0]
		assert.Equal(t, resourcestest.Options.InitImage, init.Image)
		assert.Equal(t, []string{"/bin/sh", "-c", resources.InitScript, "init-directories", "a", "z/y"}, init.Command)
		assert.NotContains(t, resources.InitScript, "z/y")
	})
	t.Run("no directories, no init container", func(t *testing.T) {
		assert.Empty(t, resources.BuildDeployment(resourcestest.NewFS("team"), "d", resourcestest.Options).Spec.Template.Spec.InitContainers)
	})
	t.Run("an empty pull secret means none", func(t *testing.T) {
		opts := resourcestest.Options
		opts.ImagePullSecret = ""
		assert.Empty(t, resources.BuildDeployment(resourcestest.NewFS("team"), "d", opts).Spec.Template.Spec.ImagePullSecrets)
		assert.Equal(t, []corev1.LocalObjectReference{{Name: "clerum"}},
			resources.BuildDeployment(resourcestest.NewFS("team"), "d", resourcestest.Options).Spec.Template.Spec.ImagePullSecrets)
	})
	t.Run("Recreate and one replica: the data volume is ReadWriteOnce", func(t *testing.T) {
		d := resources.BuildDeployment(resourcestest.NewFS("team"), "d", resourcestest.Options)
		assert.Equal(t, "Recreate", string(d.Spec.Strategy.Type))
		assert.Equal(t, int32(1), *d.Spec.Replicas)
	})
}

func TestLabelsAndNames(t *testing.T) {
	fs := resourcestest.NewFS("team", resourcestest.WithHosts("alice"))
	want := map[string]string{names.LabelManagedBy: names.ManagedByValue, names.LabelSharedFileSystem: "team"}
	d := resources.BuildDeployment(fs, "d", resourcestest.Options)
	assert.Equal(t, want, d.Labels)
	assert.Equal(t, want, d.Spec.Template.Labels)
	assert.Equal(t, want, d.Spec.Selector.MatchLabels)
	assert.Equal(t, "wfc-team", d.Name)
	s := resources.BuildService(fs, resourcestest.Options)
	assert.Equal(t, want, s.Labels)
	assert.Equal(t, want, s.Spec.Selector)
	assert.Equal(t, "wfc-team", s.Name)
	c := resources.BuildClaim(fs, resourcestest.Options)
	assert.Equal(t, want, c.Labels)
	assert.Equal(t, "wfc-team-data", c.Name)
	p := resources.BuildIngressPolicy(fs, resourcestest.Options)
	assert.Equal(t, names.PolicyTypeFileSystem, p.Labels[names.LabelPolicyType])
	assert.Equal(t, "wfc-team-ingress", p.Name)
	assert.Equal(t, "http://wfc-team.mcp-host.svc.cluster.local:8086", resources.Endpoint(fs, resourcestest.Options))
}

func TestBuildClaim(t *testing.T) {
	cases := []struct {
		name      string
		fs        *clerumv1alpha1.SharedFileSystem
		opts      func(*resources.Options)
		wantSize  string
		wantClass *string
	}{
		{name: "the defaults are the host workspace's", fs: resourcestest.NewFS("a"), wantSize: "10Gi", wantClass: ptr.To("do-block-storage-retain")},
		{name: "spec.size and spec.storageClassName win", fs: resourcestest.NewFS("a", resourcestest.WithSize("50Gi"), func(fs *clerumv1alpha1.SharedFileSystem) {
			fs.Spec.StorageClassName = ptr.To("fast")
		}), wantSize: "50Gi", wantClass: ptr.To("fast")},
		{name: "no class anywhere means the cluster's default", fs: resourcestest.NewFS("a"), opts: func(o *resources.Options) { o.DefaultStorageClass = "" }, wantSize: "10Gi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := resourcestest.Options
			if tc.opts != nil {
				tc.opts(&opts)
			}
			c := resources.BuildClaim(tc.fs, opts)
			got := c.Spec.Resources.Requests[corev1.ResourceStorage]
			assert.Equal(t, tc.wantSize, got.String())
			assert.Equal(t, tc.wantClass, c.Spec.StorageClassName)
			assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, c.Spec.AccessModes)
		})
	}
}

func TestBuildIngressPolicy(t *testing.T) {
	t.Run("admits only the named Hosts' pods, on the WFC port", func(t *testing.T) {
		p := resources.BuildIngressPolicy(resourcestest.NewFS("team", resourcestest.WithHosts("bob", "alice")), resourcestest.Options)
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
		p := resources.BuildIngressPolicy(resourcestest.NewFS("team"), resourcestest.Options)
		assert.Empty(t, p.Spec.Ingress)
		assert.Len(t, p.Spec.PolicyTypes, 1)
	})
}

func TestBuildEgressPolicy(t *testing.T) {
	t.Run("the named Hosts' pods may reach the WFC pods, on the WFC port", func(t *testing.T) {
		p := resources.BuildEgressPolicy(resourcestest.NewFS("team", resourcestest.WithHosts("bob", "alice")), resourcestest.Options)
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
		assert.Nil(t, resources.BuildEgressPolicy(resourcestest.NewFS("team"), resourcestest.Options))
	})
}

func TestLongNames(t *testing.T) {
	fs := resourcestest.NewFS(strings.Repeat("f", 63))
	assert.LessOrEqual(t, len(resources.BuildService(fs, resourcestest.Options).Name), 63)
	assert.LessOrEqual(t, len(resources.BuildDeployment(fs, "d", resourcestest.Options).Spec.Template.Labels[names.LabelSharedFileSystem]), 63)
}

func TestOptionsFrom(t *testing.T) {
	cfg := &config.Config{}
	cfg.Namespaces.Host = "hosts"
	cfg.Core.ClusterDomain = "example.internal"
	cfg.WFC = config.WFC{Image: "wfc:1", ImagePullPolicy: corev1.PullAlways, Port: 9000, InitImage: "busybox:1",
		JWTPublicKeyConfigMap: "cm", JWTPublicKeyConfigMapKey: "k", MaxUploadBytes: 1, MaxListEntries: 2, MaxPathDepth: 3}
	cfg.Host.WorkspaceSize = resource.MustParse("3Gi")
	cfg.Host.WorkspaceStorageClass = "slow"
	o := resources.OptionsFrom(cfg)
	assert.Equal(t, "hosts", o.HostNamespace)
	assert.Equal(t, "example.internal", o.ClusterDomain)
	assert.Equal(t, "wfc:1", o.Image)
	assert.Equal(t, int32(9000), o.Port)
	assert.Equal(t, "cm", o.JWTConfigMap)
	assert.Equal(t, "k", o.JWTConfigMapKey)
	assert.Equal(t, "3Gi", o.DefaultSize.String())
	assert.Equal(t, "slow", o.DefaultStorageClass)
}

func TestValidatePublicKey(t *testing.T) {
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	rsaPEM := resourcestest.RSAKey(t)
	cases := []struct {
		name  string
		value string
		ok    bool
	}{
		{"an RSA key", rsaPEM, true},
		{"an EC key", resourcestest.ECKey(t), true},
		{"surrounding whitespace", "\n" + rsaPEM + "\n\n", true},
		{"an Ed25519 key", resourcestest.PEMKey(t, edPub), false},
		{"not PEM", "hello", false},
		{"empty", "", false},
		{"a private-key block type", strings.ReplaceAll(rsaPEM, "PUBLIC KEY", "PRIVATE KEY"), false},
		{"garbage in the block", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", false},
		{"two blocks", rsaPEM + rsaPEM, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := resources.ValidatePublicKey(tc.value)
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}
