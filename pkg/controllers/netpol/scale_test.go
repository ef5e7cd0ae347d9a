package netpol

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/netpol"
)

// inventory returns contexts Contexts, each granting its own serversPer
// enabled McpServers.
func inventory(contexts, serversPer int) ([]*clerumv1alpha1.Context, []*clerumv1alpha1.McpServer) {
	var ctxs []*clerumv1alpha1.Context
	var servers []*clerumv1alpha1.McpServer
	for c := range contexts {
		ctx := &clerumv1alpha1.Context{
			ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: fmt.Sprintf("context-%04d", c)},
			Spec:       clerumv1alpha1.ContextSpec{ContextID: fmt.Sprintf("c%04d", c)},
		}
		for s := range serversPer {
			name := fmt.Sprintf("s%04d-%02d", c, s)
			servers = append(servers, &clerumv1alpha1.McpServer{
				ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-server", Name: name},
				Spec:       clerumv1alpha1.McpServerSpec{Image: "i", Transport: clerumv1alpha1.Transport{Type: clerumv1alpha1.TransportSSE}},
			})
			ctx.Spec.McpServers = append(ctx.Spec.McpServers, name)
		}
		ctxs = append(ctxs, ctx)
	}
	return ctxs, servers
}

// convergedFixture is a fixture whose cluster already holds the real plan.
func convergedFixture(t testing.TB, contexts, serversPer int) (*fixture, *Controller) {
	w := world{}
	w.contexts, w.servers = inventory(contexts, serversPer)
	w.policies = netpol.Compute(netpol.Inventory{Contexts: w.contexts, Servers: w.servers}, testPlanOpts).Policies
	f, c := newFixture(t, w)
	c.plan = netpol.Compute // the real planner over the seeded listers
	f.running(c)
	return f, c
}

func TestChangingOneContextWritesOnlyItsPolicies(t *testing.T) {
	f, c := convergedFixture(t, 3, 2)
	require.NoError(t, fullPass(c))
	require.Empty(t, f.Writes(), "converged: no writes")

	// context-0001 drops one server: exactly its three allows go.
	changed := f.contexts[1].DeepCopy()
	changed.Spec.McpServers = changed.Spec.McpServers[:1]
	f.Index(changed)
	require.NoError(t, fullPass(c))
	assert.Equal(t, trio("delete", "c0001", "s0001-01"), f.writes())
}

// The write counts the pass benchmarks assert: properties of the planner
// and the diff, not timings, so a benchmark fails when they break.
const (
	// unchangedPassWrites: a pass over a converged cluster has nothing to
	// change, so any write is a spurious update.
	unchangedPassWrites = 0
	// oneServerDroppedWrites: a Context that drops one server revokes that
	// pair's three allows (ctx-CID-S, ctx-CID-S-egress, rpc-egress-CID-S)
	// and touches nothing else.
	oneServerDroppedWrites = 3
)

// BenchmarkPassUnchanged is a full pass over a converged cluster of 1,000
// Contexts × 10 servers: it must issue no write.
func BenchmarkPassUnchanged(b *testing.B) {
	f, c := convergedFixture(b, 1000, 10)
	ctx := context.Background()
	f.ClearWrites()
	for b.Loop() {
		if _, err := c.syncFull(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if got := len(f.Writes()); got != unchangedPassWrites*b.N {
		b.Fatalf("%d passes over a converged cluster issued %d writes, want %d: %v", b.N, got, unchangedPassWrites*b.N, f.Writes())
	}
	b.ReportMetric(float64(len(f.Writes()))/float64(b.N), "writes/op")
	b.ReportMetric(float64(len(f.policies)), "policies")
}

// BenchmarkPassOneContextChanged is a full pass after one of 1,000 Contexts
// dropped a server: it must issue exactly that server's three deletes.
func BenchmarkPassOneContextChanged(b *testing.B) {
	f, c := convergedFixture(b, 1000, 10)
	ctx := context.Background()
	changed := f.contexts[500].DeepCopy()
	changed.Spec.McpServers = changed.Spec.McpServers[1:]
	f.Index(changed)
	f.ClearWrites()
	for b.Loop() {
		// The policy caches are not synced, so every iteration sees the
		// same one-Context change.
		if _, err := c.syncFull(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if got := len(f.Writes()); got != oneServerDroppedWrites*b.N {
		b.Fatalf("%d passes after one Context dropped a server issued %d writes, want %d (three deletes each)", b.N, got, oneServerDroppedWrites*b.N)
	}
	for _, w := range f.Writes() {
		if !strings.HasPrefix(w, "delete ") {
			b.Fatalf("a pass after one Context dropped a server issued %q, want only deletes", w)
		}
	}
	b.ReportMetric(float64(len(f.Writes()))/float64(b.N), "writes/op")
}
