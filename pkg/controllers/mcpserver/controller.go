// Package mcpserver is the McpServer operator: each McpServer becomes a
// Deployment and a Service (stdio servers with the stdio bridge, remote
// servers behind the platform's egress proxy and its ConfigMap). What a
// server gets is planned by package resources, which render shares; this
// package holds the I/O around it: caches, writes through the kit, status.
package mcpserver

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	clerumlisters "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/names"
)

// Gate is the external-egress coordinator's runtime gate: a server's
// Deployment is created or rolled only while it is open.
type Gate interface {
	// Ready reports whether the egress policies of server's current
	// generation are in the cluster.
	Ready(server *clerumv1alpha1.McpServer) bool
	// OnGate registers the function told when a server's gate may have
	// changed.
	OnGate(func(server string))
	// Settled is closed once the gates say something about every server
	// (the first NetworkPolicy pass has reported). Until then a closed
	// gate says nothing: the operator syncs only the servers whose gates
	// are open, so a restart does not block and release every server on
	// its way up, and a cold start deploys each server as the first pass
	// releases it. Settling re-queues every server (OnGate).
	Settled() <-chan struct{}
}

// Config is what the operator reads of the configuration.
type Config struct {
	Namespace string // CONTEXT_MAPPER_NAMESPACE
	Build     resources.Options
	Images    *imagepolicy.Policy
	// Enforce blocks a server whose image the allowlist refuses; otherwise
	// the refusal is reported (ImageAllowed=False, AuditOnly) and the
	// server deploys.
	Enforce bool
	Workers int // HCC_MCPSERVER_WORKERS
}

// Controller is the McpServer operator.
type Controller struct {
	kube kubernetes.Interface
	hcc  clientset.Interface
	cfg  Config
	gate Gate

	servers     clerumlisters.McpServerLister
	serverIndex cache.Indexer
	deployments appslisters.DeploymentLister
	services    corelisters.ServiceLister
	configMaps  corelisters.ConfigMapLister
	secrets     corelisters.SecretLister

	base     *kit.Controller[cache.ObjectName]
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName] // base's
	children *kit.Children
	recorder record.EventRecorder
	metrics  *Metrics
	clock    clock.Clock
	// statusWrites skips a status write the cache has not shown yet.
	statusWrites *kit.StatusWrites

	// What the operator remembers of each server between syncs
	// (docs/reconcilers.md#memory): blocked, why it was last blocked, so
	// a block and its release are each one event, not one per sync;
	// states, its state; warned, the generation a remote warning was last
	// given for; noted, the generation its FieldsIgnored event was last
	// given for. Reasons and states are counted as they are set, so the
	// gauges cost no walk over every server; gauges orders their
	// refreshes.
	blocked *kit.Reasons
	states  *kit.Reasons
	warned  *remoteWarnings
	noted   *remoteWarnings
	gauges  sync.Mutex
}

// New returns the operator over the McpServers of cfg.Namespace and the
// Deployments, Services, ConfigMaps and Secrets there, from d.Informers.
func New(d kit.Deps, gate Gate, cfg Config) *Controller {
	clk := clock.Clock(d.Clock)
	if d.Clock == nil {
		clk = clock.RealClock{}
	}
	ns := cfg.Namespace
	servers := d.Informers.HCC(ns).Clerum().V1alpha1().McpServers()
	deployments := d.Informers.Kube(ns, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	services := d.Informers.Kube(ns, kit.ManagedObjects, "services").Core().V1().Services()
	configMaps := d.Informers.Kube(ns, kit.ManagedObjects, "configmaps").Core().V1().ConfigMaps()
	// The cache holds key names and value digests, never a value.
	secrets := d.Informers.Secrets(ns)

	c := &Controller{
		kube:         d.Kube,
		hcc:          d.HCC,
		cfg:          cfg,
		gate:         gate,
		servers:      servers.Lister(),
		serverIndex:  servers.Informer().GetIndexer(),
		deployments:  deployments.Lister(),
		services:     services.Lister(),
		configMaps:   configMaps.Lister(),
		secrets:      secrets.Lister(),
		recorder:     d.Recorder,
		metrics:      NewMetrics(d.Registry),
		clock:        clk,
		statusWrites: kit.NewStatusWrites(clk),
		blocked:      kit.NewReasons(),
		states:       kit.NewReasons(),
		warned:       newRemoteWarnings(),
		noted:        newRemoteWarnings(),
	}
	c.children = kit.NewChildren(d.Kube, d.Informers, clerumv1alpha1.FieldManagerMcpServer, d.Recorder, func(kind string, cause kit.Cause) {
		c.metrics.Refused.WithLabelValues(kind, string(cause)).Inc()
	}).WithHold(d.Hold)
	// A failed sync retries after 1 s, doubling to at most 5 min.
	c.base = kit.NewController(d, kit.Spec[cache.ObjectName]{Name: "mcpserver", Sync: c.syncMcpServer,
		Resource: clerumv1alpha1.Resource("mcpservers"), BaseDelay: time.Second, MaxDelay: 5 * time.Minute,
		Workers: cfg.Workers, ErrorsMetric: "clerum_hcc_mcpserver_reconcile_errors_total"})
	c.queue = c.base.Queue()

	c.base.Indexes(servers.Informer(), cache.Indexers{secretIndex: referencedSecrets})
	c.base.For(servers.Informer())
	owner := kit.OwnerByRefOrLabel(resources.GVK.GroupVersion().String(), resources.GVK.Kind, ns, names.LabelMcpServer)
	c.base.Owns(owner, deployments.Informer(), services.Informer(), configMaps.Informer())
	c.base.Watches(secrets.Informer(), c.secretHandlers())
	gate.OnGate(func(server string) { c.base.Add(cache.ObjectName{Namespace: ns, Name: server}) })
	return c
}

// Name implements kit.Reconciler.
func (c *Controller) Name() string { return "mcpserver" }

// Run implements kit.Reconciler: it waits for the caches, then syncs
// servers with cfg.Workers workers until ctx is done; until the egress
// gates settle, only servers whose gates are open. An informer that could not be wired makes it fail at once.
func (c *Controller) Run(ctx context.Context) error { return c.base.Run(ctx) }

// secretHandlers re-queue exactly the servers that name a changed Secret.
func (c *Controller) secretHandlers() cache.ResourceEventHandler {
	requeue := func(obj any) {
		key, ok := kit.KeyOf(obj)
		if !ok {
			return
		}
		dependents, err := c.serverIndex.ByIndex(secretIndex, key.Name)
		if err != nil {
			return
		}
		for _, o := range dependents {
			if k, ok := kit.KeyOf(o); ok {
				c.base.Add(k)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: requeue,
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Secret), cur.(*corev1.Secret)
			if o.ResourceVersion != n.ResourceVersion {
				requeue(cur)
			}
		},
		DeleteFunc: requeue,
	}
}

// Metrics are the operator's series, all named clerum_hcc_mcpserver_*
// (its error counter, clerum_hcc_mcpserver_reconcile_errors_total, is
// kit.Controller's).
type Metrics struct {
	Servers *prometheus.GaugeVec
	Blocked *prometheus.GaugeVec
	Refused *prometheus.CounterVec
}

// NewMetrics registers the operator's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Servers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clerum_hcc_mcpserver_servers",
			Help: "McpServers by state (ready, deployed, blocked, disabled).",
		}, []string{"state"}),
		Blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clerum_hcc_mcpserver_blocked",
			Help: "McpServers kept from deploying, by reason.",
		}, []string{"reason"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_mcpserver_children_refused_total",
			Help: "Children not written because an object HCC does not own holds their name, by kind and cause.",
		}, []string{"kind", "cause"}),
	}
	reg.MustRegister(m.Servers, m.Blocked, m.Refused)
	return m
}

// deploymentOf returns the live Deployment of s, or nil.
func (c *Controller) deploymentOf(s *clerumv1alpha1.McpServer) *appsv1.Deployment {
	d, err := c.deployments.Deployments(s.Namespace).Get(names.McpServerWorkload(s.Name))
	if err != nil {
		return nil
	}
	return d
}
