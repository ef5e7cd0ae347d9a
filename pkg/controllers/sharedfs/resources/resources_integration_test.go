//go:build integration

package resources_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources/resourcestest"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/names"
)

// cp is the one control plane this package's integration tests share.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
}

type world struct {
	kube kubernetes.Interface
	hcc  clientset.Interface
	opts resources.Options
}

func newWorld(t *testing.T, suffix string) world {
	t.Helper()
	w := world{kube: kubernetes.NewForConfigOrDie(cp.Config()), hcc: clientset.NewForConfigOrDie(cp.Config()), opts: resourcestest.Options}
	w.opts.HostNamespace = "sfs-" + suffix
	_, err := w.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.opts.HostNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return w
}

func (w world) createFS(t *testing.T, fs *clerumv1alpha1.SharedFileSystem) (*clerumv1alpha1.SharedFileSystem, kit.Owner) {
	t.Helper()
	fs = fs.DeepCopy()
	fs.Namespace, fs.UID, fs.Generation = w.opts.HostNamespace, "", 0
	live, err := w.hcc.ClerumV1alpha1().SharedFileSystems(fs.Namespace).Create(context.Background(), fs, metav1.CreateOptions{})
	require.NoError(t, err)
	return live, kit.Owner{Object: live, GVK: resources.GVK, IdentityLabel: names.LabelSharedFileSystem}
}

// TestBuildersEmitWhatTheAPIServerKeeps creates every object the builders
// make and proves that a second ensure writes nothing: the builders emit
// the API server's defaults.
func TestBuildersEmitWhatTheAPIServerKeeps(t *testing.T) {
	cases := map[string]struct {
		fs   *clerumv1alpha1.SharedFileSystem
		opts func(*resources.Options)
	}{
		"full":      {fs: resourcestest.NewFS("full", resourcestest.WithHosts("bob", "alice"), resourcestest.WithDirs("a/b", "c"), resourcestest.WithSize("20Gi"))},
		"bare":      {fs: resourcestest.NewFS("bare"), opts: func(o *resources.Options) { o.ImagePullSecret, o.DefaultStorageClass = "", "" }},
		"long name": {fs: resourcestest.NewFS(strings.Repeat("l", 63), resourcestest.WithHosts(strings.Repeat("h", 63)))},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, fmt.Sprint("rt-", i))
			if tc.opts != nil {
				tc.opts(&w.opts)
			}
			live, owner := w.createFS(t, tc.fs)
			kittest.RoundTrip(t, cp.Config(), kit.Deployments, owner, resources.BuildDeployment(live, resources.KeyDigest("k"), w.opts))
			kittest.RoundTrip(t, cp.Config(), kit.Services, owner, resources.BuildService(live, w.opts))
			kittest.RoundTrip(t, cp.Config(), kit.PersistentVolumeClaims, owner, resources.BuildClaim(live, w.opts))
			kittest.RoundTrip(t, cp.Config(), kit.NetworkPolicies, owner, resources.BuildIngressPolicy(live, w.opts))
			if p := resources.BuildEgressPolicy(live, w.opts); p != nil {
				kittest.RoundTrip(t, cp.Config(), kit.NetworkPolicies, owner, p)
			}
		})
	}
}
