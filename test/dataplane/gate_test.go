//go:build dataplane

package dataplane

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// gateInterval is how often each flow is tried while the server
	// starts.
	gateInterval = 50 * time.Millisecond
	// gateObserve is how long the flows are watched after the granted one
	// first passed.
	gateObserve = 5 * time.Second
	// gateHold is how long the server stays unresolvable (its binding's
	// hostname has no answer yet) before the answer is given: long enough
	// for HCC, were its gate open, to have written the server's Deployment.
	gateHold = 10 * time.Second
)

// gateWatches are the flows watched from the moment the server's pod has
// a network.
type gateWatches struct {
	pod     types.NamespacedName
	wiredAt time.Time
	// granted: the Host of the server's Context (gate-1, HCC's own), which
	// must get in.
	granted *Watch
	// intruders: a Host of another Context, a stray pod of the server's
	// namespace and a pod of a namespace without policies, which must
	// never get in.
	intruders map[string]*Watch
	// bound: the server's egress binding, which must pass from the first
	// attempt; other: an address beside it, which must never.
	bound, other *Watch
}

// TestEgressGate: a server's pod receives no traffic from outside its
// grants, and sends none outside its bindings, at any moment of its start;
// and its egress binding works from its first packet, because HCC creates
// its Deployment only once its policies are programmed (the runtime gate,
// docs/networkpolicy.md). Every flow is tried every gateInterval from the
// moment the agent brings the pod's network up. The server is created
// while its binding's hostname does not resolve, and gets the answer only
// gateHold later: until then HCC must not write its Deployment; after,
// the gate opens only once the allow is written, so the first packet to
// the binding passes. Without the hold the allow would be written before
// any pod could start whether or not the gate held it back, and the test
// could not tell.
func TestEgressGate(t *testing.T) {
	need(t)
	ctx := context.Background()
	answer := map[string][]netip.Addr{"api.gated.example.com": {netip.MustParseAddr("93.184.216.50")}}
	require.NoError(t, env.SetDNS(nil))
	t.Cleanup(func() { require.NoError(t, env.SetDNS(nil)) })
	raw, err := os.ReadFile(filepath.Join("flows", "gate.yaml"))
	require.NoError(t, err)
	f, _, err := ParseWithExisting(raw)
	require.NoError(t, err)

	// The server's Context and Host, and the intruders, first.
	objects := filepath.Join("flows", "gate-objects.yaml")
	require.NoError(t, env.ApplyFiles(ctx, objects))
	t.Cleanup(func() {
		require.NoError(t, env.DeleteFiles(context.Background(), objects))
		require.NoError(t, env.WaitConverged(context.Background(), 3*time.Minute))
	})
	require.NoError(t, env.WaitConverged(ctx, 3*time.Minute))
	host, err := env.ExistingPods(ctx, []string{"deployment/mcp-host/gate-1"})
	require.NoError(t, err)
	pods, err := env.CreatePods(ctx, f, host)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.DeletePods(context.Background(), f)) })
	require.NoError(t, env.PrepareDestinations(f))
	require.NoError(t, env.WaitConverged(ctx, 3*time.Minute))

	started := make(chan *gateWatches, 1)
	var armed atomic.Bool
	armed.Store(true)
	t.Cleanup(func() { armed.Store(false) })
	env.OnPodWired(func(key types.NamespacedName, ip netip.Addr, labels map[string]string) {
		if !armed.Load() || labels["clerum.io/mcpserver"] != "gated" {
			return
		}
		armed.Store(false)
		g := &gateWatches{pod: key, wiredAt: time.Now(), intruders: map[string]*Watch{}}
		watch := func(target WatchTarget) *Watch {
			w, err := env.StartWatch(target, gateInterval, watchTimeout)
			if err != nil {
				t.Errorf("watching %s → %s: %v", target.From, target.To, err)
			}
			return w
		}
		server := netip.AddrPortFrom(ip, 3000)
		g.granted = watch(WatchTarget{From: pods["deployment/mcp-host/gate-1"], To: server, Identity: key.String()})
		for _, name := range []string{"intruder-host", "intruder-runtime", "intruder-open"} {
			g.intruders[name] = watch(WatchTarget{From: pods[name], To: server, Identity: key.String()})
		}
		g.bound = watch(WatchTarget{From: key, To: netip.MustParseAddrPort("93.184.216.50:443")})
		g.other = watch(WatchTarget{From: key, To: netip.MustParseAddrPort("93.184.216.51:443")})
		started <- g
	})

	server := filepath.Join("flows", "gate-server.yaml")
	require.NoError(t, env.ApplyFiles(ctx, server))
	t.Cleanup(func() {
		require.NoError(t, env.DeleteFiles(context.Background(), server))
		require.NoError(t, env.WaitConverged(context.Background(), 3*time.Minute))
	})
	// The binding's hostname does not resolve: no allow, so no Deployment.
	time.Sleep(gateHold)
	deployments, err := env.Kube.AppsV1().Deployments("mcp-server").List(ctx, metav1.ListOptions{LabelSelector: "clerum.io/mcpserver=gated"})
	require.NoError(t, err)
	require.Empty(t, deployments.Items, "HCC wrote the server's Deployment while its egress binding's hostname did not resolve: the egress gate was open")
	require.True(t, armed.Load(), "the server's pod came up while its egress binding's hostname did not resolve: the egress gate was open")
	require.NoError(t, env.SetDNS(answer))
	var g *gateWatches
	select {
	case g = <-started:
	case <-time.After(3 * time.Minute):
		t.Fatal("the server's pod got no network within 3 minutes")
	}
	require.False(t, t.Failed())
	waitSamples(t, g.granted, "the server's Context's Host gets in", 2*time.Minute, func(s []Sample) bool {
		return len(s) > 0 && s[len(s)-1].Got == GotAllowed
	})
	time.Sleep(gateObserve)

	granted := g.granted.Stop()
	bound, other := g.bound.Stop(), g.other.Stop()
	for name, w := range g.intruders {
		samples := w.Stop()
		assert.Greater(t, len(samples), int(gateObserve/gateInterval)/2, "%s: attempts while the server started", name)
		for _, s := range samples {
			if s.Got != GotDenied {
				t.Errorf("%s → %s at +%s after its network came up: %s (%s); every attempt must be dropped", name, g.pod, s.Start.Sub(g.wiredAt), s.Got, s.Detail)
			}
		}
	}
	for _, s := range other {
		if s.Got != GotDenied {
			t.Errorf("%s → 93.184.216.51:443 (no binding) at +%s: %s (%s)", g.pod, s.Start.Sub(g.wiredAt), s.Got, s.Detail)
		}
	}
	for _, s := range bound {
		if s.Got != GotAllowed {
			t.Errorf("%s → 93.184.216.50:443 (its binding) at +%s: %s (%s); the gate opens only once its egress is programmed, so every attempt must pass",
				g.pod, s.Start.Sub(g.wiredAt), s.Got, s.Detail)
		}
	}
	firstGranted := time.Duration(-1)
	for _, s := range granted {
		if s.Got == GotAllowed {
			firstGranted = s.Start.Sub(g.wiredAt)
			break
		}
	}
	t.Logf("egress gate: %d attempts per flow over %s from the moment %s's network came up; its Context's Host got in at +%s",
		len(bound), bound[len(bound)-1].Start.Sub(g.wiredAt).Round(time.Millisecond), g.pod, firstGranted.Round(time.Millisecond))

	// And the steady state, as flows.
	existing, err := env.ExistingPods(ctx, []string{"deployment/mcp-server/gated"})
	require.NoError(t, err)
	for k, v := range existing {
		pods[k] = v
	}
	for _, r := range env.RunFlows(ctx, f, pods) {
		if r.Pass() {
			t.Log(r.Line())
		} else {
			t.Error(r.Line())
		}
	}
}
