//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
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

	e.waitConverged(3 * time.Minute)
	assert.Equal(t, e.expectedSet(), actualSet(t), "exactly the planned objects")
	writes := controllerWrites(t, offset)
	t.Logf("%d writes by the two replicas", len(writes))
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
	hosts, err := hcc.ClerumV1alpha1().Hosts("mcp-host").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, len(hosts.Items), e.controlAPI.Issued(), "the Control API issued one credential per Host")
}

// kube-apiserver is stopped and started again in the middle of
// convergence. Both binaries recover: the controller converges to exactly
// the planned objects, and hcc-api serves the inventory again. (The
// controller runs without leader election here: a leader that cannot
// renew for HCC_LEADER_RENEW_SEC exits by design, and its restart is the
// kubelet's job, not the binary's.)
func TestAPIServerRestart(t *testing.T) {
	e := newEnv(t)
	e.startController("solo", "HCC_LEADER_ELECT=false")
	api := e.startAPI()
	defer e.cleanUp()

	e.fleet(24, 2)
	e.waitMidConvergence()
	require.NoError(t, cluster.StopAPIServer())
	time.Sleep(3 * time.Second)
	require.NoError(t, cluster.StartAPIServer())

	e.waitConverged(3 * time.Minute)
	assert.Equal(t, e.expectedSet(), actualSet(t), "exactly the planned objects: nothing missing, nothing extra")
	token := e.accessToken("fleet-0")
	e.eventually("hcc-api lists the fleet again", time.Minute, func() bool {
		return len(inventory(t, api, token)) == 24
	})
}

// After convergence on the shipped examples (every kind, every transport),
// a forced full resync — a controller restart, which syncs every object
// from a cold cache, and every periodic resync firing twice — writes
// nothing.
func TestResyncWritesNothing(t *testing.T) {
	e := newEnv(t)
	resync := []string{"HCC_LEADER_ELECT=false", "CONTEXT_MAPPER_HOST_RESYNC_SEC=2", "CONTEXT_MAPPER_SFS_RESYNC_SEC=2",
		"CONTEXT_MAPPER_GFS_RESYNC_SEC=2", "CONTEXT_MAPPER_NETPOL_RESYNC_SEC=2", "CONTEXT_MAPPER_NETPOL_DEFAULTS_RESYNC_SEC=2",
		"HCC_EXTERNAL_EGRESS_RESYNC_SEC=2"}
	first := e.startController("first", resync...)
	e.createFiles(filepath.Join(repoRoot, "deploy", "examples"))
	e.waitConverged(3 * time.Minute)
	require.NoError(t, first.Stop())

	offset := auditOffset(t)
	second := e.startController("second", resync...)
	defer e.cleanUp()
	e.eventually("the restarted controller is ready", time.Minute, func() bool { return ready(second) })
	time.Sleep(5 * time.Second) // two rounds of every 2 s resync
	e.waitConverged(time.Minute)
	writes := controllerWrites(t, offset)
	var what []string
	for _, w := range writes {
		what = append(what, describe(w))
	}
	t.Logf("writes after the restart and resyncs: %d", len(writes))
	assert.Empty(t, what, "a resync over a converged cluster writes nothing")
	assert.Equal(t, e.expectedSet(), actualSet(t))
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
