//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clerum/hcc/hack/devcontrolapi"
	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
)

// fleet creates n sse servers in one Context and hosts Hosts using it.
func (e *env) fleet(n, hosts int) {
	e.t.Helper()
	var servers []string
	for i := range n {
		name := fmt.Sprintf("srv-%02d", i)
		e.create(sseServer(name))
		servers = append(servers, name)
	}
	e.create(contextOf("fleet", servers...))
	for i := range hosts {
		e.create(hostOf(fmt.Sprintf("fleet-%d", i), "fleet"))
	}
}

// waitMidConvergence waits until HCC has written its first Deployment,
// while (with a fleet) most of the work is still ahead.
func (e *env) waitMidConvergence() {
	e.t.Helper()
	e.eventually("a first Deployment", time.Minute, func() bool {
		deps, err := kube.AppsV1().Deployments("mcp-server").List(context.Background(), metav1.ListOptions{})
		return err == nil && len(deps.Items) > 0
	})
	if ok, _ := converged(e.t); ok {
		e.t.Fatal("converged before the fault could be injected: grow the fleet")
	}
}

func lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := kube.CoordinationV1().Leases("control-plane").Get(context.Background(), "hcc-controller", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return l
}

func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// Two leader-elected controllers; the leader is killed with SIGKILL in the
// middle of convergence. The standby takes over within the lease duration
// plus two jittered retry periods (as client-go bounds it; docs/deploy.md,
// "Failover"), finishes convergence with exactly the planned objects, and
// no object is written twice with the same content.
func TestFailover(t *testing.T) {
	e := newEnv(t)
	offset := auditOffset(t)
	replicas := map[string]*binary{"replica-a": e.startController("replica-a")}
	// From here a controller runs to delete what the scenario made, also
	// when a later step fails (the deferred cleanUp runs before the
	// binaries' cleanups stop them).
	defer e.cleanUp()
	e.eventually("replica-a leads", 30*time.Second, func() bool { return holder(lease(t)) == "replica-a" })
	replicas["replica-b"] = e.startController("replica-b")

	e.fleet(24, 3)
	e.waitMidConvergence()
	killed := time.Now()
	replicas["replica-a"].Kill()

	var l *coordinationv1.Lease
	e.eventually("replica-b takes over", 30*time.Second, func() bool {
		l = lease(t)
		return holder(l) == "replica-b"
	})
	require.NotNil(t, l.Spec.AcquireTime)
	takeover := l.Spec.AcquireTime.Sub(killed)
	// The standby polls the Lease every RetryPeriod, jittered by up to
	// 1.2 × RetryPeriod (leaderelection.JitterFactor), and counts the lease
	// duration from when it last saw the record change, not from the
	// leader's renewal: it may see the last renewal one jittered period
	// late, and acquire one jittered period after the lease runs out. So
	// client-go bounds a takeover by the lease duration plus two jittered
	// retry periods (10.4 s here); idle runs measured 6.0–7.6 s.
	jittered := time.Duration(float64(retrySec) * 2.2 * float64(time.Second))
	bound := time.Duration(leaseSec)*time.Second + 2*jittered
	t.Logf("takeover %s after the SIGKILL (lease %ds, retry %ds, bound %s)", takeover.Round(time.Millisecond), leaseSec, retrySec, bound)
	assert.LessOrEqual(t, takeover, bound)

	e.waitConvergedAfterKill(3*time.Minute, offset, "replica-a")
	e.waitPlanned(time.Minute, "exactly the planned objects")
	writes := controllerWrites(t, offset)
	t.Logf("%d writes by the two replicas", len(writes))
	// Open finding: a NetworkPolicy create has been seen re-sent 11 ms
	// after its own 201 during the standby's first passes (a 409, no
	// change). It is logged, not failed on, until it is explained.
	if refused := refusedCreates(writes); len(refused) > 0 {
		t.Logf("creates refused after the controller's own write: %v", refused)
	}
	dups := duplicateWrites(writes)
	assert.Empty(t, dups, "no change is written twice")
	if len(dups) > 0 {
		first := strings.Fields(dups[0])[1:3]
		for _, w := range writes {
			if w.Target() == first[0]+" "+first[1] {
				t.Logf("%s %s", w.Received, describe(w))
			}
		}
	}
	// One credential per Host: a credential issued twice across the
	// failover (the old leader's in-flight issuance and the new leader's
	// again) is a Control API call the Host did not need.
	// The one exception is a credential the kill itself lost: issued to
	// replica-a, which died before writing it into the Host's Secret.
	hosts, err := hcc.ClerumV1alpha1().Hosts("mcp-host").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	lost := lostCredentials(t, offset, "replica-a", killed, e.controlAPI.Issuances())
	if len(lost) > 0 {
		t.Logf("credentials issued to replica-a before the kill and never written (issued again): %v", lost)
	}
	assert.Equal(t, len(hosts.Items)+len(lost), e.controlAPI.Issued(), "the Control API issued one credential per Host, and one more for each the kill lost")
}

// waitConvergedAfterKill is waitConverged after replica identity was
// killed or lost its lease to an outage, with the one repair
// docs/ownership.md prescribes for what that can leave behind: a claim
// identity created but could not mark before it exited, bound meanwhile to
// a static volume (the test cluster binds at once), is refused by the next
// leader (its Host reports NotOwned) until someone deletes it. Such a claim
// — created by identity, never written by it again, unmarked and bound —
// is deleted, once, and logged; any other refusal still fails the wait.
func (e *env) waitConvergedAfterKill(timeout time.Duration, offset int64, identity string) {
	e.t.Helper()
	ctx := context.Background()
	deleted := map[string]bool{}
	eventually(e.t, "converged after the kill", timeout, func() bool {
		if ok, _ := converged(e.t); ok {
			return true
		}
		claims, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").List(ctx, metav1.ListOptions{})
		require.NoError(e.t, err)
		var writes []controlplane.AuditEvent // identity's, read once a poll, if a claim needs them
		read := false
		for _, c := range claims.Items {
			if deleted[c.Name] || c.Annotations[mark.Annotation] != "" || c.Spec.VolumeName == "" {
				continue
			}
			if !read {
				writes, read = writesBy(e.t, offset, identity), true
			}
			if !createdUnmarked(writes, c.Name) {
				continue
			}
			e.t.Logf("claim %s: created by %s, which exited before marking it, and bound to %s meanwhile: deleted, as docs/ownership.md says", c.Name, identity, c.Spec.VolumeName)
			require.NoError(e.t, kube.CoreV1().PersistentVolumeClaims("mcp-host").Delete(ctx, c.Name, metav1.DeleteOptions{}))
			deleted[c.Name] = true
		}
		return false
	})
	ok, what := converged(e.t)
	require.True(e.t, ok, "not converged: %s", what)
}

// createdUnmarked reports whether writes, one replica's, created the
// claim name in mcp-host and never wrote it again (its mark is the update
// right after the create).
func createdUnmarked(writes []controlplane.AuditEvent, name string) bool {
	created := false
	for _, w := range writes {
		if w.ObjectRef == nil || w.ObjectRef.Resource != "persistentvolumeclaims" || w.ObjectRef.Namespace != "mcp-host" || w.ObjectRef.Name != name || !w.Succeeded() {
			continue
		}
		if w.Verb != "create" {
			return false
		}
		created = true
	}
	return created
}

// lostCredentials returns the Hosts a bootstrap credential was issued for
// before killed that replica identity never wrote into the Host's
// runtime-token Secret: the kill landed between the Control API's answer
// and the write, so the next leader rightly asks again.
func lostCredentials(t *testing.T, offset int64, identity string, killed time.Time, issued []devcontrolapi.Issuance) []string {
	written := map[string]bool{}
	for _, w := range writesBy(t, offset, identity) {
		if w.ObjectRef != nil && w.ObjectRef.Resource == "secrets" && w.Succeeded() {
			written[w.ObjectRef.Namespace+"/"+w.ObjectRef.Name] = true
		}
	}
	var lost []string
	for _, i := range issued {
		if i.At.Before(killed) && !written[i.Namespace+"/"+names.HostRuntimeTokens(i.HostRef)] {
			lost = append(lost, i.Namespace+"/"+i.HostRef)
		}
	}
	return lost
}

// kube-apiserver is stopped and started again in the middle of
// convergence, for longer than the renew deadline. The controller runs
// with leader election on, as shipped: it loses its lease and exits, and a
// supervisor restarts it as the kubelet would (restartPolicy: Always, with
// backoff); the test logs how many restarts that took. Both binaries
// recover to state that did not exist before the outage, so neither can
// pass on what it had cached: the Context drops a server just before the
// stop, and right after the restart drops twelve more and names four new
// servers. The controller converges to exactly the planned objects, and
// hcc-api's inventory shows exactly the new set.
func TestAPIServerRestart(t *testing.T) {
	e := newEnv(t)
	offset := auditOffset(t)
	ctrl := e.superviseController("solo")
	e.eventually("solo leads", 30*time.Second, func() bool { return holder(lease(t)) == "solo" })
	api := e.startAPI()
	defer e.cleanUp()

	e.fleet(24, 2)
	e.waitMidConvergence()
	var before []string
	for i := range 23 {
		before = append(before, fmt.Sprintf("srv-%02d", i))
	}
	e.update(contextOf("fleet", before...)) // srv-23 leaves just before the outage
	var restarted time.Time
	want := slices.Clone(before[12:])
	restartAPIServer(t, func() {
		// Past the renew deadline (HCC_LEADER_RENEW_SEC): the leader
		// cannot renew, loses its lease and exits.
		time.Sleep(time.Duration(leaseSec+2) * time.Second)
	}, func() {
		restarted = time.Now()
		for i := range 4 {
			name := fmt.Sprintf("new-%02d", i)
			e.create(sseServer(name))
			want = append(want, name)
		}
		e.update(contextOf("fleet", want...))
	})
	slices.Sort(want)

	// The outage may fall between a claim's create and its mark, which
	// the leader, exiting, then never writes.
	e.waitConvergedAfterKill(3*time.Minute, offset, "solo")
	t.Logf("converged %s after the API server came back", time.Since(restarted).Round(time.Millisecond))
	e.waitPlanned(time.Minute, "exactly the planned objects: nothing missing, nothing extra")
	token := e.accessToken("fleet-0")
	// Polled every second, under hcc-api's per-Host limit (120 a minute);
	// a 429 is retried, not failed.
	var got []string
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
		code, body := call(t, api, http.MethodGet, "/api/v2/hosts/self/mcpservers", token, "")
		if code != http.StatusOK {
			last = fmt.Sprintf("%d %s", code, body)
			return false, nil
		}
		var inv struct{ Servers []inventoryEntry }
		require.NoError(t, json.Unmarshal([]byte(body), &inv))
		got = entryNames(inv.Servers)
		slices.Sort(got)
		last = fmt.Sprint(got)
		return slices.Equal(got, want), nil
	})
	assert.NoError(t, err, "hcc-api lists exactly the Context's servers after the outage; last answer %s, want %v", last, want)

	t.Logf("hcc-controller restarts: %d (%s)", ctrl.Restarts(), strings.Join(ctrl.Exits(), "; "))
	assert.GreaterOrEqual(t, ctrl.Restarts(), 1, "an outage past the renew deadline costs the leader its lease")
	assert.Empty(t, ctrl.Bad(), "every exit is one a healthy binary makes")
}

// After convergence on the shipped examples (every kind, every transport),
// a forced full resync — a controller restart, which syncs every object
// from a cold cache, and every periodic resync firing at least twice, as
// the controller's own metrics show — writes nothing. The converged
// cluster also matches the hand-written expectation for deploy/examples
// (examples_test.go), besides render's plan.
func TestResyncWritesNothing(t *testing.T) {
	e := newEnv(t)
	resync := []string{"HCC_LEADER_ELECT=false", "CONTEXT_MAPPER_HOST_RESYNC_SEC=2", "CONTEXT_MAPPER_SFS_RESYNC_SEC=2",
		"CONTEXT_MAPPER_GFS_RESYNC_SEC=2", "CONTEXT_MAPPER_NETPOL_RESYNC_SEC=2", "CONTEXT_MAPPER_NETPOL_DEFAULTS_RESYNC_SEC=2",
		"HCC_EXTERNAL_EGRESS_RESYNC_SEC=2"}
	// A hostname egress binding, so the DNS refresh has something to
	// resolve, at a DNS server the test runs.
	dns := startDNS(t, map[string]string{"api.example.com": "93.184.216.34"})
	resync = append(resync, "HCC_EXTERNAL_EGRESS_DNS_SERVER="+dns.addr)
	e.resolve = map[string][]netip.Addr{"api.example.com": {netip.MustParseAddr("93.184.216.34")}}
	first := e.startController("first", resync...)
	e.createFiles(filepath.Join(repoRoot, "deploy", "examples"))
	lookup := sseServer("lookup")
	lookup.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "api", Mode: clerumv1alpha1.EgressModeExactHost, Host: "api.example.com", Port: ptr.To[int32](443)}}
	e.create(lookup)
	e.waitConverged(3 * time.Minute)
	// Ready owners do not mean the NetworkPolicy pass for them has run:
	// the first controller stops only once its work is all done, or the
	// second would finish it and its writes would count as the resync's.
	e.waitPlanned(time.Minute, "the first controller's plan")
	e.waitQueuesIdle(first)
	require.NoError(t, first.Stop())

	offset := auditOffset(t)
	second := e.startController("second", resync...)
	defer e.cleanUp()
	e.eventually("the restarted controller is ready", time.Minute, func() bool { return ready(second) })

	// Every periodic resync has fired at least twice since /ready: the
	// NetworkPolicy ticks (full and defaults-only passes), the Host sweep,
	// which queues every Host, and the file-system resyncs, which queue
	// every file system. Three rounds are required, so that adds made by
	// the cold start before the baseline cannot stand in for a resync.
	ctx := context.Background()
	hosts, err := hcc.ClerumV1alpha1().Hosts("mcp-host").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	sfs, err := hcc.ClerumV1alpha1().SharedFileSystems(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	gfs, err := hcc.ClerumV1alpha1().GlobalFileSystems(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	const rounds = 3
	want := map[string]float64{
		netpolPasses("full"):          rounds,
		netpolPasses("defaults"):      rounds,
		queueAdds("host-sweep"):       rounds,
		queueAdds("host"):             rounds * float64(len(hosts.Items)),
		queueAdds("sharedfilesystem"): rounds * float64(len(sfs.Items)),
		queueAdds("globalfilesystem"): rounds * float64(len(gfs.Items)),
		// The coordinator requeues a hostname server for its refresh.
		queueAdds("external-egress"): rounds,
	}
	before := scrape(t, second)
	queriesBefore := dns.Queries("api.example.com")
	since := time.Now()
	var now map[string]float64
	e.eventually("every periodic resync fired at least twice", time.Minute, func() bool {
		now = scrape(t, second)
		for series, n := range want {
			if now[series]-before[series] < n {
				return false
			}
		}
		// At least two lookups reached the DNS server (one or two
		// queries each: A, and AAAA when both families are asked).
		return dns.Queries("api.example.com")-queriesBefore >= rounds
	})
	t.Logf("DNS queries for api.example.com since /ready: %d", dns.Queries("api.example.com")-queriesBefore)
	var deltas []string
	for series := range now {
		if strings.HasPrefix(series, "workqueue_adds_total") || strings.HasPrefix(series, "clerum_hcc_netpol_pass_duration_seconds_count") {
			deltas = append(deltas, fmt.Sprintf("%s +%g", series, now[series]-before[series]))
		}
	}
	slices.Sort(deltas)
	t.Logf("in %s after /ready: %s", time.Since(since).Round(time.Millisecond), strings.Join(deltas, ", "))

	e.waitConverged(time.Minute)
	writes := controllerWrites(t, offset)
	var what []string
	for _, w := range writes {
		what = append(what, describe(w))
	}
	t.Logf("writes after the restart and resyncs: %d", len(writes))
	assert.Empty(t, what, "a resync over a converged cluster writes nothing")
	assert.Equal(t, e.expectedSet(), actualSet(t))
	checkExamples(t, "Deployment mcp-server/lookup", "Service mcp-server/lookup", "NetworkPolicy mcp-server/ext-egress-lookup-api")
	// The hostname's allow is the DNS server's answer.
	api := getPolicy(t, "mcp-server", "ext-egress-lookup-api")
	if assert.Len(t, api.Spec.Egress, 1) {
		assert.Equal(t, []string{"cidr:93.184.216.34/32"}, peers(api.Spec.Egress[0].To))
		assert.Equal(t, []string{"TCP/443"}, rulePorts(api.Spec.Egress[0].Ports))
	}
}

// createFiles creates every object of the YAML files under dir.
func (e *env) createFiles(dir string) {
	e.t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(e.t, err)
	for _, entry := range entries {
		if strings.HasSuffix(entry.Name(), ".yaml") {
			e.createFile(filepath.Join(dir, entry.Name()))
		}
	}
}

// createFile creates every object of the YAML file at path.
func (e *env) createFile(path string) {
	e.t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(e.t, err)
	for doc := range strings.SplitSeq(string(raw), "\n---\n") {
		var m metav1.PartialObjectMetadata
		require.NoError(e.t, yaml.Unmarshal([]byte(doc), &m))
		// diff-rbac.yaml's RBAC is for the operator who runs diff, not an
		// object HCC reads.
		if m.Kind == "" || strings.HasPrefix(m.APIVersion, "rbac.authorization.k8s.io/") {
			continue
		}
		e.created[m.Kind+"/"+m.Namespace+"/"+m.Name] = []byte(doc)
		require.NoError(e.t, applyObject(context.Background(), []byte(doc)))
	}
}
