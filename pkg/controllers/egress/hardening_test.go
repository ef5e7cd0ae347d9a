package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	netpolcontroller "github.com/clerum/hcc/pkg/controllers/netpol"
	"github.com/clerum/hcc/pkg/reasons"
)

// apply reports a pass of the current version that wrote everything.
func (f *fixture) apply() {
	_, v := f.c.Snapshot()
	f.c.Applied(v, netpolcontroller.EgressReport{})
}

func cidr(name, prefix string, port int32) clerumv1alpha1.EgressBinding {
	return clerumv1alpha1.EgressBinding{Name: name, CIDR: prefix, Port: ptr.To(port)}
}

func TestTheGateWaitsForAPassOfTheCurrentGeneration(t *testing.T) {
	edits := []struct {
		name   string
		change func(*clerumv1alpha1.McpServer)
	}{
		{name: "a CIDR edit", change: func(s *clerumv1alpha1.McpServer) { s.Spec.EgressBindings[0].CIDR = "8.8.4.0/24" }},
		{name: "a port edit", change: func(s *clerumv1alpha1.McpServer) { s.Spec.EgressBindings[0].Port = ptr.To[int32](8443) }},
		{name: "a mode edit", change: func(s *clerumv1alpha1.McpServer) {
			s.Spec.EgressBindings[0].Mode = clerumv1alpha1.EgressModePublicWeb
		}},
		{name: "a new public-web binding", change: func(s *clerumv1alpha1.McpServer) {
			s.Spec.EgressBindings = append(s.Spec.EgressBindings, clerumv1alpha1.EgressBinding{Name: "web", Mode: clerumv1alpha1.EgressModePublicWeb})
		}},
	}
	for _, tc := range edits {
		t.Run(tc.name+" closes the gate until a pass applies it", func(t *testing.T) {
			f := newFixture(t, cidr("dns", "8.8.8.0/24", 443))
			f.sync(t)
			f.apply()
			require.True(t, f.c.Ready(f.server))
			f.sync(t)
			cond, _ := f.status(t)
			require.Equal(t, reasons.Programmed, cond.Reason)

			f.update(t, tc.change)
			changes := f.changes
			f.sync(t)
			assert.Equal(t, changes+1, f.changes, "the edit asks for a pass")
			assert.False(t, f.c.Ready(f.server), "the policies of the new generation are not in the cluster yet")
			cond, _ = f.status(t)
			assert.Equal(t, reasons.Pending, cond.Reason)
			assert.Equal(t, f.server.Generation, cond.ObservedGeneration)

			f.apply()
			assert.True(t, f.c.Ready(f.server))
		})
	}
}

func TestAFailedPassKeepsOnlyItsServersGateClosed(t *testing.T) {
	f := newFixture(t, cidr("dns", "8.8.8.0/24", 443))
	f.sync(t)
	_, v := f.c.Snapshot()
	f.c.Applied(v, netpolcontroller.EgressReport{Failed: sets.New("s1")})
	assert.False(t, f.c.Ready(f.server))
	f.c.Applied(v, netpolcontroller.EgressReport{Failed: sets.New("other")})
	assert.True(t, f.c.Ready(f.server))
}

func TestAPlannerRejectionReachesTheLoser(t *testing.T) {
	f := newFixture(t, cidr("dns", "8.8.8.0/24", 443))
	f.sync(t)
	_, v := f.c.Snapshot()
	reason := "NetworkPolicy mcp-server/ext-egress-s1-dns is already planned for server s1-dns, x"
	f.c.Applied(v, netpolcontroller.EgressReport{Rejected: map[string]map[string]string{"s1": {"dns": reason}}})
	assert.False(t, f.c.Ready(f.server), "the loser's gate stays closed")
	f.sync(t)
	cond, _ := f.status(t)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, reasons.BindingRejected, cond.Reason)
	assert.Equal(t, "binding dns: "+reason, cond.Message)
	events := f.Events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Warning EgressBindingRejected binding dns: "+reason)

	// The collision goes away with the next pass.
	f.c.Applied(v, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server))
}

func TestTheUnionSpansOneServerAndOneDestination(t *testing.T) {
	a, b := netip.MustParseAddr("93.184.216.1"), netip.MustParseAddr("93.184.216.2")
	t.Run("a changed host starts from the new answer alone", func(t *testing.T) {
		f := newFixture(t, hostBinding("api", "api.example.com"))
		f.resolver.set("api.example.com", a.String())
		f.resolver.set("other.example.com", b.String())
		f.sync(t)
		f.update(t, func(s *clerumv1alpha1.McpServer) { s.Spec.EgressBindings[0].Host = "other.example.com" })
		f.sync(t)
		assert.Equal(t, []netip.Addr{b}, f.resolved())
	})
	t.Run("a changed port starts from the new answer alone", func(t *testing.T) {
		f := newFixture(t, hostBinding("api", "api.example.com"))
		f.resolver.set("api.example.com", a.String())
		f.sync(t)
		f.resolver.set("api.example.com", b.String())
		f.update(t, func(s *clerumv1alpha1.McpServer) { s.Spec.EgressBindings[0].Port = ptr.To[int32](8443) })
		f.sync(t)
		assert.Equal(t, []netip.Addr{b}, f.resolved())
	})
	t.Run("a re-created server starts from the new answer alone", func(t *testing.T) {
		f := newFixture(t, hostBinding("api", "api.example.com"))
		f.resolver.set("api.example.com", a.String())
		f.sync(t)
		f.resolver.set("api.example.com", b.String())
		recreated := f.server.DeepCopy()
		recreated.UID, recreated.Generation = types.UID("uid-2"), 1
		f.remove(t)
		f.create(t, recreated)
		f.sync(t)
		assert.Equal(t, []netip.Addr{b}, f.resolved())
	})
	t.Run("an unchanged destination keeps the earlier answer", func(t *testing.T) {
		f := newFixture(t, hostBinding("api", "api.example.com"))
		f.resolver.set("api.example.com", a.String())
		f.sync(t)
		f.resolver.set("api.example.com", b.String())
		f.update(t, func(s *clerumv1alpha1.McpServer) { s.Spec.Description = "edited" })
		f.sync(t)
		assert.Equal(t, []netip.Addr{a, b}, f.resolved())
	})
}

func TestLookupsAreRootedAndClusterNamesRefused(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"), hostBinding("svc", "db.team.svc.corp.example"),
		hostBinding("cluster", "corp.example"))
	f.resolver.set("api.example.com", "93.184.216.34")
	f.sync(t)
	assert.Equal(t, []string{"api.example.com."}, f.resolver.asked, "the name is absolute; cluster names are never looked up")
	cond, _ := f.status(t)
	assert.Equal(t, reasons.BindingRejected, cond.Reason)
	assert.Contains(t, cond.Message, `binding cluster: host "corp.example" is a local or cluster-internal name (corp.example)`)
	assert.Contains(t, cond.Message, `binding svc: host "db.team.svc.corp.example" is a local or cluster-internal name (corp.example)`)
}

// TestNoRetryStorm: a resolver failing with a new text on every call (an
// ephemeral port in each) and an event every 100 ms for 5 s — status writes
// of other managers, spec-less updates — give at most 3 lookups and 1
// status write.
func TestNoRetryStorm(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"))
	f.resolver.errFor = func(call int) error {
		return &net.DNSError{Err: fmt.Sprintf("read udp 10.0.0.3:%d->10.96.0.10:53: i/o timeout", 40000+call), IsTimeout: true}
	}
	handlers := f.c.handlers
	for step := 0; step <= 50; step++ {
		// Another manager's status write arrives as an update; the worker
		// syncs whatever is queued.
		next := f.server.DeepCopy()
		next.ResourceVersion = fmt.Sprint(step + 2)
		next.Status.Ready = step%2 == 0
		handlers.OnUpdate(f.server, next)
		f.sync(t) // the worker also runs when the backoff delay fires
		if len(f.applied()) > 0 {
			f.status(t)
		}
		f.Clock.Step(100 * time.Millisecond)
	}
	assert.LessOrEqual(t, f.resolver.calls, 3, "lookups follow the backoff, not the events")
	assert.GreaterOrEqual(t, f.resolver.calls, 2, "the backoff does retry")
	assert.Len(t, f.applied(), 1, "a steady failure writes status once")
	assert.Zero(t, f.c.queue.Len(), "status-only updates queue nothing")
	cond, _ := f.status(t)
	assert.Equal(t, "binding api: looking up api.example.com failed: timeout", cond.Message)
}

func TestPrimeIsBoundedInTimeAndConcurrency(t *testing.T) {
	f := newFixture(t)
	var inFlight, peak atomic.Int32
	blocking := resolverFunc(func(ctx context.Context, _, _ string) ([]netip.Addr, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	for i := range 100 {
		s := f.server.DeepCopy()
		s.Name, s.UID = fmt.Sprintf("s%03d", i), types.UID(fmt.Sprintf("uid-%03d", i))
		s.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{hostBinding("api", fmt.Sprintf("h%03d.example.com", i))}
		_, err := f.HCC.ClerumV1alpha1().McpServers("mcp-server").Create(context.Background(), s, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	f.SyncCaches()
	f.c.resolver = blocking
	f.c.synced = func() bool { return true } // the fixture seeds the caches without running the informers
	f.c.OnChange(func() {})                  // refreshes run in parallel here
	f.c.opts.DNSTimeout = time.Minute
	f.c.opts.PrimeDeadline = 200 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- f.c.Prime(context.Background()) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Prime outlived its deadline by far")
	}
	assert.LessOrEqual(t, peak.Load(), int32(primeConcurrency))
	snap, _ := f.c.Snapshot()
	assert.Empty(t, snap, "nothing unproven is published")
}

type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (r resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return r(ctx, network, host)
}

func TestDNSFailureSeriesGoWithTheirServer(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"))
	f.sync(t) // NXDOMAIN
	assert.Equal(t, 1, f.series(t, "clerum_hcc_netpol_dns_failures_total"))
	f.remove(t)
	f.sync(t)
	assert.Zero(t, f.series(t, "clerum_hcc_netpol_dns_failures_total"))
}

// series counts the series of metric name in the fixture's registry.
func (f *fixture) series(t *testing.T, name string) int {
	families, err := f.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

func TestRemovingEveryBindingWaitsForTheRevocation(t *testing.T) {
	f := newFixture(t, cidr("dns", "8.8.8.0/24", 443))
	f.sync(t)
	f.apply()
	f.update(t, func(s *clerumv1alpha1.McpServer) { s.Spec.EgressBindings, s.Spec.Image = nil, "new" })
	f.sync(t)
	assert.False(t, f.c.Ready(f.server), "ext-egress-s1-dns is still in the cluster")
	cond, _ := f.status(t)
	assert.Equal(t, reasons.Pending, cond.Reason)

	_, v := f.c.Snapshot()
	f.c.Applied(v, netpolcontroller.EgressReport{Failed: sets.New("s1")}) // its delete failed
	assert.False(t, f.c.Ready(f.server))
	f.c.Applied(v, netpolcontroller.EgressReport{})
	assert.True(t, f.c.Ready(f.server))
	f.sync(t)
	cond, _ = f.status(t)
	assert.Equal(t, reasons.NoBindings, cond.Reason)
}

func TestTheSnapshotNamesWhatEachAnswerIsFor(t *testing.T) {
	f := newFixture(t, hostBinding("api", "old.example.com"))
	f.resolver.set("old.example.com", "93.184.216.34")
	f.sync(t)
	snap, _ := f.c.Snapshot()
	got := snap["s1"]["api"]
	assert.Equal(t, types.UID("uid-1"), got.ServerUID)
	assert.Equal(t, "old.example.com", got.Host)
	assert.Equal(t, int32(443), got.Port)
	assert.Equal(t, "TCP", got.Protocol)
	// The planner uses an answer only for the same server and destination
	// (pkg/netpol TestAStaleAnswerAllowsNothing): a pass that reads the new
	// spec before the coordinator resolved it plans no allow.
}

func TestAddressesNotConfirmedForTwoPeriodsLeaveTheSnapshot(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"))
	f.resolver.set("api.example.com", "93.184.216.34")
	f.sync(t)
	f.Clock.Step(2 * refresh) // no refresh ran: a stalled worker
	snap, _ := f.c.Snapshot()
	assert.Empty(t, snap["s1"], "an answer older than two periods proves nothing")
}

func TestARotatingPoolKeepsTheGateOpen(t *testing.T) {
	f := newFixture(t, hostBinding("api", "api.example.com"))
	f.resolver.set("api.example.com", "93.184.216.1")
	f.sync(t)
	f.apply()
	require.True(t, f.c.Ready(f.server))
	changes := f.changes
	f.resolver.set("api.example.com", "93.184.216.2")
	f.Clock.Step(refresh)
	f.sync(t)
	assert.Equal(t, changes+1, f.changes, "the new address asks for a pass")
	assert.True(t, f.c.Ready(f.server), "the earlier address stays allowed, so the gate stays open")
}

func TestABlockedPassClosesEveryGate(t *testing.T) {
	f := newFixture(t, cidr("dns", "8.8.8.0/24", 443))
	f.sync(t)
	_, v := f.c.Snapshot()
	f.c.Applied(v, netpolcontroller.EgressReport{Blocked: true})
	assert.False(t, f.c.Ready(f.server))
}

// The gate answers for the server object it is asked about: a generation
// the coordinator has not synced yet, or a server deleted and re-created
// under the name, finds it closed even though the state it holds is open.
func TestTheGateOpensOnlyForTheGenerationAndUIDItSynced(t *testing.T) {
	f := newFixture(t, cidr("dns", "8.8.8.0/24", 443))
	f.sync(t)
	f.apply()
	require.True(t, f.c.Ready(f.server))

	newer := f.server.DeepCopy()
	newer.Generation++
	assert.False(t, f.c.Ready(newer), "a generation not synced yet may declare bindings no pass wrote")

	recreated := f.server.DeepCopy()
	recreated.UID = "re-created"
	assert.False(t, f.c.Ready(recreated), "a re-created server is not the one whose policies landed")
}

// A binding-less server first seen after the first pass took its snapshot
// opens with that pass when the pass's own inventory held its generation
// without bindings: the pass revoked every external allow under its name.
// Waiting for a second pass flapped the status of a failed-over leader
// (EgressPending, then NoBindings again: found by the end-to-end failover
// test). Anything less than that evidence keeps it closed.
func TestAPassThatPlannedTheServerWithoutBindingsOpensItsGate(t *testing.T) {
	planned := func(f *fixture) netpolcontroller.PlannedServer {
		return netpolcontroller.PlannedServer{UID: f.server.UID, Generation: f.server.Generation}
	}
	for _, tc := range []struct {
		name   string
		report func(f *fixture) netpolcontroller.EgressReport
		open   bool
	}{
		{"the pass planned this generation without bindings", func(f *fixture) netpolcontroller.EgressReport {
			return netpolcontroller.EgressReport{Bindingless: only("s1", planned(f))}
		}, true},
		{"the pass did not plan the server", func(*fixture) netpolcontroller.EgressReport {
			return netpolcontroller.EgressReport{}
		}, false},
		{"the pass planned an older generation", func(f *fixture) netpolcontroller.EgressReport {
			p := planned(f)
			p.Generation--
			return netpolcontroller.EgressReport{Bindingless: only("s1", p)}
		}, false},
		{"the pass planned another server of the name", func(f *fixture) netpolcontroller.EgressReport {
			p := planned(f)
			p.UID = "another"
			return netpolcontroller.EgressReport{Bindingless: only("s1", p)}
		}, false},
		{"its revocation failed", func(f *fixture) netpolcontroller.EgressReport {
			return netpolcontroller.EgressReport{Bindingless: only("s1", planned(f)), Failed: sets.New("s1")}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			_, v := f.c.Snapshot() // the first pass snapshots before the server's state exists
			f.sync(t)
			require.False(t, f.c.Ready(f.server), "no pass has landed since the start")
			f.c.Applied(v, tc.report(f))
			assert.Equal(t, tc.open, f.c.Ready(f.server))
		})
	}
}

// only is a Bindingless lookup that knows one server.
func only(name string, p netpolcontroller.PlannedServer) func(string) (netpolcontroller.PlannedServer, bool) {
	return func(n string) (netpolcontroller.PlannedServer, bool) { return p, n == name }
}
