//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/clerum/hcc/internal/testing/controlplane"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

var (
	crdGVR       = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crdServerGVR = schema.GroupVersionResource{Group: "clerum.io", Version: "v1alpha1", Resource: "mcpservers"}
)

// crdProbeField is the optional field the upgraded CRD adds, under spec
// and under status. The controller's types do not know it.
const crdProbeField = "crdProbe"

// The McpServer CRD is upgraded under a running controller: the shipped
// CRD plus a new optional field under spec and under status, applied as an
// operator applies a new release's CRDs. The API server then serves
// McpServers from a new storage and closes every watch of the old one, the
// controller's included. Nothing crashes, and nothing is written that the
// change does not call for:
//
//   - After the CRD change, and after changes that leave every generation
//     as it was (an annotation on srv-00, the new status field set on
//     srv-01 by an admin), the controller writes nothing. That it saw them
//     is proved, not assumed: the old watches are closed first, and the
//     mcpserver workqueue counts the annotation's sync before the test
//     waits for every workqueue to drain.
//   - After the new spec field is set on srv-01 (an admin write: it bumps
//     the generation, and nothing the controller renders changes), the
//     only writes allowed are srv-01's status, each for the new generation,
//     none repeated, and no child: one per field manager that reports on
//     generations — hcc-mcpserver (observedGeneration, its conditions) and
//     the egress coordinator (ExternalEgressReady) — as every condition
//     carries the generation it was judged for. When hcc-mcpserver syncs
//     before the coordinator has judged the generation, the egress gate is
//     closed for a moment (by design: a new generation waits for its
//     egress policies), and it writes Ready False (EgressPending) and then
//     True, with the Events Blocked and Released: three status writes and
//     two Events (created, or patched as repeats), allowed too. Both new fields survive those writes: the
//     spec field (a status write cannot touch spec) and the admin's status
//     field (server-side apply removes only fields the manager owns).
//   - The controller process never exits and logs no panic or data race.
func TestCRDUpgradedUnderARunningController(t *testing.T) {
	started := time.Now()
	e := newEnv(t)
	ctl := e.startController("crd", "HCC_LEADER_ELECT=false")
	t.Cleanup(e.cleanUp) // runs while the controller still does (cleanups run last first)
	dyn, err := dynamic.NewForConfig(cluster.Config())
	require.NoError(t, err)
	ctx := context.Background()

	e.fleet(3, 1)
	e.waitConverged(3 * time.Minute)
	t.Logf("converged %s after the start", time.Since(started).Round(time.Millisecond))
	e.waitQueuesIdle(ctl)

	// The CRD as the cluster holds it, to restore at the end: the cluster
	// is shared by the whole package.
	live, err := dyn.Resource(crdGVR).Get(ctx, "mcpservers.clerum.io", metav1.GetOptions{})
	require.NoError(t, err)
	original := live.Object["spec"]
	t.Cleanup(func() {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := dyn.Resource(crdGVR).Get(ctx, "mcpservers.clerum.io", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Object["spec"] = original
			_, err = dyn.Resource(crdGVR).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		assert.NoError(t, err, "restoring the McpServer CRD")
	})

	// The upgrade. The API server serves the new schema from a new storage
	// and then closes every watch of the old one: a watch opened before
	// the change, like the controller's, ends.
	watch, err := dyn.Resource(crdServerGVR).Namespace("mcp-server").Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer watch.Stop()
	oldWatchClosed := make(chan struct{})
	go func() {
		defer close(oldWatchClosed)
		for range watch.ResultChan() {
		}
	}()
	offset := auditOffset(t)
	applied := time.Now()
	require.NoError(t, controlplane.ApplyObjects(ctx, cluster.Config(), crdUpgraded(t)))
	e.eventually("the upgraded CRD is established and its schema served", time.Minute, func() bool {
		return crdEstablished(t, dyn) && crdServed(t, dyn)
	})
	select {
	case <-oldWatchClosed:
	case <-time.After(time.Minute):
		t.Fatal("a watch of McpServers opened before the CRD change still runs a minute after it")
	}
	t.Logf("the upgraded CRD is served and the old watches closed %s after the apply", time.Since(applied).Round(time.Millisecond))

	// Changes that leave every generation as it was: the mcpserver
	// reconciler syncs srv-00 (an annotation is not status-only), and the
	// readers of McpServers see srv-01 change. That the annotation is
	// synced proves the controller's informer watches again: its old
	// watch is closed.
	before := scrape(t, ctl)
	crdPatch(t, dyn, "srv-00", "", `{"metadata":{"annotations":{"e2e.clerum.io/crd-upgrade":"touched"}}}`)
	crdPatch(t, dyn, "srv-01", "status", `{"status":{"`+crdProbeField+`":"set by an admin"}}`)
	e.eventually("the mcpserver reconciler synced srv-00", time.Minute, func() bool {
		return scrape(t, ctl)[`workqueue_adds_total{name="mcpserver"}`] > before[`workqueue_adds_total{name="mcpserver"}`]
	})
	e.waitQueuesIdle(ctl)
	crdAlive(t, ctl)
	crdNoWrites(t, offset, nil, "after the CRD change and changes of no generation, the controller writes nothing")

	// The new spec field: a new generation of srv-01. See the test's
	// comment for the writes allowed.
	offset = auditOffset(t)
	gen := crdPatch(t, dyn, "srv-01", "", `{"spec":{"`+crdProbeField+`":"set by an admin"}}`)
	last := &clerumv1alpha1.McpServer{}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		s, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Get(ctx, "srv-01", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = s
		return s.Generation == gen && s.Status.ObservedGeneration == gen && s.Status.Ready &&
			crdConditionAt(s.Status.Conditions, clerumv1alpha1.ConditionExternalEgressReady, gen), nil
	})
	require.NoError(t, err, "the controller did not judge srv-01's generation %d ready; its status: %+v", gen, last.Status)
	e.waitQueuesIdle(ctl)
	crdAlive(t, ctl)
	statusWrites := map[string]int{} // by field manager
	var events int
	crdNoWrites(t, offset, func(w controlplane.AuditEvent) bool {
		switch {
		case w.Verb == "patch" && w.Target() == "mcpservers/status mcp-server/srv-01" && w.Succeeded() && crdOnlyGeneration(w, gen):
			statusWrites[w.FieldManager()]++
		case (w.Verb == "create" || w.Verb == "patch") && w.ObjectRef.Resource == "events" && strings.HasPrefix(w.ObjectRef.Name, "srv-01."):
			// Blocked and Released; patched when the recorder counts a
			// repeat of one given during the first convergence.
			events++
		default:
			return false
		}
		return true
	}, "a new generation with nothing new to render: only srv-01's status, for the new generation, and its gate's Events")
	t.Logf("after the new generation: status writes by field manager %v, %d Events", statusWrites, events)
	plain := map[string]int{clerumv1alpha1.FieldManagerMcpServer: 1, clerumv1alpha1.FieldManagerNetPol: 1}
	gated := map[string]int{clerumv1alpha1.FieldManagerMcpServer: 2, clerumv1alpha1.FieldManagerNetPol: 1}
	assert.True(t, maps.Equal(statusWrites, plain) && events == 0 || maps.Equal(statusWrites, gated) && events == 2,
		"one status write by each of hcc-mcpserver and hcc-netpol (the egress coordinator), or, when the gate closed, two by hcc-mcpserver and two Events; got %v and %d", statusWrites, events)
	assert.Empty(t, duplicateWrites(controllerWrites(t, offset)), "no status written twice")
	s, err := dyn.Resource(crdServerGVR).Namespace("mcp-server").Get(ctx, "srv-01", metav1.GetOptions{})
	require.NoError(t, err)
	for _, path := range [][]string{{"spec", crdProbeField}, {"status", crdProbeField}} {
		v, _, _ := unstructured.NestedString(s.Object, path...)
		assert.Equal(t, "set by an admin", v, "%s survives the controller's writes", strings.Join(path, "."))
	}
	ok, what := converged(t)
	assert.True(t, ok, "still converged; not: %s", what)
	assert.Equal(t, e.expectedSet(), actualSet(t), "exactly the planned objects")
	t.Logf("test body took %s", time.Since(started).Round(time.Millisecond))
}

// crdUpgraded is the shipped McpServer CRD with crdProbeField added, as
// an optional string, under spec and under status.
func crdUpgraded(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "crds", "clerum.io_mcpservers.yaml"))
	require.NoError(t, err)
	crd := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(strings.TrimPrefix(string(raw), "---\n")), &crd.Object))
	versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	require.NoError(t, err)
	require.Len(t, versions, 1)
	version := versions[0].(map[string]any)
	for _, part := range []string{"spec", "status"} {
		path := []string{"schema", "openAPIV3Schema", "properties", part, "properties"}
		props, found, err := unstructured.NestedMap(version, path...)
		require.NoError(t, err)
		require.True(t, found, "the CRD has %s properties", part)
		require.NotContains(t, props, crdProbeField)
		props[crdProbeField] = map[string]any{"type": "string", "description": "A field added by a later release."}
		require.NoError(t, unstructured.SetNestedMap(version, props, path...))
	}
	require.NoError(t, unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"))
	return crd
}

// crdEstablished reports whether the McpServer CRD says Established.
func crdEstablished(t *testing.T, dyn dynamic.Interface) bool {
	t.Helper()
	crd, err := dyn.Resource(crdGVR).Get(context.Background(), "mcpservers.clerum.io", metav1.GetOptions{})
	require.NoError(t, err)
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		c := c.(map[string]any)
		if c["type"] == "Established" && c["status"] == "True" {
			return true
		}
	}
	return false
}

// crdServed reports whether the API server serves the upgraded schema: a
// dry-run of setting the new spec field keeps it (the old schema prunes
// it). A dry run writes nothing and wakes no informer.
func crdServed(t *testing.T, dyn dynamic.Interface) bool {
	t.Helper()
	s, err := dyn.Resource(crdServerGVR).Namespace("mcp-server").Patch(context.Background(), "srv-02", types.MergePatchType,
		[]byte(`{"spec":{"`+crdProbeField+`":"dry run"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	v, _, _ := unstructured.NestedString(s.Object, "spec", crdProbeField)
	return v == "dry run"
}

// crdPatch merge-patches the McpServer name (or its subresource) as the
// admin and returns its generation after the patch.
func crdPatch(t *testing.T, dyn dynamic.Interface, name, subresource, patch string) int64 {
	t.Helper()
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	s, err := dyn.Resource(crdServerGVR).Namespace("mcp-server").Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, sub...)
	require.NoError(t, err)
	return s.GetGeneration()
}

// crdAlive fails the test if the controller exited or logged a panic or
// a data race.
func crdAlive(t *testing.T, b *binary) {
	t.Helper()
	select {
	case <-b.Done():
		t.Fatalf("%s exited: %v\n%s", b.name, b.Err(), b.LogTail(40))
	default:
	}
	log, err := os.ReadFile(b.log)
	require.NoError(t, err)
	for _, bad := range []string{"panic:", "WARNING: DATA RACE"} {
		assert.NotContains(t, string(log), bad, "%s's log", b.name)
	}
}

// crdNoWrites fails the test for every write by the controller after
// offset that allowed (nil: none) does not accept, with its body.
func crdNoWrites(t *testing.T, offset int64, allowed func(controlplane.AuditEvent) bool, msg string) {
	t.Helper()
	var bad []string
	for _, w := range controllerWrites(t, offset) {
		if allowed == nil || !allowed(w) {
			bad = append(bad, describe(w))
		}
	}
	assert.Empty(t, bad, msg)
}

// crdConditionAt reports whether conds hold the condition typ judged for
// generation gen.
func crdConditionAt(conds []metav1.Condition, typ string, gen int64) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && c.ObservedGeneration == gen
}

// crdOnlyGeneration reports whether every generation w's body states
// (status.observedGeneration, each condition's observedGeneration) is gen,
// and it states one.
func crdOnlyGeneration(w controlplane.AuditEvent, gen int64) bool {
	var body struct {
		Status struct {
			ObservedGeneration *int64 `json:"observedGeneration"`
			Conditions         []struct {
				ObservedGeneration int64 `json:"observedGeneration"`
			} `json:"conditions"`
		} `json:"status"`
	}
	if json.Unmarshal(w.RequestObject, &body) != nil {
		return false
	}
	stated := body.Status.ObservedGeneration != nil
	if stated && *body.Status.ObservedGeneration != gen {
		return false
	}
	for _, c := range body.Status.Conditions {
		if c.ObservedGeneration != gen {
			return false
		}
		stated = true
	}
	return stated
}
