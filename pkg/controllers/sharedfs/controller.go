// Package sharedfs is the SharedFileSystem reconciler: each SharedFileSystem
// in the host namespace becomes a workspace-files-controller (WFC)
// Deployment with its Service, its data claim and an ingress NetworkPolicy
// that admits only the Hosts it names.
//
// What it writes is planned by the pure package resources
// (resources.MakeChildren), which render uses too; this package holds the
// informers, the sync that ensures those children and the status.
package sharedfs

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	klabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	clerumlisters "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

// Config is what the SharedFileSystem reconciler needs besides its Deps.
type Config struct {
	// Namespace is the host namespace (CONTEXT_MAPPER_HOST_NAMESPACE),
	// where SharedFileSystems and their children live. It overrides
	// Build.HostNamespace.
	Namespace string
	Build     resources.Options
	// Resync is the interval of the full reconcile that queues every
	// SharedFileSystem (CONTEXT_MAPPER_SFS_RESYNC_SEC); 0 disables it (the
	// configuration warns at boot).
	Resync  time.Duration
	Workers int // HCC_FILESYSTEM_WORKERS
}

// gvk is the owners' kind, for controller references.
var gvk = resources.GVK

// refusedRetry is how soon a SharedFileSystem one of whose names an object
// HCC does not own holds is looked at again: the holder may be removed by
// hand, and the informers of managed objects would not say so.
const refusedRetry = 5 * time.Minute

// Controller is the SharedFileSystem reconciler (docs/sharedfilesystem.md).
type Controller struct {
	kube kubernetes.Interface
	hcc  clientset.Interface
	cfg  Config

	filesystems clerumlisters.SharedFileSystemLister
	configMaps  corelisters.ConfigMapLister
	// configMapInformer is the informer of the one ConfigMap read, by
	// name. The Host operator asks kit for the same ConfigMap by default
	// with a transform that keeps only its existence; this reconciler
	// reads a key's value, so its informer is another.
	configMapInformer cache.SharedIndexInformer
	deployments       appslisters.DeploymentLister
	services          corelisters.ServiceLister
	claims            corelisters.PersistentVolumeClaimLister
	policies          networkinglisters.NetworkPolicyLister

	base     *kit.Controller[cache.ObjectName]
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName] // base's
	children *kit.Children
	// claimKind writes the data claims under HCC's mark.
	claimKind kit.Kind[*corev1.PersistentVolumeClaim]
	recorder  record.EventRecorder
	metrics   *Metrics
	clock     clock.WithTicker
	// statusWrites skips a status write the cache has not shown yet.
	statusWrites *kit.StatusWrites

	state *fsState
}

var _ kit.Reconciler = (*Controller)(nil)

// New returns the reconciler of the SharedFileSystems of cfg.Namespace and
// their children, from d.Informers.
func New(d kit.Deps, cfg Config) *Controller {
	clk := d.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	ns := cfg.Namespace
	cfg.Build.HostNamespace = ns
	filesystems := d.Informers.HCC(ns).Clerum().V1alpha1().SharedFileSystems()
	// The JWT key ConfigMap is the platform's, unmanaged: only it is
	// watched and cached, by name, not every ConfigMap of the namespace.
	configMapInformer := d.Informers.ConfigMap(ns, cfg.Build.JWTConfigMap, kit.Transform{})
	// The same selections as the Host operator's: shared watches.
	deployments := d.Informers.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	services := d.Informers.Kube(ns, kit.ManagedObjects, "services").Core().V1().Services()
	claims := d.Informers.Kube(ns, kit.ManagedObjects, "persistentvolumeclaims").Core().V1().PersistentVolumeClaims()
	policies := d.Informers.Kube(ns, kit.ManagedObjects, "networkpolicies").Networking().V1().NetworkPolicies()

	c := &Controller{
		kube:              d.Kube,
		hcc:               d.HCC,
		cfg:               cfg,
		filesystems:       filesystems.Lister(),
		configMaps:        corelisters.NewConfigMapLister(configMapInformer.GetIndexer()),
		configMapInformer: configMapInformer,
		deployments:       deployments.Lister(),
		services:          services.Lister(),
		claims:            claims.Lister(),
		policies:          policies.Lister(),
		recorder:          d.Recorder,
		metrics:           NewMetrics(d.Registry),
		clock:             clk,
		statusWrites:      kit.NewStatusWrites(clk),
		state:             newFSState(),
	}
	// A failed sync retries after 1 s, doubling to at most 5 min.
	c.base = kit.NewController(d, kit.Spec[cache.ObjectName]{Name: "sharedfilesystem", Sync: c.syncSharedFileSystem,
		Resource: clerumv1alpha1.Resource("sharedfilesystems"), BaseDelay: time.Second, MaxDelay: 5 * time.Minute,
		Workers: cfg.Workers, ErrorsMetric: "clerum_hcc_sfs_reconcile_errors_total"})
	c.queue = c.base.Queue()
	c.claimKind = kit.PersistentVolumeClaims.WithMarker(kit.NewMarker(cfg.Build.ClaimMark))
	c.children = kit.NewChildren(d.Kube, d.Informers, clerumv1alpha1.FieldManagerSharedFileSystem, d.Recorder, func(kind string, cause kit.Cause) {
		c.metrics.Refused.WithLabelValues(kind, string(cause)).Inc()
	}).WithHold(d.Hold)

	// The primary kind, as For declares it, and its deletions recorded.
	c.base.Watches(filesystems.Informer(), c.ownHandlers(c.base.Add))
	// Children of Hosts share these informers; the owner lookup ignores
	// them (their controller reference is a Host's, and they carry no
	// clerum.io/sharedfilesystem).
	c.base.Owns(kit.OwnerByRefOrLabel(gvk.GroupVersion().String(), gvk.Kind, ns, names.LabelSharedFileSystem),
		deployments.Informer(), services.Informer(), claims.Informer(), policies.Informer())
	c.base.Watches(configMapInformer, c.configMapHandlers())
	// Every SharedFileSystem at once and every Resync: the full reconcile
	// (a claim bound or a pod become ready is also an informer event, but
	// a holder of a name removed by hand is not).
	c.base.OnStart(func(context.Context) error { c.queueAll(); return nil })
	c.base.Resync(cfg.Resync, c.queueAll)
	return c
}

// Name implements kit.Reconciler.
func (c *Controller) Name() string { return c.base.Name() }

// Run implements kit.Reconciler.
func (c *Controller) Run(ctx context.Context) error { return c.base.Run(ctx) }

// queueAll queues every SharedFileSystem in the cache.
func (c *Controller) queueAll() {
	all, _ := c.filesystems.SharedFileSystems(c.cfg.Namespace).List(klabels.Everything())
	for _, fs := range all {
		c.queue.Add(cache.ObjectName{Namespace: fs.Namespace, Name: fs.Name})
	}
}

// ownHandlers queue a SharedFileSystem on every change but a status-only
// one, and record its deletion: its children, the data claim included, are
// deleted only for a deletion this process observed.
func (c *Controller) ownHandlers(enqueue func(cache.ObjectName)) cache.ResourceEventHandler {
	own := kit.OwnHandlers(enqueue)
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { own.OnAdd(obj, false) },
		UpdateFunc: own.OnUpdate,
		DeleteFunc: func(obj any) {
			if fs, ok := kit.Unwrap(obj).(*clerumv1alpha1.SharedFileSystem); ok && fs != nil {
				c.state.deleted.Observe(fs.Name, fs.UID)
			}
			own.OnDelete(obj)
		},
	}
}

// configMapHandlers queue every SharedFileSystem when the JWT key
// ConfigMap appears, changes or goes: they all read the one ConfigMap.
// Other ConfigMaps of the namespace are ignored.
func (c *Controller) configMapHandlers() cache.ResourceEventHandler {
	relevant := func(obj any) bool {
		cm, ok := kit.Unwrap(obj).(*corev1.ConfigMap)
		if ok && cm != nil {
			return cm.Name == c.cfg.Build.JWTConfigMap
		}
		key, ok := kit.KeyOf(obj)
		return ok && key.Name == c.cfg.Build.JWTConfigMap
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if relevant(obj) {
				c.queueAll()
			}
		},
		UpdateFunc: func(old, cur any) {
			// A change of another key (the ConfigMap is shared by the
			// platform) moves nothing a file system reads.
			key := c.cfg.Build.JWTConfigMapKey
			ov, had := old.(*corev1.ConfigMap).Data[key]
			nv, has := cur.(*corev1.ConfigMap).Data[key]
			if relevant(cur) && (ov != nv || had != has) {
				c.queueAll()
			}
		},
		DeleteFunc: func(obj any) {
			if relevant(obj) {
				c.queueAll()
			}
		},
	}
}

// fsState is what the reconciler remembers between syncs: the file systems
// it saw deleted, and each one's phase and block reason, for events and
// gauges (docs/reconcilers.md#memory).
type fsState struct {
	// deleted: a file system's children, the data claim included, are
	// deleted only for a deletion this process observed.
	deleted *kit.Deletions
	// block is each file system's block reason, so a block and its release
	// are each one event.
	block *kit.Reasons

	mu    sync.Mutex
	phase map[string]clerumv1alpha1.FileSystemPhase
	// available holds the UID of each file system whose WFC this process
	// saw available: one that stops being available is Degraded, not
	// Initializing.
	available map[string]types.UID
}

func newFSState() *fsState {
	return &fsState{deleted: kit.NewDeletions(gvk.Kind), block: kit.NewReasons(),
		phase: map[string]clerumv1alpha1.FileSystemPhase{}, available: map[string]types.UID{}}
}

// wasAvailable reports whether fs's WFC has been available: seen so by
// this process, or, after a restart, as fs's status last said.
func (s *fsState) wasAvailable(fs *clerumv1alpha1.SharedFileSystem) bool {
	s.mu.Lock()
	uid, ok := s.available[fs.Name]
	s.mu.Unlock()
	if ok && uid == fs.UID {
		return true
	}
	return meta.IsStatusConditionTrue(fs.Status.Conditions, clerumv1alpha1.ConditionWorkloadReady)
}

func (s *fsState) markAvailable(fs *clerumv1alpha1.SharedFileSystem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.available[fs.Name] = fs.UID
}

func (s *fsState) setPhase(name string, p clerumv1alpha1.FileSystemPhase) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase[name] = p
}

// forget drops a file system that is gone from the gauges. Its deletion,
// if observed, is remembered until its children are gone (gone).
func (s *fsState) forget(name string) {
	s.block.Forget(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.phase, name)
	delete(s.available, name)
}

// Metrics are the reconciler's series, all named clerum_hcc_sfs_*; its
// failed syncs are counted by its kit.Controller, in
// clerum_hcc_sfs_reconcile_errors_total.
type Metrics struct {
	FileSystems *prometheus.GaugeVec
	Blocked     *prometheus.GaugeVec
	Refused     *prometheus.CounterVec
}

// NewMetrics registers the reconciler's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		FileSystems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clerum_hcc_sfs_filesystems",
			Help: "SharedFileSystems by phase (Initializing, Ready, Degraded).",
		}, []string{"phase"}),
		Blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clerum_hcc_sfs_blocked",
			Help: "SharedFileSystems kept from deploying, by reason (ConfigMissing, ConfigInvalid).",
		}, []string{"reason"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_sfs_children_refused_total",
			Help: "SharedFileSystem children not written because an object HCC does not own holds their name, or the change is one HCC does not make (a claim shrinking), by kind and cause.",
		}, []string{"kind", "cause"}),
	}
	reg.MustRegister(m.FileSystems, m.Blocked, m.Refused)
	return m
}

var (
	phases       = []clerumv1alpha1.FileSystemPhase{clerumv1alpha1.FileSystemInitializing, clerumv1alpha1.FileSystemReady, clerumv1alpha1.FileSystemDegraded}
	blockReasons = []string{reasons.ConfigMissing, reasons.ConfigInvalid}
)

// refresh sets the gauges from st.
func (m *Metrics) refresh(st *fsState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	byPhase := map[clerumv1alpha1.FileSystemPhase]int{}
	for _, p := range st.phase {
		byPhase[p]++
	}
	for _, p := range phases {
		m.FileSystems.WithLabelValues(string(p)).Set(float64(byPhase[p]))
	}
	for _, r := range blockReasons {
		m.Blocked.WithLabelValues(r).Set(float64(st.block.Count(r)))
	}
}
