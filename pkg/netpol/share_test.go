package netpol

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
)

// The policies of one plan share label maps, selectors, ports and rules
// (build.go, planCache). That is safe only because no two plans share
// anything and every consumer copies a policy before changing it. These
// tests hold the planner to the first and to the copies; the controller's
// TestIncrementalPassesKeepTheClusterAsAFullPassWould holds the applier,
// which keeps a planner across passes, to leaving its policies alone.

// scribble overwrites every string, number, map value, slice element and
// pointer target reachable from v, and adds a key to every map: the worst a
// consumer changing a policy in place, rather than a copy of it, could do.
func scribble(t *testing.T, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scribble(t, v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				scribble(t, f)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			scribble(t, v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		require.Equal(t, reflect.String, v.Type().Elem().Kind(), "scribble handles maps of strings, not %s", v.Type())
		for _, k := range v.MapKeys() {
			v.SetMapIndex(k, reflect.ValueOf("scribbled").Convert(v.Type().Elem()))
		}
		v.SetMapIndex(reflect.ValueOf("scribbled").Convert(v.Type().Key()), reflect.ValueOf("scribbled").Convert(v.Type().Elem()))
	case reflect.String:
		v.SetString("scribbled")
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	}
}

func scribbleAll(t *testing.T, policies []*networkingv1.NetworkPolicy) {
	for _, p := range policies {
		scribble(t, reflect.ValueOf(p))
	}
}

// requireSamePolicies fails unless got holds want's policies, labels and
// specs included.
func requireSamePolicies(t *testing.T, want, got []*networkingv1.NetworkPolicy, what string) {
	t.Helper()
	require.Equal(t, keys(want), keys(got), what)
	for i := range want {
		require.True(t, samePolicy(want[i], got[i]), "%s: %s/%s:\nwant %v\n got %v", what, want[i].Namespace, want[i].Name, want[i], got[i])
	}
}

// sharingFleet is a fleet whose Contexts share servers and whose servers
// share ports, so that its policies share every part a plan can share.
func sharingFleet() Inventory {
	inv := largeInventory(30, 4, 8)
	inv.Servers = append(inv.Servers, newServer("same-port", withPort(3001)))
	inv.Contexts = append(inv.Contexts, newContext("both", "both", 99, "server-001", "same-port"))
	return inv
}

// deepCopies returns a copy of each of policies: a plan nothing can have
// changed since.
func deepCopies(policies []*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy {
	out := make([]*networkingv1.NetworkPolicy, len(policies))
	for i, p := range policies {
		out[i] = p.DeepCopy()
	}
	return out
}

func TestNoTwoPlansShareAnything(t *testing.T) {
	inv, opts := sharingFleet(), defaultOptions(t)
	want := deepCopies(Compute(inv, opts).Policies)
	require.NotEmpty(t, contextPolicies(want))

	// Plans made one after the other, each of which a consumer then
	// changes in place.
	plans := map[string]func() []*networkingv1.NetworkPolicy{
		"Compute":     func() []*networkingv1.NetworkPolicy { return Compute(inv, opts).Policies },
		"Incremental": func() []*networkingv1.NetworkPolicy { return NewIncremental(inv, opts).Plan().Policies },
		"an edited Incremental": func() []*networkingv1.NetworkPolicy {
			inc := NewIncremental(inv, opts)
			c := inv.Contexts[3].DeepCopy()
			inc.SetContext(newContext(c.Name, c.Spec.ContextID, 0, "server-002"))
			inc.SetContext(inv.Contexts[3])
			return inc.Plan().Policies
		},
	}
	for scribbled, plan := range plans {
		for kept, other := range plans {
			before := other()
			scribbleAll(t, plan())
			requireSamePolicies(t, want, before, fmt.Sprintf("a plan of %s after a consumer changed one of %s", kept, scribbled))
			requireSamePolicies(t, want, other(), fmt.Sprintf("a plan of %s made after a consumer changed one of %s", kept, scribbled))
		}
	}
}

func TestAPolicysCopyIsItsOwn(t *testing.T) {
	inv, opts := sharingFleet(), defaultOptions(t)
	want := deepCopies(Compute(inv, opts).Policies)
	for what, plan := range map[string]*Plan{"Compute": Compute(inv, opts), "Incremental": NewIncremental(inv, opts).Plan()} {
		// What every consumer of a plan does before it changes a policy.
		for _, p := range plan.Policies {
			scribble(t, reflect.ValueOf(p.DeepCopy()))
		}
		requireSamePolicies(t, want, plan.Policies, what+"'s plan after its policies' copies were changed")
	}
}
