//go:build dataplane

package dataplane

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Revocation on the wire: an edit that takes a grant away stops the
// packets, and how long that takes — from the edit to the first dropped
// connection, kube-router's own sync included — is measured beside the
// same path without HCC (a NetworkPolicy deleted by hand).

// Timing of the revocation watches: an attempt every watchInterval, each
// waiting watchTimeout. The figures are good to a watchInterval.
const (
	watchInterval = 100 * time.Millisecond
	watchTimeout  = time.Second
	// revocationDeadline bounds how long a revocation may take before the
	// test calls it lost (HCC's passes are a second apart, kube-router
	// syncs on every change, and the DNS refresh runs every
	// egressResync seconds, its old answer kept two periods).
	revocationDeadline = 2 * time.Minute
	// stayDropped is how long a dropped flow is watched to stay dropped.
	stayDropped = 3 * time.Second
)

var (
	searchOld = netip.MustParseAddr("93.184.216.40")
	searchNew = netip.MustParseAddr("93.184.216.41")
)

// revocationFigures are the measured times from edit to first drop.
type revocationFigures struct {
	removeServer, deleteContext, dnsChange, directDelete time.Duration
}

// TestRevocation removes a server from a Context, deletes a Context and
// changes a DNS answer, and requires each to stop the packets it granted
// (and to leave the others flowing); it logs the figures, which
// BenchmarkRevocation reports.
func TestRevocation(t *testing.T) {
	need(t)
	f := measureRevocation(t)
	t.Logf("revocation, edit to first dropped connection: remove a server from a Context %s, delete a Context %s, change a DNS answer %s; a NetworkPolicy deleted by hand %s",
		f.removeServer, f.deleteContext, f.dnsChange, f.directDelete)
}

// BenchmarkRevocation reports the time from each edit to the first
// dropped connection (make bench-dataplane), and the ratio of each to the
// dataplane's own latency (a NetworkPolicy deleted by hand), measured in
// the same run.
func BenchmarkRevocation(b *testing.B) {
	if unavailable != nil {
		b.Skipf("dataplane unavailable: %v", unavailable)
	}
	for range b.N {
		f := measureRevocation(b)
		direct := f.directDelete.Seconds()
		for name, d := range map[string]time.Duration{"remove-server": f.removeServer, "delete-context": f.deleteContext, "dns-change": f.dnsChange} {
			// x-direct-M is the ratio of metric M-s to the direct delete
			// (hack/benchtable).
			b.ReportMetric(d.Seconds(), name+"-s")
			b.ReportMetric(d.Seconds()/direct, "x-direct-"+name)
		}
		b.ReportMetric(direct, "direct-delete-s")
	}
}

func measureRevocation(tb testing.TB) revocationFigures {
	tb.Helper()
	ctx := context.Background()
	require.NoError(tb, env.SetDNS(map[string][]netip.Addr{"api.search.example.com": {searchOld}}))
	tb.Cleanup(func() { require.NoError(tb, env.SetDNS(nil)) })
	objects := filepath.Join("flows", "revocation-objects.yaml")
	require.NoError(tb, env.ApplyFiles(ctx, objects))
	tb.Cleanup(func() {
		require.NoError(tb, env.DeleteFiles(context.Background(), objects))
		require.NoError(tb, env.WaitConverged(context.Background(), 3*time.Minute))
	})
	require.NoError(tb, env.WaitConverged(ctx, 5*time.Minute))
	f, pods := loadFlows(tb, "revocation.yaml")
	runFlows(tb, f, pods)
	if tb.Failed() {
		tb.FailNow() // nothing granted, nothing to revoke
	}
	for name, pod := range f.Pods {
		pods[name] = types.NamespacedName{Namespace: pod.Namespace, Name: name}
	}
	calcPod, searchPod := pods["deployment/mcp-server/calc"], pods["deployment/mcp-server/search"]
	calcIP, _ := env.PodIP(calcPod)
	searchIP, _ := env.PodIP(searchPod)
	toCalc := netip.AddrPortFrom(calcIP, 3000)
	calcName := calcPod.String()

	var figures revocationFigures
	clerum := env.HCC.ClerumV1alpha1()

	// Remove calc from rev-a: rev-a's Host loses calc, keeps search;
	// rev-b's Host keeps calc.
	figures.removeServer = timeRevocation(tb, "remove calc from Context rev-a",
		WatchTarget{From: pods["host-rev-a"], To: toCalc, Identity: calcName},
		func() {
			c, err := clerum.Contexts("mcp-server").Get(ctx, "rev-a", metav1.GetOptions{})
			require.NoError(tb, err)
			c.Spec.McpServers = []string{"search"}
			_, err = clerum.Contexts("mcp-server").Update(ctx, c, metav1.UpdateOptions{})
			require.NoError(tb, err)
		})
	stillAllowed(tb, pods["host-rev-a"], netip.AddrPortFrom(searchIP, 3000), searchPod.String(), "rev-a still names search")
	stillAllowed(tb, pods["host-rev-b"], toCalc, calcName, "rev-b still names calc")

	// Delete rev-b: its Host loses calc.
	figures.deleteContext = timeRevocation(tb, "delete Context rev-b",
		WatchTarget{From: pods["host-rev-b"], To: toCalc, Identity: calcName},
		func() {
			require.NoError(tb, clerum.Contexts("mcp-server").Delete(ctx, "rev-b", metav1.DeleteOptions{}))
		})

	// A new DNS answer: the old address stops, the new one opens.
	figures.dnsChange = timeRevocation(tb, "change api.search.example.com's answer",
		WatchTarget{From: searchPod, To: netip.AddrPortFrom(searchOld, 443)},
		func() {
			require.NoError(tb, env.SetDNS(map[string][]netip.Addr{"api.search.example.com": {searchNew}}))
		})
	require.NoError(tb, env.PrepareDestinations(&File{Flows: []Flow{{ToIP: searchNew.String(), Port: 443, Protocol: corev1.ProtocolTCP}}}))
	eventuallyAllowed(tb, searchPod, netip.AddrPortFrom(searchNew, 443), "", "search reaches the new answer")

	figures.directDelete = directRevocation(tb)
	return figures
}

// timeRevocation watches target, which must be allowed, makes the edit,
// and returns the time from the edit to the first dropped connection; it
// fails tb if the flow is not dropped within revocationDeadline or comes
// back after it was.
func timeRevocation(tb testing.TB, what string, target WatchTarget, edit func()) time.Duration {
	tb.Helper()
	w, err := env.StartWatch(target, watchInterval, watchTimeout)
	require.NoError(tb, err)
	defer w.Stop()
	// The flow must be seen passing before the edit, or a drop proves nothing.
	waitSamples(tb, w, what+": allowed before the edit", time.Minute, func(s []Sample) bool {
		return len(s) > 0 && s[len(s)-1].Got == GotAllowed
	})
	edited := time.Now()
	edit()
	var drop time.Time
	waitSamples(tb, w, what+": the first dropped connection", revocationDeadline, func(s []Sample) bool {
		d, _, ok := FirstDrop(s, edited)
		drop = d
		return ok && time.Since(d) > stayDropped
	})
	samples := w.Stop()
	d, comeback, ok := FirstDrop(samples, edited)
	if !ok {
		detail := "never dropped"
		if comeback != nil {
			detail = fmt.Sprintf("dropped at +%s but %s again at +%s (%s)", d.Sub(edited), comeback.Got, comeback.Start.Sub(edited), comeback.Detail)
		}
		tb.Fatalf("%s: %s", what, detail)
	}
	for _, s := range samples {
		if s.Start.Before(d) && s.Got != GotAllowed && s.Got != GotDenied {
			tb.Errorf("%s: an attempt at +%s got %s (%s)", what, s.Start.Sub(edited), s.Got, s.Detail)
		}
	}
	latency := drop.Sub(edited)
	tb.Logf("%s: first dropped connection %s after the edit (%d attempts)", what, latency.Round(time.Millisecond), len(samples))
	return latency
}

// waitSamples waits until cond holds for w's samples.
func waitSamples(tb testing.TB, w *Watch, what string, timeout time.Duration, cond func([]Sample) bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond(w.Samples()) {
		if time.Now().After(deadline) {
			s := w.Samples()
			last := "no attempt"
			if len(s) > 0 {
				last = fmt.Sprintf("last attempt %s (%s)", s[len(s)-1].Got, s[len(s)-1].Detail)
			}
			tb.Fatalf("%s: not within %s; %s", what, timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stillAllowed checks that one flow passes (with the usual retry).
func stillAllowed(tb testing.TB, from types.NamespacedName, to netip.AddrPort, identity, why string) {
	tb.Helper()
	r := env.runAttempts(context.Background(), from, to, corev1.ProtocolTCP, identity)
	if r.got != GotAllowed {
		tb.Errorf("%s → %s: want allowed, got %s (%s): %s", from, to, r.got, r.detail, why)
	}
}

// eventuallyAllowed waits until one flow passes.
func eventuallyAllowed(tb testing.TB, from types.NamespacedName, to netip.AddrPort, identity, why string) {
	tb.Helper()
	w, err := env.StartWatch(WatchTarget{From: from, To: to, Identity: identity}, watchInterval, watchTimeout)
	require.NoError(tb, err)
	defer w.Stop()
	waitSamples(tb, w, why, revocationDeadline, func(s []Sample) bool {
		return len(s) > 0 && s[len(s)-1].Got == GotAllowed
	})
}

// directRevocation is the dataplane's own latency: two pods of a namespace
// of their own, a default deny and an allow written by hand; the allow is
// deleted and the time to the first dropped connection returned.
func directRevocation(tb testing.TB) time.Duration {
	tb.Helper()
	ctx := context.Background()
	const ns = "rev-direct"
	yes := true
	f := &File{
		Pods: map[string]Pod{
			"direct-src": {Namespace: ns, Labels: map[string]string{"role": "src"}},
			"direct-dst": {Namespace: ns, Labels: map[string]string{"role": "dst"}},
		},
		Flows: []Flow{{From: "direct-src", To: "direct-dst", Port: 8080, Protocol: corev1.ProtocolTCP, Allowed: &yes}},
	}
	require.NoError(tb, env.ensureNamespaces(ctx, []string{ns}))
	policies := env.Kube.NetworkingV1().NetworkPolicies(ns)
	deny := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	allow := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-src"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "dst"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "src"}}}},
			}},
		},
	}
	for _, p := range []*networkingv1.NetworkPolicy{deny, allow} {
		_, err := policies.Create(ctx, p, metav1.CreateOptions{})
		require.NoError(tb, err)
	}
	tb.Cleanup(func() {
		_ = policies.Delete(context.Background(), deny.Name, metav1.DeleteOptions{})
	})
	pods, err := env.CreatePods(ctx, f, nil)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, env.DeletePods(context.Background(), f)) })
	dstIP, _ := env.PodIP(pods["direct-dst"])
	return timeRevocation(tb, "delete a NetworkPolicy by hand",
		WatchTarget{From: pods["direct-src"], To: netip.AddrPortFrom(dstIP, 8080), Identity: pods["direct-dst"].String()},
		func() { require.NoError(tb, policies.Delete(ctx, allow.Name, metav1.DeleteOptions{})) })
}
