package netpol

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
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
	c.plan = nil // the real planner over the seeded listers
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
	// and touches nothing else; taking it back creates the three again.
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

// BenchmarkPassOneContextChanged is the pass an edit of one of 1,000
// Contexts signals, on a controller whose last pass converged: one
// Context drops a server, then takes it back, and so on. Each pass must
// run incrementally and issue exactly that server's three deletes, or its
// three creates. The edit, its delivery to the handlers and the delivery
// of the pass's own writes are outside the timing.
func BenchmarkPassOneContextChanged(b *testing.B) {
	f, c := convergedFixture(b, 1000, 10)
	ctx := context.Background()
	if _, _, err := c.syncSignalled(ctx); err != nil || c.inc == nil {
		b.Fatalf("the first pass: %v (state kept: %v)", err, c.inc != nil)
	}
	// The fake API server's managed-fields tracker costs milliseconds a
	// create (a REST mapper built per call): an API server's cost, not the
	// pass's. The benchmark's server answers policy writes at once.
	written := 0
	f.Kube.PrependReactor("*", "networkpolicies", func(a core.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "create":
			written++
			p := a.(core.CreateAction).GetObject().(*networkingv1.NetworkPolicy).DeepCopy()
			p.UID, p.ResourceVersion = types.UID(fmt.Sprint("bench-", written)), fmt.Sprint(written)
			return true, p, nil
		case "delete":
			return true, nil, nil
		}
		return false, nil, nil
	})
	full := f.contexts[500]
	cur := full
	handlers := c.contextHandlers()
	incremental := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		next := full.DeepCopy()
		verb := "create "
		if i%2 == 0 {
			next.Spec.McpServers = next.Spec.McpServers[1:]
			verb = "delete "
		}
		next.Generation, next.ResourceVersion = cur.Generation+1, fmt.Sprint(i)
		f.Index(next)
		handlers.OnUpdate(cur, next)
		cur = next
		f.ClearWrites()
		b.StartTimer()

		_, inc, err := c.syncSignalled(ctx)

		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if inc {
			incremental++
		}
		writes := f.Writes()
		if len(writes) != oneServerDroppedWrites {
			b.Fatalf("pass %d after one Context changed issued %d writes, want %d: %v", i, len(writes), oneServerDroppedWrites, writes)
		}
		for _, w := range writes {
			if !strings.HasPrefix(w, verb) {
				b.Fatalf("pass %d after one Context changed issued %q, want only %ss", i, w, strings.TrimSpace(verb))
			}
		}
		f.echo(c)
		b.StartTimer()
	}
	if incremental != b.N {
		b.Fatalf("%d of %d passes after one Context changed ran incrementally, want all", incremental, b.N)
	}
	b.ReportMetric(oneServerDroppedWrites, "writes/op")
}

// echo delivers the NetworkPolicy writes since the last ClearWrites back to
// c's cache and handlers, as the watch would, without relisting the rest.
func (f *fixture) echo(c *Controller) {
	f.t.Helper()
	h := c.policyHandlers()
	for i, a := range f.Kube.Actions() {
		if a.GetResource().Resource != "networkpolicies" {
			continue
		}
		switch a.GetVerb() {
		case "create", "update":
			live := a.(core.CreateAction).GetObject().(*networkingv1.NetworkPolicy).DeepCopy()
			live.UID, live.ResourceVersion = types.UID(fmt.Sprint("echo-", i)), fmt.Sprint("echo-", i)
			f.Index(live)
			h.OnAdd(live, false)
		case "delete":
			d := a.(core.DeleteAction)
			gone := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: d.GetNamespace(), Name: d.GetName(),
				Labels: map[string]string{names.LabelManagedBy: names.ManagedByValue}}}
			f.Unindex(gone)
			h.OnDelete(gone)
		}
	}
}
