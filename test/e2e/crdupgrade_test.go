//go:build integration

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// The McpServer CRD is upgraded under a running controller: a new
// version of it, with an optional spec field this controller does not
// know, is applied while it runs (kube-apiserver swaps the resource's
// storage and closes its watches). The invariants: nothing crashes (the
// controller stays up and ready), the upgrade writes nothing (the audit
// log shows no write by the controller once its work queues have drained
// after it), and an McpServer that sets the new field is still reconciled
// (its status observes the new generation). The shipped CRD is restored
// at the end: the cluster is shared.
//
// Not asserted, an open finding: once srv-00 sets the new field (a new
// generation that changes nothing HCC plans), it stays Ready=False,
// EgressPending ("the egress policies of this generation are not in the
// cluster yet") with ExternalEgressReady True: nothing wakes the server
// after the netpol pass reports the generation applied, since no child
// changes.
func TestCRDUpgradeUnderARunningController(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	path := filepath.Join(repoRoot, "deploy", "crds", "clerum.io_mcpservers.yaml")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	crd := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(raw, &crd.Object))
	versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	require.NoError(t, err)
	for i := range versions {
		v := versions[i].(map[string]any)
		require.NoError(t, unstructured.SetNestedField(v, map[string]any{"type": "string", "description": "an optional field added by a newer CRD"},
			"schema", "openAPIV3Schema", "properties", "spec", "properties", "e2eNote"))
	}
	require.NoError(t, unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"))

	c := e.startController("solo", "HCC_LEADER_ELECT=false")
	defer e.cleanUp()
	e.fleet(3, 1)
	e.waitConverged(2 * time.Minute)
	e.eventually("the controller is ready", 30*time.Second, func() bool { return ready(c) })

	offset := auditOffset(t)
	adds := scrapeSum(t, c, "workqueue_adds_total")
	t.Cleanup(func() {
		assert.NoError(t, applyFile(context.Background(), path), "restoring the shipped McpServer CRD")
	})
	require.NoError(t, applyObject(ctx, mustYAML(t, crd.Object)))
	e.eventually("the upgraded CRD serves the new field", time.Minute, func() bool {
		patch := []byte(`{"spec":{"e2eNote":"probe"}}`)
		_, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Patch(ctx, "srv-00", types.MergePatchType, patch, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
	time.Sleep(3 * time.Second) // the storage swap closes the watches; the informers come back
	e.waitQueuesDrained(c)
	t.Logf("%v work-queue adds after the upgrade", scrapeSum(t, c, "workqueue_adds_total")-adds)
	var what []string
	for _, w := range auditEvents(t, offset, controllerUser) {
		what = append(what, w.Verb+" "+w.target()+" "+string(w.RequestObject))
	}
	assert.Empty(t, what, "the CRD upgrade writes nothing")
	assert.Equal(t, e.expectedSet(), actualSet(t))

	// An object that uses the new field is reconciled.
	_, err = hcc.ClerumV1alpha1().McpServers("mcp-server").Patch(ctx, "srv-00", types.MergePatchType, []byte(`{"spec":{"e2eNote":"hello"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	e.eventually("srv-00's new generation is observed", time.Minute, func() bool {
		s, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Get(ctx, "srv-00", metav1.GetOptions{})
		return err == nil && s.Status.ObservedGeneration == s.Generation && s.Generation > 1
	})
	select {
	case <-c.Done():
		t.Fatalf("the controller exited: %v", c.Err())
	default:
	}
	assert.True(t, ready(c), "the controller is still ready")
}

func mustYAML(t *testing.T, obj map[string]any) []byte {
	t.Helper()
	raw, err := yaml.Marshal(obj)
	require.NoError(t, err)
	return raw
}
