// Package host is the Host operator: each Host becomes an mcp-host
// Deployment with its Service, workspace claim, runtime-token Secret and
// per-Host identity (ServiceAccount, Role, RoleBinding), the desktop
// sidecar and its NetworkPolicy when asked for, and in the channels
// namespace a channel-reader Deployment, Service and egress policy. What
// those objects are is planned in the pure package resources; this package
// reads the caches, writes the plan through the kit, and keeps the
// credential and the status.
package host

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/kit"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	clerumlisters "github.com/clerum/hcc/pkg/generated/listers/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// Config is what the Host operator needs besides its Deps.
type Config struct {
	// ContextNamespace is where Contexts live (CONTEXT_MAPPER_NAMESPACE).
	ContextNamespace string
	// TargetNamespace is the namespace named to the Control API
	// (HCC_TARGET_NAMESPACE).
	TargetNamespace string
	Build           resources.Options
	// RefreshBefore is how long before expiry a credential is replaced
	// (HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC).
	RefreshBefore time.Duration
	// MaxLifetime is the longest credential lifetime accepted
	// (HCC_HOST_CREDENTIAL_MAX_LIFETIME_SEC); an adopted credential's
	// expiry may lie no further out.
	MaxLifetime time.Duration
	// AdoptCreatedBefore (HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE): an
	// unmarked runtime-token Secret the API server created before it may
	// be adopted instead of re-issued (adoptCredential); zero: never.
	AdoptCreatedBefore time.Time
	// Resync is the interval of the full reconcile and orphan sweep
	// (CONTEXT_MAPPER_HOST_RESYNC_SEC); 0 sweeps once, at startup.
	Resync time.Duration
	// Caps bound the sweep's unexplained deletes (HCC_HOST_ORPHAN_DELETE_CAP,
	// …_PERCENT).
	Caps    kit.Caps
	Workers int // HCC_HOST_WORKERS
}

// gvk is the owners' kind, for controller references.
var gvk = resources.GVK

// Index names on shared informers; prefixed so no other reconciler's
// indexer on the same informer clashes.
const (
	hostsByContext = "host.contextRef"
	hostsBySecret  = "host.secretRef"
	contextsByID   = "host.contextId"
	// sweepKey is the one key of the sweep queue.
	sweepKey = "sweep"
	// refusedRetry is how soon a Host some of whose names an object HCC
	// does not own holds is looked at again: the holder may be removed by
	// hand, and no event of HCC's informers (which watch managed objects)
	// would say so.
	refusedRetry = 5 * time.Minute
	// retryBase and retryMax are the main queue's backoff: a failed sync
	// retries after retryBase, doubling per failure to at most retryMax.
	// In a Control API outage it paces each Host's syncs; the breaker
	// (breaker.go) bounds the calls across all of them.
	retryBase = time.Second
	retryMax  = 5 * time.Minute
)

// Controller is the Host operator (docs/host.md).
type Controller struct {
	kube   kubernetes.Interface
	hcc    clientset.Interface
	cfg    Config
	issuer controlapi.CredentialIssuer

	hosts       clerumlisters.HostLister
	hostIndex   cache.Indexer
	contexts    clerumlisters.ContextLister
	contextIdx  cache.Indexer
	secrets     corelisters.SecretLister
	deployments appslisters.DeploymentLister
	services    corelisters.ServiceLister
	claims      corelisters.PersistentVolumeClaimLister
	accounts    corelisters.ServiceAccountLister
	roles       rbaclisters.RoleLister
	bindings    rbaclisters.RoleBindingLister
	policies    networkinglisters.NetworkPolicyLister
	// The channels namespace's children.
	readerDeployments appslisters.DeploymentLister
	readerServices    corelisters.ServiceLister
	readerPolicies    networkinglisters.NetworkPolicyLister
	// configMaps caches the one ConfigMap every mcp-host container loads
	// (cfg.Build.ConfigMapName), and of it only that it exists; nil when
	// no ConfigMap is named.
	configMaps cache.SharedIndexInformer

	base      *kit.Controller[cache.ObjectName]
	queue     workqueue.TypedRateLimitingInterface[cache.ObjectName] // base's
	sweeps    workqueue.TypedRateLimitingInterface[string]
	sweepLoop *kit.Loop[string]
	// stops is the fast path that scales a Host's pods to zero when its
	// Context no longer vouches for the contextId they carry. It has a
	// worker of its own and never calls the Control API, so a stop never
	// waits behind credential calls on the main queue.
	stops    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	stopLoop *kit.Loop[cache.ObjectName]
	children *kit.Children
	// claimKind writes the workspace claims under HCC's mark.
	claimKind kit.Kind[*corev1.PersistentVolumeClaim]
	recorder  record.EventRecorder
	metrics   *Metrics
	clock     clock.Clock
	// statusWrites skips a status write the cache has not shown yet.
	statusWrites *kit.StatusWrites
	log          zerolog.Logger

	state   *hostState
	breaker *breaker
}

// New returns the Host operator over the Hosts of cfg.Build.HostNamespace
// and their children there and in cfg.Build.ChannelsNamespace, from
// d.Informers; issuer obtains bootstrap credentials from the Control API.
func New(d kit.Deps, issuer controlapi.CredentialIssuer, cfg Config) *Controller {
	clk := clock.Clock(d.Clock)
	if d.Clock == nil {
		clk = clock.RealClock{}
	}
	hostNS, readerNS := cfg.Build.HostNamespace, cfg.Build.ChannelsNamespace
	hosts := d.Informers.HCC(hostNS).Clerum().V1alpha1().Hosts()
	contexts := d.Informers.HCC(cfg.ContextNamespace).Clerum().V1alpha1().Contexts()
	secrets := d.Informers.Secrets(hostNS)
	deployments := d.Informers.Kube(hostNS, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	services := d.Informers.Kube(hostNS, kit.ManagedObjects, "services").Core().V1().Services()
	claims := d.Informers.Kube(hostNS, kit.ManagedObjects, "persistentvolumeclaims").Core().V1().PersistentVolumeClaims()
	accounts := d.Informers.Kube(hostNS, kit.ManagedObjects, "serviceaccounts").Core().V1().ServiceAccounts()
	roles := d.Informers.Kube(hostNS, kit.ManagedObjects, "roles").Rbac().V1().Roles()
	bindings := d.Informers.Kube(hostNS, kit.ManagedObjects, "rolebindings").Rbac().V1().RoleBindings()
	policies := d.Informers.Kube(hostNS, kit.ManagedObjects, "networkpolicies").Networking().V1().NetworkPolicies()
	readerDeployments := d.Informers.Kube(readerNS, kit.ManagedObjects, "deployments").Apps().V1().Deployments()
	readerServices := d.Informers.Kube(readerNS, kit.ManagedObjects, "services").Core().V1().Services()
	readerPolicies := d.Informers.Kube(readerNS, kit.ManagedObjects, "networkpolicies").Networking().V1().NetworkPolicies()

	c := &Controller{
		kube:              d.Kube,
		hcc:               d.HCC,
		cfg:               cfg,
		issuer:            issuer,
		hosts:             hosts.Lister(),
		hostIndex:         hosts.Informer().GetIndexer(),
		contexts:          contexts.Lister(),
		contextIdx:        contexts.Informer().GetIndexer(),
		secrets:           secrets.Lister(),
		deployments:       deployments.Lister(),
		services:          services.Lister(),
		claims:            claims.Lister(),
		accounts:          accounts.Lister(),
		roles:             roles.Lister(),
		bindings:          bindings.Lister(),
		policies:          policies.Lister(),
		readerDeployments: readerDeployments.Lister(),
		readerServices:    readerServices.Lister(),
		readerPolicies:    readerPolicies.Lister(),
		sweeps:            kit.New(d.Queues, "host-sweep", kit.Backoff[string](time.Second, 5*time.Minute)),
		stops:             kit.New(d.Queues, "host-stop", kit.Backoff[cache.ObjectName](100*time.Millisecond, time.Minute)),
		recorder:          d.Recorder,
		metrics:           nil, // below: its expiry gauge reads the state
		clock:             clk,
		statusWrites:      kit.NewStatusWrites(clk),
		state:             newHostState(),
		breaker:           &breaker{},
	}
	c.base = kit.NewController(d, kit.Spec[cache.ObjectName]{Name: "host", Sync: c.syncHost,
		Resource: clerumv1alpha1.Resource("hosts"), BaseDelay: retryBase, MaxDelay: retryMax,
		Workers: cfg.Workers, ErrorsMetric: "clerum_hcc_host_reconcile_errors_total"})
	c.queue, c.log = c.base.Queue(), c.base.Log()
	c.metrics = NewMetrics(d.Registry, func() float64 { return c.state.soonestExpiry(c.clock.Now()) }, c.breaker.tripped)
	c.claimKind = kit.PersistentVolumeClaims.WithMarker(kit.NewMarker(cfg.Build.ClaimMark))
	c.children = kit.NewChildren(d.Kube, clerumv1alpha1.FieldManagerHost, d.Recorder, func(kind string, cause kit.Cause) {
		c.metrics.Refused.WithLabelValues(kind, string(cause)).Inc()
	}).WithHold(d.Hold)
	// The sweep and the stop fast path have queues and loops of their own,
	// run beside the main workers; their failures count with the main
	// queue's.
	c.sweepLoop = &kit.Loop[string]{Name: "host-sweep", Queue: c.sweeps, Sync: c.sweep, Log: d.Log, Errors: c.base.Errors()}
	c.stopLoop = &kit.Loop[cache.ObjectName]{Name: "host-stop", Queue: c.stops, Sync: c.syncStop, Log: d.Log,
		Resource: clerumv1alpha1.Resource("hosts"), Errors: c.base.Errors()}

	c.base.Indexes(hosts.Informer(), cache.Indexers{
		hostsByContext: func(obj any) ([]string, error) {
			if h, ok := obj.(*clerumv1alpha1.Host); ok {
				return []string{h.Spec.ContextRef}, nil
			}
			return nil, nil
		},
		hostsBySecret: func(obj any) ([]string, error) {
			if h, ok := obj.(*clerumv1alpha1.Host); ok && h.Spec.SecretRef != nil && h.Spec.SecretRef.Name != "" {
				return []string{h.Spec.SecretRef.Name}, nil
			}
			return nil, nil
		},
	})
	c.base.Indexes(contexts.Informer(), cache.Indexers{contextsByID: func(obj any) ([]string, error) {
		if c, ok := obj.(*clerumv1alpha1.Context); ok {
			return []string{c.Spec.ContextID}, nil
		}
		return nil, nil
	}})
	// A Host's own change (its contextRef) may also stop its pods.
	c.base.Watches(hosts.Informer(), c.hostHandlers(c.enqueueWithStop))
	owner := kit.OwnerByRefOrLabel(gvk.GroupVersion().String(), gvk.Kind, hostNS, names.LabelHost)
	c.base.Owns(owner, deployments.Informer(), services.Informer(), claims.Informer(),
		accounts.Informer(), roles.Informer(), bindings.Informer(), policies.Informer(),
		readerDeployments.Informer(), readerServices.Informer(), readerPolicies.Informer())
	c.base.Watches(secrets.Informer(), c.secretHandlers(owner))
	c.base.Watches(contexts.Informer(), c.contextHandlers())
	if name := cfg.Build.ConfigMapName; name != "" {
		c.configMaps = d.Informers.ConfigMap(hostNS, name, kit.Transform{Name: "existence-only", Func: existenceOnly})
		c.base.Watches(c.configMaps, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.queueAllHosts() },
			UpdateFunc: func(any, any) {},
			DeleteFunc: func(any) { c.queueAllHosts() },
		})
	}
	// The first sweep runs once the caches synced; each sweep asks for the
	// next one Resync later (sweep's Result), and a failed one retries on
	// the sweep queue's backoff.
	c.base.OnStart(func(context.Context) error { c.sweeps.Add(sweepKey); return nil })
	c.base.Beside(func(ctx context.Context) { c.sweepLoop.Run(ctx, 1) })
	c.base.Beside(func(ctx context.Context) { c.stopLoop.Run(ctx, 1) })
	return c
}

// existenceOnly is the ConfigMap informer's transform: the controller needs
// to know only that the ConfigMap exists, so none of its data is cached.
func existenceOnly(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil // a tombstone
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID,
		ResourceVersion: cm.ResourceVersion, DeletionTimestamp: cm.DeletionTimestamp}}, nil
}

// queueAllHosts queues every Host: the ConfigMap all of them load appeared
// or went.
func (c *Controller) queueAllHosts() {
	for _, o := range c.hostIndex.List() {
		if k, ok := kit.KeyOf(o); ok {
			c.queue.Add(k)
		}
	}
}

// configMissing returns why the Host's ConfigMap keeps its Deployment from
// being written, or "" when it exists or none is named.
func (c *Controller) configMissing() string {
	name := c.cfg.Build.ConfigMapName
	if c.configMaps == nil {
		return ""
	}
	if _, exists, err := c.configMaps.GetIndexer().GetByKey(c.cfg.Build.HostNamespace + "/" + name); err == nil && exists {
		return ""
	}
	return fmt.Sprintf("ConfigMap %s does not exist in %s: the mcp-host container loads it whole (its trust anchors and proxy), so no Deployment is written without it",
		name, c.cfg.Build.HostNamespace)
}

// Name implements kit.Reconciler.
func (c *Controller) Name() string { return "host" }

// Run implements kit.Reconciler: it waits for the caches, sweeps orphans
// once at startup and every Resync (each sweep also queues every Host: the
// periodic full reconcile), and serves the queue with cfg.Workers workers
// and the stop fast path with one. A wiring error makes it fail at once.
func (c *Controller) Run(ctx context.Context) error {
	// The base shuts down its own queue on every way out, and the sweep and
	// stop queues when their loops return; these cover a Run that fails
	// before they start.
	defer c.sweeps.ShutDown()
	defer c.stops.ShutDown()
	return c.base.Run(ctx)
}

// hostHandlers queue a Host on every change but a status-only one (its own
// status write must not queue it again), and on deletion.
func (c *Controller) hostHandlers(enqueue func(cache.ObjectName)) cache.ResourceEventHandler {
	own := kit.OwnHandlers(enqueue)
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { own.OnAdd(obj, false) },
		UpdateFunc: func(old, cur any) {
			// Someone removing HCC's finalizer is no spec change, but the
			// Host must get it back.
			o, n := old.(*clerumv1alpha1.Host), cur.(*clerumv1alpha1.Host)
			if !slices.Equal(o.Finalizers, n.Finalizers) {
				if k, ok := kit.KeyOf(cur); ok {
					enqueue(k)
					return
				}
			}
			own.OnUpdate(old, cur)
		},
		DeleteFunc: func(obj any) {
			if h, ok := kit.Unwrap(obj).(*clerumv1alpha1.Host); ok {
				// Observed: its leftovers are cleaned up whatever the caps.
				c.state.deleted.Observe(h.Name, h.UID)
			}
			own.OnDelete(obj)
		},
	}
}

// enqueueWithStop queues a Host on the main queue and on the stop fast
// path: a change that may move who holds its contextId.
func (c *Controller) enqueueWithStop(k cache.ObjectName) {
	c.stops.Add(k)
	c.queue.Add(k)
}

// secretHandlers queue the Host whose runtime-token Secret changed and the
// Hosts whose spec.secretRef names a changed Secret.
func (c *Controller) secretHandlers(owner func(metav1.Object) (cache.ObjectName, bool)) cache.ResourceEventHandler {
	requeue := func(obj any) {
		s, ok := kit.Unwrap(obj).(*corev1.Secret)
		if !ok {
			return
		}
		if _, deleted := obj.(cache.DeletedFinalStateUnknown); deleted || s.DeletionTimestamp != nil {
			c.forgetIssuanceOf(s)
		}
		if key, ok := owner(s); ok {
			c.queue.Add(key)
		}
		dependents, _ := c.hostIndex.ByIndex(hostsBySecret, s.Name)
		for _, o := range dependents {
			if k, ok := kit.KeyOf(o); ok {
				c.queue.Add(k)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: requeue,
		UpdateFunc: func(old, cur any) {
			if old.(*corev1.Secret).ResourceVersion != cur.(*corev1.Secret).ResourceVersion {
				requeue(cur)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := kit.Unwrap(obj).(*corev1.Secret); ok {
				c.forgetIssuanceOf(s)
			}
			requeue(obj)
		},
	}
}

// forgetIssuanceOf forgets the credential this process stored in s, a
// runtime-token Secret that is gone: it no longer stands in for a cache
// that does not show it.
func (c *Controller) forgetIssuanceOf(s *corev1.Secret) {
	if host := s.Labels[names.LabelHost]; host != "" && s.Name == names.HostRuntimeTokens(host) {
		c.state.clearIssuance(host)
	}
}

// contextHandlers queue every Host whose Context is changed, and every Host
// of a Context that shares an old or new contextId with it: a Context
// created, deleted or re-labelled can move who holds a contextId.
func (c *Controller) contextHandlers() cache.ResourceEventHandler {
	affected := func(objs ...any) {
		contexts := map[string]bool{}
		for _, obj := range objs {
			ctx, ok := kit.Unwrap(obj).(*clerumv1alpha1.Context)
			if !ok {
				continue
			}
			contexts[ctx.Name] = true
			same, _ := c.contextIdx.ByIndex(contextsByID, ctx.Spec.ContextID)
			for _, o := range same {
				contexts[o.(*clerumv1alpha1.Context).Name] = true
			}
		}
		for name := range contexts {
			dependents, _ := c.hostIndex.ByIndex(hostsByContext, name)
			for _, o := range dependents {
				if k, ok := kit.KeyOf(o); ok {
					c.enqueueWithStop(k)
				}
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { affected(obj) },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*clerumv1alpha1.Context), cur.(*clerumv1alpha1.Context)
			// A status-only change (the ContextIDConflict condition) moves
			// nothing a Host reads.
			if o.Spec.ContextID != n.Spec.ContextID || !o.CreationTimestamp.Equal(&n.CreationTimestamp) || o.UID != n.UID {
				affected(old, cur)
			}
		},
		DeleteFunc: func(obj any) { affected(obj) },
	}
}

// hostState is what the operator remembers between syncs: the Hosts it
// saw deleted (their leftovers are explained, so no cap holds them back),
// each Host's block reason and state, for events and gauges, and each
// credential's expiry.
type hostState struct {
	// deleted are the Hosts this process saw deleted, until nothing of
	// them is left.
	deleted *kit.Deletions
	// blocks are the Hosts' block reasons: one event per block and per
	// release, and clerum_hcc_host_blocked.
	blocks *kit.Reasons

	mu      sync.Mutex
	state   map[string]string
	expiry  map[string]time.Time
	byState map[string]int
	// issuances are the credentials stored by this process, so a sync that
	// reads a cache not yet showing one never asks for another.
	issuances map[string]issuance
	// forged is, per Host, the runtime-token Secret version last reported
	// as not believed, so each is one event and one count.
	forged map[string]string
	// unstored are credentials issued whose Secret write failed, held in
	// memory (never logged) so the retry stores them instead of asking
	// the Control API for another.
	unstored map[string]unstored
}

type unstored struct {
	uid  types.UID
	cred controlapi.Credential
}

// forgedOnce reports whether version (UID and resourceVersion) of host's
// runtime-token Secret is reported for the first time, and remembers it.
func (s *hostState) forgedOnce(host, version string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forged == nil {
		s.forged = map[string]string{}
	}
	if s.forged[host] == version {
		return false
	}
	s.forged[host] = version
	return true
}

func (s *hostState) holdUnstored(host string, uid types.UID, cred controlapi.Credential) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unstored == nil {
		s.unstored = map[string]unstored{}
	}
	s.unstored[host] = unstored{uid: uid, cred: cred}
}

// unstoredFor returns, and forgets, a held credential of host's uid that is
// valid past notBefore.
func (s *hostState) unstoredFor(host string, uid types.UID, notBefore time.Time) (controlapi.Credential, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.unstored[host]
	delete(s.unstored, host)
	if !ok || u.uid != uid || !u.cred.ExpiresAt.After(notBefore) {
		return controlapi.Credential{}, false
	}
	return u.cred, true
}

// clearIssuance records that host's Secret is gone: the remembered
// issuance must not stand in for it, but still names the credential HCC
// wrote last, so an older one put back in a re-created Secret is not
// believed.
func (s *hostState) clearIssuance(host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.issuances[host]; ok {
		i.gone = true
		s.issuances[host] = i
	}
}

func newHostState() *hostState {
	return &hostState{deleted: kit.NewDeletions(gvk.Kind), blocks: kit.NewReasons(),
		state: map[string]string{}, expiry: map[string]time.Time{}, byState: map[string]int{}}
}

func (s *hostState) setState(host, state string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.state[host]; ok {
		s.byState[prev]--
	}
	s.state[host] = state
	s.byState[state]++
}

func (s *hostState) setExpiry(host string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if at.IsZero() {
		delete(s.expiry, host)
		return
	}
	s.expiry[host] = at
}

// forget drops a Host that is gone from the gauges.
func (s *hostState) forget(host string) {
	s.blocks.Forget(host)
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.state[host]; ok {
		s.byState[st]--
	}
	delete(s.state, host)
	delete(s.expiry, host)
	delete(s.issuances, host)
	delete(s.unstored, host)
	delete(s.forged, host)
}

// Metrics are the operator's series, all named clerum_hcc_host_*; its
// error counter, clerum_hcc_host_reconcile_errors_total{controller}, is
// kit.Controller's (failed syncs of host, host-sweep and host-stop, and
// wiring errors).
type Metrics struct {
	Hosts    *prometheus.GaugeVec
	Blocked  *prometheus.GaugeVec
	Expiry   prometheus.GaugeFunc
	Breaker  prometheus.GaugeFunc
	Refused  *prometheus.CounterVec
	CapTrips prometheus.Counter
	Orphans  *prometheus.CounterVec
	Forged   *prometheus.CounterVec
	Adopted  prometheus.Counter
}

// NewMetrics registers the operator's metrics with reg; soonest reports
// the seconds until the soonest credential expires, breakerOpen whether the
// Control API breaker is open.
func NewMetrics(reg prometheus.Registerer, soonest func() float64, breakerOpen func() bool) *Metrics {
	m := &Metrics{
		Hosts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clerum_hcc_host_hosts",
			Help: "Hosts by state (ready, deployed, blocked, not-owned).",
		}, []string{"state"}),
		Blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "clerum_hcc_host_blocked",
			Help: "Hosts kept from deploying, by reason.",
		}, []string{"reason"}),
		Expiry: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "clerum_hcc_host_credential_expiry_seconds",
			Help: "Seconds until the soonest bootstrap credential of any Host expires, at scrape time (negative: expired; +Inf with no credential).",
		}, func() float64 { return soonest() }),
		Breaker: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "clerum_hcc_host_control_api_breaker_open",
			Help: "1 while the Control API breaker is open (three calls in a row found it unavailable and none has succeeded since: calls pause, one probe per pause), else 0.",
		}, func() float64 {
			if breakerOpen() {
				return 1
			}
			return 0
		}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_host_children_refused_total",
			Help: "Per-Host objects not written because an object HCC does not own holds their name, by kind and cause.",
		}, []string{"kind", "cause"}),
		CapTrips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clerum_hcc_host_orphan_cap_trips_total",
			Help: "Orphan sweeps whose unexplained deletes a cap held back.",
		}),
		Orphans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_host_orphans_deleted_total",
			Help: "Per-Host objects deleted by the orphan sweep, by whether their Host's deletion was observed (explained) or not (unexplained).",
		}, []string{"class"}),
		Forged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "clerum_hcc_host_forged_credentials_total",
			Help: "Runtime-token Secrets found claiming a credential HCC does not believe, by trust: unmarked (no mark), mismatch (a mark that does not verify) or replayed (an older credential of HCC's than the one it wrote last). Each is re-issued.",
		}, []string{"trust"}),
		Adopted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "clerum_hcc_host_credentials_adopted_total",
			Help: "Unmarked runtime-token Secrets created before HCC_HOST_ADOPT_CREDENTIALS_CREATED_BEFORE whose credential was adopted (marked and kept) instead of re-issued.",
		}),
	}
	reg.MustRegister(m.Hosts, m.Blocked, m.Expiry, m.Breaker, m.Refused, m.CapTrips, m.Orphans, m.Forged, m.Adopted)
	return m
}

// refresh sets the gauges from st. It holds st's lock throughout, so two
// refreshes never interleave and the last one sets the latest counts.
func (m *Metrics) refresh(st *hostState, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range hostStates {
		m.Hosts.WithLabelValues(s).Set(float64(st.byState[s]))
	}
	for _, r := range blockReasons {
		m.Blocked.WithLabelValues(r).Set(float64(st.blocks.Count(r)))
	}
}

// soonestExpiry is the seconds from now until the soonest credential
// expires, +Inf without any.
func (s *hostState) soonestExpiry(now time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var soonest time.Time
	for _, at := range s.expiry {
		if soonest.IsZero() || at.Before(soonest) {
			soonest = at
		}
	}
	if soonest.IsZero() {
		return math.Inf(1)
	}
	return soonest.Sub(now).Seconds()
}
