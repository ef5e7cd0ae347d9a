// Package globalfs is the GlobalFileSystem reconciler: each GlobalFileSystem
// in the GFS namespace becomes a gfsc writer Deployment and Service, an
// egress NetworkPolicy that lets gfsc reach only Postgres and DNS, and a
// one-shot Job that seeds the drive's root directory
// (docs/globalfilesystem.md).
//
// What those children are is decided by the pure package resources
// (resources.MakeChildren), which render shares; this package reads the
// caches, ensures the children through the kit, and writes status.
package globalfs

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/kit"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	clerumlisters "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
)

// Config is what the GlobalFileSystem reconciler needs besides its Deps.
type Config struct {
	// Namespace is where GlobalFileSystems and their children live
	// (CONTEXT_MAPPER_GFS_NAMESPACE).
	Namespace string
	Build     resources.Options
	// Resync is the interval of the full reconcile
	// (CONTEXT_MAPPER_GFS_RESYNC_SEC); 0 disables it.
	Resync  time.Duration
	Workers int // HCC_FILESYSTEM_WORKERS
	// SeedKey signs and verifies the seed Job's mark
	// (mark.PurposeSeedJob, from INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET).
	// Without a usable key no seed Job is created.
	SeedKey mark.Key
}

// gvk is the owners' kind, for controller references.
var gvk = resources.GVK

// refusedRetry is how soon a GlobalFileSystem some of whose names an object
// HCC does not own holds is looked at again: the holder may be removed by
// hand, and no event of the informers of managed objects would say so.
const refusedRetry = 5 * time.Minute

// Controller is the GlobalFileSystem reconciler (docs/globalfilesystem.md).
type Controller struct {
	kube kubernetes.Interface
	hcc  clientset.Interface
	cfg  Config

	filesystems clerumlisters.GlobalFileSystemLister
	secrets     corelisters.SecretLister
	configMaps  corelisters.ConfigMapLister
	// configMapInformer is the informer of the one ConfigMap read.
	configMapInformer cache.SharedIndexInformer
	deployments       appslisters.DeploymentLister
	services          corelisters.ServiceLister
	policies          networkinglisters.NetworkPolicyLister
	jobs              batchlisters.JobLister

	base     *kit.Controller[cache.ObjectName]
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName] // base's
	children *kit.Children
	recorder record.EventRecorder
	metrics  *Metrics
	clock    clock.WithTicker
	// statusWrites skips a status write the cache has not shown yet.
	statusWrites *kit.StatusWrites
	log          zerolog.Logger // base's: every line names the reconciler

	state *gfsState
	// wait is the init container's wait target and the configuration
	// digest it was read under (buildOptions).
	wait struct {
		mu                 sync.Mutex
		digest, host, port string
	}
}

// New returns the reconciler of the GlobalFileSystems of cfg.Namespace and
// their children there, from d.Informers.
func New(d kit.Deps, cfg Config) *Controller {
	clk := d.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	ns := cfg.Namespace
	filesystems := d.Informers.HCC(ns).Clerum().V1alpha1().GlobalFileSystems()
	secrets := d.Informers.Secrets(ns)
	// The JWT key ConfigMap is the platform's, unmanaged: only it is
	// watched and cached, by name, not every ConfigMap of the namespace.
	configMaps := d.Informers.ConfigMap(ns, cfg.Build.JWTConfigMap, kit.Transform{})
	deployments := d.Informers.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	services := d.Informers.Kube(ns, kit.ManagedObjects, "services").Core().V1().Services()
	policies := d.Informers.Kube(ns, kit.ManagedObjects, "networkpolicies").Networking().V1().NetworkPolicies()
	jobs := d.Informers.Kube(ns, kit.ManagedObjects, "jobs").Batch().V1().Jobs()

	c := &Controller{
		kube:              d.Kube,
		hcc:               d.HCC,
		cfg:               cfg,
		filesystems:       filesystems.Lister(),
		secrets:           secrets.Lister(),
		configMaps:        corelisters.NewConfigMapLister(configMaps.GetIndexer()),
		configMapInformer: configMaps,
		deployments:       deployments.Lister(),
		services:          services.Lister(),
		policies:          policies.Lister(),
		jobs:              jobs.Lister(),
		recorder:          d.Recorder,
		metrics:           NewMetrics(d.Registry),
		clock:             clk,
		statusWrites:      kit.NewStatusWrites(clk),
		state:             newGFSState(),
	}
	// A failed sync retries after 1 s, doubling to at most 5 min.
	c.base = kit.NewController(d, kit.Spec[cache.ObjectName]{Name: "globalfilesystem", Sync: c.syncGlobalFileSystem,
		Resource:  clerumv1alpha1.Resource("globalfilesystems"),
		BaseDelay: time.Second, MaxDelay: 5 * time.Minute, Workers: cfg.Workers,
		ErrorsMetric: "clerum_hcc_gfs_reconcile_errors_total"})
	c.queue, c.log = c.base.Queue(), c.base.Log()
	c.children = kit.NewChildren(d.Kube, d.Informers, clerumv1alpha1.FieldManagerGlobalFileSystem, d.Recorder, func(kind string, cause kit.Cause) {
		c.metrics.Refused.WithLabelValues(kind, string(cause)).Inc()
	}).WithHold(d.Hold)

	c.base.For(filesystems.Informer())
	// A drive is freed when its holder goes or names another drive, and
	// when the holder's gfsc Deployment goes: every GlobalFileSystem is
	// looked at again, so the next one takes the drive over.
	c.base.Watches(filesystems.Informer(), c.drivesFreed())
	c.base.Watches(deployments.Informer(), cache.ResourceEventHandlerFuncs{DeleteFunc: func(any) { c.enqueueAll() }})
	c.base.Owns(kit.OwnerByRefOrLabel(gvk.GroupVersion().String(), gvk.Kind, ns, names.LabelGlobalFileSystem),
		deployments.Informer(), services.Informer(), policies.Informer(), jobs.Informer())
	c.base.Watches(secrets.Informer(), c.configHandlers(cfg.Build.PostgresSecret))
	c.base.Watches(configMaps, c.configHandlers(cfg.Build.JWTConfigMap))
	// Every GlobalFileSystem once the caches synced, and again every
	// cfg.Resync (the periodic full reconcile).
	c.base.OnStart(func(context.Context) error { c.enqueueAll(); return nil })
	c.base.Resync(cfg.Resync, c.enqueueAll)
	return c
}

// Name implements kit.Reconciler.
func (c *Controller) Name() string { return c.base.Name() }

// Run implements kit.Reconciler: it waits for the caches, queues every
// GlobalFileSystem once and then every Resync (the periodic full
// reconcile), and serves the queue with cfg.Workers workers. An informer
// that could not be wired makes it fail at once.
func (c *Controller) Run(ctx context.Context) error { return c.base.Run(ctx) }

// enqueueAll queues every GlobalFileSystem in the cache.
func (c *Controller) enqueueAll() {
	all, _ := c.filesystems.GlobalFileSystems(c.cfg.Namespace).List(k8slabels.Everything())
	for _, g := range all {
		c.queue.Add(cache.ObjectName{Namespace: g.Namespace, Name: g.Name})
	}
}

// drivesFreed queues every GlobalFileSystem when one is deleted or its
// drive (or deletion) changes.
func (c *Controller) drivesFreed() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*clerumv1alpha1.GlobalFileSystem)
			n, ok2 := cur.(*clerumv1alpha1.GlobalFileSystem)
			if ok1 && ok2 && (o.Spec.DriveName != n.Spec.DriveName || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)) {
				c.enqueueAll()
			}
		},
		DeleteFunc: func(any) { c.enqueueAll() },
	}
}

// configHandlers queue every GlobalFileSystem when the object named name
// (the Postgres Secret, the JWT ConfigMap: one for all of them) is
// created, changed or deleted.
func (c *Controller) configHandlers(name string) cache.ResourceEventHandler {
	requeue := func(obj any) {
		if key, ok := kit.KeyOf(obj); ok && key.Name == name {
			c.enqueueAll()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: requeue,
		UpdateFunc: func(old, cur any) {
			o, errOld := metaOf(old)
			n, errNew := metaOf(cur)
			if errOld || errNew || o != n {
				requeue(cur)
			}
		},
		DeleteFunc: requeue,
	}
}

// metaOf returns obj's resourceVersion; true when obj is neither a Secret
// nor a ConfigMap.
func metaOf(obj any) (string, bool) {
	switch o := obj.(type) {
	case *corev1.Secret:
		return o.ResourceVersion, false
	case *corev1.ConfigMap:
		return o.ResourceVersion, false
	}
	return "", true
}

// gfsState is what the reconciler remembers between syncs, for events and
// gauges: each GlobalFileSystem's block reason and drive conflict (each
// entered and left is one event), the seed Job it marked, whether its seed
// failure was reported, and its phase.
type gfsState struct {
	block, conflict *kit.Reasons

	mu sync.Mutex
	// marked is the UID of the seed Job this process last created and
	// marked, per GlobalFileSystem, so a cache that shows the Job before
	// its mark does not get it replaced.
	marked     map[string]types.UID
	seedFailed map[string]bool
	phase      map[string]clerumv1alpha1.FileSystemPhase
}

func newGFSState() *gfsState {
	return &gfsState{block: kit.NewReasons(), conflict: kit.NewReasons(),
		marked: map[string]types.UID{}, seedFailed: map[string]bool{}, phase: map[string]clerumv1alpha1.FileSystemPhase{}}
}

func (s *gfsState) setSeedMarked(gfs string, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marked[gfs] = uid
}

func (s *gfsState) seedMarked(gfs string) types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marked[gfs]
}

// setSeedFailed records whether gfs's seed has failed and reports whether
// that is news.
func (s *gfsState) setSeedFailed(gfs string, failed bool) (changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed = s.seedFailed[gfs] != failed
	if failed {
		s.seedFailed[gfs] = true
	} else {
		delete(s.seedFailed, gfs)
	}
	return changed
}

func (s *gfsState) setPhase(gfs string, p clerumv1alpha1.FileSystemPhase) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase[gfs] = p
}

// forget drops a GlobalFileSystem that is gone.
func (s *gfsState) forget(gfs string) {
	s.block.Forget(gfs)
	s.conflict.Forget(gfs)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.marked, gfs)
	delete(s.seedFailed, gfs)
	delete(s.phase, gfs)
}

// Metrics are the reconciler's series, all named clerum_hcc_gfs_*; its
// error counter, clerum_hcc_gfs_reconcile_errors_total, is its
// kit.Controller's.
type Metrics struct {
	FileSystems *prometheus.GaugeVec
	Refused     *prometheus.CounterVec
}

// NewMetrics registers the reconciler's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		FileSystems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clerum_hcc_gfs_globalfilesystems",
			Help: "GlobalFileSystems by phase (Initializing, Ready, Degraded).",
		}, []string{"phase"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_gfs_children_refused_total",
			Help: "Per-GlobalFileSystem objects not written because an object HCC does not own holds their name (or a change was refused), by kind and cause.",
		}, []string{"kind", "cause"}),
	}
	reg.MustRegister(m.FileSystems, m.Refused)
	return m
}

var phases = []clerumv1alpha1.FileSystemPhase{clerumv1alpha1.FileSystemInitializing, clerumv1alpha1.FileSystemReady, clerumv1alpha1.FileSystemDegraded}

// refresh sets the phase gauge from st.
func (m *Metrics) refresh(st *gfsState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	counts := map[clerumv1alpha1.FileSystemPhase]int{}
	for _, p := range st.phase {
		counts[p]++
	}
	for _, p := range phases {
		m.FileSystems.WithLabelValues(string(p)).Set(float64(counts[p]))
	}
}
