//go:build integration

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// plainPrefix prefixes the namespaces the plain client writes in.
const plainPrefix = "plain-"

// plainWorkers is the plain client's concurrency: enough that the client
// budget, not the round trip, bounds its rate.
const plainWorkers = 64

type plainResult struct {
	rate       float64 // creates per second, first to last
	unreplayed int     // writes with no object of their kind to create
}

// replayCreate is one create of the plain client.
type replayCreate struct {
	gvr schema.GroupVersionResource
	obj *unstructured.Unstructured
}

// replayPlain creates, with a client-go client on budget, one object per
// controller write, in the controller's order: for a write whose body is
// a whole object (a create, an update, an apply) that object, else (a
// status write, a merge patch, a delete) an object of the same kind — the
// controller's own body of that kind, or one of templates (the fleet's
// kinds). Names repeated by the controller's updates get a suffix.
func replayPlain(b *testing.B, cp *controlplane.ControlPlane, writes []auditEvent, templates []runtime.Object, budget clientBudget) plainResult {
	b.Helper()
	ctx := context.Background()
	byGVR := map[schema.GroupVersionResource]*unstructured.Unstructured{}
	for _, t := range templates {
		u := toUnstructured(b, t)
		gvk := u.GroupVersionKind()
		byGVR[gvk.GroupVersion().WithResource(resourceOf(gvk.Kind))] = u
	}
	bodies := make([]*unstructured.Unstructured, len(writes))
	for i := range writes {
		if u := wholeObject(&writes[i]); u != nil {
			bodies[i] = u
			if _, ok := byGVR[gvrOf(&writes[i])]; !ok {
				byGVR[gvrOf(&writes[i])] = u
			}
		}
	}

	var res plainResult
	creates := make([]replayCreate, 0, len(writes))
	names := map[string]int{}
	namespaces := map[string]bool{}
	for i := range writes {
		ev := &writes[i]
		gvr := gvrOf(ev)
		obj := bodies[i]
		if obj == nil {
			if byGVR[gvr] == nil || ev.ObjectRef.Namespace == "" {
				res.unreplayed++
				continue
			}
			obj = byGVR[gvr]
		}
		obj = cleanForCreate(obj)
		ns := plainPrefix + ev.ObjectRef.Namespace
		obj.SetNamespace(ns)
		key := gvr.String() + " " + ns + " " + obj.GetName()
		if n := names[key]; n > 0 {
			obj.SetName(suffixed(obj.GetName(), n))
		}
		names[key]++
		namespaces[ns] = true
		creates = append(creates, replayCreate{gvr: gvr, obj: obj})
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
	res.rate = float64(len(creates)) / time.Since(start).Seconds()
	return res
}

func gvrOf(ev *auditEvent) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: ev.ObjectRef.APIGroup, Version: ev.ObjectRef.APIVersion, Resource: ev.ObjectRef.Resource}
}

// wholeObject is the write's body when it is a whole object of the
// written resource (not a subresource's).
func wholeObject(ev *auditEvent) *unstructured.Unstructured {
	if ev.ObjectRef.Subresource != "" || len(ev.RequestObject) == 0 || ev.Verb == "delete" {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(ev.RequestObject, &m) != nil {
		return nil
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" || u.GetKind() == "Status" {
		return nil
	}
	if ev.Verb == "patch" {
		// An apply or merge patch may set only metadata (labels, an owner
		// reference): not an object to create.
		content := 0
		for k := range m {
			if k != "apiVersion" && k != "kind" && k != "metadata" && k != "status" {
				content++
			}
		}
		if content == 0 {
			return nil
		}
	}
	return u
}

// cleanForCreate is a copy of obj with what the server assigns removed.
func cleanForCreate(obj *unstructured.Unstructured) *unstructured.Unstructured {
	u := obj.DeepCopy()
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers"} {
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

// suffixed is name with -rN, within the 63 characters of a label value.
func suffixed(name string, n int) string {
	s := fmt.Sprintf("-r%d", n)
	if len(name)+len(s) > 63 {
		name = name[:63-len(s)]
	}
	return name + s
}

// resourceOf is the plural resource of the fleet's kinds.
func resourceOf(kind string) string {
	switch kind {
	case "McpServer":
		return "mcpservers"
	case "Context":
		return "contexts"
	case "Host":
		return "hosts"
	}
	panic("resourceOf: unexpected kind " + kind)
}
