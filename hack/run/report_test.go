package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
	"github.com/clerum/hcc/pkg/names"
)

// outputMarker precedes, in the README and docs/make-run.md, the fenced
// block that shows what make run prints on stdout.
const outputMarker = "<!-- make-run-output -->"

// The documents that show make run's output, from this package's folder.
var outputDocs = []string{
	filepath.Join("..", "..", "README.md"),
	filepath.Join("..", "..", "docs", "make-run.md"),
}

// TestDocumentedOutputIsPrinted: the block the README and docs/make-run.md
// show under outputMarker is, line for line, what printReport and
// writeInventoryCommand print for a cluster holding the objects below: a
// few of those a real make run held, with their names and states, and
// that run's endpoints (make run on 2026-12-04).
// A changed line of the output, or of a document, fails until the other
// follows.
func TestDocumentedOutputIsPrinted(t *testing.T) {
	want := fixtureOutput(t)
	for _, doc := range outputDocs {
		blocks := markedBlocks(t, doc, outputMarker)
		require.Len(t, blocks, 1, "%s: one fenced block after %s", doc, outputMarker)
		assert.Equal(t, want, blocks[0], "%s shows what make run prints; change the document and hack/run together", doc)
	}
}

// fixtureOutput is what make run prints, after the wait, for the fixture
// cluster: the summary and table, then one inventory command. The leading
// empty line of the summary is left out, as a document's block starts at
// its first line.
func fixtureOutput(t *testing.T) string {
	t.Helper()
	w := &watcher{kube: kubefake.NewClientset(kubeFixture()...), hcc: hccfake.NewClientset(hccFixture()...)}
	var out bytes.Buffer
	require.NoError(t, w.printReport(context.Background(), &out, summary{
		kubeconfig:   "/tmp/hcc-controlplane-1415500318/kubeconfig",
		api:          "http://127.0.0.1:34177",
		desktopToken: "241b91c32dd5c3716ec4a854b2d9f98ec32dabb233f2697e3bb658770e5cace8",
		controller:   "http://127.0.0.1:44283",
		controlAPI:   "http://127.0.0.1:43141",
		logs:         "/tmp/hcc-run-2230904957",
	}))
	writeInventoryCommand(&out, inventoryCommand{
		host:    "mcp-host/research-1",
		servers: 3,
		status:  200,
		expires: time.Date(2026, 12, 4, 22, 24, 48, 0, time.UTC),
		token:   "eyJhbGciOiJSUzI1NiIsImtpZCI6…",
		apiURL:  "http://127.0.0.1:34177",
	})
	s, ok := strings.CutPrefix(out.String(), "\n")
	require.True(t, ok, "the summary starts with an empty line")
	return s
}

func hccFixture() []runtime.Object {
	ready := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: clerumv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: reason}}
	}
	server := func(name string) runtime.Object {
		return &clerumv1alpha1.McpServer{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "mcp-server"},
			Status:     clerumv1alpha1.McpServerStatus{Deployed: true, Ready: true, Conditions: ready("Available")},
		}
	}
	return []runtime.Object{
		server("fetch"), server("notes"), server("tracker"),
		&clerumv1alpha1.Host{
			ObjectMeta: metav1.ObjectMeta{Name: "research-1", Namespace: "mcp-host"},
			Status:     clerumv1alpha1.HostStatus{Conditions: ready("Available")},
		},
		&clerumv1alpha1.SharedFileSystem{
			ObjectMeta: metav1.ObjectMeta{Name: "team-docs", Namespace: "mcp-host"},
			Status:     clerumv1alpha1.SharedFileSystemStatus{Phase: clerumv1alpha1.FileSystemReady},
		},
		&clerumv1alpha1.GlobalFileSystem{
			ObjectMeta: metav1.ObjectMeta{Name: "main", Namespace: "gfs"},
			Status:     clerumv1alpha1.GlobalFileSystemStatus{Phase: clerumv1alpha1.FileSystemReady, RootSeeded: true},
		},
	}
}

func kubeFixture() []runtime.Object {
	meta := func(ns, name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{names.LabelManagedBy: names.ManagedByValue}}
	}
	deployment := func(ns, name string) runtime.Object {
		return &appsv1.Deployment{ObjectMeta: meta(ns, name), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
			Status: appsv1.DeploymentStatus{AvailableReplicas: 1}}
	}
	return []runtime.Object{
		deployment("mcp-server", "fetch"),
		&corev1.PersistentVolumeClaim{ObjectMeta: meta("mcp-host", "research-1-workspace"),
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
		&corev1.Secret{ObjectMeta: meta("mcp-host", "host-research-1-mcp-host-runtime-tokens")},
		&networkingv1.NetworkPolicy{ObjectMeta: meta("mcp-server", "ctx-research-fetch")},
		// Not HCC's: make run lists only what HCC created.
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gfs-config", Namespace: "gfs"}},
	}
}

// markedBlocks returns the content of each fenced block that follows a
// line holding marker (blank lines between them allowed), without the
// fence's indentation.
func markedBlocks(t *testing.T, path, marker string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var blocks []string
	var block strings.Builder
	armed, inside, indent := false, false, ""
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case inside && trimmed == "```":
			blocks = append(blocks, block.String())
			block.Reset()
			inside = false
		case inside:
			block.WriteString(strings.TrimPrefix(line, indent) + "\n")
		case trimmed == marker:
			armed = true
		case armed && strings.HasPrefix(trimmed, "```"):
			armed, inside = false, true
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
		case armed && trimmed != "":
			t.Fatalf("%s: %s is not followed by a fenced block", path, marker)
		}
	}
	require.NoError(t, sc.Err())
	require.False(t, inside, "%s: a fenced block is not closed", path)
	return blocks
}
