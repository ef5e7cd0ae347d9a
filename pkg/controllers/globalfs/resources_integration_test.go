//go:build integration

package globalfs

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
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
	ns   string
}

func newWorld(t *testing.T, ns string) world {
	t.Helper()
	w := world{kube: kubernetes.NewForConfigOrDie(cp.Config()), hcc: clientset.NewForConfigOrDie(cp.Config()), ns: ns}
	_, err := w.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return w
}

func (w world) createGFS(t *testing.T, g *clerumv1alpha1.GlobalFileSystem) *clerumv1alpha1.GlobalFileSystem {
	t.Helper()
	g = g.DeepCopy()
	g.Namespace, g.UID, g.Generation = w.ns, "", 0
	live, err := w.hcc.ClerumV1alpha1().GlobalFileSystems(w.ns).Create(context.Background(), g, metav1.CreateOptions{})
	require.NoError(t, err)
	return live
}

// TestBuildersEmitWhatTheAPIServerKeeps creates every object the builders
// make and proves that a second ensure writes nothing. It tests package
// resources, but lives here to share the control plane of
// TestControllerConverges.
func TestBuildersEmitWhatTheAPIServerKeeps(t *testing.T) {
	cases := map[string]struct {
		gfs  *clerumv1alpha1.GlobalFileSystem
		opts func(*resources.Options)
	}{
		"plain": {gfs: resourcestest.NewGFS("plain"), opts: func(o *resources.Options) { o.NodeLocalDNSCIDR = netip.MustParsePrefix("169.254.20.10/32") }},
		"no pull secret or priority class": {gfs: resourcestest.NewGFS("bare"), opts: func(o *resources.Options) {
			o.ImagePullSecret, o.PriorityClassName = "", ""
		}},
		"long name": {gfs: resourcestest.NewGFS(strings.Repeat("l", 63))},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, fmt.Sprint("gfs-rt-", i))
			opts := resourcestest.Options
			// The priority class must exist for the API server to admit a pod
			// naming it; none is created here, and Deployments do not check it.
			if tc.opts != nil {
				tc.opts(&opts)
			}
			live := w.createGFS(t, tc.gfs)
			owner := kit.Owner{Object: live, GVK: gvk, IdentityLabel: names.LabelGlobalFileSystem}
			kittest.RoundTrip(t, cp.Config(), kit.Deployments, owner, resources.BuildDeployment(live, opts, resourcestest.Digest))
			kittest.RoundTrip(t, cp.Config(), kit.Services, owner, resources.BuildService(live, opts))
			kittest.RoundTrip(t, cp.Config(), kit.NetworkPolicies, owner, resources.BuildEgressPolicy(live, opts))
			kittest.RoundTrip(t, cp.Config(), kit.Jobs, owner, resources.BuildSeedJob(live, opts, resourcestest.Digest))
		})
	}
}

// TestControllerConverges runs the reconciler against the API server: it
// creates the children, reports Ready once the Deployment is available and
// the seed Job complete, and deletes the children when the GFS goes.
func TestControllerConverges(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newWorld(t, resourcestest.Namespace) // the namespace of resourcestest.PGSecret and resourcestest.JWTConfigMap
	secret, configMap := resourcestest.PGSecret(), resourcestest.JWTConfigMap(resourcestest.PublicKeyPEM)
	secret.ResourceVersion, configMap.ResourceVersion = "", ""
	_, err := w.kube.CoreV1().Secrets(w.ns).Create(ctx, secret, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = w.kube.CoreV1().ConfigMaps(w.ns).Create(ctx, configMap, metav1.CreateOptions{})
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	d := kit.Deps{Kube: w.kube, HCC: w.hcc, Informers: kit.NewInformers(w.kube, w.hcc), Recorder: record.NewFakeRecorder(1000),
		Registry: reg, Queues: kit.NewQueues(reg, clock.RealClock{}), Clock: clock.RealClock{}, Log: zerolog.Nop()}
	c := New(d, Config{Namespace: w.ns, Build: resourcestest.Options, Resync: time.Second, Workers: 1, SeedKey: testSeedKey})
	d.Informers.Start(ctx.Done())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	defer func() { cancel(); d.Informers.Shutdown(); <-done }()

	g := w.createGFS(t, resourcestest.NewGFS("main"))
	var dep *appsv1.Deployment
	require.Eventually(t, func() bool {
		dep, err = w.kube.AppsV1().Deployments(w.ns).Get(ctx, "gfsc-main", metav1.GetOptions{})
		return err == nil
	}, 20*time.Second, 100*time.Millisecond)
	// No kubelet or Job controller runs: play them. The controller may still
	// be writing either object, so each status write retries on a conflict,
	// and the seed Job is awaited like the Deployment.
	require.Eventually(t, func() bool {
		if dep, err = w.kube.AppsV1().Deployments(w.ns).Get(ctx, "gfsc-main", metav1.GetOptions{}); err != nil {
			return false
		}
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
		_, err = w.kube.AppsV1().Deployments(w.ns).UpdateStatus(ctx, dep, metav1.UpdateOptions{})
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "deployment status: %v", err)
	require.Eventually(t, func() bool {
		job, err := w.kube.BatchV1().Jobs(w.ns).Get(ctx, "gfsc-main-seed", metav1.GetOptions{})
		if err != nil {
			return false
		}
		now := metav1.Now()
		job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		}
		_, err = w.kube.BatchV1().Jobs(w.ns).UpdateStatus(ctx, job, metav1.UpdateOptions{})
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "seed job")

	require.Eventually(t, func() bool {
		g, err = w.hcc.ClerumV1alpha1().GlobalFileSystems(w.ns).Get(ctx, "main", metav1.GetOptions{})
		return err == nil && g.Status.Phase == clerumv1alpha1.FileSystemReady && g.Status.RootSeeded
	}, 20*time.Second, 100*time.Millisecond, "status: %+v", g.Status)
	assert.Equal(t, "http://gfsc-main."+w.ns+".svc.cluster.local:8087", g.Status.Endpoint)

	require.NoError(t, w.hcc.ClerumV1alpha1().GlobalFileSystems(w.ns).Delete(ctx, "main", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, e1 := w.kube.AppsV1().Deployments(w.ns).Get(ctx, "gfsc-main", metav1.GetOptions{})
		_, e2 := w.kube.CoreV1().Services(w.ns).Get(ctx, "gfsc-main", metav1.GetOptions{})
		_, e3 := w.kube.NetworkingV1().NetworkPolicies(w.ns).Get(ctx, "gfsc-main-egress", metav1.GetOptions{})
		return apierrors.IsNotFound(e1) && apierrors.IsNotFound(e2) && apierrors.IsNotFound(e3)
	}, 20*time.Second, 100*time.Millisecond, "no garbage collector runs: the reconciler deletes the children itself")
}
