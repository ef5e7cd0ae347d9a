//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/clerum/hcc/hack/devcontrolapi"
	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/render"
)

// Leader-election timings of the scenarios: short, so a failover takes
// seconds, and valid (renew < lease, retry < renew).
const (
	leaseSec = 6
	renewSec = 4
	retrySec = 1
)

// hmacSecret is INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET of every scenario.
const hmacSecret = "e2e-hmac-secret"

// env is one scenario's development Control API and the binaries it runs.
type env struct {
	t          *testing.T
	controlAPI *devcontrolapi.Server
	devURL     string
	// created are the YAML documents of the objects the scenario created,
	// for the expected set (render).
	created map[string][]byte
	// resolve answers the hostnames of the created objects for render, as
	// the scenario's DNS server answers them for the controller.
	resolve map[string][]netip.Addr
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s, err := devcontrolapi.New(devcontrolapi.Options{HMACSecret: []byte(hmacSecret), MigrationAudience: devcontrolapi.DefaultMigrationAudience})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	// Each scenario calls e.cleanUp itself, while a controller still runs
	// to delete the children.
	e := &env{t: t, controlAPI: s, devURL: srv.URL, created: map[string][]byte{}}
	e.keepAuditOnFailure()
	// The Host pods' configuration, as deploy/base ships it: a Host does
	// not start without it. deploy/examples applies its own over it.
	e.createFile(filepath.Join(repoRoot, "deploy", "base", "mcp-host", "configmap.yaml"))
	return e
}

// keepAuditOnFailure copies the part of the audit log the test wrote into
// its log directory if it fails with HCC_E2E_LOG_DIR set: every request of
// the scenario, to be read with the binaries' logs.
func (e *env) keepAuditOnFailure() {
	if os.Getenv("HCC_E2E_LOG_DIR") == "" {
		return
	}
	offset := auditOffset(e.t)
	e.t.Cleanup(func() {
		if !e.t.Failed() {
			return
		}
		raw, err := os.ReadFile(cluster.AuditLog())
		if err != nil || int64(len(raw)) < offset {
			e.t.Logf("keeping the audit log: %v", err)
			return
		}
		path := filepath.Join(e.logDir(), "audit.log")
		if err := os.WriteFile(path, raw[offset:], 0o644); err != nil {
			e.t.Logf("keeping the audit log: %v", err)
			return
		}
		e.t.Logf("the scenario's audit log: %s", path)
	})
}

// controllerEnv is the shipped configuration (deploy/base) with the local
// endpoints and the scenario's timings.
func (e *env) controllerEnv(identity string, port int, extra ...string) []string {
	shipped := shippedEnv(e.t, filepath.Join(repoRoot, "deploy", "base", "controller", "deployment.yaml"))
	return append(append(shipped,
		"POD_NAME="+identity,
		"HCC_CONTROLLER_PORT="+strconv.Itoa(port),
		"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET="+hmacSecret,
		"CONTROL_API_BASE_URL="+e.devURL,
		"MCP_HOST_GATEWAY_URL="+e.devURL,
		"CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS="+controlplane.StorageClass,
		"HCC_LEADER_LEASE_SEC="+strconv.Itoa(leaseSec),
		"HCC_LEADER_RENEW_SEC="+strconv.Itoa(renewSec),
		"HCC_LEADER_RETRY_SEC="+strconv.Itoa(retrySec),
		"LOG_LEVEL=debug",
	), extra...)
}

// binary is a running hcc-controller or hcc-api.
type binary struct {
	*controlplane.Process
	name string
	base string // http://127.0.0.1:PORT
	log  string
}

// startController runs hcc-controller as identity and waits for /health.
func (e *env) startController(identity string, extra ...string) *binary {
	e.t.Helper()
	return e.start("hcc-controller", identity, controllerKubeconfig, func(port int) []string { return e.controllerEnv(identity, port, extra...) })
}

// startAPI runs hcc-api and waits for /ready.
func (e *env) startAPI() *binary {
	e.t.Helper()
	shipped := shippedEnv(e.t, filepath.Join(repoRoot, "deploy", "base", "api", "deployment.yaml"))
	b := e.start("hcc-api", "api", apiKubeconfig, func(port int) []string {
		return append(slices.Clone(shipped),
			"CONTEXT_MAPPER_PORT="+strconv.Itoa(port),
			"HCC_MCP_HOST_JWT_PUBLIC_KEY="+e.controlAPI.PublicKeyPEM(),
			"CONTEXT_MAPPER_DESKTOP_API_TOKEN=e2e-desktop-token",
		)
	})
	e.eventually("hcc-api ready", time.Minute, func() bool {
		resp, err := http.Get(b.base + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return b
}

// startAttempts is how often start tries a binary on a new port when the
// port it picked was taken before the binary bound it.
const startAttempts = 3

// start runs the binary name as identity with the environment environ
// gives for a free port, and waits for /health. When the test ends, the
// binary is stopped, and the test fails if it exited unasked or the race
// detector reported a race (controlplane.Process.Unexpected).
func (e *env) start(name, identity, kubeconfig string, environ func(port int) []string) *binary {
	e.t.Helper()
	for attempt := 1; ; attempt++ {
		b, err := e.startOnce(name, identity, kubeconfig, environ)
		if err == nil {
			return b
		}
		if !b.LoggedAddressInUse() || attempt == startAttempts {
			e.t.Fatalf("%v\n%s", err, b.LogTail(40))
		}
		e.t.Logf("%s: its port was taken; trying another", b.name)
	}
}

// logDir is where the binaries a test starts log: a directory of the
// test's own under $HCC_E2E_LOG_DIR when that is set (kept after the run,
// for a failure to be read whole), else a temporary one.
func (e *env) logDir() string {
	e.t.Helper()
	root := os.Getenv("HCC_E2E_LOG_DIR")
	if root == "" {
		return e.t.TempDir()
	}
	dir, err := os.MkdirTemp(root, strings.NewReplacer("/", "-").Replace(e.t.Name())+"-")
	require.NoError(e.t, err)
	return dir
}

// raceReports returns the race detector's reports in the log at path
// (each from its WARNING line to its closing rule), "" if none: the log's
// tail shows only what came after them.
func raceReports(path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var out []string
	in := false
	for line := range strings.SplitSeq(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "WARNING: DATA RACE"):
			in = true
		case in && strings.HasPrefix(line, "=================="):
			in = false
			out = append(out, line)
		}
		if in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// startOnce is one attempt of start; the binary it returns has exited if
// the error is not nil.
func (e *env) startOnce(name, identity, kubeconfig string, environ func(port int) []string) (*binary, error) {
	e.t.Helper()
	dir, err := binaries()
	require.NoError(e.t, err)
	port := testenv.FreePort(e.t)
	log := filepath.Join(e.logDir(), name+"-"+identity+".log")
	p, err := controlplane.StartProcess(name, filepath.Join(dir, name), []string{"--kubeconfig", kubeconfig}, append(controlplane.BinaryEnv(), environ(port)...), log)
	require.NoError(e.t, err)
	b := &binary{Process: p, name: name + " " + identity, base: fmt.Sprintf("http://127.0.0.1:%d", port), log: log}
	e.t.Cleanup(func() {
		_ = p.Stop()
		// A data race, or an exit the test did not ask for, fails the
		// test whatever it asserted.
		if err := p.Unexpected(); err != nil && !p.LoggedAddressInUse() {
			e.t.Errorf("%s: %v", b.name, err)
			if races := raceReports(log); races != "" {
				e.t.Logf("the race detector's reports in %s's log:\n%s", b.name, races)
			}
		}
		if e.t.Failed() {
			e.t.Logf("the end of %s's log:\n%s", b.name, p.LogTail(40))
		}
	})
	var exited error
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-p.Done():
			exited = fmt.Errorf("%s exited: %v", b.name, p.Err())
			return false, exited
		default:
		}
		resp, err := http.Get(b.base + "/health")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if exited != nil {
		return b, exited
	}
	require.NoError(e.t, err, b.name+" healthy")
	return b, nil
}

// shippedEnv is the literal env of the Deployment manifest at path.
func shippedEnv(t *testing.T, path string) []string {
	t.Helper()
	env, err := controlplane.ShippedEnv(path)
	require.NoError(t, err)
	return env
}

func (e *env) eventually(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	eventually(e.t, what, timeout, cond)
}

// eventually polls cond every 200 ms until it holds, and fails t (what
// names the wait) once timeout passes.
func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond(), nil })
	require.NoError(t, err, what)
}

// create creates obj (a typed clerum.io or core object) as the admin and
// remembers it for the expected set.
func (e *env) create(obj runtime.Object) {
	e.t.Helper()
	raw, err := yaml.Marshal(obj)
	require.NoError(e.t, err)
	m, err := meta.Accessor(obj)
	require.NoError(e.t, err)
	gvk := obj.GetObjectKind().GroupVersionKind()
	require.NotEmpty(e.t, gvk.Kind, "set TypeMeta on %s", m.GetName())
	e.created[gvk.Kind+"/"+m.GetNamespace()+"/"+m.GetName()] = raw
	require.NoError(e.t, applyObject(context.Background(), raw))
}

// update replaces a created object (same kind, namespace and name).
func (e *env) update(obj runtime.Object) { e.create(obj) }

// expectedSet is what render plans for the created objects: every object
// HCC should have created, as "Kind namespace/name".
func (e *env) expectedSet() []string {
	e.t.Helper()
	dir := e.t.TempDir()
	for key, raw := range e.created {
		require.NoError(e.t, os.WriteFile(filepath.Join(dir, strings.ReplaceAll(key, "/", "_")+".yaml"), raw, 0o644))
	}
	for _, kv := range shippedEnv(e.t, filepath.Join(repoRoot, "deploy", "base", "controller", "deployment.yaml")) {
		name, value, _ := strings.Cut(kv, "=")
		e.t.Setenv(name, value)
	}
	e.t.Setenv("CONTEXT_MAPPER_HOST_WORKSPACE_STORAGE_CLASS", controlplane.StorageClass)
	cfg, err := config.Load(config.Render)
	require.NoError(e.t, err)
	out, err := render.Render(context.Background(), render.Options{Paths: []string{dir}, Overrides: e.resolve, Config: cfg, Warn: func(string, ...any) {}})
	require.NoError(e.t, err)
	var set []string
	for doc := range strings.SplitSeq(string(out), "\n---\n") {
		var m metav1.PartialObjectMetadata
		require.NoError(e.t, yaml.Unmarshal([]byte(doc), &m))
		if m.Kind != "" {
			set = append(set, m.Kind+" "+m.Namespace+"/"+m.Name)
		}
	}
	slices.Sort(set)
	return set
}

// actualSet is every object labelled as HCC's, as "Kind namespace/name".
func actualSet(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: names.LabelManagedBy + "=" + names.ManagedByValue}
	all := metav1.NamespaceAll
	var set []string
	for kind, list := range map[string]func() (runtime.Object, error){
		"Deployment":            func() (runtime.Object, error) { return kube.AppsV1().Deployments(all).List(ctx, opts) },
		"Service":               func() (runtime.Object, error) { return kube.CoreV1().Services(all).List(ctx, opts) },
		"ConfigMap":             func() (runtime.Object, error) { return kube.CoreV1().ConfigMaps(all).List(ctx, opts) },
		"Secret":                func() (runtime.Object, error) { return kube.CoreV1().Secrets(all).List(ctx, opts) },
		"ServiceAccount":        func() (runtime.Object, error) { return kube.CoreV1().ServiceAccounts(all).List(ctx, opts) },
		"PersistentVolumeClaim": func() (runtime.Object, error) { return kube.CoreV1().PersistentVolumeClaims(all).List(ctx, opts) },
		"Role":                  func() (runtime.Object, error) { return kube.RbacV1().Roles(all).List(ctx, opts) },
		"RoleBinding":           func() (runtime.Object, error) { return kube.RbacV1().RoleBindings(all).List(ctx, opts) },
		"NetworkPolicy":         func() (runtime.Object, error) { return kube.NetworkingV1().NetworkPolicies(all).List(ctx, opts) },
		"Job":                   func() (runtime.Object, error) { return kube.BatchV1().Jobs(all).List(ctx, opts) },
	} {
		l, err := list()
		require.NoError(t, err)
		items, err := meta.ExtractList(l)
		require.NoError(t, err)
		for _, item := range items {
			m, err := meta.Accessor(item)
			require.NoError(t, err)
			if m.GetDeletionTimestamp() == nil {
				set = append(set, kind+" "+m.GetNamespace()+"/"+m.GetName())
			}
		}
	}
	slices.Sort(set)
	return set
}

// notReady is " (Reason: message)" of the Ready condition in conds, so a
// convergence that times out says why; "" without one.
func notReady(conds []metav1.Condition) string {
	c := meta.FindStatusCondition(conds, clerumv1alpha1.ConditionReady)
	if c == nil {
		return ""
	}
	return fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
}

// converged reports whether every McpServer, Host and file system says
// ready for its generation and every Deployment HCC wrote is available.
// The McpServers and Hosts in blocked ("Kind name") need only have been
// judged for their generation: they are expected not to be ready.
func converged(t *testing.T, blocked ...string) (bool, string) {
	t.Helper()
	ctx := context.Background()
	servers, err := hcc.ClerumV1alpha1().McpServers("mcp-server").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range servers.Items {
		if slices.Contains(blocked, "McpServer "+s.Name) {
			if s.Status.ObservedGeneration != s.Generation {
				return false, "McpServer " + s.Name
			}
			continue
		}
		if s.Spec.IsEnabled() && (s.Status.ObservedGeneration != s.Generation || !s.Status.Ready) {
			return false, "McpServer " + s.Name
		}
	}
	hosts, err := hcc.ClerumV1alpha1().Hosts("mcp-host").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, h := range hosts.Items {
		if slices.Contains(blocked, "Host "+h.Name) {
			if h.Status.ObservedGeneration != h.Generation {
				return false, "Host " + h.Name
			}
			continue
		}
		if h.Status.ObservedGeneration != h.Generation || !meta.IsStatusConditionTrue(h.Status.Conditions, clerumv1alpha1.ConditionReady) {
			return false, "Host " + h.Name + notReady(h.Status.Conditions)
		}
	}
	sfs, err := hcc.ClerumV1alpha1().SharedFileSystems(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, f := range sfs.Items {
		if f.Status.ObservedGeneration != f.Generation || f.Status.Phase != clerumv1alpha1.FileSystemReady {
			return false, "SharedFileSystem " + f.Name
		}
	}
	gfs, err := hcc.ClerumV1alpha1().GlobalFileSystems(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, f := range gfs.Items {
		if f.Status.ObservedGeneration != f.Generation || f.Status.Phase != clerumv1alpha1.FileSystemReady || !f.Status.RootSeeded {
			return false, "GlobalFileSystem " + f.Name
		}
	}
	deps, err := kube.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: names.LabelManagedBy + "=" + names.ManagedByValue})
	require.NoError(t, err)
	for _, d := range deps.Items {
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			continue
		}
		if !kit.DeploymentAvailable(&d) {
			return false, "Deployment " + d.Namespace + "/" + d.Name
		}
	}
	return true, ""
}

func (e *env) waitConverged(timeout time.Duration, blocked ...string) {
	e.t.Helper()
	var last string
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, what := converged(e.t, blocked...)
		last = what
		return ok, nil
	})
	require.NoError(e.t, err, "not converged after %s; still waiting for %s", time.Since(start).Round(time.Millisecond), last)
	e.t.Logf("converged in %s", time.Since(start).Round(time.Millisecond))
}

// waitPlanned waits until the cluster holds exactly the planned objects
// (expectedSet) and fails t with the difference once timeout passes.
// converged reads the owners' statuses, which a new leader inherits
// from the old one: right after a takeover they may already read ready
// while the new leader's first NetworkPolicy pass is still writing, so a
// test comparing sets after a change waits here rather than comparing
// once.
func (e *env) waitPlanned(timeout time.Duration, msgAndArgs ...any) {
	e.t.Helper()
	var want, got []string
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		want, got = e.expectedSet(), actualSet(e.t)
		return equalSets(want, got), nil
	})
	if err != nil {
		assert.Equal(e.t, want, got, msgAndArgs...)
		return
	}
	e.t.Logf("exactly the planned objects %s after the wait began", time.Since(start).Round(time.Millisecond))
}

// cleanUp deletes the created objects and waits until HCC has removed
// everything it made for them, leaving the cluster as the scenario found
// it. A controller must be running.
func (e *env) cleanUp() {
	e.t.Helper()
	ctx := context.Background()
	for key := range e.created {
		kind, rest, _ := strings.Cut(key, "/")
		ns, name, _ := strings.Cut(rest, "/")
		var err error
		switch kind {
		case "McpServer":
			err = hcc.ClerumV1alpha1().McpServers(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case "Context":
			err = hcc.ClerumV1alpha1().Contexts(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case "Host":
			err = hcc.ClerumV1alpha1().Hosts(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case "SharedFileSystem":
			err = hcc.ClerumV1alpha1().SharedFileSystems(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case "GlobalFileSystem":
			err = hcc.ClerumV1alpha1().GlobalFileSystems(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case "Secret":
			err = kube.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{})
		case "ConfigMap":
			err = kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{})
		default:
			e.t.Fatalf("cleanUp: unexpected kind %s", kind)
		}
		require.NoError(e.t, ignoreNotFound(err))
	}
	e.created = map[string][]byte{}
	want := e.expectedSet() // the namespaces' defaults only
	e.eventually("only the namespace defaults remain", 2*time.Minute, func() bool { return slices.Equal(actualSet(e.t), want) })
	e.eventually("every Host is gone", time.Minute, func() bool {
		hosts, err := hcc.ClerumV1alpha1().Hosts("mcp-host").List(ctx, metav1.ListOptions{})
		return err == nil && len(hosts.Items) == 0
	})
}

// auditOffset is the current length of the audit log: controllerWrites
// reads only what follows.
func auditOffset(t *testing.T) int64 {
	t.Helper()
	n, err := controlplane.AuditLogSize(cluster.AuditLog())
	require.NoError(t, err)
	return n
}

// controllerWrites returns every mutating request (create, update, patch,
// delete, deletecollection) hcc-controller made after offset, whatever
// its response: a 409, 403, 422 or 500 is a write the controller
// attempted. succeeded keeps the successful ones.
func controllerWrites(t *testing.T, offset int64) []controlplane.AuditEvent {
	t.Helper()
	events, err := controlplane.ReadAudit(cluster.AuditLog(), offset)
	require.NoError(t, err)
	var out []controlplane.AuditEvent
	for _, ev := range events {
		if ev.User() == controllerUser && ev.Write() {
			out = append(out, ev)
		}
	}
	return out
}

// succeeded returns the writes that succeeded (2xx): the changes made, for
// a test that compares them with the changes planned.
func succeeded(writes []controlplane.AuditEvent) []controlplane.AuditEvent {
	var out []controlplane.AuditEvent
	for _, w := range writes {
		if w.Succeeded() {
			out = append(out, w)
		}
	}
	return out
}

// describe is a write as "verb target code body", for a failure message.
func describe(w controlplane.AuditEvent) string {
	return fmt.Sprintf("%s %s %d %s", w.Verb, w.Target(), w.Code(), w.RequestObject)
}

// duplicateWrites returns the writes that repeat a change already made to
// the same object, whatever the verbs: an object is judged by the state
// each successful write left it in (the audit log's response object), so
// a create followed by an update or patch that changes nothing, or two
// updates of one change, are caught alike. What is compared:
//
//   - the object without its status for writes of the object, its status
//     for writes of /status, each without what differs between two writes
//     of one change (resourceVersion, managed fields, generation, and the
//     lastTransitionTime a sync from an older cache stamps again);
//   - a successful write is a duplicate when it leaves the object in a
//     state an earlier write in the window left it in (a no-op write, or
//     one that undoes a change and makes it again);
//   - a create refused with 409 AlreadyExists after the controller itself
//     created or wrote the object earlier in the window (it acted on a
//     cache that had not seen its own write) changed nothing, so it is no
//     duplicate change: refusedCreates returns those for the test to log.
//     (A refused write on a converged cluster fails TestResyncWritesNothing,
//     which counts every write attempt.) A 409 on an object the window has
//     not seen written is the AlreadyExists race the kit handles by
//     reading;
//   - a delete is a duplicate when the controller had already deleted the
//     object successfully;
//   - other failed writes change nothing and are not compared (their
//     retry is the change's first write). Events are left out: a repeated
//     Event is counted, not a repeated change.
func duplicateWrites(events []controlplane.AuditEvent) []string {
	states := map[string][]string{} // per object part, the states written
	deleted := map[string]bool{}
	var dups []string
	for _, ev := range events {
		r := ev.ObjectRef
		if r.Resource == "events" || r.Name == "" {
			continue
		}
		obj := r.APIGroup + "/" + r.Resource + " " + r.Namespace + "/" + r.Name
		part := obj
		if r.Subresource != "" {
			part += "/" + r.Subresource
		}
		switch {
		case ev.Verb == "delete":
			if deleted[obj] {
				dups = append(dups, "delete "+ev.Target()+" again")
			}
			if ev.Succeeded() {
				deleted[obj] = true
				delete(states, obj)
				delete(states, obj+"/status")
			}
		case ev.Verb == "create" && ev.Code() == http.StatusConflict:
			continue
		case ev.Succeeded():
			deleted[obj] = false
			state := content(ev.ResponseObject, r.Subresource)
			if slices.Contains(states[part], state) {
				dups = append(dups, ev.Verb+" "+ev.Target())
			}
			states[part] = append(states[part], state)
		}
	}
	return dups
}

// refusedCreates returns the creates refused with 409 AlreadyExists after
// the controller had itself written the object earlier in the window.
func refusedCreates(events []controlplane.AuditEvent) []string {
	written := map[string]*controlplane.AuditEvent{}
	var refused []string
	for i := range events {
		ev := &events[i]
		r := ev.ObjectRef
		if r.Resource == "events" || r.Name == "" || r.Subresource != "" {
			continue
		}
		obj := r.APIGroup + "/" + r.Resource + " " + r.Namespace + "/" + r.Name
		switch {
		case ev.Verb == "delete" && ev.Succeeded():
			delete(written, obj)
		case ev.Verb == "create" && ev.Code() == http.StatusConflict:
			if last := written[obj]; last != nil {
				refused = append(refused, fmt.Sprintf("create %s by %s, received %s, after %s %d by %s, received %s, answered %s",
					ev.Target(), ev.UserAgent, ev.Received.Format(time.RFC3339Nano),
					last.Verb, last.Code(), last.UserAgent, last.Received.Format(time.RFC3339Nano), last.Stage.Format(time.RFC3339Nano)))
			}
		case ev.Succeeded():
			written[obj] = ev
		}
	}
	return refused
}

func createNamespaces(ctx context.Context, names []string) error {
	return controlplane.CreateNamespaces(ctx, cluster.Config(), names)
}

func applyFile(ctx context.Context, path string) error {
	return controlplane.ApplyFiles(ctx, cluster.Config(), path)
}

// applyObject applies one object given as YAML, as the admin.
func applyObject(ctx context.Context, raw []byte) error {
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		return err
	}
	unstructured.RemoveNestedField(obj.Object, "status")
	unstructured.RemoveNestedField(obj.Object, "metadata", "creationTimestamp")
	return controlplane.ApplyObjects(ctx, cluster.Config(), obj)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// ready reports whether the binary's /ready answers 200.
func ready(b *binary) bool {
	resp, err := http.Get(b.base + "/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// content is the part of the object body a write of subresource ("" for
// the object itself) changes, as compared by duplicateWrites.
func content(body json.RawMessage, subresource string) string {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return string(body)
	}
	switch subresource {
	case "":
		delete(doc, "status")
	case "status":
		doc = map[string]any{"status": doc["status"]}
	}
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			delete(v, "lastTransitionTime")
			if m, ok := v["metadata"].(map[string]any); ok {
				delete(m, "resourceVersion")
				delete(m, "managedFields")
				delete(m, "generation")
			}
			for _, child := range v {
				strip(child)
			}
		case []any:
			for _, child := range v {
				strip(child)
			}
		}
	}
	strip(doc)
	out, _ := json.Marshal(doc)
	return string(out)
}
