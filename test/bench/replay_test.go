//go:build integration

package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// plainPrefix prefixes the namespaces the plain client writes in.
const plainPrefix = "plain-"

// plainWorkers is the plain client's concurrency: enough that the client
// budget, not the round trip, bounds its rate.
const plainWorkers = 64

// managedByLabel marks every object HCC owns (docs/names.md).
const managedByLabel = "clerum.io/managed-by"

// ownedObject is one object the controller owns in the converged state.
type ownedObject struct {
	gvr schema.GroupVersionResource
	obj *unstructured.Unstructured
}

// ownedObjects reads from the cluster every object the controller owns
// (it carries managedByLabel), of every resource the controller wrote
// (events) but the fleet's own kinds (fleetWriteBounds): the objects the
// converged fleet must hold, whatever it took the controller to write them.
func ownedObjects(b *testing.B, cp *controlplane.ControlPlane, events []auditEvent) []ownedObject {
	b.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cp.Config())
	require.NoError(b, err)
	resources := map[schema.GroupVersionResource]bool{}
	for i := range events {
		ev := &events[i]
		if _, fleet := fleetWriteBounds[ev.ObjectRef.Resource]; ev.write() && !fleet {
			resources[gvrOf(ev)] = true
		}
	}
	var out []ownedObject
	for gvr := range resources {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: managedByLabel})
		require.NoError(b, err, "listing %s", gvr)
		for i := range list.Items {
			out = append(out, ownedObject{gvr: gvr, obj: &list.Items[i]})
		}
	}
	return out
}

type plainResult struct {
	rate float64 // creates per second, first to last
}

// createPlain creates, with a client-go client on budget, each of objects
// once, in a namespace of its own named for the original's: the writes a
// client would make that knew the final state and wrote nothing twice.
func createPlain(b *testing.B, cp *controlplane.ControlPlane, objects []ownedObject, budget clientBudget) plainResult {
	b.Helper()
	ctx := context.Background()
	namespaces := map[string]bool{}
	creates := make([]ownedObject, 0, len(objects))
	for _, o := range objects {
		require.NotEmpty(b, o.obj.GetNamespace(), "%s %s: the plain client creates namespaced objects only", o.gvr, o.obj.GetName())
		obj := cleanForCreate(o.obj)
		obj.SetNamespace(plainPrefix + o.obj.GetNamespace())
		namespaces[obj.GetNamespace()] = true
		creates = append(creates, ownedObject{gvr: o.gvr, obj: obj})
	}
	nsList := make([]string, 0, len(namespaces))
	for ns := range namespaces {
		nsList = append(nsList, ns)
	}
	require.NoError(b, controlplane.CreateNamespaces(ctx, cp.Config(), nsList))

	cfg := cp.Config()
	cfg.QPS, cfg.Burst = float32(budget.qps), budget.burst
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(b, err)
	start := time.Now()
	parallel(b, plainWorkers, len(creates), func(i int) error {
		c := creates[i]
		_, err := dyn.Resource(c.gvr).Namespace(c.obj.GetNamespace()).Create(ctx, c.obj, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("plain create %s %s/%s: %w", c.gvr.Resource, c.obj.GetNamespace(), c.obj.GetName(), err)
		}
		return nil
	})
	return plainResult{rate: float64(len(creates)) / time.Since(start).Seconds()}
}

func gvrOf(ev *auditEvent) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: ev.ObjectRef.APIGroup, Version: ev.ObjectRef.APIVersion, Resource: ev.ObjectRef.Resource}
}

// cleanForCreate is a copy of obj with what the server assigns removed,
// and its owner references: the owners are in the original namespace.
func cleanForCreate(obj *unstructured.Unstructured) *unstructured.Unstructured {
	u := obj.DeepCopy()
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers", "ownerReferences"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	if u.GetKind() == "Service" {
		// An allocated address would collide with the original's.
		unstructured.RemoveNestedField(u.Object, "spec", "clusterIP")
		unstructured.RemoveNestedField(u.Object, "spec", "clusterIPs")
	}
	return u
}
