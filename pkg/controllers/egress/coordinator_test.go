package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/kit/kittest"
	netpolcontroller "github.com/clerum/hcc/pkg/controllers/netpol"
	"github.com/clerum/hcc/pkg/netpol"
	"github.com/clerum/hcc/pkg/reasons"
)

// fakeResolver answers from a table; a missing host is NXDOMAIN and a host
// mapped to errTimeout blocks until the lookup deadline.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	errs    map[string]error
	calls   int
	asked   []string
	// errFor, when set, makes every lookup fail with its error.
	errFor func(call int) error
}

var errTimeout = errors.New("timeout")

func (r *fakeResolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.errs, host)
	r.answers[host] = nil
	for _, a := range addrs {
		r.answers[host] = append(r.answers[host], netip.MustParseAddr(a))
	}
}

func (r *fakeResolver) fail(host string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs[host] = err
}

func (r *fakeResolver) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.calls++
	r.asked = append(r.asked, host)
	if r.errFor != nil {
		err := r.errFor(r.calls)
		r.mu.Unlock()
		return nil, err
	}
	host = strings.TrimSuffix(host, ".")
	err, failing := r.errs[host]
	addrs, ok := r.answers[host]
	r.mu.Unlock()
	if failing && errors.Is(err, errTimeout) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if failing {
		return nil, err
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

type fixture struct {
	*kittest.Fixture
	c        *Coordinator
	resolver *fakeResolver
	changes  int
	// server is s1 as the cache shows it.
	server *clerumv1alpha1.McpServer
}

const refresh = 5 * time.Minute

func newFixture(t *testing.T, bindings ...clerumv1alpha1.EgressBinding) *fixture {
	f := &fixture{
		Fixture: kittest.NewFixture(t, &clerumv1alpha1.McpServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: "s1", UID: "uid-1", Generation: 1},
			Spec: clerumv1alpha1.McpServerSpec{
				Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE},
				EgressBindings: bindings,
			},
		}),
		resolver: &fakeResolver{answers: map[string][]netip.Addr{}, errs: map[string]error{}},
	}
	f.c = New(f.Deps(), f.resolver, Options{Namespace: "mcp-server", DNSTimeout: 50 * time.Millisecond, Refresh: refresh,
		Rules: netpol.NewEgressRules(netpol.Options{ClusterDomain: "corp.example"})})
	f.syncCaches()
	f.c.OnChange(func() { f.changes++ })
	// As after the first NetworkPolicy pass; TestStatusWaitsForTheFirstPass
	// covers the time before it.
	f.c.settle()
	for f.c.queue.Len() > 0 { // settle queued every server; start empty
		k, _ := f.c.queue.Get()
		f.c.queue.Done(k)
	}
	return f
}

// syncCaches makes the cache, and f.server, show the fake API server;
// once s1 is gone, f.server stays as the cache last showed it.
func (f *fixture) syncCaches() {
	f.SyncCaches()
	if s, err := f.c.lister.McpServers("mcp-server").Get("s1"); err == nil {
		f.server = s
	}
}

// sync runs one sync of s1 and returns when it asked to be seen again.
func (f *fixture) sync(t *testing.T) time.Duration {
	t.Helper()
	after, err := f.c.syncServer(context.Background(), "s1")
	require.NoError(t, err)
	return after
}

// update writes s1 changed, at the next generation, and makes the cache
// show it.
func (f *fixture) update(t *testing.T, change func(*clerumv1alpha1.McpServer)) {
	t.Helper()
	// From the stored object, not the cache's: a status write since the
	// cache last synced makes the cached copy stale, and the fake API
	// server refuses stale updates as the real one does.
	stored, err := f.HCC.ClerumV1alpha1().McpServers("mcp-server").Get(context.Background(), "s1", metav1.GetOptions{})
	require.NoError(t, err)
	next := stored.DeepCopy()
	change(next)
	next.Generation++
	_, err = f.HCC.ClerumV1alpha1().McpServers("mcp-server").Update(context.Background(), next, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.syncCaches()
}

// create writes server, and makes the cache show it.
func (f *fixture) create(t *testing.T, server *clerumv1alpha1.McpServer) {
	t.Helper()
	_, err := f.HCC.ClerumV1alpha1().McpServers("mcp-server").Create(context.Background(), server, metav1.CreateOptions{})
	require.NoError(t, err)
	f.syncCaches()
}

// remove deletes s1, and makes the cache show it gone.
func (f *fixture) remove(t *testing.T) {
	t.Helper()
	require.NoError(t, f.HCC.ClerumV1alpha1().McpServers("mcp-server").Delete(context.Background(), "s1", metav1.DeleteOptions{}))
	f.syncCaches()
}

// applied returns s1's status applies, in order.
func (f *fixture) applied() []*clerumv1alpha1.McpServer {
	return kittest.Applied[*clerumv1alpha1.McpServer](f.Fixture, "mcp-server", "s1")
}

func hostBinding(name, host string) clerumv1alpha1.EgressBinding {
	return clerumv1alpha1.EgressBinding{Name: name, Host: host, Port: ptr.To[int32](443)}
}

// status returns the ExternalEgressReady condition and IPs of the last
// status apply, and makes the cache show them, as the informer would.
func (f *fixture) status(t *testing.T) (*metav1.Condition, []string) {
	applied := f.applied()
	require.NotEmpty(t, applied, "no status was applied")
	last := applied[len(applied)-1].Status
	f.syncCaches()
	return meta.FindStatusCondition(last.Conditions, clerumv1alpha1.ConditionExternalEgressReady), last.ResolvedEgressIPs
}

func (f *fixture) resolved() []netip.Addr {
	snap, _ := f.c.Snapshot()
	return snap["s1"]["api"].Addrs
}

func TestResolvedHostIsPublishedThenGatedUntilApplied(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"))
	f.resolver.set("api.example.com", "93.184.216.34", "2606:2800:220:1::1")

	f.sync(t)
	assert.Equal(t, []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800:220:1::1")}, f.resolved())
	assert.Equal(t, 1, f.changes, "a new answer asks for a pass")
	assert.False(t, f.c.Ready(f.server), "the runtime waits until the pass has programmed the allow")
	cond, ips := f.status(t)
	require.NotNil(t, cond)
	assert.Equal(t, reasons.Pending, cond.Reason)
	assert.Equal(t, []string{"2606:2800:220:1::1", "93.184.216.34"}, ips)

	_, version := f.c.Snapshot()
	f.c.Applied(version, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server))
	f.sync(t)
	cond, _ = f.status(t)
	assert.Equal(t, metav1.ConditionTrue, cond.Status)
	assert.Equal(t, reasons.Programmed, cond.Reason)
	assert.Equal(t, int64(1), cond.ObservedGeneration)

	calls, writes := f.resolver.calls, len(f.applied())
	f.sync(t)
	assert.Equal(t, calls, f.resolver.calls, "no lookup before the refresh period")
	assert.Equal(t, writes, len(f.applied()), "no status write when nothing changed")
	assert.Equal(t, 1, f.changes)
}

func TestLookupFailuresRevokeAndBlockOnlyThatServer(t *testing.T) {
	tests := []struct {
		name  string
		setup func(r *fakeResolver)
	}{
		{name: "NXDOMAIN", setup: func(*fakeResolver) {}},
		{name: "a timeout", setup: func(r *fakeResolver) { r.fail("api.example.com", errTimeout) }},
		{name: "a server failure", setup: func(r *fakeResolver) {
			r.fail("api.example.com", &net.DNSError{Err: "server misbehaving", IsTemporary: true})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, hostBinding("api", "api.example.com"))
			f.resolver.set("api.example.com", "93.184.216.34")
			f.sync(t)
			_, v := f.c.Snapshot()
			f.c.Applied(v, netpolcontroller.EgressReport{})
			require.True(t, f.c.Ready(f.server))

			// The refresh fails: the allow is withdrawn at once.
			f.resolver.mu.Lock()
			delete(f.resolver.answers, "api.example.com")
			f.resolver.mu.Unlock()
			tc.setup(f.resolver)
			f.Clock.Step(refresh)
			after := f.sync(t)
			assert.Equal(t, 2*time.Second, after, "a failing lookup is retried on the DNS backoff")
			assert.Empty(t, f.resolved())
			assert.False(t, f.c.Ready(f.server))
			cond, ips := f.status(t)
			assert.Equal(t, reasons.ResolutionFailed, cond.Reason)
			assert.Empty(t, ips)

			// DNS recovers: the allow comes back on the next attempt.
			f.resolver.set("api.example.com", "93.184.216.35")
			f.Clock.Step(after)
			f.sync(t)
			assert.Equal(t, []netip.Addr{netip.MustParseAddr("93.184.216.35")}, f.resolved())
		})
	}
}

func TestPrivateAnswerFailsTheBinding(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"))
	f.resolver.set("api.example.com", "93.184.216.34", "10.0.0.5")
	after := f.sync(t)
	assert.Empty(t, f.resolved(), "one private address in the answer withholds the whole name")
	assert.False(t, f.c.Ready(f.server))
	assert.Positive(t, after, "DNS may change: the lookup is retried on the backoff")
	cond, _ := f.status(t)
	assert.Equal(t, reasons.ResolutionFailed, cond.Reason)
	assert.Equal(t, "binding api: looking up api.example.com failed: private-answer", cond.Message)
	assert.NotContains(t, cond.Message, "10.0.0.5", "status holds the class, not the answer")
}

func TestRejectedHostnamesAndCIDRsNeedNoLookup(t *testing.T) {
	f := newFixture(t,
		hostBinding("local", "metadata.google.internal"),
		clerumv1alpha1.EgressBinding{Name: "lan", CIDR: "192.168.0.0/24", Port: ptr.To[int32](443)},
		clerumv1alpha1.EgressBinding{Name: "web", Mode: clerumv1alpha1.EgressModePublicWeb},
	)
	f.sync(t)
	assert.Zero(t, f.resolver.calls)
	cond, _ := f.status(t)
	assert.Equal(t, reasons.BindingRejected, cond.Reason)
	assert.Contains(t, cond.Message, "binding lan")
	assert.Contains(t, cond.Message, "binding local")
	assert.NotContains(t, cond.Message, "binding web")
}

func TestRoundRobinAnswersAreKeptForTwoRefreshPeriods(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"))
	step := func(addr string) []netip.Addr {
		f.resolver.set("api.example.com", addr)
		f.Clock.Step(refresh)
		f.sync(t)
		return f.resolved()
	}
	a, b, c := netip.MustParseAddr("93.184.216.1"), netip.MustParseAddr("93.184.216.2"), netip.MustParseAddr("93.184.216.3")
	assert.Equal(t, []netip.Addr{a}, step("93.184.216.1"))
	assert.Equal(t, []netip.Addr{a, b}, step("93.184.216.2"), "the previous answer is still live")
	assert.Equal(t, []netip.Addr{b, c}, step("93.184.216.3"), "an answer two periods old is dropped")
}

func TestDeletedServerIsForgotten(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"))
	f.resolver.set("api.example.com", "93.184.216.34")
	f.sync(t)
	f.remove(t)
	f.sync(t)
	snap, _ := f.c.Snapshot()
	assert.Empty(t, snap)
	assert.Equal(t, 2, f.changes)
}

// Before the first NetworkPolicy pass reports, every gate is closed for want
// of a pass: no status is published (a restart must not mark every server
// pending, then ready again). The first report settles the coordinator and
// queues every server; so does the deadline when no pass reports.
func TestStatusWaitsForTheFirstPass(t *testing.T) {
	t.Run("the first report settles", func(t *testing.T) {
		f := newFixture(t)
		f.c.settled, f.c.settleOnce = make(chan struct{}), sync.Once{}
		f.sync(t)
		assert.Empty(t, f.applied(), "nothing published before a pass")
		_, version := f.c.Snapshot()
		f.c.Applied(version, netpolcontroller.EgressReport{})
		select {
		case <-f.c.Settled():
		default:
			t.Fatal("the first report did not settle the coordinator")
		}
		assert.Equal(t, 1, f.c.queue.Len(), "every server is queued again")
		f.sync(t)
		cond, _ := f.status(t)
		assert.Equal(t, reasons.NoBindings, cond.Reason)
		assert.Len(t, f.applied(), 1, "one status write, not pending then ready")
	})
	t.Run("the deadline settles when no pass reports", func(t *testing.T) {
		f := newFixture(t)
		f.c.settled, f.c.settleOnce = make(chan struct{}), sync.Once{}
		var mu sync.Mutex
		var gated []string
		f.c.OnGate(func(s string) { mu.Lock(); defer mu.Unlock(); gated = append(gated, s) })
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { f.c.settleAfter(ctx, DefaultSettleDeadline); close(done) }()
		defer func() { cancel(); <-done }()
		require.Eventually(t, func() bool {
			f.Clock.Step(DefaultSettleDeadline)
			select {
			case <-f.c.Settled():
				return true
			default:
				return false
			}
		}, 10*time.Second, 10*time.Millisecond)
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(gated) > 0 }, 10*time.Second, time.Millisecond)
		assert.Equal(t, 1, f.c.queue.Len(), "every server is queued again")
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"s1"}, gated, "and in the McpServer operator, which syncs only open gates until now")
	})
}

// The first pass releasing servers as their policies land is making
// progress: each release starts the settle deadline again, so the
// servers it has not released yet are not published pending meanwhile (on
// a cold start, two status writes per server from the budget the pass's
// writes need).
func TestAReleaseOfTheFirstPassPostponesTheSettleDeadline(t *testing.T) {
	f := newFixture(t)
	f.c.settled, f.c.settleOnce = make(chan struct{}), sync.Once{}
	// A clock of its own: its only timer is the deadline's.
	clk := clocktesting.NewFakeClock(f.Clock.Now())
	f.c.clock = clk
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.c.settleAfter(ctx, DefaultSettleDeadline); close(done) }()
	defer func() { cancel(); <-done }()
	settled := func() bool {
		select {
		case <-f.c.Settled():
			return true
		default:
			return false
		}
	}

	require.Eventually(t, clk.HasWaiters, 10*time.Second, time.Millisecond)
	clk.Step(DefaultSettleDeadline - time.Second)
	f.c.Landed(0, nil, netpolcontroller.EgressReport{})
	clk.Step(time.Second) // the first deadline
	require.Eventually(t, func() bool { return clk.HasWaiters() || settled() }, 10*time.Second, time.Millisecond)
	require.False(t, settled(), "a second after a release")
	clk.Step(DefaultSettleDeadline - time.Second)
	require.Eventually(t, settled, 10*time.Second, time.Millisecond, "a deadline after the last release")
}

// A server that never declared a binding has no allows for a pass to add
// or revoke: seeing it, or an edit of its image, leaves its gate open, so
// the runtime is not blocked until the next pass (a flap of status and
// events on every new server and every rollout). Removing bindings, and
// re-creating a forgotten server before its revoking pass, still wait.
func TestServersWithoutBindingsAreNotGated(t *testing.T) {
	f := newFixture(t)
	f.c.Applied(0, netpolcontroller.EgressReport{}) // a first pass has landed
	assert.True(t, f.c.Ready(f.server), "unseen")
	f.sync(t)
	assert.True(t, f.c.Ready(f.server), "seen: nothing to program")
	f.update(t, func(s *clerumv1alpha1.McpServer) { s.Spec.Image = "i2" })
	f.sync(t)
	assert.True(t, f.c.Ready(f.server), "an image edit opens no new allow")

	f.update(t, func(s *clerumv1alpha1.McpServer) {
		s.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "net", CIDR: "93.184.216.0/24", Port: ptr.To[int32](443)}}
	})
	f.sync(t)
	assert.False(t, f.c.Ready(f.server), "a binding waits for its pass")
	_, version := f.c.Snapshot()
	f.c.Applied(version, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server))
	f.update(t, func(s *clerumv1alpha1.McpServer) { s.Spec.EgressBindings = nil })
	f.sync(t)
	assert.False(t, f.c.Ready(f.server), "removed bindings wait for the pass that revokes their allows")
	_, version = f.c.Snapshot()
	f.c.Applied(version, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server))

	// Deleted with an allow, then re-created under the name without one.
	f.update(t, func(s *clerumv1alpha1.McpServer) {
		s.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "net", CIDR: "93.184.216.0/24", Port: ptr.To[int32](443)}}
	})
	f.sync(t)
	_, version = f.c.Snapshot()
	f.c.Applied(version, netpolcontroller.EgressReport{})
	f.remove(t)
	f.sync(t)
	again := f.server.DeepCopy()
	again.UID, again.Generation, again.Spec.EgressBindings = "uid-2", 1, nil
	f.create(t, again)
	f.sync(t)
	assert.False(t, f.c.Ready(f.server), "the old incarnation's allow may still be in the cluster")
	_, version = f.c.Snapshot()
	f.c.Applied(version, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server), "its revoking pass has run")
}

// Until a pass has landed since the start, a server without bindings may
// still have the allows of bindings removed while no controller ran: it
// waits for that pass, and a pass that did not land keeps it waiting.
func TestServersWithoutBindingsWaitForTheFirstPass(t *testing.T) {
	f := newFixture(t)
	f.sync(t)
	assert.False(t, f.c.Ready(f.server), "no pass has revoked what an earlier run allowed")
	_, version := f.c.Snapshot()
	f.c.Applied(version, netpolcontroller.EgressReport{Blocked: true})
	assert.False(t, f.c.Ready(f.server), "a blocked pass revoked nothing")
	f.c.Applied(version, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server))
}

// The gate the McpServer controller reads may be asked before the
// coordinator has synced the server: without state, it opens only when no
// allow can be left under the name.
func TestStatelessGateWaitsLikeASyncedOne(t *testing.T) {
	f := newFixture(t)
	assert.False(t, f.c.Ready(f.server), "no pass has landed since the start")
	f.c.Applied(0, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server))

	// Deleted with an allow; re-created without bindings and asked about
	// before the coordinator syncs it.
	f.update(t, func(s *clerumv1alpha1.McpServer) {
		s.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "net", CIDR: "93.184.216.0/24", Port: ptr.To[int32](443)}}
	})
	f.sync(t)
	_, version := f.c.Snapshot()
	f.c.Applied(version, netpolcontroller.EgressReport{})
	f.remove(t)
	f.sync(t)
	again := f.server.DeepCopy()
	again.UID, again.Generation, again.Spec.EgressBindings = "uid-2", 1, nil
	assert.False(t, f.c.Ready(again), "the old incarnation's allow may still be in the cluster")
}

// A pass that failed to revoke the allows of a server the coordinator
// has no state for keeps it gated until a pass succeeds.
func TestFailedRevocationOfAStatelessServerKeepsItGated(t *testing.T) {
	f := newFixture(t)
	f.c.Applied(1, netpolcontroller.EgressReport{Failed: sets.New("s1")})
	assert.False(t, f.c.Ready(f.server))
	f.sync(t)
	assert.False(t, f.c.Ready(f.server), "synced, it still waits")
	_, version := f.c.Snapshot()
	f.c.Applied(version, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server))
}

// While a pass cannot write a namespace's default deny, no gate opens,
// a binding-less server's included.
func TestBlockedPassClosesEveryGate(t *testing.T) {
	f := newFixture(t)
	f.c.Applied(0, netpolcontroller.EgressReport{})
	f.sync(t)
	require.True(t, f.c.Ready(f.server))
	f.c.Applied(1, netpolcontroller.EgressReport{Blocked: true})
	assert.False(t, f.c.Ready(f.server))
	f.c.Applied(1, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server))
}

// A server the planner holds inactive (an image enforce mode refuses) is
// not resolved, like a disabled one: Options.Active is the planner's
// ServerActive.
func TestAnInactiveServerIsNotResolved(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"))
	f.resolver.set("api.example.com", "93.184.216.34")
	f.c.opts.Active = func(*clerumv1alpha1.McpServer) bool { return false }
	f.sync(t)
	assert.Empty(t, f.resolver.asked, "no lookup for a server that may hold no egress")
	assert.Empty(t, f.resolved())
}

// TestZeroRefreshTurnsTheDNSRefreshOff: HCC_EXTERNAL_EGRESS_RESYNC_SEC=0
// (Refresh 0) resolves a server when it changes and never again by time:
// no sync asks to be seen again, and a sync long after would-be periods
// (an event, or the settle round) looks nothing up. The same steps with a
// refresh period do.
func TestZeroRefreshTurnsTheDNSRefreshOff(t *testing.T) {
	for _, tc := range []struct {
		refresh time.Duration
		lookups int // after the first resolution, over four periods
	}{{0, 0}, {refresh, 4}} {
		t.Run(tc.refresh.String(), func(t *testing.T) {
			f := newFixture(t, hostBinding("api", "api.example.com"))
			f.c.opts.Refresh = tc.refresh
			f.resolver.set("api.example.com", "93.184.216.34")
			after := f.sync(t)
			require.Equal(t, 1, f.resolver.calls)
			if tc.refresh == 0 {
				assert.Zero(t, after, "no sync asks to be seen again by time")
			} else {
				assert.Equal(t, tc.refresh, after)
			}
			for range 4 {
				f.Clock.Step(refresh + time.Second)
				f.sync(t)
			}
			assert.Equal(t, 1+tc.lookups, f.resolver.calls)
			assert.Equal(t, []netip.Addr{netip.MustParseAddr("93.184.216.34")}, f.resolved(),
				"the proven answer stays; without a refresh it does not age out")
		})
	}
}

// A server without bindings whose spec changes elsewhere (an image, a
// field the coordinator does not read) keeps no allow to wait for, but
// until the coordinator has synced the new generation its gate reads
// closed: the McpServer controller, syncing first, blocks it on
// EgressPending. The coordinator's sync of that generation must tell the
// gate's listener, or nothing wakes the server again (its status write
// is status-only to the McpServer controller).
func TestANewGenerationWithoutBindingsTellsTheGate(t *testing.T) {
	f := newFixture(t)
	f.c.Applied(0, netpolcontroller.EgressReport{}) // a first pass has landed
	f.sync(t)
	f.changes = 0
	var told []string
	f.c.OnGate(func(server string) { told = append(told, server) })

	f.update(t, func(s *clerumv1alpha1.McpServer) { s.Spec.Image = "i2" })
	assert.False(t, f.c.Ready(f.server), "before the coordinator syncs it, the new generation's gate reads closed")
	f.sync(t)
	assert.True(t, f.c.Ready(f.server), "an image edit opens no new allow")
	assert.Equal(t, []string{"s1"}, told, "the gate's listener hears the new generation's gate open")
	assert.Zero(t, f.changes, "no pass is needed")
}

// A pass tells the coordinator as each server's policies land (Landed),
// before the pass ends: that server's gate opens then, with the planner's
// rejections of its bindings, and its status is published. A server whose
// state is newer than the pass's snapshot waits for a pass that planned
// it. Landed does not settle the coordinator: only the pass's report at its
// end has judged every server.
func TestLandedOpensAGateBeforeThePassEnds(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"))
	f.c.settled, f.c.settleOnce = make(chan struct{}), sync.Once{}
	f.resolver.set("api.example.com", "93.184.216.34")
	f.sync(t)
	require.False(t, f.c.Ready(f.server))
	_, version := f.c.Snapshot()

	gated := 0
	f.c.OnGate(func(string) { gated++ })
	f.c.Landed(version-1, []string{"s1"}, netpolcontroller.EgressReport{})
	assert.False(t, f.c.Ready(f.server), "a pass planned from an older snapshot did not program this answer")
	f.c.Landed(version, []string{"s1"}, netpolcontroller.EgressReport{Rejected: map[string]map[string]string{
		"s1": {"api": "NetworkPolicy mcp-server/ext-egress-s1-api is already planned for server s0"}}})
	assert.False(t, f.c.Ready(f.server), "the planner rejected its binding")
	f.c.Landed(version, []string{"s1", "not-known"}, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server), "its policies landed")
	assert.Equal(t, 3, gated, "the McpServer operator hears each change of the gate, and each server named")
	select {
	case <-f.c.Settled():
		t.Fatal("Landed settled the coordinator before the pass judged every server")
	default:
	}
	f.sync(t)
	cond, _ := f.status(t)
	assert.Equal(t, reasons.Programmed, cond.Reason, "an open gate is published before the coordinator settles")

	// The pass's own report at its end changes nothing more.
	f.c.Applied(version, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server))
	f.sync(t)
	assert.Len(t, f.applied(), 1, "one status write")
}

// The revocation rule holds for an early release: a server forgotten after
// the pass took its snapshot, and re-created under its name, waits for the
// pass that revokes its old allows, even when a pass names it.
func TestLandedKeepsAServerWhoseOldAllowsMayExistGated(t *testing.T) {
	f := newFixture(t, clerumv1alpha1.EgressBinding{Name: "net", CIDR: "93.184.216.0/24", Port: ptr.To[int32](443)})
	f.c.settled, f.c.settleOnce = make(chan struct{}), sync.Once{}
	f.sync(t)
	_, version := f.c.Snapshot()
	f.c.Landed(version, []string{"s1"}, netpolcontroller.EgressReport{})
	require.True(t, f.c.Ready(f.server))

	f.remove(t)
	f.sync(t) // forgotten: a newer pass revokes its allow
	again := f.server.DeepCopy()
	again.UID, again.Generation, again.Spec.EgressBindings = "uid-2", 1, nil
	f.create(t, again)
	f.c.Landed(version, []string{"s1"}, netpolcontroller.EgressReport{})
	assert.False(t, f.c.Ready(f.server), "the pass planned from before the deletion: the allow may still be there")
	_, revoking := f.c.Snapshot()
	f.c.Landed(revoking, []string{"s1"}, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server), "the revoking pass released it")
}

// At a new leader the first pass releases servers as their policies land
// (Landed) while every server still shows what the old leader wrote. A
// server the pass released is published; the others are not until the
// pass has judged them all (Applied), so none is reported pending and then
// ready again — a second status write per server, which the end-to-end
// TestFailover forbids. Every kind of server a pass names opens: one the
// startup round synced before the pass's snapshot, one the workers first
// saw after it (the pass's inventory held it without bindings), and one
// not seen yet.
func TestANewLeadersFirstPassReportsNoServerPending(t *testing.T) {
	f := newFixture(t, clerumv1alpha1.EgressBinding{Name: "net", CIDR: "93.184.216.0/24", Port: ptr.To[int32](443)})
	f.c.settled, f.c.settleOnce = make(chan struct{}), sync.Once{}
	var gated []string
	f.c.OnGate(func(s string) { gated = append(gated, s) })
	servers := map[string]*clerumv1alpha1.McpServer{"s1": f.server}
	planned := map[string]netpolcontroller.PlannedServer{}
	for _, name := range []string{"s2", "s3"} {
		s := &clerumv1alpha1.McpServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name, UID: types.UID("uid-" + name), Generation: 1},
			Spec:       clerumv1alpha1.McpServerSpec{Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
		}
		f.create(t, s)
		servers[name] = s
		planned[name] = netpolcontroller.PlannedServer{UID: s.UID, Generation: 1}
	}
	report := netpolcontroller.EgressReport{Bindingless: func(n string) (netpolcontroller.PlannedServer, bool) {
		p, ok := planned[n]
		return p, ok
	}}
	syncAll := func() {
		for name := range servers {
			_, err := f.c.syncServer(t.Context(), name)
			require.NoError(t, err)
		}
		f.syncCaches()
	}

	f.sync(t) // the startup round
	_, version := f.c.Snapshot()
	_, err := f.c.syncServer(t.Context(), "s2") // a worker, after the pass's snapshot
	require.NoError(t, err)

	f.c.Landed(version, []string{"s2", "s3"}, report) // nothing to create for them
	assert.True(t, f.c.Ready(servers["s2"]), "first seen after the snapshot, planned without bindings")
	assert.True(t, f.c.Ready(servers["s3"]), "not seen yet: the pass revoked every allow under its name")
	assert.False(t, f.c.Ready(servers["s1"]), "its policies are still being written")
	select {
	case <-f.c.Settled():
		t.Fatal("Landed settled the coordinator before the pass judged every server")
	default:
	}
	syncAll()
	assert.Empty(t, kittest.Applied[*clerumv1alpha1.McpServer](f.Fixture, "mcp-server", "s1"),
		"a server the pass has not judged is not reported pending")

	f.c.Landed(version, []string{"s1"}, report)
	syncAll()
	f.c.Applied(version, report)
	select {
	case <-f.c.Settled():
	default:
		t.Fatal("the pass's report did not settle the coordinator")
	}
	syncAll()
	for name := range servers {
		applied := kittest.Applied[*clerumv1alpha1.McpServer](f.Fixture, "mcp-server", name)
		require.Len(t, applied, 1, "%s: one status write", name)
		cond := meta.FindStatusCondition(applied[0].Status.Conditions, clerumv1alpha1.ConditionExternalEgressReady)
		assert.Equal(t, metav1.ConditionTrue, cond.Status, "%s is never reported pending", name)
		assert.Contains(t, gated, name, "settling queues %s in the McpServer operator too", name)
	}
}
