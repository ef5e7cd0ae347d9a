//go:build integration

package sharedfs

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

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
	return live, kit.Owner{Object: live, GVK: gvk, IdentityLabel: names.LabelSharedFileSystem}
}

// TestControllerConverges runs the reconciler against the API server: it
// creates the children, reaches Ready once the claim is bound and the
// Deployment available (no controller-manager runs: both are simulated by
// writing their status), writes nothing more on resync, and deletes every
// child when the file system goes.
func TestControllerConverges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWorld(t, "ctrl")
	ns := w.opts.HostNamespace
	_, err := w.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: w.opts.JWTConfigMap},
		Data: map[string]string{w.opts.JWTConfigMapKey: resourcestest.RSAKey(t)}}, metav1.CreateOptions{})
	require.NoError(t, err)

	counted, writes := kittest.CountWrites(cp.Config())
	kube, hcc := kubernetes.NewForConfigOrDie(counted), clientset.NewForConfigOrDie(counted)
	reg := prometheus.NewRegistry()
	d := kit.Deps{Kube: kube, HCC: hcc, Informers: kit.NewInformers(kube, hcc), Recorder: &record.FakeRecorder{},
		Registry: reg, Queues: kit.NewQueues(reg, clock.RealClock{}), Clock: clock.RealClock{},
		Log: zerolog.New(os.Stderr).Level(zerolog.WarnLevel)}
	c := New(d, Config{Namespace: ns, Build: w.opts, Resync: 2 * time.Second, Workers: 1})
	d.Informers.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); <-done; d.Informers.Shutdown() }()

	w.createFS(t, resourcestest.NewFS("team", resourcestest.WithHosts("alice"), resourcestest.WithDirs("inbox")))
	phase := func() clerumv1alpha1.FileSystemPhase {
		fs, err := w.hcc.ClerumV1alpha1().SharedFileSystems(ns).Get(ctx, "team", metav1.GetOptions{})
		require.NoError(t, err)
		return fs.Status.Phase
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }), what)
	}
	waitFor("Initializing", func() bool { return phase() == clerumv1alpha1.FileSystemInitializing })
	waitFor("the Deployment", func() bool {
		_, err := w.kube.AppsV1().Deployments(ns).Get(ctx, "wfc-team", metav1.GetOptions{})
		return err == nil
	})

	// Bind the claim and make the Deployment available, as the
	// controller-manager and the kubelet would.
	pvc, err := w.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "wfc-team-data", metav1.GetOptions{})
	require.NoError(t, err)
	pvc.Status.Phase = corev1.ClaimBound
	_, err = w.kube.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	require.NoError(t, err)
	dep, err := w.kube.AppsV1().Deployments(ns).Get(ctx, "wfc-team", metav1.GetOptions{})
	require.NoError(t, err)
	dep.Status.ObservedGeneration = dep.Generation
	dep.Status.Replicas, dep.Status.UpdatedReplicas, dep.Status.ReadyReplicas, dep.Status.AvailableReplicas = 1, 1, 1, 1
	_, err = w.kube.AppsV1().Deployments(ns).UpdateStatus(ctx, dep, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor("Ready", func() bool { return phase() == clerumv1alpha1.FileSystemReady })

	// A steady state: resyncs (every 2 s) write nothing.
	time.Sleep(time.Second) // the Ready status write lands
	writes.Reset()
	before := queueAdds(t, reg)
	time.Sleep(5 * time.Second)
	assert.Equal(t, 0, writes.Count(), "writes on a no-op resync: %s", writes)
	assert.GreaterOrEqual(t, queueAdds(t, reg)-before, 2.0, "the resyncs ran: the file system was queued again")

	require.NoError(t, w.hcc.ClerumV1alpha1().SharedFileSystems(ns).Delete(ctx, "team", metav1.DeleteOptions{}))
	gone := func(get func() error) func() bool { return func() bool { return apierrors.IsNotFound(get()) } }
	waitFor("the Deployment deleted", gone(func() error {
		_, err := w.kube.AppsV1().Deployments(ns).Get(ctx, "wfc-team", metav1.GetOptions{})
		return err
	}))
	waitFor("the Service deleted", gone(func() error {
		_, err := w.kube.CoreV1().Services(ns).Get(ctx, "wfc-team", metav1.GetOptions{})
		return err
	}))
	waitFor("the policy deleted", gone(func() error {
		_, err := w.kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "wfc-team-ingress", metav1.GetOptions{})
		return err
	}))
	// No controller-manager removes kubernetes.io/pvc-protection here: the
	// claim is deleted (a deletion timestamp) or gone.
	waitFor("the claim deleted", func() bool {
		pvc, err := w.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "wfc-team-data", metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && pvc.DeletionTimestamp != nil)
	})
}

// queueAdds is how many keys the reconciler's queue has been given
// (workqueue_adds_total{name="sharedfilesystem"}).
func queueAdds(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != "workqueue_adds_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "sharedfilesystem" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatal("no workqueue_adds_total for sharedfilesystem")
	return 0
}
