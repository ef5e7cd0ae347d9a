package netpol

import (
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// The benchmark fleet: 1,000 Contexts, each granting 10 of 100 shared
// servers (10,000 Context/server pairs, 30,000 L2 policies), every server
// with a public-web and a CIDR binding, every tenth with a hostname binding
// and a two-port recipe binding.
const (
	benchContexts          = 1000
	benchServersPerContext = 10
	benchServers           = 100
)

// memoryBudget is the ceiling for one planning pass.
const memoryBudget = 300 << 20

func BenchmarkCompute1000x10(b *testing.B) {
	inv := largeInventory(benchContexts, benchServersPerContext, benchServers)
	opts := defaultOptions(b)

	allocated, retained := measureCompute(inv, opts)

	b.ReportAllocs()
	var plan *Plan
	for b.Loop() {
		plan = Compute(inv, opts)
	}
	b.ReportMetric(float64(len(plan.Policies)), "policies/op")
	// Reported after the loop: b.Loop resets the metrics on entry.
	b.ReportMetric(float64(allocated)/(1<<20), "alloc-MiB/plan")
	b.ReportMetric(float64(retained)/(1<<20), "retained-MiB/plan")
}

// BenchmarkFloor1000x10 is the least any planner must do for the same fleet:
// build as many NetworkPolicy objects of the same shapes (deep copies of the
// plan) and compare each, as the applier will, with its live counterpart.
func BenchmarkFloor1000x10(b *testing.B) {
	want := Compute(largeInventory(benchContexts, benchServersPerContext, benchServers), defaultOptions(b)).Policies
	live := make([]*networkingv1.NetworkPolicy, len(want))
	for i, p := range want {
		live[i] = p.DeepCopy()
	}

	b.ReportAllocs()
	for b.Loop() {
		for i, p := range want {
			if !apiequality.Semantic.DeepEqual(p.DeepCopy(), live[i]) {
				b.Fatalf("%s/%s differs from its copy", p.Namespace, p.Name)
			}
		}
	}
	b.ReportMetric(float64(len(want)), "policies/op")
}

// measureCompute returns the bytes one Compute allocates, which bounds the
// heap growth it causes, and the bytes its plan keeps live.
func measureCompute(inv Inventory, opts Options) (allocated, retained uint64) {
	var before, after, kept runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	plan := Compute(inv, opts)
	runtime.ReadMemStats(&after)
	runtime.GC()
	runtime.ReadMemStats(&kept)
	runtime.KeepAlive(plan)
	return after.TotalAlloc - before.TotalAlloc, kept.HeapAlloc - before.HeapAlloc
}

func TestComputeStaysWithinTheMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("plans the full benchmark fleet")
	}
	inv := largeInventory(benchContexts, benchServersPerContext, benchServers)
	opts := defaultOptions(t)
	plan := Compute(inv, opts)
	assert.Len(t, contextPolicies(plan.Policies), 3*benchContexts*benchServersPerContext)
	assert.Empty(t, plan.Rejections)

	allocated, retained := measureCompute(inv, opts)
	t.Logf("one Compute of %d policies allocates %.1f MiB and retains %.1f MiB",
		len(plan.Policies), float64(allocated)/(1<<20), float64(retained)/(1<<20))
	assert.Less(t, allocated, uint64(memoryBudget))
}

// BenchmarkPlanOneContextChanged replans the benchmark fleet after one
// Context dropped a server and took it back: plain is Compute over the
// whole inventory, as every pass did; incremental is the Incremental
// planner's two edits. After the loop both must hold Compute's plan.
func BenchmarkPlanOneContextChanged(b *testing.B) {
	inv := largeInventory(benchContexts, benchServersPerContext, benchServers)
	opts := defaultOptions(b)
	original := inv.Contexts[benchContexts/2]
	changed := original.DeepCopy()
	changed.Spec.McpServers = changed.Spec.McpServers[1:]
	want := Compute(inv, opts)

	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		var plan *Plan
		for b.Loop() {
			inv.Contexts[benchContexts/2] = changed
			Compute(inv, opts)
			inv.Contexts[benchContexts/2] = original
			plan = Compute(inv, opts)
		}
		if len(plan.Policies) != len(want.Policies) {
			b.Fatalf("planned %d policies, want %d", len(plan.Policies), len(want.Policies))
		}
	})
	b.Run("incremental", func(b *testing.B) {
		inc := NewIncremental(inv, opts)
		b.ReportAllocs()
		touched := 0
		for b.Loop() {
			inc.SetContext(changed)
			inc.SetContext(original)
			touched = inc.Touched().Len()
		}
		if got := inc.Plan(); len(got.Policies) != len(want.Policies) || !slices.EqualFunc(got.Policies, want.Policies,
			func(a, b *networkingv1.NetworkPolicy) bool { return apiequality.Semantic.DeepEqual(a, b) }) {
			b.Fatalf("the incremental plan after the edits is not Compute's")
		}
		if touched != 3*benchServersPerContext {
			b.Fatalf("one Context's edits touched %d names, want its %d allows", touched, 3*benchServersPerContext)
		}
		b.ReportMetric(float64(touched), "touched/op")
	})
}

// The large fleet of the full plan benchmark: 10,000 Contexts each granting
// 10 of 1,000 shared servers, about 300,000 policies.
const (
	largeContexts = 10000
	largeServers  = 1000
	// largePlanBudget is the ceiling for the memory a full pass's
	// planning holds at 10,000 Contexts × 10 servers: the planner it keeps
	// for incremental passes, and its plan.
	largePlanBudget = 1536 << 20
)

// BenchmarkFullPlan10000x10 is what a full pass plans with at 10,000
// Contexts × 10 servers: an Incremental planner built from the whole
// inventory (which the pass keeps) and its sorted plan. It fails when the
// planner and plan retain more than largePlanBudget, or plan another set
// than Compute.
func BenchmarkFullPlan10000x10(b *testing.B) {
	inv := largeInventory(largeContexts, benchServersPerContext, largeServers)
	opts := defaultOptions(b)
	want := len(Compute(inv, opts).Policies)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	inc := NewIncremental(inv, opts)
	plan := inc.Plan()
	runtime.GC()
	runtime.ReadMemStats(&after)
	retained := after.HeapAlloc - before.HeapAlloc
	if len(plan.Policies) != want {
		b.Fatalf("planned %d policies, Compute %d", len(plan.Policies), want)
	}
	if retained > largePlanBudget {
		b.Fatalf("the planner and its plan retain %.0f MiB, over the %d MiB budget", float64(retained)/(1<<20), largePlanBudget>>20)
	}
	runtime.KeepAlive(inc)
	inc, plan = nil, nil

	b.ReportAllocs()
	cpu := processCPU(b)
	for b.Loop() {
		inc = NewIncremental(inv, opts)
		plan = inc.Plan()
	}
	// The CPU the process spent (the collector's included) is the figure
	// a shared machine disturbs least; on an idle machine the planner runs
	// on one core and the collector beside it, so the time per op is about
	// this or less.
	b.ReportMetric((processCPU(b)-cpu).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(len(plan.Policies)), "policies/op")
	b.ReportMetric(float64(retained)/(1<<20), "retained-MiB")
}

// processCPU is the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
