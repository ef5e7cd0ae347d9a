//go:build integration

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/pkg/mark"
)

// Two leader-elected controllers; the leader is paused (SIGSTOP) in the
// middle of convergence, with work in hand, until the standby has taken
// over and written, then continued (SIGCONT). Client-go's election has no
// fencing, so what keeps the resumed leader from writing what it had in
// hand is the controller's own fence (pkg/leaderfence): no write of the old
// leader reaches the API server after its lease ran out (its last renewal
// plus the lease duration), it exits with "lost the leader lease", it
// leaves the new leader's Lease alone, and the fleet converges to exactly
// the planned objects.
//
// Writes are told apart by the user agent, which names the replica; every
// mutating request counts, whatever its answer. The reconcilers' client
// budget is lowered so that, at the pause, the leader has writes queued
// behind its rate limiter: the in-flight work a resumed leader would send.
func TestPausedLeader(t *testing.T) {
	e := newEnv(t)
	slow := []string{"HCC_KUBE_API_QPS=10", "HCC_KUBE_API_BURST=10"}
	a := e.startController("replica-a", slow...)
	e.eventually("replica-a leads", 30*time.Second, func() bool { return holder(lease(t)) == "replica-a" })
	e.startController("replica-b", slow...)
	defer e.cleanUp()
	offset := auditOffset(t)

	e.fleet(16, 2)
	e.waitMidConvergence()
	require.NoError(t, a.Pause())
	paused := time.Now()
	defer func() { _ = a.Resume() }() // a failed test must not leave it stopped

	// The last renewal replica-a made is the last record naming it before
	// replica-b's: a renewal in flight at the pause still lands.
	var last, taken *coordinationv1.Lease
	e.eventually("replica-b takes over", 30*time.Second, func() bool {
		l := lease(t)
		switch holder(l) {
		case "replica-a":
			last = l
		case "replica-b":
			taken = l
		}
		return taken != nil
	})
	require.NotNil(t, last, "the Lease was read while replica-a held it")
	expiry := last.Spec.RenewTime.Add(time.Duration(*last.Spec.LeaseDurationSeconds) * time.Second)
	t.Logf("replica-a paused; its lease ran out %s after the pause; replica-b acquired %s after the pause",
		expiry.Sub(paused).Round(time.Millisecond), taken.Spec.AcquireTime.Sub(paused).Round(time.Millisecond))
	e.eventually("replica-b writes", 30*time.Second, func() bool { return len(writesBy(t, offset, "replica-b")) > 0 })

	// The one exit of this scenario that is expected (below); a race
	// reported by the race detector still fails the test.
	a.ExpectExit()
	require.NoError(t, a.Resume())
	resumed := time.Now()
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("replica-a still runs 30 s after it was continued")
	}
	t.Logf("replica-a exited %s after SIGCONT: %v", time.Since(resumed).Round(time.Millisecond), a.Err())
	// The one exit of this scenario that is expected: a leader that finds
	// it lost its lease stops, and its kubelet would restart it.
	require.Error(t, a.Err(), "a leader that lost its lease exits non-zero")
	logText, err := os.ReadFile(a.log)
	require.NoError(t, err)
	assert.Contains(t, string(logText), "lost the leader lease")
	for line := range strings.SplitSeq(string(logText), "\n") {
		if strings.Contains(line, "refusing a write") || strings.Contains(line, "lost the leader lease") {
			t.Logf("replica-a: %s", line)
		}
	}

	e.waitConverged(3 * time.Minute)
	e.waitPlanned(time.Minute, "exactly the planned objects")
	assert.Equal(t, "replica-b", holder(lease(t)), "the old leader did not release the new leader's Lease")

	var late []string
	writesA := writesBy(t, offset, "replica-a")
	for _, w := range writesA {
		if !w.Received.Before(expiry) {
			late = append(late, w.Received.Format(time.RFC3339Nano)+" "+describe(w))
		}
	}
	t.Logf("replica-a: %d writes, its lease ran out at %s; replica-b: %d writes", len(writesA), expiry.Format(time.RFC3339Nano), len(writesBy(t, offset, "replica-b")))
	assert.Empty(t, late, "replica-a writes nothing after its lease ran out")
}

// handoverWriteDelay is how long the fault proxy holds the old leader's
// writes around its SIGTERM: longer than the standby's longest wait
// between two polls of the Lease (2.2 retry periods), so a release sent
// before those writes are answered lets the standby take over while they
// are still to land.
const handoverWriteDelay = 2 * time.Second

// handoverTimings are the scenario's leader-election timings: a renew
// deadline, which bounds how long a release waits for the writes in
// flight, long enough for a create and its mark both held back.
var handoverTimings = []string{"HCC_LEADER_LEASE_SEC=10", "HCC_LEADER_RENEW_SEC=8", "HCC_LEADER_RETRY_SEC=1"}

// A graceful handover (a rollout, a drain): the leader is sent SIGTERM in
// the middle of convergence while its writes are held in flight (a fault
// proxy delays them 2 s, and forwards them even when the client gives
// up, as a slow API server still applies a write whose client went away).
// The API server has answered every write of the old leader before the
// standby acquires the Lease: the fence closes, waits for the writes in
// flight, and only then lets the release go out (docs/deploy.md,
// "Failover"). The old leader exits 0 within its grace period, the test
// requires that writes were indeed answered after the SIGTERM (the drain
// was exercised), and the standby converges to exactly the planned
// objects.
func TestGracefulHandover(t *testing.T) {
	e := newEnv(t)
	proxy, kubeconfig := startProxy(t)
	a := e.startControllerVia(kubeconfig, "replica-a", handoverTimings...)
	e.eventually("replica-a leads", 30*time.Second, func() bool { return holder(lease(t)) == "replica-a" })
	e.startController("replica-b", handoverTimings...)
	defer e.cleanUp()
	offset := auditOffset(t)

	e.fleet(16, 2)
	e.waitMidConvergence()
	proxy.SetWriteDelay(handoverWriteDelay)
	time.Sleep(time.Second) // writes pile up in flight
	stopped := time.Now()
	require.NoError(t, a.Stop())
	exited := time.Since(stopped)
	assert.NoError(t, a.Err(), "a leader shutting down exits 0 within the grace period")
	proxy.SetWriteDelay(0)

	var taken *coordinationv1.Lease
	e.eventually("replica-b takes over", 30*time.Second, func() bool {
		l := lease(t)
		if holder(l) == "replica-b" {
			taken = l
		}
		return taken != nil
	})
	acquired := taken.Spec.AcquireTime.Time
	t.Logf("replica-a exited %s after the SIGTERM; replica-b acquired %s after it", exited.Round(time.Millisecond),
		acquired.Sub(stopped).Round(time.Millisecond))

	e.waitConverged(3 * time.Minute)
	e.waitPlanned(time.Minute, "exactly the planned objects")
	var late []string
	answered := 0
	writesA := writesBy(t, offset, "replica-a")
	for _, w := range writesA {
		if !w.Stage.Before(stopped) {
			answered++
		}
		if !w.Stage.Before(acquired) {
			late = append(late, w.Stage.Format(time.RFC3339Nano)+" "+describe(w))
		}
	}
	t.Logf("replica-a: %d writes, %d answered after its SIGTERM; replica-b acquired at %s", len(writesA), answered, acquired.Format(time.RFC3339Nano))
	assert.Positive(t, answered, "writes were in flight at the SIGTERM: the drain was exercised")
	assert.Empty(t, late, "every write of the old leader was answered before the standby took over")
}

// A leader stopped between creating a Host's workspace claim and writing
// the mark on it: the fault proxy applies the claim's create at once and
// holds its answer 2 s, and the SIGTERM comes as soon as the claim exists.
// The create and its mark are one hold for the fence (kit.Children's
// WithHold, wired to leaderfence.Fence.Hold), so the mark is written
// before the lease is released; the standby, which never saw the create,
// finds the claim marked, though the volume binder bound it to a static
// volume meanwhile, and the Host converges. Without the hold the mark is
// refused once the release has closed the fence, and the standby refuses
// the claim for good (docs/ownership.md, "Claims").
func TestGracefulHandoverMarksWhatItCreated(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	proxy, kubeconfig := startProxy(t)
	a := e.startControllerVia(kubeconfig, "replica-a", handoverTimings...)
	e.eventually("replica-a leads", 30*time.Second, func() bool { return holder(lease(t)) == "replica-a" })
	e.startController("replica-b", handoverTimings...)
	defer e.cleanUp()
	e.fleet(2, 0)
	e.waitConverged(3 * time.Minute)

	proxy.SetAnswerDelay(handoverWriteDelay)
	e.create(hostOf("late", "fleet"))
	const claim = "late-workspace"
	e.eventually("replica-a created the workspace claim", time.Minute, func() bool {
		_, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, claim, metav1.GetOptions{})
		return err == nil
	})
	stopped := time.Now()
	require.NoError(t, a.Stop())
	t.Logf("replica-a exited %s after the SIGTERM", time.Since(stopped).Round(time.Millisecond))
	assert.NoError(t, a.Err(), "a leader shutting down exits 0 within the grace period")
	proxy.SetAnswerDelay(0)

	e.eventually("replica-b takes over", 30*time.Second, func() bool { return holder(lease(t)) == "replica-b" })
	e.waitConverged(3 * time.Minute)
	pvc, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, claim, metav1.GetOptions{})
	require.NoError(t, err)
	t.Logf("claim %s bound to %q", claim, pvc.Spec.VolumeName)
	assert.NotEmpty(t, pvc.Annotations[mark.Annotation], "the claim carries HCC's mark")
	e.waitPlanned(time.Minute, "exactly the planned objects")
}

// writesBy returns every mutating request (any verb, any answer) the
// reconcilers of replica identity made after offset in the audit log
// (controllerWrites, told apart by the user agent, which names the
// replica).
func writesBy(t *testing.T, offset int64, identity string) []controlplane.AuditEvent {
	t.Helper()
	var out []controlplane.AuditEvent
	for _, ev := range controllerWrites(t, offset) {
		if strings.HasSuffix(ev.UserAgent, "/"+identity) {
			out = append(out, ev)
		}
	}
	return out
}

// The failover of TestFailover with the shipped leader-election timings
// (deploy/base: lease 15 s, renew 10 s, retry 2 s) and a small fleet: the
// leader is killed, and the standby must take over within the bound
// client-go gives — the lease duration plus two jittered retry periods of
// at most 2.2 × 2 s each, 23.8 s (see TestFailover for why two).
func TestFailoverShippedTimings(t *testing.T) {
	e := newEnv(t)
	var shipped []string
	for _, kv := range shippedEnv(t, filepath.Join(repoRoot, "deploy", "base", "controller", "deployment.yaml")) {
		if strings.HasPrefix(kv, "HCC_LEADER_") {
			shipped = append(shipped, kv)
		}
	}
	require.ElementsMatch(t, []string{"HCC_LEADER_LEASE_SEC=15", "HCC_LEADER_RENEW_SEC=10", "HCC_LEADER_RETRY_SEC=2"}, shipped,
		"the shipped timings this bound is for")
	const shippedLease, shippedRetry = 15 * time.Second, 2 * time.Second

	a := e.startController("replica-a", shipped...)
	e.eventually("replica-a leads", 30*time.Second, func() bool { return holder(lease(t)) == "replica-a" })
	e.startController("replica-b", shipped...)
	defer e.cleanUp()
	e.fleet(4, 1)
	e.waitConverged(3 * time.Minute)

	killed := time.Now()
	a.Kill()
	var l *coordinationv1.Lease
	e.eventually("replica-b takes over", time.Minute, func() bool {
		l = lease(t)
		return holder(l) == "replica-b"
	})
	require.NotNil(t, l.Spec.AcquireTime)
	takeover := l.Spec.AcquireTime.Sub(killed)
	bound := shippedLease + 2*time.Duration(2.2*float64(shippedRetry))
	t.Logf("takeover %s after the SIGKILL (shipped timings: lease %s, retry %s; bound %s)", takeover.Round(time.Millisecond), shippedLease, shippedRetry, bound)
	assert.LessOrEqual(t, takeover, bound)

	e.waitConverged(time.Minute)
	e.waitPlanned(time.Minute)
}
