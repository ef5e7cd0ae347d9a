//go:build integration

package mcpserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controllers/egress"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources"
	"github.com/clerum/hcc/pkg/controllers/mcpserver/resources/resourcestest"
	netpolcontroller "github.com/clerum/hcc/pkg/controllers/netpol"
	"github.com/clerum/hcc/pkg/controllers/netpol/planopts"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/health"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/netpol"
)

// benchServers is the fleet of the convergence benchmark;
// HCC_BENCH_MCPSERVERS overrides it for a quick run.
func benchServers(b *testing.B) int {
	if v := os.Getenv("HCC_BENCH_MCPSERVERS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(b, err)
		return n
	}
	return 1000
}

// The client budget of both runs: HCC_KUBE_API_QPS and _BURST's defaults.
const (
	benchQPS   = 50
	benchBurst = 100
)

// BenchmarkMcpServerConvergence creates McpServers (1,000) with their
// Secret and measures, against the real API server, the McpServer operator
// converging them from cold — beside the egress coordinator and the
// NetworkPolicy operator that gate it, as hcc-controller runs them, all on
// one client budget of 50 QPS — then a plain client creating the same
// Deployments and Services at the same budget, in the same run; then a
// full resync of every server over the unchanged cluster.
func BenchmarkMcpServerConvergence(b *testing.B) {
	for b.Loop() {
		runConvergence(b, benchServers(b))
	}
}

func runConvergence(b *testing.B, n int) {
	ctx := context.Background()
	admin := cp.Config()
	kube := kubernetes.NewForConfigOrDie(admin)
	hcc := clientset.NewForConfigOrDie(admin)
	ns := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	plainNS := ns + "-plain"
	for _, name := range []string{ns, plainNS} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(b, err)
	}
	_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"uri": "mongodb+srv://bench"}}, metav1.CreateOptions{})
	require.NoError(b, err)
	servers := make([]*clerumv1alpha1.McpServer, n)
	kittest.Parallel(b, n, func(i int) error {
		s := resourcestest.NewServer(fmt.Sprintf("s%04d", i), clerumv1alpha1.TransportStreamableHTTP, func(s *clerumv1alpha1.McpServer) {
			s.Spec.EnvSecret = &clerumv1alpha1.EnvSecret{Name: "creds", Keys: []clerumv1alpha1.EnvSecretKey{{SecretKey: "uri", EnvName: "URI"}}}
		})
		s.Namespace, s.UID, s.Generation = ns, "", 0
		live, err := hcc.ClerumV1alpha1().McpServers(ns).Create(ctx, s, metav1.CreateOptions{})
		servers[i] = live
		return err
	})

	// hcc-controller's reconcilers of McpServers, on one rate-limited,
	// write-counting client budget (pkg/kube gives the binary one limiter).
	limited := rest.CopyConfig(admin)
	limited.QPS, limited.Burst = benchQPS, benchBurst
	limited.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(benchQPS, benchBurst)
	counted, writes := kittest.CountWrites(limited)
	cfg := benchConfig(b, ns)
	reg := prometheus.NewRegistry()
	opKube, opHCC := kubernetes.NewForConfigOrDie(counted), clientset.NewForConfigOrDie(counted)
	d := kit.Deps{Kube: opKube, HCC: opHCC, Informers: kit.NewInformers(opKube, opHCC), Recorder: &record.FakeRecorder{},
		Registry: reg, Queues: kit.NewQueues(reg, clock.RealClock{}), Clock: clock.RealClock{},
		Log: zerolog.New(os.Stderr).Level(zerolog.WarnLevel), Config: cfg, Readiness: health.NewReadiness()}
	images, err := imagepolicy.Parse(cfg.ImagePolicy.AllowedPrefixes)
	require.NoError(b, err)
	planOpts := planopts.FromConfig(cfg)
	coordinator := egress.New(d, net.DefaultResolver, egress.Options{Namespace: ns, DNSTimeout: time.Second,
		Rules: netpol.NewEgressRules(planOpts)})
	policies := netpolcontroller.New(d, coordinator, netpolcontroller.Options{Plan: planOpts,
		Caps: netpolcontroller.Caps{Absolute: 10, Percent: 20}})
	coordinator.OnChange(policies.Signal)
	c := New(d, coordinator, Config{Namespace: ns, Build: resourcestest.Options, Images: images, Workers: cfg.Core.McpServerWorkers})

	runCtx, stop := context.WithCancel(ctx)
	start := time.Now()
	d.Informers.Start(runCtx.Done())
	var wg sync.WaitGroup
	for _, r := range []kit.Reconciler{coordinator, policies, c} {
		wg.Go(func() { _ = r.Run(runCtx) })
	}
	defer func() { stop(); wg.Wait(); d.Informers.Shutdown() }()

	kittest.WaitFor(b, 5*time.Second, 10*time.Minute, "every server deployed", func() bool {
		list, err := hcc.ClerumV1alpha1().McpServers(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		deployed := 0
		for _, s := range list.Items {
			if s.Status.Deployed && s.Status.ObservedGeneration == s.Generation {
				deployed++
			}
		}
		b.Logf("%s: %d deployed, %d writes", time.Since(start).Round(time.Second), deployed, writes.Count())
		return deployed == n
	})
	converge := time.Since(start)
	time.Sleep(2 * time.Second) // writes still under way (the coordinator's last status writes)
	statusBy := func(manager string) int {
		return writes.CountBy(func(req, m string) bool { return strings.HasSuffix(req, "/status") && m == manager })
	}
	operatorWrites := writes.CountBy(func(req, m string) bool {
		return m == clerumv1alpha1.FieldManagerMcpServer || strings.Contains(req, "/deployments") || strings.Contains(req, "/services")
	})
	coordinatorStatus := statusBy(clerumv1alpha1.FieldManagerNetPol)
	policyWrites := writes.CountBy(func(req, _ string) bool { return strings.Contains(req, "/networkpolicies") })
	total := writes.Count()
	rss := residentMiB(b)

	// The resync: every server queued again over an unchanged cluster.
	writes.Reset()
	for _, s := range servers {
		c.queue.Add(cache.ObjectName{Namespace: s.Namespace, Name: s.Name})
	}
	kittest.WaitFor(b, 200*time.Millisecond, 10*time.Minute, "the resync drained", func() bool { return c.queue.Len() == 0 })
	time.Sleep(2 * time.Second) // the last syncs finish
	resyncWrites := writes.Count()

	// The plain client: the same Deployments and Services, one budget.
	plainCfg := rest.CopyConfig(limited)
	plainCfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(benchQPS, benchBurst)
	plain := kubernetes.NewForConfigOrDie(plainCfg)
	plainStart := time.Now()
	kittest.Parallel(b, n, func(i int) error {
		s := servers[i].DeepCopy()
		s.Namespace = plainNS
		dep, err := resources.BuildDeployment(s, plainNS, resourcestest.Options, "hmac-sha256:0")
		if err != nil {
			return err
		}
		if _, err := plain.AppsV1().Deployments(plainNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err = plain.CoreV1().Services(plainNS).Create(ctx, resources.BuildService(s, plainNS), metav1.CreateOptions{})
		return err
	})
	plainDur := time.Since(plainStart)

	opRate := float64(total) / converge.Seconds()
	plainRate := float64(2*n) / plainDur.Seconds()
	b.ReportMetric(converge.Seconds(), "converge-s")
	b.ReportMetric(float64(operatorWrites)/float64(n), "mcpserver-writes/server")
	b.ReportMetric(float64(coordinatorStatus)/float64(n), "coordinator-status/server")
	b.ReportMetric(float64(policyWrites), "netpol-writes")
	b.ReportMetric(opRate, "writes/s")
	b.ReportMetric(plainRate, "plain-writes/s")
	b.ReportMetric(opRate/plainRate, "x-plain")
	b.ReportMetric(float64(resyncWrites), "resync-writes")
	b.ReportMetric(rss, "RSS-MiB")
}

// benchConfig is hcc-controller's configuration with the MCP server
// namespace set to ns.
func benchConfig(b *testing.B, ns string) *config.Config {
	env := map[string]string{
		"CONTEXT_MAPPER_NAMESPACE":             ns,
		"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET": "bench",
	}
	cfg, err := config.LoadFrom(config.Controller, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(b, err)
	return cfg
}

// residentMiB is this process's resident set: the reconcilers, their
// caches and the benchmark's own clients.
func residentMiB(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	require.NoError(b, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			require.NoError(b, err)
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
