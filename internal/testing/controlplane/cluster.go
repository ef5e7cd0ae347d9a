package controlplane

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The local cluster of Options.Cluster (docs/local-cluster.md).
const (
	// NodeName is the one fake node kwok runs pods on.
	NodeName = "kwok-node-0"
	// StorageClass is the default StorageClass the static volumes belong
	// to; the name matches minikube's, so the minikube overlay's
	// CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS works unchanged.
	StorageClass = "standard"
	// StaticVolumes is how many PersistentVolumes are created. Nothing
	// provisions or recycles volumes, and a released volume (reclaim policy
	// Retain) is not bound again, so this bounds how many claims a cluster
	// binds in its lifetime.
	StaticVolumes = 64
	// volumeSize is each static volume's capacity: more than any claim the
	// examples and tests make.
	volumeSize = "1Ti"
	// PodCIDR is where kwok takes pod IPs from; apart from the Service
	// range.
	PodCIDR = "10.244.0.0/16"

	clusterReadyTimeout = 2 * time.Minute
)

// kubeControllers are the kube-controller-manager controllers the local
// cluster needs: garbage collection (owner references cascade), Deployments
// and ReplicaSets (pods exist), Jobs (the file-system seed), volume binding
// and protection (workspace claims bind), namespaces (deletes finish) and
// service accounts (every namespace gets its default one).
var kubeControllers = []string{
	"garbage-collector-controller",
	"deployment-controller",
	"replicaset-controller",
	"job-controller",
	"persistentvolume-binder-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
	"namespace-controller",
	"serviceaccount-controller",
	"endpointslice-controller",
}

// startCluster runs kube-controller-manager, kube-scheduler and kwok
// against the running kube-apiserver, then creates the fake node, the
// StorageClass and the static volumes, and waits until the node is Ready.
func (c *ControlPlane) startCluster(ctx context.Context) error {
	if err := c.startComponents(); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return err
	}
	if err := createNode(ctx, kube); err != nil {
		return err
	}
	if err := createVolumes(ctx, kube); err != nil {
		return err
	}
	return waitNodeReady(ctx, kube)
}

// RestartCluster stops kube-controller-manager, kube-scheduler and kwok,
// starts them again and waits until the node is Ready. A test calls it
// right after it restarts kube-apiserver: while kube-apiserver was down
// their informers failed to list and watch, and client-go's reflector
// backs off up to 30 s between attempts, so for that long after the
// restart they act on nothing — a namespace deleted then is not finalized,
// a new Deployment gets no pods — and the rest of the test, and the next,
// would meet a cluster that lags by up to half a minute. A component that
// fails to start leaves the cluster part-started: the error says which.
func (c *ControlPlane) RestartCluster(ctx context.Context) error {
	switch {
	case c.stopped:
		return errors.New("control plane already stopped")
	case !c.opts.Cluster:
		return errors.New("control plane runs no cluster (Options.Cluster)")
	}
	var errs []error
	var running []*process // what would not stop, for Close to try again
	for i := len(c.cluster) - 1; i >= 0; i-- {
		if err := c.cluster[i].stop(); err != nil {
			errs = append(errs, err)
			running = append(running, c.cluster[i])
		}
	}
	c.cluster = running
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := c.startComponents(); err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(c.Config())
	if err != nil {
		return err
	}
	return waitNodeReady(ctx, kube)
}

// startComponents starts kube-controller-manager, kube-scheduler and kwok
// and waits until each is healthy.
func (c *ControlPlane) startComponents() error {
	kcm := func(port int) []string {
		return append(c.componentServing(port),
			"--kubeconfig="+c.kubeconfig,
			"--controllers="+strings.Join(kubeControllers, ","),
			"--use-service-account-credentials=false",
			"--service-account-private-key-file="+c.pki.serviceAccountKey,
			"--root-ca-file="+c.pki.caFile,
			"--cert-dir="+filepath.Join(c.dir, "kube-controller-manager"),
			// Fast enough for tests: deleted pods' owners notice at once.
			"--concurrent-gc-syncs=10",
		)
	}
	scheduler := func(port int) []string {
		return append(c.componentServing(port),
			"--kubeconfig="+c.kubeconfig,
			"--cert-dir="+filepath.Join(c.dir, "kube-scheduler"),
		)
	}
	for _, comp := range []struct {
		name string
		args func(port int) []string
	}{{"kube-controller-manager", kcm}, {"kube-scheduler", scheduler}} {
		if err := withFreePorts(func() error { return c.startComponent(comp.name, comp.args) }); err != nil {
			return err
		}
	}
	return withFreePorts(c.startKwok)
}

// componentServing are the serving flags of kube-controller-manager and
// kube-scheduler: healthz on a loopback port (self-signed), no leader
// election, delegated authentication through the admin kubeconfig.
func (c *ControlPlane) componentServing(port int) []string {
	return []string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--authentication-kubeconfig=" + c.kubeconfig,
		"--authorization-kubeconfig=" + c.kubeconfig,
		"--leader-elect=false",
	}
}

// startComponent starts kube-controller-manager or kube-scheduler and
// waits for its /healthz.
func (c *ControlPlane) startComponent(name string, args func(port int) []string) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	p, err := startProcess(name, filepath.Join(c.binDir, name), args(ports[0]), c.logPath(name))
	if err != nil {
		return err
	}
	c.cluster = append(c.cluster, p)
	// The component serves a self-signed certificate of its own, and
	// /healthz is open to anyone; there is nothing to verify.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probe
	err = p.waitReady(apiserverReadyTimeout, func(ctx context.Context) error {
		return probe(ctx, client, fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0]))
	})
	if err != nil {
		c.cluster = c.cluster[:len(c.cluster)-1]
		_ = p.stop()
	}
	return err
}

// startKwok runs kwok with the stages hack/controlplane installs next to
// it, managing the nodes labelled type=kwok.
func (c *ControlPlane) startKwok() error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	args := []string{
		"--kubeconfig=" + c.kubeconfig,
		"--config=" + filepath.Join(c.binDir, "kwok-stages.yaml"),
		"--manage-nodes-with-label-selector=type=kwok",
		"--cidr=" + PodCIDR,
		"--node-ip=" + cmp.Or(c.opts.NodeIP, "127.0.0.1"),
		"--server-address=" + addr,
	}
	p, err := startProcess("kwok", filepath.Join(c.binDir, "kwok"), args, c.logPath("kwok"))
	if err != nil {
		return err
	}
	c.cluster = append(c.cluster, p)
	err = p.waitReady(apiserverReadyTimeout, func(ctx context.Context) error {
		return probe(ctx, http.DefaultClient, "http://"+addr+"/healthz")
	})
	if err != nil {
		c.cluster = c.cluster[:len(c.cluster)-1]
		_ = p.stop()
	}
	return err
}

// createNode registers the fake node and removes the not-ready taint that
// admission puts on every new Node: no node-lifecycle controller runs to
// lift it once kwok reports the node Ready.
func createNode(ctx context.Context, kube kubernetes.Interface) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("2000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: NodeName,
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": NodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", NodeName, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, clusterReadyTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		var keep []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(n.Spec.Taints) {
			return true, nil
		}
		n.Spec.Taints = keep
		_, err = kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, nil // a conflict with kwok's status write retries
	})
}

// createVolumes creates the default StorageClass and StaticVolumes
// hostPath volumes in it. Claims bind at once (Immediate), and no kubelet
// ever mounts them.
func createVolumes(ctx context.Context, kube kubernetes.Interface) error {
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       "kubernetes.io/no-provisioner",
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if _, err := kube.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating StorageClass %s: %w", StorageClass, err)
	}
	for i := range StaticVolumes {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("local-pv-%02d", i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(volumeSize)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              StorageClass,
				PersistentVolumeSource: corev1.PersistentVolumeSource{
					HostPath: &corev1.HostPathVolumeSource{Path: fmt.Sprintf("/var/lib/hcc-local/pv-%02d", i)},
				},
			},
		}
		if _, err := kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating PersistentVolume %s: %w", pv.Name, err)
		}
	}
	return nil
}

// waitNodeReady waits until kwok reports the fake node Ready.
func waitNodeReady(ctx context.Context, kube kubernetes.Interface) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, clusterReadyTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready (kwok log: %s): %w", NodeName, "kwok.log", err)
	}
	return nil
}

// logNames are the processes whose logs exist, in start order.
func (c *ControlPlane) logNames() []string {
	names := []string{"etcd", "kube-apiserver"}
	if c.opts.Cluster {
		names = append(names, "kube-controller-manager", "kube-scheduler", "kwok")
	}
	return names
}
