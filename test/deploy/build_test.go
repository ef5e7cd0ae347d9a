package deploy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The trees under deploy/ that are built and applied as they are.
const (
	// productionTree is `kubectl apply -k deploy/`: base, without the CRDs.
	productionTree = "deploy"
	// baseTree is HCC's workloads alone.
	baseTree = "deploy/base"
	// minikubeTree is `kubectl apply -k deploy/overlays/minikube`.
	minikubeTree = "deploy/overlays/minikube"
	// monitoringTree is `kubectl apply -k deploy/monitoring`, on a cluster
	// with the Prometheus Operator (docs/monitoring.md).
	monitoringTree = "deploy/monitoring"
)

// repoRoot is the module root: go test runs in test/deploy.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "no go.mod at %s", root)
	return root
}

// build runs kustomize on dir (relative to the repository root) as
// `kubectl apply -k` does: default options, so files outside a
// kustomization's directory are refused (LoadRestrictionsRootOnly).
func build(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	return buildIn(t, filesys.MakeFsOnDisk(), filepath.Join(repoRoot(t), dir))
}

func buildIn(t *testing.T, fs filesys.FileSystem, dir string) []*unstructured.Unstructured {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	require.NoError(t, err, "kustomize build %s", dir)
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		// Through JSON, so that numbers are int64 and float64 as in every
		// object client-go decodes.
		raw, err := r.MarshalJSON()
		require.NoError(t, err)
		obj := &unstructured.Unstructured{}
		require.NoError(t, obj.UnmarshalJSON(raw))
		objs = append(objs, obj)
	}
	require.NotEmpty(t, objs, "%s builds nothing", dir)
	return objs
}

// ofKind returns the objects of kind, in build order.
func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// find returns the object of kind named name, failing the test when there
// is none or more than one.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range ofKind(objs, kind) {
		if o.GetName() == name {
			found = append(found, o)
		}
	}
	require.Len(t, found, 1, "%s %s", kind, name)
	return found[0]
}

// typed converts o into out (a typed API object), refusing unknown fields
// so that a misspelt field in a manifest fails here rather than being
// dropped by the API server.
func typed(t *testing.T, o *unstructured.Unstructured, out any) {
	t.Helper()
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true),
		"%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
}

// podSpecs returns the pod template of every Deployment, by Deployment name.
func podSpecs(t *testing.T, objs []*unstructured.Unstructured) map[string]corev1.PodSpec {
	t.Helper()
	out := map[string]corev1.PodSpec{}
	for _, o := range ofKind(objs, "Deployment") {
		var d struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d))
		out[o.GetName()] = d.Spec.Template.Spec
	}
	return out
}
