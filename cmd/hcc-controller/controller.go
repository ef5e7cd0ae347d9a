package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/clerum/hcc/internal/startup"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/egress"
	"github.com/clerum/hcc/pkg/controllers/egress/resolve"
	"github.com/clerum/hcc/pkg/controllers/globalfs"
	gfsresources "github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/host"
	hostresources "github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/mcpserver"
	mcpserverresources "github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	netpolcontroller "github.com/clerum/hcc/pkg/controllers/netpol"
	"github.com/clerum/hcc/pkg/controllers/netpol/planopts"
	"github.com/clerum/hcc/pkg/controllers/sharedfs"
	sfsresources "github.com/clerum/hcc/pkg/controllers/sharedfs/resources"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	clerumscheme "github.com/clerum/hcc/pkg/generated/clientset/versioned/scheme"
	"github.com/clerum/hcc/pkg/health"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/leaderfence"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/netpol"
)

const (
	// leaseName is the Lease in the control-plane namespace that elects the
	// one replica allowed to reconcile.
	leaseName = "hcc-controller"
	// drainTimeout bounds the graceful shutdown of the health server.
	drainTimeout = 10 * time.Second
)

// runController serves the health endpoints and, outside dev mode, connects
// to the cluster and reconciles while this replica holds the leader lease.
func runController(ctx context.Context, log zerolog.Logger, flags startup.Flags, cfg *config.Config) error {
	registry := newRegistry()
	// Each reconciler the leader runs adds its own readiness check.
	readiness := newReadiness(cfg.Core)
	mux := http.NewServeMux()
	health.Register(mux, readiness, registry)

	if cfg.Core.DevMode {
		log.Warn().Msg("CLERUM_DEV_MODE is set: no reconciliation; serving health endpoints only")
		return startup.Serve(ctx, log, cfg.Core.ControllerPort, mux, drainTimeout)
	}

	restCfg, err := startup.Connect(ctx, binary, flags, cfg.Core)
	if err != nil {
		return err
	}
	log.Info().Str("server", restCfg.Host).Msg("connected to the Kubernetes API server")

	// Under leader election every write of the reconcilers' clients waits
	// on the fence: a leader paused past its lease must not write after a
	// standby took over (pkg/leaderfence). Without an election it is open.
	var fence *leaderfence.Fence
	if cfg.Core.LeaderElect {
		fence = leaderfence.New(clock.RealClock{}, cfg.Core.LeaderLease, log)
	}
	ctrlCfg := controllerConfig(restCfg, cfg.Core.PodName, fence)
	kubeClient, err := kubernetes.NewForConfig(ctrlCfg)
	if err != nil {
		return fmt.Errorf("building the Kubernetes client: %w", err)
	}
	hccClient, err := clientset.NewForConfig(ctrlCfg)
	if err != nil {
		return fmt.Errorf("building the clerum.io client: %w", err)
	}
	clients := clientSet{kube: kubeClient, hcc: hccClient}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return startup.Serve(ctx, log, cfg.Core.ControllerPort, mux, drainTimeout) })
	if cfg.Core.PprofPort != 0 {
		g.Go(func() error { return servePprof(ctx, log, cfg.Core.PprofPort) })
	}
	g.Go(func() error {
		if !cfg.Core.LeaderElect {
			return reconcile(ctx, log, cfg, clients, readiness, registry, nil)
		}
		return runLeaderElected(ctx, log, leaderElectionConfig(restCfg, cfg.Core.PodName), fence, cfg, func(ctx context.Context) error {
			return reconcile(ctx, log, cfg, clients, readiness, registry, fence.Hold)
		})
	})
	return g.Wait()
}

// newRegistry is the registry /metrics serves: the Go and process
// collectors on every replica, and the reconcilers' series once this
// replica leads (reconcile).
func newRegistry() *prometheus.Registry {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return registry
}

// controllerConfig is the configuration of the reconcilers' clients: the
// user agent names the replica (identity), so the audit log tells two
// replicas' writes apart, and a non-nil fence gates their writes. restCfg
// is not changed.
func controllerConfig(restCfg *rest.Config, identity string, fence *leaderfence.Fence) *rest.Config {
	c := rest.CopyConfig(restCfg)
	c.UserAgent = restCfg.UserAgent + "/" + identity
	if fence != nil {
		c.Wrap(fence.WrapTransport)
	}
	return c
}

// leaderElectionConfig is the configuration of the leader-election client:
// never fenced (it is what keeps the fence open), and with a limiter of its
// own, since lease renewals queued behind a busy reconciler's requests
// would miss the renew deadline. restCfg is not changed.
func leaderElectionConfig(restCfg *rest.Config, identity string) *rest.Config {
	c := rest.CopyConfig(restCfg)
	c.UserAgent = restCfg.UserAgent + "/" + identity + "/leader-election"
	c.RateLimiter = nil
	return c
}

// newReadiness returns the process's readiness. Standby replicas are
// ready: a rollout must be able to replace the leader. A replica that
// reconciles without an election is never a standby: it is not ready until
// its NetworkPolicy operator certifies, so the check is pending from the
// start — /ready must not answer 200 in the moment between serving and that
// operator registering it (docs/networkpolicy.md, "Certification").
func newReadiness(core config.Core) *health.Readiness {
	if !core.LeaderElect && !core.DevMode {
		return health.NewReadiness(netpolcontroller.ReadinessCheck)
	}
	return health.NewReadiness()
}

// clientSet holds the clients reconcilers share.
type clientSet struct {
	kube kubernetes.Interface
	hcc  clientset.Interface
}

// reconcile runs every reconciler until ctx is done and returns once all of
// them have stopped; the first to fail stops the others. The safety order
// lives in the reconcilers themselves: the NetworkPolicy operator's first
// pass waits for its caches and for the coordinator's startup DNS round,
// and revokes stale allows before it certifies readiness. A non-nil hold
// keeps the reconcilers' create-and-mark writes together across a
// shutdown (leaderfence.Fence.Hold).
func reconcile(ctx context.Context, log zerolog.Logger, cfg *config.Config, clients clientSet, readiness *health.Readiness, registry prometheus.Registerer, hold kit.WriteHold) error {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clients.kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()

	deps := newDeps(log, cfg, clients, broadcaster.NewRecorder(eventScheme(), corev1.EventSource{Component: binary}), readiness, registry, hold)
	reconcilers, err := buildReconcilers(deps)
	if err != nil {
		return err
	}

	// Informers start once every reconciler has asked for its own, and stop
	// with them: Shutdown waits for the informers, which end only when
	// their stop channel closes, so it must be this function's own.
	informersCtx, stopInformers := context.WithCancel(ctx)
	deps.Informers.Start(informersCtx.Done())
	defer func() {
		stopInformers()
		deps.Informers.Shutdown()
	}()
	log.Info().Msg("reconciling")
	// Each burst of work (the start-up lists, a full resync) leaves a heap
	// goal far above the caches; return what it freed once it is over
	// (docs/deploy.md#memory).
	reconcilers = append(reconcilers, kit.IdleMemoryReleaser{Queues: deps.Queues, Log: log})
	return kit.RunAll(ctx, reconcilers)
}

// newDeps are the dependencies the leader's reconcilers share; their
// queues and metrics register with registry.
func newDeps(log zerolog.Logger, cfg *config.Config, clients clientSet, recorder record.EventRecorder, readiness *health.Readiness, registry prometheus.Registerer, hold kit.WriteHold) kit.Deps {
	return kit.Deps{
		Kube:      clients.kube,
		HCC:       clients.hcc,
		Informers: kit.NewInformers(clients.kube, clients.hcc),
		Recorder:  recorder,
		Registry:  registry,
		Queues:    kit.NewQueues(registry, clock.RealClock{}),
		Clock:     clock.RealClock{},
		Log:       log,
		Config:    cfg,
		Readiness: readiness,
		Hold:      hold,
	}
}

// buildReconcilers builds what the leader runs: the Control API client
// and every reconciler, resolving egress hostnames as the configuration
// says.
func buildReconcilers(deps kit.Deps) ([]kit.Reconciler, error) {
	issuer, err := newIssuer(deps)
	if err != nil {
		return nil, err
	}
	return newReconcilers(deps, egressResolver(deps.Config.McpServer.ExternalEgressDNSServer), issuer)
}

// egressResolver is the resolver of external egress hostnames: the
// system's, or, with HCC_EXTERNAL_EGRESS_DNS_SERVER set, Go's own resolver
// asking only that server (the end-to-end tests run one).
func egressResolver(server string) *net.Resolver {
	if server == "" {
		return net.DefaultResolver
	}
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		},
	}
}

// newIssuer is the Control API client that issues the Hosts' credentials.
func newIssuer(deps kit.Deps) (controlapi.CredentialIssuer, error) {
	cfg := deps.Config
	issuer, err := controlapi.New(controlapi.Options{
		BaseURL:    cfg.ControlAPI.BaseURL,
		HMACSecret: []byte(cfg.ControlAPI.HMACSecret),
		Clock:      deps.Clock,
		// A credential must outlive its refresh window by a margin, or
		// every Host would refresh again seconds after the last.
		MinLifetime: cfg.Host.BootstrapRefreshBefore + host.MinCredentialMargin,
		MaxLifetime: cfg.Host.CredentialMaxLifetime,
		// A Host is asked for again within its refresh window, whatever
		// Retry-After the Control API sends.
		RetryAfterCap: cfg.Host.BootstrapRefreshBefore,
		Observe:       controlapi.NewMetrics(deps.Registry).Observe,
	})
	if err != nil {
		return nil, fmt.Errorf("the Control API client: %w", err)
	}
	return issuer, nil
}

// newReconcilers builds every reconciler hcc-controller runs, wired to each
// other, from deps; issuer issues the Hosts' credentials (diff's never
// calls the Control API).
func newReconcilers(deps kit.Deps, resolver resolve.Resolver, issuer controlapi.CredentialIssuer) ([]kit.Reconciler, error) {
	cfg := deps.Config
	images, err := imagepolicy.Parse(cfg.ImagePolicy.AllowedPrefixes)
	if err != nil {
		return nil, fmt.Errorf("CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES: %w", err)
	}
	planOpts := planopts.FromConfig(cfg)
	coordinator := egress.New(deps, resolver, egress.Options{
		Namespace:  cfg.Namespaces.McpServer,
		DNSTimeout: cfg.McpServer.ExternalEgressDNSTimeout,
		Refresh:    cfg.McpServer.ExternalEgressResync,
		Rules:      netpol.NewEgressRules(planOpts),
		Active:     planOpts.ServerActive,
	})
	policies := netpolcontroller.New(deps, coordinator, netpolcontroller.Options{
		Plan:           planOpts,
		Caps:           netpolcontroller.Caps{Absolute: cfg.NetPol.OrphanDeleteCap, Percent: cfg.NetPol.OrphanDeleteCapPercent},
		Resync:         cfg.NetPol.Resync,
		DefaultsResync: cfg.NetPol.DefaultsResync,
	})
	coordinator.OnChange(policies.Signal)
	servers := mcpserver.New(deps, coordinator, mcpserver.Config{
		Namespace: cfg.Namespaces.McpServer,
		Build: mcpserverresources.Options{
			PullPolicy:           cfg.McpServer.ImagePullPolicy,
			StdioBridgeImage:     cfg.McpServer.StdioBridgeImage,
			StdioBridgeResources: cfg.McpServer.StdioBridgeResources,
			EgressProxyImage:     cfg.McpServer.EgressProxyImage,
			DigestKey:            mcpserverresources.DigestKey(cfg.ControlAPI.HMACSecret),
		},
		Images:  images,
		Enforce: cfg.ImagePolicy.Enforce,
		Workers: cfg.Core.McpServerWorkers,
	})
	hosts := host.New(deps, issuer, host.Config{
		ContextNamespace:   cfg.Namespaces.McpServer,
		TargetNamespace:    cfg.Namespaces.Target,
		Build:              hostresources.OptionsFrom(cfg),
		RefreshBefore:      cfg.Host.BootstrapRefreshBefore,
		MaxLifetime:        cfg.Host.CredentialMaxLifetime,
		AdoptCreatedBefore: cfg.Host.AdoptCredentialsCreatedBefore,
		Resync:             cfg.Host.Resync,
		Caps:               kit.Caps{Absolute: cfg.NetPol.HostOrphanDeleteCap, Percent: cfg.NetPol.HostOrphanDeleteCapPercent},
		Workers:            cfg.Core.HostWorkers,
	})
	sharedFileSystems := sharedfs.New(deps, sharedfs.Config{
		Namespace: cfg.Namespaces.Host,
		Build:     sfsresources.OptionsFrom(cfg),
		Resync:    cfg.WFC.SFSResync,
		Workers:   cfg.Core.FileSystemWorkers,
	})
	globalFileSystems := globalfs.New(deps, globalfs.Config{
		Namespace: cfg.Namespaces.GFS,
		Build:     gfsresources.OptionsFrom(cfg),
		Resync:    cfg.GFS.Resync,
		Workers:   cfg.Core.FileSystemWorkers,
		SeedKey:   mark.NewKey(cfg.ControlAPI.HMACSecret, mark.PurposeSeedJob),
	})
	// In the safety order, each declared to kit.Controller: the egress
	// coordinator, whose startup DNS round the first NetworkPolicy pass
	// waits for; the NetworkPolicy operator, whose default deny and
	// revocations come before any workload is trusted; then the workloads,
	// the McpServers first (they wait for the coordinator's gates), the
	// Hosts, and the file systems. Run starts them all at once; the waits
	// are in the reconcilers (WaitFor), not in this list.
	return []kit.Reconciler{coordinator, policies, servers, hosts, sharedFileSystems, globalFileSystems}, nil
}

// eventScheme knows the clerum.io kinds, so events can reference them.
func eventScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(kubescheme.AddToScheme(scheme))
	utilruntime.Must(clerumscheme.AddToScheme(scheme))
	return scheme
}

// runLeaderElected runs lead while this replica holds the Lease, through a
// client built from leCfg; fence observes the renewals. Losing the lease
// ends the process: another replica has taken over, and continuing would
// make two writers. So does a write the fence refused (the lease was not
// renewed within its duration, as after a pause): the elector may not have
// noticed yet.
func runLeaderElected(ctx context.Context, log zerolog.Logger, leCfg *rest.Config, fence *leaderfence.Fence, cfg *config.Config, lead func(context.Context) error) error {
	leClient, err := kubernetes.NewForConfig(leCfg)
	if err != nil {
		return fmt.Errorf("building the leader-election client: %w", err)
	}
	lock := fence.Lock(&resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespaces.ControlPlane, Name: leaseName},
		Client:     leClient.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Core.PodName},
	})

	leadErr := make(chan error, 1)
	lost := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.Core.LeaderLease,
		RenewDeadline:   cfg.Core.LeaderRenew,
		RetryPeriod:     cfg.Core.LeaderRetry,
		ReleaseOnCancel: true,
		Name:            leaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info().Str("identity", cfg.Core.PodName).Msg("became leader")
				leadErr <- lead(ctx)
			},
			OnStoppedLeading: func() { close(lost) },
			OnNewLeader: func(identity string) {
				if identity != cfg.Core.PodName {
					log.Info().Str("leader", identity).Msg("standing by")
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configuring leader election: %w", err)
	}
	log.Info().Str("lease", cfg.Namespaces.ControlPlane+"/"+leaseName).Str("identity", cfg.Core.PodName).
		Msg("waiting for leadership")
	electCtx, stopElecting := context.WithCancel(ctx)
	defer stopElecting()
	go func() {
		select {
		case <-fence.Lost():
			stopElecting()
		case <-electCtx.Done():
		}
	}()
	elector.Run(electCtx)

	select {
	case err := <-leadErr:
		if err != nil {
			return err
		}
	default:
	}
	if ctx.Err() != nil {
		return nil
	}
	<-lost
	if err := fence.Check(); err != nil {
		return fmt.Errorf("lost the leader lease %s/%s: %w", cfg.Namespaces.ControlPlane, leaseName, err)
	}
	return fmt.Errorf("lost the leader lease %s/%s", cfg.Namespaces.ControlPlane, leaseName)
}
