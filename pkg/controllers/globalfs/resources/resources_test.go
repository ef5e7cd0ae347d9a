package resources_test

import (
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest/golden"
	"github.com/clerum/hcc/pkg/names"
)

// goldenYAML compares obj's YAML with testdata/name (golden.YAML).
func goldenYAML(t *testing.T, name string, obj any) {
	t.Helper()
	golden.YAML(t, filepath.Join("testdata", name), obj, "the gfsc interface is pinned (docs/globalfilesystem.md)")
}

// The golden files pin the pods and the policy HCC runs for a
// GlobalFileSystem: the gfsc interface (docs/globalfilesystem.md) changes
// only on purpose.
func TestBuildersGolden(t *testing.T) {
	g := resourcestest.NewGFS("main")
	opts := resourcestest.Options
	opts.NodeLocalDNSCIDR = netip.MustParsePrefix("169.254.20.10/32")
	goldenYAML(t, "gfsc.deployment.yaml", resources.BuildDeployment(g, opts, resourcestest.Digest))
	goldenYAML(t, "gfsc.service.yaml", resources.BuildService(g, opts))
	goldenYAML(t, "gfsc.networkpolicy.yaml", resources.BuildEgressPolicy(g, opts))
	goldenYAML(t, "gfsc.seed-job.yaml", resources.BuildSeedJob(g, opts, resourcestest.Digest))
}

func TestBuildDeployment(t *testing.T) {
	env := func(c corev1.Container) map[string]corev1.EnvVar {
		out := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			out[e.Name] = e
		}
		return out
	}
	t.Run("gfsc is the first container and runs the configured image, port and resources", func(t *testing.T) {
		c := resources.BuildDeployment(resourcestest.NewGFS("g"), resourcestest.Options, resourcestest.Digest).Spec.Template.Spec.Containers
		assert.Equal(t, resources.ContainerGFSC, c[0].Name)
		assert.Equal(t, resourcestest.Options.Image, c[0].Image)
		assert.Equal(t, resourcestest.Options.ImagePullPolicy, c[0].ImagePullPolicy)
		assert.Equal(t, resourcestest.Options.Resources, c[0].Resources)
		assert.Equal(t, []corev1.ContainerPort{{Name: resources.PortHTTP, ContainerPort: 8087, Protocol: corev1.ProtocolTCP}}, c[0].Ports)
	})
	t.Run("the connection string and the public key are references, never values", func(t *testing.T) {
		e := env(resources.BuildDeployment(resourcestest.NewGFS("g"), resourcestest.Options, resourcestest.Digest).Spec.Template.Spec.Containers[0])
		assert.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gfs-controller-db"}, Key: "connection-string"},
			e[resources.EnvDatabaseURL].ValueFrom.SecretKeyRef)
		assert.Empty(t, e[resources.EnvDatabaseURL].Value)
		assert.Equal(t, &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "gfs-config"}, Key: "jwt-public-key"},
			e[resources.EnvJWTPublicKey].ValueFrom.ConfigMapKeyRef)
		assert.Equal(t, "gfs-controller", e[resources.EnvTokenAudience].Value)
	})
	t.Run("the drive is spec.driveName, else the default", func(t *testing.T) {
		assert.Equal(t, "main", env(resources.BuildDeployment(resourcestest.NewGFS("g"), resourcestest.Options, "").Spec.Template.Spec.Containers[0])[resources.EnvDriveName].Value)
		withDrive := resourcestest.NewGFS("g", func(g *clerumv1alpha1.GlobalFileSystem) { g.Spec.DriveName = "archive" })
		d := resources.BuildDeployment(withDrive, resourcestest.Options, "")
		assert.Equal(t, "archive", env(d.Spec.Template.Spec.Containers[0])[resources.EnvDriveName].Value)
		assert.Equal(t, "archive", resources.DeployedDrive(d))
		assert.Empty(t, resources.DeployedDrive(nil))
	})
	t.Run("a new digest rolls the pods", func(t *testing.T) {
		a := resources.BuildDeployment(resourcestest.NewGFS("g"), resourcestest.Options, resources.ConfigDigest([]byte("a"), "k"))
		b := resources.BuildDeployment(resourcestest.NewGFS("g"), resourcestest.Options, resources.ConfigDigest([]byte("b"), "k"))
		assert.NotEqual(t, a.Spec.Template.Annotations, b.Spec.Template.Annotations)
		assert.NotEqual(t, resources.ConfigDigest([]byte("a"), "k"), resources.ConfigDigest([]byte("a"), "k2"))
		assert.Equal(t, resources.ConfigDigest([]byte("a"), "k"), resources.ConfigDigest([]byte("a"), "k"))
	})
	t.Run("an empty pull secret or priority class means none", func(t *testing.T) {
		opts := resourcestest.Options
		opts.ImagePullSecret, opts.PriorityClassName = "", ""
		pod := resources.BuildDeployment(resourcestest.NewGFS("g"), opts, "").Spec.Template.Spec
		assert.Nil(t, pod.ImagePullSecrets)
		assert.Empty(t, pod.PriorityClassName)
		pod = resources.BuildDeployment(resourcestest.NewGFS("g"), resourcestest.Options, "").Spec.Template.Spec
		assert.Equal(t, []corev1.LocalObjectReference{{Name: "clerum"}}, pod.ImagePullSecrets)
		assert.Equal(t, "platform-critical", pod.PriorityClassName)
	})
	t.Run("every container is hardened and non-root, the init container included", func(t *testing.T) {
		for _, pod := range []corev1.PodSpec{
			resources.BuildDeployment(resourcestest.NewGFS("g"), resourcestest.Options, "").Spec.Template.Spec,
			resources.BuildSeedJob(resourcestest.NewGFS("g"), resourcestest.Options, "").Spec.Template.Spec,
		} {
			assert.False(t, *pod.AutomountServiceAccountToken)
			assert.True(t, *pod.SecurityContext.RunAsNonRoot)
			assert.Equal(t, resources.PodUser, *pod.SecurityContext.RunAsUser)
			assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
			require.Len(t, pod.InitContainers, 1)
			assert.Equal(t, resourcestest.Options.InitImage, pod.InitContainers[0].Image)
			for _, c := range append(pod.InitContainers, pod.Containers...) {
				sc := c.SecurityContext
				assert.False(t, *sc.AllowPrivilegeEscalation, c.Name)
				assert.True(t, *sc.ReadOnlyRootFilesystem, c.Name)
				assert.True(t, *sc.RunAsNonRoot, c.Name)
				assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, c.Name)
				assert.Empty(t, sc.Capabilities.Add, c.Name)
				assert.Equal(t, []corev1.VolumeMount{{Name: resources.VolumeTmp, MountPath: resources.TmpDir}}, c.VolumeMounts, c.Name)
			}
		}
	})
	t.Run("the selector and Service pick the gfsc pods, not the seed's", func(t *testing.T) {
		g := resourcestest.NewGFS("g")
		sel := resources.BuildDeployment(g, resourcestest.Options, "").Spec.Selector.MatchLabels
		assert.Equal(t, sel, resources.BuildService(g, resourcestest.Options).Spec.Selector)
		assert.Equal(t, resources.ComponentGFSC, sel[resources.LabelComponent])
		assert.Equal(t, resources.ComponentSeed, resources.BuildSeedJob(g, resourcestest.Options, "").Spec.Template.Labels[resources.LabelComponent])
	})
}

func TestBuildSeedJob(t *testing.T) {
	j := resources.BuildSeedJob(resourcestest.NewGFS("g", func(g *clerumv1alpha1.GlobalFileSystem) { g.Spec.DriveName = "archive" }), resourcestest.Options, "d1")
	assert.Equal(t, "gfsc-g-seed", j.Name)
	assert.Equal(t, []string{"seed-root", "--drive", "archive"}, j.Spec.Template.Spec.Containers[0].Args)
	assert.Equal(t, resourcestest.Options.Image, j.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, corev1.RestartPolicyNever, j.Spec.Template.Spec.RestartPolicy)
	assert.Equal(t, map[string]string{resources.AnnotationDrive: "archive", resources.AnnotationConfigDigest: "d1"}, j.Annotations)
	assert.Equal(t, resources.SeedBackoffLimit, *j.Spec.BackoffLimit)
	assert.Equal(t, resources.SeedTTL, *j.Spec.TTLSecondsAfterFinished)
	assert.LessOrEqual(t, len(resources.SeedJobName(string(make([]byte, 63)))), 63, "a Job name is a label value on its pods")
}

func TestBuildEgressPolicy(t *testing.T) {
	t.Run("egress only to Postgres and kube-dns, of policy type filesystem", func(t *testing.T) {
		p := resources.BuildEgressPolicy(resourcestest.NewGFS("g"), resourcestest.Options)
		assert.Equal(t, "gfsc-g-egress", p.Name)
		assert.Equal(t, names.PolicyTypeFileSystem, p.Labels[names.LabelPolicyType])
		assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, p.Spec.PolicyTypes)
		assert.Equal(t, resources.Labels(resourcestest.NewGFS("g")), p.Spec.PodSelector.MatchLabels, "gfsc and the seed")
		require.Len(t, p.Spec.Egress, 2)
		pg := p.Spec.Egress[0]
		assert.Equal(t, map[string]string{names.LabelApp: "control-postgres"}, pg.To[0].PodSelector.MatchLabels)
		assert.Equal(t, map[string]string{names.NamespaceNameKey: "control-plane"}, pg.To[0].NamespaceSelector.MatchLabels)
		assert.Equal(t, int32(5432), pg.Ports[0].Port.IntVal)
		assert.Len(t, pg.Ports, 1)
		assert.Len(t, p.Spec.Egress[1].Ports, 2, "DNS on UDP and TCP")
	})
	t.Run("NodeLocal DNSCache when configured", func(t *testing.T) {
		opts := resourcestest.Options
		opts.NodeLocalDNSCIDR = netip.MustParsePrefix("169.254.20.10/32")
		p := resources.BuildEgressPolicy(resourcestest.NewGFS("g"), opts)
		require.Len(t, p.Spec.Egress, 3)
		assert.Equal(t, "169.254.20.10/32", p.Spec.Egress[2].To[0].IPBlock.CIDR)
	})
}

func TestAdmit(t *testing.T) {
	t.Run("a valid configuration admits with a digest that hides the values", func(t *testing.T) {
		a := resources.Admit(resourcestest.Digested(resourcestest.PGSecret()), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM), resourcestest.Options)
		assert.Empty(t, a.Block)
		assert.NotEmpty(t, a.Digest)
		assert.NotContains(t, a.Digest+a.Message, "hunter2")
	})
	t.Run("a PKCS #1 RSA key parses; trailing data does not", func(t *testing.T) {
		assert.ErrorIs(t, resources.ParsePublicKey(resourcestest.PublicKeyPEM+"garbage"), resources.ErrNotPublicKey)
		assert.NoError(t, resources.ParsePublicKey("\n"+resourcestest.PublicKeyPEM+"\n\n"))
		assert.ErrorIs(t, resources.ParsePublicKey(""), resources.ErrNotPublicKey)
	})
}

func TestPlan(t *testing.T) {
	g := resourcestest.NewGFS("g")
	a := resources.Admit(resourcestest.Digested(resourcestest.PGSecret()), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM), resourcestest.Options)
	assert.Len(t, resources.Plan(g, a, resourcestest.Options), 4)
	g.Status.RootSeeded = true
	assert.Len(t, resources.Plan(g, a, resourcestest.Options), 3, "no seed Job once seeded")
	assert.Empty(t, resources.Plan(g, resources.Admission{Block: "ConfigMissing"}, resourcestest.Options))
}

func TestOptionsFrom(t *testing.T) {
	cfg := &config.Config{}
	cfg.Namespaces.ControlPlane = "cp"
	cfg.GFS.Image, cfg.GFS.PostgresSecret, cfg.GFS.DriveName = "img", "db", "main"
	opts := resources.OptionsFrom(cfg)
	assert.Equal(t, "cp", opts.ControlPlaneNamespace)
	assert.Equal(t, "img", opts.Image)
	assert.Equal(t, "db", opts.PostgresSecret)
	assert.Equal(t, "main", opts.DriveName)
}
