//go:build integration

package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/clerum/hcc/hack/devcontrolapi"
	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/reasons"
)

// clientBudget is one HCC_KUBE_API_QPS / HCC_KUBE_API_BURST setting.
type clientBudget struct{ qps, burst int }

// The settings measured: the defaults, and four times them.
var budgets = []clientBudget{{50, 100}, {200, 400}}

// quietPeriod is how long the controller must write nothing, once every
// status says converged, before its last write counts as the end.
const quietPeriod = 10 * time.Second

const hmacSecret = "bench-hmac-secret"

// fleet is what the convergence benchmark creates: Contexts of
// serversPerContext sse McpServers each, and Hosts spread over them.
type fleet struct {
	contexts, serversPerContext, hosts int
}

func (f fleet) servers() int { return f.contexts * f.serversPerContext }

func serverName(i int) string  { return fmt.Sprintf("s%05d", i) }
func contextName(i int) string { return fmt.Sprintf("c%04d", i) }
func hostName(i int) string    { return fmt.Sprintf("h%04d", i) }

func newServer(i int) *clerumv1alpha1.McpServer {
	return &clerumv1alpha1.McpServer{
		TypeMeta:   metav1.TypeMeta{APIVersion: clerumv1alpha1.GroupVersion.String(), Kind: "McpServer"},
		ObjectMeta: metav1.ObjectMeta{Name: serverName(i), Namespace: "mcp-server"},
		Spec: clerumv1alpha1.McpServerSpec{
			Image:     "ghcr.io/evenfire-ai/" + serverName(i) + ":1",
			Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE},
		},
	}
}

// newContext lists servers [i*per, (i+1)*per).
func newContext(i, per int) *clerumv1alpha1.Context {
	c := &clerumv1alpha1.Context{
		TypeMeta:   metav1.TypeMeta{APIVersion: clerumv1alpha1.GroupVersion.String(), Kind: "Context"},
		ObjectMeta: metav1.ObjectMeta{Name: contextName(i), Namespace: "mcp-server"},
		Spec:       clerumv1alpha1.ContextSpec{ContextID: contextName(i)},
	}
	for s := i * per; s < (i+1)*per; s++ {
		c.Spec.McpServers = append(c.Spec.McpServers, serverName(s))
	}
	return c
}

// newHost belongs to Context i mod contexts.
func newHost(i, contexts int) *clerumv1alpha1.Host {
	return &clerumv1alpha1.Host{
		TypeMeta:   metav1.TypeMeta{APIVersion: clerumv1alpha1.GroupVersion.String(), Kind: "Host"},
		ObjectMeta: metav1.ObjectMeta{Name: hostName(i), Namespace: "mcp-host"},
		Spec:       clerumv1alpha1.HostSpec{ContextRef: contextName(i % contexts)},
	}
}

// BenchmarkFleetConvergence creates a fleet (100 Contexts of 10 sse
// McpServers, 50 Hosts spread over them) and runs the real hcc-controller
// on it from cold, once per client budget, each on a fresh control plane
// (the platform namespaces are fixed). Converged means: every McpServer
// status deployed at its generation, every Host's credential stored and
// its Deployment rolling out (Ready=False Progressing: no
// kube-controller-manager makes a Deployment available here, and the
// benchmark does not play the kubelet), and then no controller write for
// 10 s; the time is the controller's last write, from the audit log,
// since its process started. The controller's writes are counted from the
// audit log; the plain client then creates one equivalent object per
// write (the controller's own create bodies, or an object of the same
// kind for its updates and status patches) on the same budget, in
// namespaces of its own on the same control plane.
func BenchmarkFleetConvergence(b *testing.B) {
	f := fleet{
		contexts:          size(b, "HCC_BENCH_CONTEXTS", 100),
		serversPerContext: size(b, "HCC_BENCH_SERVERS_PER_CONTEXT", 10),
		hosts:             size(b, "HCC_BENCH_FLEET_HOSTS", 50),
	}
	bin := buildBinary(b, "hcc-controller")
	for _, budget := range budgets {
		b.Run(fmt.Sprintf("qps%d-burst%d", budget.qps, budget.burst), func(b *testing.B) {
			for b.Loop() {
				runFleetConvergence(b, bin, f, budget)
			}
		})
	}
}

// createFleet creates f as admin, with the Host pods' configuration.
func createFleet(b *testing.B, admin *rest.Config, f fleet) {
	ctx := context.Background()
	hcc := clientset.NewForConfigOrDie(admin)
	kittest.Parallel(b, f.servers(), func(i int) error {
		_, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, newServer(i), metav1.CreateOptions{})
		return err
	})
	kittest.Parallel(b, f.contexts, func(i int) error {
		_, err := hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, newContext(i, f.serversPerContext), metav1.CreateOptions{})
		return err
	})
	// The Host pods' configuration (deploy/base ships it), which a Host
	// needs before it starts.
	_, err := kubernetes.NewForConfigOrDie(admin).CoreV1().ConfigMaps("mcp-host").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mcp-host-config"}}, metav1.CreateOptions{})
	require.NoError(b, err)
	kittest.Parallel(b, f.hosts, func(i int) error {
		_, err := hcc.ClerumV1alpha1().Hosts("mcp-host").Create(ctx, newHost(i, f.contexts), metav1.CreateOptions{})
		return err
	})
}

func runFleetConvergence(b *testing.B, bin string, f fleet, budget clientBudget) {
	cp := startControlPlane(b, auditPolicy, "controller")
	defer cp.Stop() // before the next budget's control plane starts
	admin := cp.Config()
	admin.QPS, admin.Burst = 2000, 4000

	// The fleet, as the admin, before the controller starts.
	createFleet(b, admin, f)
	templates := []runtime.Object{newServer(0), newContext(0, f.serversPerContext), newHost(0, f.contexts)}

	run := converge(b, cp, bin, f, budget)
	controller, events, lastWrite, rss, devAPI := run.controller, run.events, run.lastWrite, run.rss, run.devAPI
	errLines, warnLines, nErrors, nWarnings := controller.logProblems(b, 5)
	for _, l := range errLines {
		progressf("hcc-controller error: %s", l)
	}
	for _, l := range warnLines {
		progressf("hcc-controller warning: %s", l)
	}

	ok := func(ev *auditEvent) bool { return ev.write() && ev.succeeded() }
	writes := filterEvents(events, ok)
	require.NotEmpty(b, writes)
	failed := countWrites(events, func(ev *auditEvent) bool { return ev.write() && !ev.succeeded() })
	reads := countWrites(events, func(ev *auditEvent) bool { return !ev.write() })
	byClass := map[string]int{}
	for i := range writes {
		byClass[writeClass(&writes[i])]++
	}
	logWriteBreakdown(writes)
	window := writes[len(writes)-1].Stage.Sub(writes[0].Stage)
	converge := lastWrite.Sub(controller.started)
	rate := float64(len(writes)) / window.Seconds()

	plain := replayPlain(b, cp, writes, templates, budget)

	b.ReportMetric(rate, "writes/s")
	b.ReportMetric(plain.rate, "plain-writes/s")
	b.ReportMetric(rate/plain.rate, "x-plain")
	b.ReportMetric(converge.Seconds(), "s-converge")
	b.ReportMetric(window.Seconds(), "s-writing")
	b.ReportMetric(float64(len(writes)), "writes")
	b.ReportMetric(float64(byClass["server"])/float64(f.servers()), "writes/server")
	b.ReportMetric(float64(byClass["host"])/float64(f.hosts), "writes/host")
	b.ReportMetric(float64(byClass["netpol"]), "netpol-writes")
	b.ReportMetric(float64(byClass["context"])/float64(f.contexts), "writes/context")
	b.ReportMetric(float64(byClass["other"]), "other-writes")
	b.ReportMetric(float64(failed), "failed-writes")
	b.ReportMetric(float64(reads), "reads")
	b.ReportMetric(float64(len(devAPI.Grants()))/float64(f.hosts), "credentials/host")
	b.ReportMetric(rss, "MiB-rss")
	b.ReportMetric(float64(nErrors), "log-errors")
	b.ReportMetric(float64(nWarnings), "log-warnings")
	if plain.unreplayed > 0 {
		progressf("%d writes had no equivalent object to replay", plain.unreplayed)
	}
}

// convergence is one run of the controller on a fleet, stopped.
type convergence struct {
	controller *process
	events     []auditEvent // the controller's requests
	lastWrite  time.Time
	rss        float64
	devAPI     *devcontrolapi.Server
}

// converge runs the controller, with the development Control API, on the
// fleet f the control plane cp holds, until every server and Host has
// converged and the controller has written nothing for quietPeriod; then
// stops it.
func converge(b *testing.B, cp *controlplane.ControlPlane, bin string, f fleet, budget clientBudget) convergence {
	hcc := clientset.NewForConfigOrDie(cp.Config())
	// The development Control API issues the Hosts' credentials.
	devAPI, err := devcontrolapi.New(devcontrolapi.Options{HMACSecret: []byte(hmacSecret), MigrationAudience: devcontrolapi.DefaultMigrationAudience})
	require.NoError(b, err)
	devSrv := httptest.NewServer(devAPI.Handler())
	defer devSrv.Close()

	port := testenv.FreePort(b)
	environ := append(shippedEnv(b, "controller"),
		"POD_NAME=hcc-controller-bench",
		"HCC_LEADER_ELECT=false",
		"HCC_CONTROLLER_PORT="+strconv.Itoa(port),
		"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET="+hmacSecret,
		"CONTROL_API_BASE_URL="+devSrv.URL,
		"MCP_HOST_GATEWAY_URL="+devSrv.URL,
		"HCC_KUBE_API_QPS="+strconv.Itoa(budget.qps),
		"HCC_KUBE_API_BURST="+strconv.Itoa(budget.burst),
	)
	kubeconfig := cp.ImpersonatingKubeconfig(controllerUser, saGroups...)
	controller := startBinary(b, "hcc-controller", bin, kubeconfig, port, environ)
	audit := &auditTail{path: cp.AuditLog(), user: controllerUser}
	var events []auditEvent
	lastWrite := time.Time{}
	quietSince := time.Now()
	kittest.WaitFor(b, 2*time.Second, 30*time.Minute, "the fleet converged and the controller quiet", func() bool {
		select {
		case <-controller.Done():
			b.Fatalf("hcc-controller exited: %v\n%s", controller.Err(), controller.LogTail(40))
		default:
		}
		for _, ev := range audit.next(b) {
			events = append(events, ev)
			if ev.write() {
				lastWrite, quietSince = ev.Stage, time.Now()
			}
		}
		servers, hosts := convergedCounts(b, hcc)
		writes := countWrites(events, func(*auditEvent) bool { return true })
		progressf("%s: %d/%d servers deployed, %d/%d hosts converged, %d writes", time.Since(controller.started).Round(time.Second),
			servers, f.servers(), hosts, f.hosts, writes)
		if servers < f.servers() || hosts < f.hosts {
			quietSince = time.Now() // quiet only counts once converged
			return false
		}
		return time.Since(quietSince) >= quietPeriod
	})
	rss := controller.peakRSS(b)
	require.NoError(b, controller.Stop())
	return convergence{controller: controller, events: events, lastWrite: lastWrite, rss: rss, devAPI: devAPI}
}

// convergedCounts counts the McpServers deployed at their generation and
// the Hosts whose credential is stored and whose Deployment is written.
func convergedCounts(b *testing.B, hcc clientset.Interface) (servers, hosts int) {
	b.Helper()
	ctx := context.Background()
	ss, err := hcc.ClerumV1alpha1().McpServers("mcp-server").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	require.NoError(b, err)
	for _, s := range ss.Items {
		if s.Status.Deployed && s.Status.ObservedGeneration == s.Generation {
			servers++
		}
	}
	hs, err := hcc.ClerumV1alpha1().Hosts("mcp-host").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	require.NoError(b, err)
	for _, h := range hs.Items {
		cond := meta.FindStatusCondition(h.Status.Conditions, clerumv1alpha1.ConditionReady)
		if cond != nil && cond.Reason == reasons.Progressing && h.Status.ObservedGeneration == h.Generation &&
			h.Status.Image != "" && h.Status.CredentialExpiresAt != nil {
			hosts++
		}
	}
	return servers, hosts
}

// writeClass attributes a write to what it serves: one McpServer (its
// children and status in the MCP server namespace), one Host (its
// children in the host and channels namespaces, its finalizer and status),
// a Context's status, or the NetworkPolicy operator (every other policy).
func writeClass(ev *auditEvent) string {
	r, ns := ev.resource(), ev.ObjectRef.Namespace
	switch {
	case r == "networkpolicies":
		// The Host operator's own policies (docs/names.md);
		// every other one is the NetworkPolicy operator's.
		if strings.HasPrefix(ev.ObjectRef.Name, "channel-reader-") || strings.HasPrefix(ev.ObjectRef.Name, "allow-rpc-proxy-desktop-") {
			return "host"
		}
		return "netpol"
	case strings.HasPrefix(r, "hosts") || ns == "mcp-host" || ns == "channels":
		return "host"
	case strings.HasPrefix(r, "contexts"):
		return "context"
	case strings.HasPrefix(r, "mcpservers") || ns == "mcp-server":
		return "server"
	}
	return "other"
}

// logWriteBreakdown logs the writes by verb, resource and namespace, for
// the reader of a surprising writes-per-object figure.
func logWriteBreakdown(writes []auditEvent) {
	counts := map[string]int{}
	for i := range writes {
		ev := &writes[i]
		counts[fmt.Sprintf("%-6s %-28s %-16s %s", ev.Verb, ev.resource(), ev.ObjectRef.Namespace, ev.fieldManager())]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "\n%6d  %s", counts[k], k)
	}
	progressf("hcc-controller's writes:%s", sb.String())
}

func filterEvents(events []auditEvent, keep func(*auditEvent) bool) []auditEvent {
	var out []auditEvent
	for i := range events {
		if keep(&events[i]) {
			out = append(out, events[i])
		}
	}
	slices.SortStableFunc(out, func(x, y auditEvent) int { return x.Stage.Compare(y.Stage) })
	return out
}

func countWrites(events []auditEvent, match func(*auditEvent) bool) int {
	n := 0
	for i := range events {
		if match(&events[i]) {
			n++
		}
	}
	return n
}

// toUnstructured converts a typed object with TypeMeta set.
func toUnstructured(b *testing.B, obj runtime.Object) *unstructured.Unstructured {
	b.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(b, err)
	return &unstructured.Unstructured{Object: m}
}
