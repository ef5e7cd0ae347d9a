package netpol

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/names"
)

// editWorld is the inventory a random edit sequence works on. Its names are
// few and hold dashes, so Contexts share contextIds and owners derive the
// same policy names ("ctx-a-b-c" is Context "a-b" with server "c" and
// Context "a" with server "b-c"): the rare paths are exercised often.
type editWorld struct {
	rnd      *rand.Rand
	contexts map[string]*clerumv1alpha1.Context
	servers  map[string]*clerumv1alpha1.McpServer
	resolved map[string]map[string]Resolution
	version  int
}

var (
	editServerNames  = []string{"a", "b-c", "b-c", "c", "c", "x", "x-y", "y", "Not_A_Label"}
	editContextNames = []string{"k1", "k2", "k3", "k4", "k5"}
	editContextIDs   = []string{"a", "a-b", "a-b", "a", "x", "not a label"}
)

func (w *editWorld) pick(from []string) string { return from[w.rnd.IntN(len(from))] }

func (w *editWorld) randomContext() *clerumv1alpha1.Context {
	w.version++
	c := newContext(w.pick(editContextNames), w.pick(editContextIDs), w.rnd.IntN(3))
	c.ResourceVersion = fmt.Sprint(w.version)
	for range w.rnd.IntN(5) {
		c.Spec.McpServers = append(c.Spec.McpServers, w.pick(editServerNames))
	}
	return c
}

func (w *editWorld) randomServer() *clerumv1alpha1.McpServer {
	w.version++
	name := w.pick(editServerNames)
	s := newServer(name, withPort([]int32{8080, 9000}[w.rnd.IntN(2)]))
	s.UID = types.UID(fmt.Sprintf("%s-%d", name, w.rnd.IntN(2)))
	s.ResourceVersion = fmt.Sprint(w.version)
	if w.rnd.IntN(5) == 0 {
		s.Spec.Enabled = ptr.To(false)
	}
	bindings := []clerumv1alpha1.EgressBinding{
		publicWebBinding("www"), publicWebBinding("y-www"), cidrBinding("net", "93.184.216.0/24", 443), hostBinding("h", "api.example.com", 443),
		hostBinding("net", "other.example.com", 8443), cidrBinding("bad", "10.0.0.0/8", 443),
	}
	for range w.rnd.IntN(4) {
		s.Spec.EgressBindings = append(s.Spec.EgressBindings, bindings[w.rnd.IntN(len(bindings))])
	}
	if w.rnd.IntN(3) == 0 {
		to := w.pick([]string{"runner", "b-runner", "c"})
		s.Annotations = map[string]string{names.AnnotationRecipeBindings: fmt.Sprintf(
			`[{"recipe":%q,"from":%q,"to":%q,"port":%d,"protocol":"TCP"}]`, w.pick([]string{"r", "r-b", "x"}), name, to, 8000+w.rnd.IntN(2))}
	}
	return s
}

// randomAnswers are DNS answers for s's hostname bindings: current, stale
// (for another port) or missing.
func (w *editWorld) randomAnswers(s *clerumv1alpha1.McpServer) map[string]Resolution {
	out := map[string]Resolution{}
	for i := range s.Spec.EgressBindings {
		b := &s.Spec.EgressBindings[i]
		switch w.rnd.IntN(3) {
		case 0:
			out[b.Name] = ResolutionFor(s, b, addrs(fmt.Sprintf("93.184.217.%d", 1+w.rnd.IntN(3))))
		case 1:
			r := ResolutionFor(s, b, addrs("93.184.217.9"))
			r.Port++
			out[b.Name] = r
		}
	}
	return out
}

func (w *editWorld) inventory() Inventory {
	inv := Inventory{Resolved: map[string]map[string]Resolution{}}
	// Map order: a different list order every step, which Compute must
	// not care about either.
	for _, c := range w.contexts {
		inv.Contexts = append(inv.Contexts, c)
	}
	for _, s := range w.servers {
		inv.Servers = append(inv.Servers, s)
	}
	maps.Copy(inv.Resolved, w.resolved)
	return inv
}

// edit applies one random edit to w and to inc, and says what it was.
func (w *editWorld) edit(inc *Incremental) string {
	switch w.rnd.IntN(8) {
	case 0, 1:
		c := w.randomContext()
		w.contexts[c.Name] = c
		inc.SetContext(c)
		return fmt.Sprintf("set Context %s (contextId %q, servers %v)", c.Name, c.Spec.ContextID, c.Spec.McpServers)
	case 2:
		name := w.pick(editContextNames)
		delete(w.contexts, name)
		inc.DeleteContext(name)
		return "delete Context " + name
	case 3, 4, 5:
		s := w.randomServer()
		w.servers[s.Name], w.resolved[s.Name] = s, w.randomAnswers(s)
		inc.SetServer(s, w.resolved[s.Name])
		return fmt.Sprintf("set McpServer %s (bindings %d, recipes %v)", s.Name, len(s.Spec.EgressBindings), s.Annotations)
	case 6:
		name := w.pick(editServerNames)
		delete(w.servers, name)
		delete(w.resolved, name)
		inc.DeleteServer(name)
		return "delete McpServer " + name
	default:
		name := w.pick(editServerNames)
		s, ok := w.servers[name]
		if !ok {
			return "no DNS change (no McpServer " + name + ")"
		}
		w.resolved[name] = w.randomAnswers(s)
		inc.SetServer(s, w.resolved[name])
		return "new DNS answers for McpServer " + name
	}
}

// winners maps each planned name to its policy and server.
func winners(p *Plan) map[Key]struct {
	policy *networkingv1.NetworkPolicy
	server string
} {
	out := map[Key]struct {
		policy *networkingv1.NetworkPolicy
		server string
	}{}
	for i, pol := range p.Policies {
		out[KeyOf(pol)] = struct {
			policy *networkingv1.NetworkPolicy
			server string
		}{pol, p.Servers[i]}
	}
	return out
}

// requireSamePlan fails unless got and want plan the same policies for the
// same servers, with the same rejections and conflicts.
func requireSamePlan(t *testing.T, want, got *Plan, step string) {
	t.Helper()
	require.Equal(t, keys(want.Policies), keys(got.Policies), "planned names after %s", step)
	require.Equal(t, want.Servers, got.Servers, "servers after %s", step)
	for i := range want.Policies {
		require.True(t, samePolicy(want.Policies[i], got.Policies[i]),
			"%s/%s after %s:\nwant %v\n got %v", want.Policies[i].Namespace, want.Policies[i].Name, step, want.Policies[i], got.Policies[i])
	}
	byAll := func(a, b Rejection) int {
		return cmp.Or(cmp.Compare(a.Server, b.Server), cmp.Compare(a.Binding, b.Binding), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Kind, b.Kind))
	}
	require.Equal(t, slices.SortedFunc(slices.Values(want.Rejections), byAll), slices.SortedFunc(slices.Values(got.Rejections), byAll),
		"rejections after %s", step)
	require.Equal(t, want.Conflicts, got.Conflicts, "contextId conflicts after %s", step)
}

// TestIncrementalPlansWhatComputePlans is the equivalence property: after
// every step of random Context, McpServer and DNS edits, the incremental
// plan is the plan Compute makes of the same inventory, and every name
// whose policy or server changed is among the names the step touched.
func TestIncrementalPlansWhatComputePlans(t *testing.T) {
	opts := defaultOptions(t)
	collided := 0
	for seed := range uint64(40) {
		w := &editWorld{rnd: rand.New(rand.NewPCG(seed, 1)), contexts: map[string]*clerumv1alpha1.Context{},
			servers: map[string]*clerumv1alpha1.McpServer{}, resolved: map[string]map[string]Resolution{}}
		for range 6 {
			s := w.randomServer()
			w.servers[s.Name], w.resolved[s.Name] = s, w.randomAnswers(s)
			c := w.randomContext()
			w.contexts[c.Name] = c
		}
		inc := NewIncremental(w.inventory(), opts)
		before := Compute(w.inventory(), opts)
		requireSamePlan(t, before, inc.Plan(), fmt.Sprintf("seed %d: the start", seed))
		requireSameCounts(t, before, inc, fmt.Sprintf("seed %d: the start", seed))
		// Every policy ever planned: once unplanned, the judges must agree
		// on it.
		ever := map[Key]*networkingv1.NetworkPolicy{}
		for step := range 150 {
			what := fmt.Sprintf("seed %d step %d: %s", seed, step, w.edit(inc))
			want := Compute(w.inventory(), opts)
			requireSamePlan(t, want, inc.Plan(), what)
			requireSameCounts(t, want, inc, what)
			for _, p := range want.Policies {
				ever[KeyOf(p)] = p
			}
			requireSameJudgement(t, w, inc, ever, step%5 == 0, what)

			touched := inc.Touched()
			old, now := winners(before), winners(want)
			for k := range mergeKeys(old, now) {
				o, n := old[k], now[k]
				if o.server != n.server || !samePolicy(o.policy, n.policy) {
					require.True(t, touched.Has(k), "%s/%s changed after %s but was not touched", k.Namespace, k.Name, what)
				}
			}
			if slices.ContainsFunc(want.Rejections, func(r Rejection) bool { return strings.Contains(r.Reason, "is already planned for") }) {
				collided++
			}
			before = want
		}
	}
	// The world is built to make owners collide; a sequence that never
	// did would not prove the collision rule.
	t.Logf("%d steps of %d planned one name for two owners", collided, 40*150)
	assert.Greater(t, collided, 100, "steps whose plan had two owners' policies under one name")
}

// requireSameCounts fails unless inc counts, by policy type, the policies
// of want (the controller's gauge of desired policies).
func requireSameCounts(t *testing.T, want *Plan, inc *Incremental, step string) {
	t.Helper()
	counts := map[string]int{}
	for _, p := range want.Policies {
		counts[p.Labels[names.LabelPolicyType]]++
	}
	got := inc.PolicyCounts()
	maps.DeleteFunc(got, func(_ string, n int) bool { return n == 0 })
	require.Equal(t, counts, got, "policies by type after %s", step)
	require.Equal(t, len(want.Policies), inc.Size(), "policies after %s", step)
}

// requireSameJudgement fails unless the Judge of inc and the Judge
// NewJudge makes of the same inventory dispose of every policy alike, under
// random observed deletions, labelled and, when unlabelled is set, as an
// older HCC wrote them (read from their names: costly, so not every step).
func requireSameJudgement(t *testing.T, w *editWorld, inc *Incremental, policies map[Key]*networkingv1.NetworkPolicy, unlabelled bool, step string) {
	t.Helper()
	observed := Observed{DeletedServers: map[string]bool{}, RetiredContextIDs: map[string]bool{}}
	for range w.rnd.IntN(3) {
		observed.DeletedServers[w.pick(editServerNames)] = true
		observed.RetiredContextIDs[w.pick(editContextIDs)] = true
	}
	full, partial := NewJudge(w.inventory(), inc.opts, observed), inc.Judge(observed)
	for k, p := range policies {
		typ := p.Labels[names.LabelPolicyType]
		variants := []*networkingv1.NetworkPolicy{p}
		if unlabelled {
			q := p.DeepCopy()
			delete(q.Labels, names.LabelContext)
			delete(q.Labels, names.LabelMcpServer)
			variants = append(variants, q)
		}
		for _, q := range variants {
			d1, s1 := full.Dispose(q, typ)
			d2, s2 := partial.Dispose(q, typ)
			require.Equal(t, d1, d2, "%s/%s (owner labels %v) after %s", k.Namespace, k.Name, q.Labels, step)
			require.Equal(t, s1, s2, "the server of %s/%s after %s", k.Namespace, k.Name, step)
		}
	}
}

// samePolicy reports whether a and b are the same policy, comparing their
// protobuf encodings (deterministic: map keys sorted), which is many times
// faster than reflection over thousands of comparisons a run.
func samePolicy(a, b *networkingv1.NetworkPolicy) bool {
	if a == nil || b == nil {
		return a == b
	}
	ab, errA := a.Marshal()
	bb, errB := b.Marshal()
	if errA != nil || errB != nil {
		return apiequality.Semantic.DeepEqual(a, b)
	}
	return bytes.Equal(ab, bb)
}

func mergeKeys[V any](a, b map[Key]V) map[Key]bool {
	out := map[Key]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// TestIncrementalTouchesOnlyTheEditedContext: replanning one Context of a
// large fleet touches that Context's allows and nothing else.
func TestIncrementalTouchesOnlyTheEditedContext(t *testing.T) {
	inv := largeInventory(50, 4, 20)
	inc := NewIncremental(inv, defaultOptions(t))
	changed := inv.Contexts[7].DeepCopy()
	dropped := changed.Spec.McpServers[0]
	changed.Spec.McpServers = changed.Spec.McpServers[1:]
	changed.CreationTimestamp = metav1.NewTime(changed.CreationTimestamp.Add(time.Second))
	inc.SetContext(changed)
	touched := inc.Touched()
	id := changed.Spec.ContextID
	for k := range touched {
		p, _, ok := inc.Winner(k)
		if ok {
			assert.Equal(t, id, p.Labels[names.LabelContext], "touched %s/%s", k.Namespace, k.Name)
		}
	}
	assert.Len(t, touched, 3*len(inv.Contexts[7].Spec.McpServers), "the Context's allows, old and new")
	_, _, planned := inc.Winner(Key{"mcp-server", names.ContextIngressPolicy(id, dropped)})
	assert.False(t, planned, "the dropped server's allow")
}
