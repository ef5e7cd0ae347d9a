package egress

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/egress/resolve"
	"github.com/clerum/hcc/pkg/controllers/kit"
	netpolcontroller "github.com/clerum/hcc/pkg/controllers/netpol"
	"github.com/clerum/hcc/pkg/netpol"
)

// serverState is what the coordinator knows of one server.
type serverState struct {
	uid        types.UID
	generation int64
	// bindings is how many egress bindings the generation declares.
	bindings   int
	resolvedAt time.Time // last resolution round, successful or not
	hostnames  bool      // the server has hostname bindings to refresh
	// version is the coordinator version at which what a pass must program
	// for this server last changed: its addresses, verdicts or generation.
	version uint64
	// gateVersion is the version at which the server's generation, UID or
	// verdicts last changed. An address-only change (a rotating pool, the
	// earlier answers still allowed) leaves the gate open.
	gateVersion uint64
	// applied is the newest version a pass put into the cluster for this
	// server; the gate is open while gateVersion <= applied.
	applied uint64
	// seen holds, per hostname binding, each address with the last time a
	// successful answer contained it.
	seen map[string]map[netip.Addr]time.Time
	// dest holds the destination each hostname binding resolved: the union
	// of answers only spans one destination.
	dest     map[string]destination
	rejected map[string]string // binding → why it gets no allow as written
	failed   map[string]string // binding → failure class, retried
	// planRejected holds the planner's rejections of this server's
	// bindings from the last pass (a policy name another server holds).
	planRejected map[string]string
	// retryAt is when a failing lookup may be retried (DNS backoff).
	retryAt time.Time
	// eventKey is the rejection summary last emitted as an event.
	eventKey string
}

// destination is what a hostname binding asks to reach. Earlier answers are
// kept only while it stays the same: a new host, port or protocol starts
// from the new answer alone.
type destination struct {
	host     string
	port     int32
	protocol string
}

func destinationOf(b *clerumv1alpha1.EgressBinding) destination {
	d := destination{host: b.Host, protocol: b.EffectiveProtocol()}
	if b.Port != nil {
		d.port = *b.Port
	}
	return d
}

// forget drops a deleted or disabled server; its allows go with the next
// pass, and so do its metric series.
func (c *Coordinator) forget(name string) {
	c.mu.Lock()
	_, had := c.states[name]
	delete(c.landed, name)
	if had {
		delete(c.states, name)
		c.version++
		c.revoking[name] = c.version
	}
	c.mu.Unlock()
	c.dnsBackoff.Forget(name)
	c.metrics.DNSFailures.DeleteLabelValues(name)
	if had {
		c.onChange()
		c.onGate(name)
	}
}

// due reports whether server needs a resolution round now: never resolved,
// re-created, spec changed, a failing lookup whose backoff has run out, or
// the refresh period elapsed. Events alone never make a failing lookup due
// early, so a burst of them cannot defeat the backoff.
func (c *Coordinator) due(server *clerumv1alpha1.McpServer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.states[server.Name]
	now := c.clock.Now()
	switch {
	case !ok, st.uid != server.UID, st.generation != server.Generation:
		return true
	case len(st.failed) > 0:
		return !now.Before(st.retryAt)
	case c.opts.Refresh > 0 && st.hostnames:
		return now.Sub(st.resolvedAt) >= c.opts.Refresh
	}
	return false
}

// refresh validates and resolves every binding of server and publishes the
// result, signalling a pass when what the pass must program changed.
func (c *Coordinator) refresh(ctx context.Context, server *clerumv1alpha1.McpServer) {
	now := c.clock.Now()
	answer := resolve.Resolve(ctx, c.resolver, c.opts.DNSTimeout, c.opts.Rules, server)
	next := &serverState{
		uid:        server.UID,
		generation: server.Generation,
		bindings:   len(server.Spec.EgressBindings),
		resolvedAt: now,
		seen:       map[string]map[netip.Addr]time.Time{},
		dest:       map[string]destination{},
		rejected:   answer.Rejected,
		failed:     answer.Failed,
	}
	for i := range server.Spec.EgressBindings {
		b := &server.Spec.EgressBindings[i]
		if b.EffectiveMode() == clerumv1alpha1.EgressModeExactHost && b.Host != "" {
			next.hostnames = true
			next.dest[b.Name] = destinationOf(b)
		}
	}
	for binding, detail := range answer.Details {
		log := kit.LogObjectOf(c.log, server.Namespace, server.Name)
		log.Warn().Str("binding", binding).Str("class", answer.Failed[binding]).
			Str("detail", detail).Msg("egress hostname lookup failed; the binding gets no allow until it succeeds")
		c.metrics.DNSFailures.WithLabelValues(server.Name).Inc()
	}
	if len(answer.Failed) > 0 {
		next.retryAt = now.Add(c.dnsBackoff.When(server.Name))
	} else {
		c.dnsBackoff.Forget(server.Name)
	}

	c.mu.Lock()
	prev := c.states[server.Name]
	same := prev != nil && prev.uid == server.UID
	for binding, addrs := range answer.Addrs {
		var earlier map[netip.Addr]time.Time
		if same && prev.dest[binding] == next.dest[binding] {
			earlier = prev.seen[binding]
		}
		next.seen[binding] = c.union(earlier, addrs, now)
	}
	if same {
		next.eventKey, next.version, next.gateVersion, next.applied = prev.eventKey, prev.version, prev.gateVersion, prev.applied
		next.planRejected = prev.planRejected
	}
	// A new generation changes what the pass must program even when the
	// addresses stay (a CIDR, port or mode edit, a new public-web binding,
	// every binding removed): the gate must wait for a pass that applied it.
	regated := !same || prev.generation != next.generation ||
		!maps.Equal(prev.rejected, next.rejected) || !maps.Equal(prev.failed, next.failed)
	if next.bindings == 0 && !c.mayHoldAllows(server.Name, prev) {
		// No pass has anything to add or revoke for it: a new server, or
		// an edit of one that never declared a binding, keeps its gate
		// open instead of closing it until the next pass.
		regated = false
	}
	changed := regated || prev == nil || !samePublished(prev, next)
	if changed {
		c.version++
		next.version = c.version
	}
	if regated {
		next.gateVersion = next.version
	}
	c.states[server.Name] = next
	c.mu.Unlock()
	if changed {
		c.onChange()
	}
	// The gate opens only for the generation and UID the state describes
	// (open): a new one opens the gate even when no pass is needed, and a
	// runtime that found it closed meanwhile must hear it.
	if changed || !same || prev.generation != next.generation {
		c.onGate(server.Name)
	}
}

// mayHoldAllows reports whether the cluster may still hold external allows
// under server name: its state (prev) declared bindings or still waits for
// a pass; or, with no state, no pass has landed since this process started
// (the server may have lost its bindings while no controller ran) nor
// released it (Landed), or it was forgotten and the revoking pass has not
// landed yet. Callers hold c.mu.
func (c *Coordinator) mayHoldAllows(name string, prev *serverState) bool {
	if prev != nil {
		return prev.bindings > 0 || prev.gateVersion > prev.applied
	}
	_, revoking := c.revoking[name]
	_, landed := c.landed[name]
	return revoking || (!c.passApplied && !landed)
}

// union keeps the addresses of earlier successful answers for the same
// destination for two refresh periods, so a round-robin pool stays allowed
// as it rotates.
func (c *Coordinator) union(earlier map[netip.Addr]time.Time, addrs []netip.Addr, now time.Time) map[netip.Addr]time.Time {
	seen := map[netip.Addr]time.Time{}
	if c.opts.Refresh > 0 {
		window := 2 * c.opts.Refresh
		for a, t := range earlier {
			if now.Sub(t) < window {
				seen[a] = t
			}
		}
	}
	for _, a := range addrs {
		seen[a.Unmap()] = now
	}
	return seen
}

// samePublished reports whether two states publish the same addresses and
// verdicts.
func samePublished(a, b *serverState) bool {
	if len(a.seen) != len(b.seen) {
		return false
	}
	for binding, as := range a.seen {
		bs, ok := b.seen[binding]
		if !ok || len(as) != len(bs) {
			return false
		}
		for addr := range as {
			if _, ok := bs[addr]; !ok {
				return false
			}
		}
	}
	return maps.Equal(a.rejected, b.rejected) && maps.Equal(a.failed, b.failed)
}

// Snapshot implements the NetworkPolicy controller's EgressSource. Each
// answer names the server UID and the destination it answers, so a pass that
// reads a newer spec than the coordinator has resolved plans no allow from
// it. An address not confirmed for two refresh periods is left out even if
// no refresh has run since (a stalled worker must not keep an allow alive).
func (c *Coordinator) Snapshot() (map[string]map[string]netpol.Resolution, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	out := make(map[string]map[string]netpol.Resolution, len(c.states))
	for server, st := range c.states {
		if len(st.seen) == 0 {
			continue
		}
		bindings := make(map[string]netpol.Resolution, len(st.seen))
		for b, seen := range st.seen {
			addrs := c.liveAddrs(seen, now)
			if len(addrs) == 0 {
				continue
			}
			d := st.dest[b]
			bindings[b] = netpol.Resolution{ServerUID: st.uid, Host: d.host, Port: d.port, Protocol: d.protocol, Addrs: addrs}
		}
		out[server] = bindings
	}
	return out, c.version
}

// liveAddrs returns the addresses of seen confirmed within two refresh
// periods, in address order.
func (c *Coordinator) liveAddrs(seen map[netip.Addr]time.Time, now time.Time) []netip.Addr {
	out := make([]netip.Addr, 0, len(seen))
	for a, t := range seen {
		if c.opts.Refresh <= 0 || now.Sub(t) < 2*c.opts.Refresh {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// Applied implements EgressSource: a pass built from Snapshot version is in
// the cluster for every server but report.Failed, which stay gated; the
// planner's rejections replace the ones of the previous pass. Servers whose
// gate or rejections changed are re-synced, so their status follows. The
// first Applied settles the coordinator: every server has been judged.
func (c *Coordinator) Applied(version uint64, report netpolcontroller.EgressReport) {
	c.mu.Lock()
	var touched []string
	for name, st := range c.states {
		if c.judge(name, st, version, report) {
			touched = append(touched, name)
		}
	}
	// A server the coordinator has no state for whose revocations failed
	// (its bindings went while no controller ran) waits like a forgotten
	// one, until a pass revokes them.
	for name := range report.Failed {
		if _, ok := c.states[name]; !ok {
			c.revoking[name] = version
			delete(c.landed, name)
			touched = append(touched, name)
		}
	}
	if c.blocked != report.Blocked {
		// Every gate follows the namespace default deny.
		for name := range c.states {
			touched = append(touched, name)
		}
	}
	c.blocked = report.Blocked
	if !report.Blocked {
		c.passApplied = true
		clear(c.landed) // passApplied says it of every server
		for name, v := range c.revoking {
			if v <= version && !report.Failed.Has(name) {
				delete(c.revoking, name)
			}
		}
	}
	c.mu.Unlock()
	slices.Sort(touched)
	touched = slices.Compact(touched)
	for _, name := range touched {
		c.queue.Add(name)
		c.onGate(name)
	}
	c.settle()
}

// Landed implements EgressSource: while a pass is still writing — its
// default denies, L1 policies and every revocation landed — every policy
// of servers, planned from Snapshot version, is in the cluster. Each is
// judged as Applied judges it (report holds no failures), so its gate may
// open now rather than when the pass ends. A server the coordinator has no
// state for yet is recorded as revoked: no allow under its name survives
// the pass. Landed never settles the coordinator: servers the pass has not
// released yet are not judged, and publishing their closed gates would
// report them pending only until Applied (docs/networkpolicy.md,
// "Releasing servers as their policies land").
func (c *Coordinator) Landed(version uint64, servers []string, report netpolcontroller.EgressReport) {
	c.mu.Lock()
	var touched []string
	for _, name := range servers {
		if st, ok := c.states[name]; ok {
			if c.judge(name, st, version, report) {
				touched = append(touched, name)
			}
			continue
		}
		if v, ok := c.revoking[name]; ok && v > version {
			continue // forgotten after the pass's snapshot: its pass is still to come
		}
		delete(c.revoking, name)
		if !c.passApplied {
			c.landed[name] = struct{}{}
		}
		touched = append(touched, name)
	}
	c.lastRelease = c.clock.Now() // the pass is making progress: the settle deadline starts again
	c.mu.Unlock()
	for _, name := range touched {
		c.queue.Add(name)
		c.onGate(name)
	}
}

// judge applies the report of a pass planned from version to the state st
// of server name, and reports whether its gate or rejections changed.
// Callers hold c.mu.
func (c *Coordinator) judge(name string, st *serverState, version uint64, report netpolcontroller.EgressReport) bool {
	before := st.gateVersion <= st.applied && len(st.planRejected) == 0
	rejected := report.Rejected[name]
	changedRejections := !maps.Equal(st.planRejected, rejected)
	st.planRejected = rejected
	switch {
	case report.Blocked || report.Failed.Has(name):
		// Some of its policies did not land: closed until a pass
		// writes them all.
		st.applied = 0
	case st.version <= version && version > st.applied:
		st.applied = version
	case st.bindings == 0 && st.gateVersion > st.applied && plannedBindingless(report, name, st):
		// The state was made after the pass took its snapshot (a server
		// first seen at startup, while no pass had landed), but the
		// pass's own inventory held this very generation without
		// bindings, so it revoked every external allow under the name:
		// waiting for another pass would only flap the status.
		st.applied = st.gateVersion
	}
	after := st.gateVersion <= st.applied && len(st.planRejected) == 0
	return before != after || changedRejections
}

// Ready is the runtime gate: true when every binding of server's current
// generation is valid, resolved, accepted by the planner and in the
// cluster, and the last pass wrote all of the server's policies. A server
// that declares no bindings needs no gate unless the cluster may still hold
// allows under its name: its bindings were just removed, or it was deleted
// and re-created before the pass that revokes them (mayHoldAllows).
func (c *Coordinator) Ready(server *clerumv1alpha1.McpServer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blocked {
		return false
	}
	st, ok := c.states[server.Name]
	if !ok {
		return len(server.Spec.EgressBindings) == 0 && !c.mayHoldAllows(server.Name, nil)
	}
	return st.open(server)
}

// open reports whether st opens the gate for server.
func (st *serverState) open(server *clerumv1alpha1.McpServer) bool {
	return st.uid == server.UID && st.generation == server.Generation &&
		len(st.rejected) == 0 && len(st.failed) == 0 && len(st.planRejected) == 0 &&
		st.gateVersion <= st.applied
}

// view returns a copy of server's state and whether its gate is open.
func (c *Coordinator) view(server *clerumv1alpha1.McpServer) (serverState, bool) {
	ready := c.Ready(server)
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.states[server.Name]; ok {
		return *st, ready
	}
	return serverState{}, ready
}

// plannedBindingless reports whether the pass of report planned server
// name at st's UID and generation, or a newer one, without bindings.
func plannedBindingless(report netpolcontroller.EgressReport, name string, st *serverState) bool {
	if report.Bindingless == nil {
		return false
	}
	p, ok := report.Bindingless(name)
	return ok && p.UID == st.uid && p.Generation >= st.generation
}
