package deploy

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// crdsDir is what `kubectl apply -f deploy/crds` applies: the CRDs, on
// their own, before `kubectl apply -k deploy/`.
const crdsDir = "deploy/crds"

// crdFiles reads every file of deploy/crds as kubectl -f does (every
// document of every file is an object to apply), failing the test for
// anything but one CustomResourceDefinition per file: a kustomization.yaml
// there makes `kubectl apply -f deploy/crds` fail, since no resource serves
// its kind.
func crdFiles(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join(repoRoot(t), crdsDir)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]*unstructured.Unstructured{}
	for _, e := range entries {
		require.True(t, e.Type().IsRegular(), "%s/%s is not a file", crdsDir, e.Name())
		require.True(t, strings.HasPrefix(e.Name(), "clerum.io_") && strings.HasSuffix(e.Name(), ".yaml"),
			"%s/%s: deploy/crds holds only the CRDs make generate writes", crdsDir, e.Name())
		f, err := os.Open(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		var docs []*unstructured.Unstructured
		decoder := yaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			obj := &unstructured.Unstructured{}
			err := decoder.Decode(&obj.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, e.Name())
			if len(obj.Object) > 0 {
				docs = append(docs, obj)
			}
		}
		require.NoError(t, f.Close())
		require.Len(t, docs, 1, "%s/%s holds one object", crdsDir, e.Name())
		crd := docs[0]
		assert.Equal(t, "apiextensions.k8s.io/v1", crd.GetAPIVersion(), e.Name())
		require.Equal(t, "CustomResourceDefinition", crd.GetKind(), e.Name())
		out[e.Name()] = crd
	}
	return out
}

// TestCRDsAreAppliedOnTheirOwn: deploy/crds holds the five generated CRDs
// and nothing else, so that `kubectl apply -f deploy/crds` applies exactly
// them; the apply itself is the integration test's.
func TestCRDsAreAppliedOnTheirOwn(t *testing.T) {
	files := crdFiles(t)
	require.Len(t, files, 5)
	for file, crd := range files {
		// clerum.io_hosts.yaml holds hosts.clerum.io.
		group, plural, _ := strings.Cut(strings.TrimSuffix(file, ".yaml"), "_")
		assert.Equal(t, plural+"."+group, crd.GetName(), file)
	}
	_, err := os.Stat(filepath.Join(repoRoot(t), crdsDir, "kustomization.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist, "kubectl apply -f deploy/crds would send the kustomization to the API server")
}

// TestNoBuildHoldsACRD: `kubectl delete -k` of any tree must not delete a
// CRD, and with it every Host, workspace and claim of the cluster.
func TestNoBuildHoldsACRD(t *testing.T) {
	for _, tree := range []string{productionTree, baseTree, minikubeTree} {
		var crds []string
		for _, o := range ofKind(build(t, tree), "CustomResourceDefinition") {
			crds = append(crds, o.GetName())
		}
		assert.Empty(t, crds, "%s: `kubectl delete -k %s` would delete these CRDs", tree, tree)
	}
}
