//go:build integration

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/clerum/hcc/hack/devcontrolapi"
	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
)

// auditPolicyWriteAttempts records every write attempt at Metadata level,
// events included, whatever its answer, and nothing else: the large
// fleet's benchmark counts writes and needs neither bodies nor reads.
const auditPolicyWriteAttempts = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
`

// The counts BenchmarkControllerFleetScale asserts.
const (
	// maxRestartWrites: a controller restarted on a fleet it converged
	// syncs every object and has nothing to write.
	maxRestartWrites = 0
	// maxResyncWrites: nor has a periodic full resync.
	maxResyncWrites = 0
)

// Timings of BenchmarkControllerFleetScale.
const (
	// idleWindow is how long the steady state is measured.
	idleWindow = 60 * time.Second
	// settledFor is how long every queue must have been empty, with no
	// item added, before a phase counts as over.
	settledFor = 3 * time.Second
	// The fixture run's client budget and workers: it converges the fleet
	// once, as fast as the API server lets it.
	fixtureQPS, fixtureBurst, fixtureWorkers = 1000, 2000, 32
)

// BenchmarkControllerFleetScale measures hcc-controller on a converged
// fleet of 10,000 McpServers, each with the Secret its spec.auth names, in
// 1,000 Contexts, and 5,000 Hosts spread over them (HCC_BENCH_LARGE_*
// shrink it). It runs only with HCC_BENCH_LARGE set: make bench-large.
//
// The converged state is the controller's own plan: the admin creates the
// fleet as kubectl apply would (every object carries its last-applied
// annotation), then the children the controller plans for it, from its
// own builders and planner (`hcc-controller render`), in parallel, with
// their controller references; then hcc-controller runs on a raised
// client budget and more workers (fixtureQPS) and writes what only it
// can: each Host's finalizer, its workspace claim and the claim's mark,
// its credential Secret from the Control API, every status, and whatever
// render's plan missed. Converged: every server deployed, every Host
// converged, and no write for quietPeriod. The controller could write it
// all itself, but writes its NetworkPolicies one at a time and a Host's
// children one after another: on a loaded 2-core machine, hours for this
// fleet. The restart below proves the fleet converged: it must write
// nothing. The fixture's figures (s-fixture-*) describe the fixture, not
// the controller under test.
//
// Then each measured binary is started on that fleet with the shipped
// environment, and measured in turn (a sub-benchmark each):
//
//   - restart: the time to /ready and to every queue settled (every
//     reconciler has synced every object once: a full resync after the
//     informers' lists), the CPU seconds that took and the writes it made,
//     asserted 0 (maxRestartWrites);
//   - steady state: over idleWindow once settled, the resident set
//     (VmRSS at its end; VmHWM is the peak of the whole run), the cores
//     used (the controller's idle release of the start-up's garbage
//     included, which must have happened: docs/deploy.md#memory), and
//     the live heap after a forced GC; a heap profile is taken
//     (HCC_PPROF_PORT) and its top entries printed;
//   - timer resync: the Host operator's full resync and the
//     NetworkPolicy operator's full pass are set to one period
//     (HCC_BENCH_LARGE_RESYNC_SEC, default 300 s, the shipped Host
//     resync; the NetworkPolicy resync ships off), and the time from the
//     first item they queue to every queue settled, its CPU seconds and
//     writes, asserted 0 (maxResyncWrites), and the resident set as the
//     queues settled and again once the controller returned the resync's
//     garbage (or 30 s after, if it did not).
//
// Writes are counted from the audit log: every mutating request of the
// controller's user, events included, whatever its answer.
//
// HCC_BENCH_MEASURE_LOCK names a lock file the measured phases take
// (flock) first, on a shared machine. HCC_BENCH_LARGE_GOMEMLIMIT gives
// each measured binary that GOMEMLIMIT: the soft limit its container's
// memory limit would set (90% of it; the fixture runs without).
//
// HCC_BENCH_BASELINE_CONTROLLER names a second hcc-controller binary (a
// build of another commit) measured first on the same fleet, as the
// sub-benchmark baseline: hack/benchtable shows each figure of current
// beside it (x-baseline).
func BenchmarkControllerFleetScale(b *testing.B) {
	if os.Getenv("HCC_BENCH_LARGE") == "" {
		b.Skip("the 10,000-server fleet runs in make bench-large (HCC_BENCH_LARGE=1)")
	}
	f := apiFleet{
		servers:  size(b, "HCC_BENCH_LARGE_SERVERS", 10000),
		contexts: size(b, "HCC_BENCH_LARGE_CONTEXTS", 1000),
		hosts:    size(b, "HCC_BENCH_LARGE_HOSTS", 5000),
	}
	require.Positive(b, f.perContext(), "fewer servers than Contexts")
	resync := time.Duration(size(b, "HCC_BENCH_LARGE_RESYNC_SEC", 300)) * time.Second
	bin := buildBinary(b, "hcc-controller")
	cp := startControlPlane(b, auditPolicyWriteAttempts, "controller")
	admin := cp.Config()
	admin.QPS, admin.Burst = 5000, 10000

	started := time.Now()
	fleetObjects := newLargeFleet(f)
	uids := createLargeFleet(b, admin, fleetObjects)
	created := time.Since(started)
	progressf("created %d Secrets, %d McpServers, %d Contexts and %d Hosts in %s",
		f.servers, f.servers, f.contexts, f.hosts, created.Round(time.Second))

	// The development Control API issues the Hosts' credentials, to both
	// the fixture run and the measured ones.
	devAPI, err := devcontrolapi.New(devcontrolapi.Options{HMACSecret: []byte(hmacSecret), MigrationAudience: devcontrolapi.DefaultMigrationAudience})
	require.NoError(b, err)
	devSrv := httptest.NewServer(devAPI.Handler())
	defer devSrv.Close()
	kubeconfig := cp.ImpersonatingKubeconfig(controllerUser, saGroups...)
	env := func(port int, extra ...string) []string {
		return append(append(shippedEnv(b, "controller"),
			"POD_NAME=hcc-controller-bench",
			"HCC_LEADER_ELECT=false",
			"HCC_CONTROLLER_PORT="+strconv.Itoa(port),
			"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET="+hmacSecret,
			"CONTROL_API_BASE_URL="+devSrv.URL,
			"MCP_HOST_GATEWAY_URL="+devSrv.URL,
		), extra...)
	}

	// The children the controller plans and anyone may write, from its own
	// plan (render), created in parallel; the controller then writes what
	// only it can (BenchmarkControllerFleetScale).
	fixtureStart := time.Now()
	children := renderedChildren(b, bin, fleetObjects, uids, env(1)) // render listens on no port
	dyn := dynamic.NewForConfigOrDie(admin)
	parallel(b, 32, len(children), func(i int) error {
		u := children[i]
		gvr, ok := childResources[u.GetKind()]
		if !ok {
			return fmt.Errorf("render planned a %s, which the fixture does not know", u.GetKind())
		}
		return createThroughTimeouts(func() error {
			_, err := dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{})
			return err
		})
	})
	progressf("created the %d children render plans, claims and Secrets apart, in %s", len(children), time.Since(fixtureStart).Round(time.Second))
	convergeFixture(b, cp, bin, kubeconfig, f, env)
	converged := time.Since(fixtureStart)

	// On a shared machine the measured phases wait for the machine's
	// measurement lock; the fixture above does not.
	if path := os.Getenv("HCC_BENCH_MEASURE_LOCK"); path != "" {
		defer measureLock(b, path)()
	}
	measured := []struct{ name, bin string }{{"current", bin}}
	if base := os.Getenv("HCC_BENCH_BASELINE_CONTROLLER"); base != "" {
		measured = append([]struct{ name, bin string }{{"baseline", base}}, measured...)
	}
	for _, m := range measured {
		b.Run(m.name, func(b *testing.B) {
			for b.Loop() {
				measureConverged(b, cp, m.name, m.bin, kubeconfig, resync, env)
			}
			b.ReportMetric(created.Seconds(), "s-fixture-create")
			b.ReportMetric(converged.Seconds(), "s-fixture-converge")
		})
	}
}

// measureLock takes an exclusive flock(2) on path, as flock(1) does,
// waiting for whoever holds it, and returns its release.
func measureLock(b *testing.B, path string) func() {
	b.Helper()
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	require.NoError(b, err)
	progressf("waiting for the measurement lock %s", path)
	waited := time.Now()
	require.NoError(b, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	progressf("holding the measurement lock after %s", time.Since(waited).Round(time.Second))
	return func() { _ = f.Close() } // closing the file releases the lock
}

// createThroughTimeouts calls create again while the API server answers
// that it timed out (504), up to maxCreateAttempts: on a loaded machine
// etcd can take longer than the API server's minute, and the create may
// still land after the answer, so an AlreadyExists after a timeout is the
// create done. Any other error is returned.
func createThroughTimeouts(create func() error) error {
	timedOut := false
	for attempt := 1; ; attempt++ {
		err := create()
		switch {
		case err == nil:
			return nil
		case timedOut && apierrors.IsAlreadyExists(err):
			return nil
		case (apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)) && attempt < maxCreateAttempts:
			timedOut = true
			continue
		}
		return err
	}
}

// maxCreateAttempts bounds createThroughTimeouts.
const maxCreateAttempts = 5

// largeFleet is the objects of an apiFleet: a Secret per McpServer, named
// by its spec.auth, the servers, the Contexts listing them evenly, the
// Host pods' configuration and the Hosts.
type largeFleet struct {
	secrets   []*corev1.Secret
	servers   []*clerumv1alpha1.McpServer
	contexts  []*clerumv1alpha1.Context
	configMap *corev1.ConfigMap
	hosts     []*clerumv1alpha1.Host
}

func newLargeFleet(f apiFleet) largeFleet {
	var out largeFleet
	for i := range f.servers {
		name := serverName(i)
		out.secrets = append(out.secrets, &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: name + "-auth", Namespace: "mcp-server"},
			StringData: map[string]string{"token": "token-of-" + name},
		})
		s := newServer(i)
		s.Spec.Auth = &clerumv1alpha1.Auth{SecretRef: clerumv1alpha1.SecretKeyReference{Name: name + "-auth", Key: "token"}}
		out.servers = append(out.servers, s)
	}
	for i := range f.contexts {
		out.contexts = append(out.contexts, newContext(i, f.perContext()))
	}
	out.configMap = &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "mcp-host-config", Namespace: "mcp-host"},
	}
	for i := range f.hosts {
		out.hosts = append(out.hosts, newHost(i, f.contexts))
	}
	return out
}

// objects are all of them, in creation order.
func (l largeFleet) objects() []runtime.Object {
	var out []runtime.Object
	for i := range l.servers {
		out = append(out, l.secrets[i], l.servers[i])
	}
	for _, c := range l.contexts {
		out = append(out, c)
	}
	out = append(out, l.configMap)
	for _, h := range l.hosts {
		out = append(out, h)
	}
	return out
}

// createLargeFleet creates the fleet as the admin, each object as kubectl
// apply would (asApplied), and returns the UIDs of the servers and Hosts
// by "Kind/name".
func createLargeFleet(b *testing.B, admin *rest.Config, l largeFleet) map[string]types.UID {
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(admin)
	hcc := clientset.NewForConfigOrDie(admin)
	opts := metav1.CreateOptions{FieldManager: "kubectl-client-side-apply"}
	serverUIDs, hostUIDs := make([]types.UID, len(l.servers)), make([]types.UID, len(l.hosts))
	parallel(b, 64, len(l.servers), func(i int) error {
		if _, err := kube.CoreV1().Secrets("mcp-server").Create(ctx, asApplied(l.secrets[i].DeepCopy()), opts); err != nil {
			return err
		}
		s, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, asApplied(l.servers[i].DeepCopy()), opts)
		if err == nil {
			serverUIDs[i] = s.UID
		}
		return err
	})
	parallel(b, 64, len(l.contexts), func(i int) error {
		_, err := hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, asApplied(l.contexts[i].DeepCopy()), opts)
		return err
	})
	_, err := kube.CoreV1().ConfigMaps("mcp-host").Create(ctx, asApplied(l.configMap.DeepCopy()), opts)
	require.NoError(b, err)
	parallel(b, 64, len(l.hosts), func(i int) error {
		h, err := hcc.ClerumV1alpha1().Hosts("mcp-host").Create(ctx, asApplied(l.hosts[i].DeepCopy()), opts)
		if err == nil {
			hostUIDs[i] = h.UID
		}
		return err
	})
	uids := map[string]types.UID{}
	for i, s := range l.servers {
		uids["McpServer/"+s.Name] = serverUIDs[i]
	}
	for i, h := range l.hosts {
		uids["Host/"+h.Name] = hostUIDs[i]
	}
	return uids
}

// renderedChildren returns the children bin's render subcommand plans for
// the fleet (the controller's own builders and planner, offline), but
// those only the controller can write: the Hosts' workspace claims, which
// it marks over the UID the API server gives them, and their credential
// Secrets, which hold what the Control API issued. Each controller
// reference names the owner's UID from uids (render knows no UID).
func renderedChildren(b *testing.B, bin string, l largeFleet, uids map[string]types.UID, env []string) []*unstructured.Unstructured {
	b.Helper()
	dir := b.TempDir()
	var in bytes.Buffer
	for _, o := range l.objects() {
		y, err := yaml.Marshal(o)
		require.NoError(b, err)
		in.WriteString("---\n")
		in.Write(y)
	}
	inputs := filepath.Join(dir, "fleet.yaml")
	require.NoError(b, os.WriteFile(inputs, in.Bytes(), 0o600))
	var out, stderr bytes.Buffer
	cmd := exec.Command(bin, "render", "-f", inputs)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, &out, &stderr
	require.NoError(b, cmd.Run(), "render: %s", stderr.String())

	var children []*unstructured.Unstructured
	docs := utilyaml.NewYAMLReader(bufio.NewReader(&out))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(b, err)
		u := &unstructured.Unstructured{}
		require.NoError(b, yaml.Unmarshal(doc, &u.Object))
		if len(u.Object) == 0 || u.GetKind() == "PersistentVolumeClaim" || u.GetKind() == "Secret" {
			continue
		}
		refs := u.GetOwnerReferences()
		for i := range refs {
			uid, ok := uids[refs[i].Kind+"/"+refs[i].Name]
			require.True(b, ok, "%s %s/%s names an owner the fleet lacks: %s %s", u.GetKind(), u.GetNamespace(), u.GetName(), refs[i].Kind, refs[i].Name)
			refs[i].UID = uid
		}
		u.SetOwnerReferences(refs)
		children = append(children, u)
	}
	return children
}

// childResources are the resources of the kinds render plans.
var childResources = map[string]schema.GroupVersionResource{
	"Deployment":     {Group: "apps", Version: "v1", Resource: "deployments"},
	"Service":        {Version: "v1", Resource: "services"},
	"ConfigMap":      {Version: "v1", Resource: "configmaps"},
	"ServiceAccount": {Version: "v1", Resource: "serviceaccounts"},
	"Role":           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"NetworkPolicy":  {Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
	"Job":            {Group: "batch", Version: "v1", Resource: "jobs"},
}

// asApplied returns obj carrying kubectl's last-applied-configuration
// annotation, as kubectl apply creates it: the manifest applied, in JSON.
// Platform teams apply their fleet so (or with a tool that does the same);
// what the controller caches of it is what this benchmark measures.
func asApplied[T metav1.Object](obj T) T {
	manifest, err := json.Marshal(obj)
	if err != nil {
		panic(err) // a typed object always marshals
	}
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[corev1.LastAppliedConfigAnnotation] = string(manifest) + "\n"
	obj.SetAnnotations(a)
	return obj
}

// convergeFixture runs bin on the fleet on the fixture budget until every
// server and Host has converged and it has written nothing for
// quietPeriod, and stops it.
func convergeFixture(b *testing.B, cp *controlplane.ControlPlane, bin, kubeconfig string, f apiFleet, env func(int, ...string) []string) {
	hcc := clientset.NewForConfigOrDie(cp.Config())
	port := testenv.FreePort(b)
	controller := startBinary(b, "hcc-controller-fixture", bin, kubeconfig, port, env(port,
		"HCC_KUBE_API_QPS="+strconv.Itoa(fixtureQPS),
		"HCC_KUBE_API_BURST="+strconv.Itoa(fixtureBurst),
		"HCC_MCPSERVER_WORKERS="+strconv.Itoa(fixtureWorkers),
		"HCC_HOST_WORKERS="+strconv.Itoa(fixtureWorkers),
	))
	audit := &auditTail{path: cp.AuditLog(), user: controllerUser}
	writes := 0
	quietSince := time.Now()
	// Listing the whole fleet loads the API server: every 15 s.
	kittest.WaitFor(b, 15*time.Second, 60*time.Minute, "the fleet converged and the controller quiet", func() bool {
		select {
		case <-controller.Done():
			b.Fatalf("hcc-controller exited: %v\n%s", controller.Err(), controller.LogTail(40))
		default:
		}
		for _, ev := range audit.next(b) {
			if ev.write() {
				writes++
				quietSince = time.Now()
			}
		}
		servers, hosts := convergedCounts(b, hcc)
		progressf("fixture: %s: %d/%d servers deployed, %d/%d hosts converged, %d writes", time.Since(controller.started).Round(time.Second),
			servers, f.servers, hosts, f.hosts, writes)
		if servers < f.servers || hosts < f.hosts {
			quietSince = time.Now()
			return false
		}
		return time.Since(quietSince) >= quietPeriod
	})
	errLines, _, nErrors, _ := controller.logProblems(b, 3)
	progressf("fixture: converged in %s, %d writes, %d errors logged %v", time.Since(controller.started).Round(time.Second), writes, nErrors, errLines)
	require.NoError(b, controller.Stop())
}

// measureConverged starts bin on the converged fleet with the shipped
// environment and measures its restart, steady state and timer resync
// (BenchmarkControllerFleetScale).
func measureConverged(b *testing.B, cp *controlplane.ControlPlane, name, bin, kubeconfig string, resync time.Duration, env func(int, ...string) []string) {
	offset, err := controlplane.AuditLogSize(cp.AuditLog())
	require.NoError(b, err)
	audit := controlplane.NewAuditReader(cp.AuditLog(), offset)
	port, pprofPort := testenv.FreePort(b), testenv.FreePort(b)
	resyncSec := strconv.Itoa(int(resync.Seconds()))
	extra := []string{
		"HCC_PPROF_PORT=" + strconv.Itoa(pprofPort),
		"CONTEXT_MAPPER_HOST_RESYNC_SEC=" + resyncSec,
		"CONTEXT_MAPPER_NETPOL_RESYNC_SEC=" + resyncSec,
	}
	if limit := os.Getenv("HCC_BENCH_LARGE_GOMEMLIMIT"); limit != "" {
		extra = append(extra, "GOMEMLIMIT="+limit) // the soft limit a container limit would give (docs/deploy.md#memory)
	}
	p := startBinary(b, "hcc-controller-"+name, bin, kubeconfig, port, env(port, extra...))
	m := &queueWatch{b: b, p: p}
	cpuAt := func() float64 {
		s, err := p.CPUSeconds()
		require.NoError(b, err)
		return s
	}

	// Restart: ready, then every object synced once.
	ready := p.waitHTTP(b, "/ready", 30*time.Minute).Sub(p.started)
	settled := m.settle(30 * time.Minute)
	restartCPU := cpuAt()
	restart := settled.at.Sub(p.started)
	restartWrites := writesOf(b, audit)
	progressf("%s: ready in %s, settled in %s (%.0f items queued), %.1f CPU s, %d writes",
		name, ready.Round(100*time.Millisecond), restart.Round(100*time.Millisecond), settled.adds, restartCPU, len(restartWrites))

	// Steady state. The resident set is read as the queues settle and
	// again at the end of the window: what the controller returns to the
	// kernel meanwhile (its idle release, kit.IdleBeforeRelease after the
	// queues fell idle, and the scavenger) is the start-up lists'
	// garbage, not the caches. The window's CPU includes that release.
	rssSettled, err := p.RSSMiB()
	require.NoError(b, err)
	idleStart := time.Now()
	idleCPU := cpuAt()
	time.Sleep(idleWindow)
	idleCores := (cpuAt() - idleCPU) / time.Since(idleStart).Seconds()
	rss, err := p.RSSMiB()
	require.NoError(b, err)
	atEnd := m.read()
	if atEnd.hasReleases {
		require.Positive(b, atEnd.releases, "%s: no idle memory release in the steady state: the start-up's garbage is still held", name)
	}
	idleAdds := atEnd.adds - settled.adds
	idleWrites := writesOf(b, audit)
	mem := goMemory(b, port) // before heapProfile's forced GC
	heapLive := heapProfile(b, name, pprofPort, port)
	progressf("%s: steady state over %s: %.0f MiB resident (%.0f MiB as it settled), %.3f cores, %.0f MiB live heap, %.0f items queued, %d writes",
		name, idleWindow, rss, rssSettled, idleCores, heapLive, idleAdds, len(idleWrites))
	progressf("%s: Go memory at the end of the window: %s", name, mem)

	// The timer resync: wait for its first item, then for every queue to
	// settle. The queues are read only from shortly before it is due.
	until := p.started.Add(resync + resync/2)
	require.True(b, time.Now().Before(p.started.Add(resync)),
		"the steady state outlasted the resync period %s: raise HCC_BENCH_LARGE_RESYNC_SEC", resync)
	before := m.adds()
	time.Sleep(time.Until(p.started.Add(resync - 10*time.Second)))
	var resyncStart time.Time
	var resyncCPU0 float64
	for resyncStart.IsZero() {
		require.True(b, time.Now().Before(until), "no resync within %s of the start", resync+resync/2)
		cpu := cpuAt()
		if m.adds() > before {
			resyncStart, resyncCPU0 = time.Now(), cpu
		}
		time.Sleep(250 * time.Millisecond)
	}
	done := m.settle(30 * time.Minute)
	resyncCPU := cpuAt() - resyncCPU0
	resyncTime := done.at.Sub(resyncStart)
	resyncWrites := writesOf(b, audit)
	peak := p.peakRSS(b)
	rssResynced, err := p.RSSMiB()
	require.NoError(b, err)
	// Once the queues have been idle for kit.IdleBeforeRelease, the
	// controller returns what the resync left, if it is worth a collection
	// (docs/deploy.md#memory): the resident set once it did, or, if it
	// does not within 30 s of the resync settling (or does not count its
	// releases), then.
	releasesBefore := m.read().releases
	releasedAfterResync := false
	for waitUntil := done.at.Add(kit.IdleBeforeRelease + 20*time.Second); !releasedAfterResync && time.Now().Before(waitUntil); {
		time.Sleep(250 * time.Millisecond)
		releasedAfterResync = m.read().releases > releasesBefore
	}
	rssResyncIdle, err := p.RSSMiB()
	require.NoError(b, err)
	progressf("%s: resync: %s, %.0f items queued, %.1f CPU s, %d writes; resident %.0f MiB after it, %.0f MiB %s after it (released: %t), peak %.0f MiB",
		name, resyncTime.Round(100*time.Millisecond), done.adds-before, resyncCPU, len(resyncWrites), rssResynced, rssResyncIdle,
		time.Since(done.at).Round(time.Second), releasedAfterResync, peak)
	_, _, nErrors, nWarnings := p.logProblems(b, 0)

	b.ReportMetric(ready.Seconds(), "s-ready")
	b.ReportMetric(restart.Seconds(), "s-restart-settled")
	b.ReportMetric(restartCPU, "cpu-s-restart")
	b.ReportMetric(float64(len(restartWrites)), "restart-writes")
	b.ReportMetric(rss, "MiB-rss")
	b.ReportMetric(rssSettled, "MiB-rss-settled")
	b.ReportMetric(rssResynced, "MiB-rss-resynced")
	b.ReportMetric(rssResyncIdle, "MiB-rss-resynced-idle")
	b.ReportMetric(atEnd.releases, "idle-releases-steady")
	b.ReportMetric(mem["go_memstats_heap_inuse_bytes"]/(1<<20), "MiB-heap-inuse")
	b.ReportMetric((mem["go_memstats_heap_idle_bytes"]-mem["go_memstats_heap_released_bytes"])/(1<<20), "MiB-heap-idle-unreleased")
	b.ReportMetric(peak, "MiB-rss-peak")
	b.ReportMetric(heapLive, "MiB-heap-live")
	b.ReportMetric(idleCores, "cores-idle")
	b.ReportMetric(resyncTime.Seconds(), "s-resync")
	b.ReportMetric(resyncCPU, "cpu-s-resync")
	b.ReportMetric(done.adds-before, "resync-items")
	b.ReportMetric(float64(len(resyncWrites)), "resync-writes")
	b.ReportMetric(float64(nErrors), "log-errors")
	b.ReportMetric(float64(nWarnings), "log-warnings")

	for what, writes := range map[string][]auditEvent{"restart": restartWrites, "steady state": idleWrites, "resync": resyncWrites} {
		for i := range writes[:min(len(writes), 5)] {
			ev := &writes[i]
			progressf("%s: %s write: %s %s (%d)", name, what, ev.Verb, ev.Target(), ev.Code())
		}
	}
	if len(restartWrites) > maxRestartWrites {
		b.Fatalf("%s: %d writes on a restart over the converged fleet, more than %d (the first above)", name, len(restartWrites), maxRestartWrites)
	}
	if len(idleWrites) > 0 {
		b.Fatalf("%s: %d writes in the steady state (the first above)", name, len(idleWrites))
	}
	if len(resyncWrites) > maxResyncWrites {
		b.Fatalf("%s: %d writes in a full resync of the converged fleet, more than %d (the first above)", name, len(resyncWrites), maxResyncWrites)
	}
	require.NoError(b, p.Stop())
}

// writesOf returns the controller's write attempts in the audit log since
// the previous call.
func writesOf(b *testing.B, audit *controlplane.AuditReader) []auditEvent {
	b.Helper()
	events, err := audit.Next()
	require.NoError(b, err)
	var out []auditEvent
	for _, ev := range events {
		if ev.User() == controllerUser && ev.Write() {
			out = append(out, auditEvent{ev})
		}
	}
	return out
}

// queueWatch reads the controller's work queues from its /metrics.
type queueWatch struct {
	b *testing.B
	p *process
}

// queues is the sum over every work queue of its depth, its adds so far
// and its unfinished work (seconds of items being synced), and the
// controller's idle memory releases so far (releases; hasReleases: the
// binary counts them, which a build before them does not).
type queues struct {
	depth, adds, unfinished, releases float64
	hasReleases                       bool
}

func (q *queueWatch) read() queues {
	q.b.Helper()
	resp, err := http.Get(q.p.base + "/metrics")
	require.NoError(q.b, err)
	defer resp.Body.Close()
	require.Equal(q.b, http.StatusOK, resp.StatusCode)
	var out queues
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var sum *float64
		switch {
		case strings.HasPrefix(line, "workqueue_depth{"):
			sum = &out.depth
		case strings.HasPrefix(line, "workqueue_adds_total{"):
			sum = &out.adds
		case strings.HasPrefix(line, "workqueue_unfinished_work_seconds{"):
			sum = &out.unfinished
		case strings.HasPrefix(line, "clerum_hcc_idle_memory_releases_total "):
			sum, out.hasReleases = &out.releases, true
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(q.b, err, line)
		*sum += v
	}
	require.NoError(q.b, sc.Err())
	return out
}

func (q *queueWatch) adds() float64 { return q.read().adds }

// settledAt is when the queues were last seen busy, and their adds then.
type settledAt struct {
	at   time.Time
	adds float64
}

// settle polls the queues until they have been empty, with nothing added
// and nothing being synced, for settledFor, and returns the last moment
// they were not.
func (q *queueWatch) settle(timeout time.Duration) settledAt {
	q.b.Helper()
	deadline := time.Now().Add(timeout)
	last := settledAt{at: time.Now(), adds: -1}
	for time.Since(last.at) < settledFor {
		select {
		case <-q.p.Done():
			q.b.Fatalf("%s exited: %v\n%s", q.p.name, q.p.Err(), q.p.LogTail(40))
		default:
		}
		require.True(q.b, time.Now().Before(deadline), "the queues did not settle within %s", timeout)
		s := q.read()
		if s.depth > 0 || s.unfinished > 0 || s.adds != last.adds {
			last = settledAt{at: time.Now(), adds: s.adds}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return last
}

// goMemory reads the Go runtime's memory figures from the controller's
// /metrics: the heap in use, idle and returned to the kernel, the heap
// goal and the soft memory limit (go_gc_gomemlimit_bytes; math.MaxInt64
// when none is set), which every figure of the run must be read beside.
func goMemory(b *testing.B, port int) goMemoryStats {
	b.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	require.NoError(b, err)
	defer resp.Body.Close()
	out := goMemoryStats{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(goMemoryMetrics, name) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		require.NoError(b, err, sc.Text())
		out[name] = v
	}
	require.NoError(b, sc.Err())
	for _, name := range goMemoryMetrics {
		_, ok := out[name]
		require.True(b, ok, "no %s in /metrics", name)
	}
	return out
}

var goMemoryMetrics = []string{
	"go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes",
	"go_memstats_heap_released_bytes", "go_memstats_sys_bytes", "go_memstats_next_gc_bytes", "go_gc_gomemlimit_bytes",
}

type goMemoryStats map[string]float64

func (m goMemoryStats) String() string {
	var parts []string
	for _, name := range goMemoryMetrics {
		parts = append(parts, fmt.Sprintf("%s %.0f MiB", strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(name, "go_memstats_"), "go_gc_"), "_bytes"), m[name]/(1<<20)))
	}
	return strings.Join(parts, ", ")
}

// heapProfile saves the controller's heap profile, after a forced GC, to
// _output/controller-heap-NAME.pb.gz (the test's temporary directory when
// there is no _output), prints its top entries by space in use, and
// returns the live heap then (go_memstats_heap_alloc_bytes right after
// the GC), in MiB.
func heapProfile(b *testing.B, name string, pprofPort, port int) float64 {
	b.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", pprofPort))
	require.NoError(b, err)
	defer resp.Body.Close()
	require.Equal(b, http.StatusOK, resp.StatusCode)
	dir := filepath.Join(repoRoot, "_output")
	if _, err := os.Stat(dir); err != nil {
		dir = b.TempDir()
	}
	path, err := filepath.Abs(filepath.Join(dir, "controller-heap-"+name+".pb.gz"))
	require.NoError(b, err)
	out, err := os.Create(path)
	require.NoError(b, err)
	_, err = io.Copy(out, resp.Body)
	require.NoError(b, err)
	require.NoError(b, out.Close())

	top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=30", "-sample_index=inuse_space", path).CombinedOutput()
	require.NoError(b, err, "%s", top)
	progressf("%s: heap profile %s, by space in use:\n%s", name, path, top)

	metrics, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	require.NoError(b, err)
	defer metrics.Body.Close()
	sc := bufio.NewScanner(metrics.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_alloc_bytes "); ok {
			bytes, err := strconv.ParseFloat(v, 64)
			require.NoError(b, err)
			return bytes / (1 << 20)
		}
	}
	b.Fatal("no go_memstats_heap_alloc_bytes in /metrics")
	return 0
}
