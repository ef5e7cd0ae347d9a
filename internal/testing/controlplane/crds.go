package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// crdReadyTimeout bounds the wait for one CRD to be established and
// served.
const crdReadyTimeout = 30 * time.Second

var crdGVR = schema.GroupVersionResource{
	Group:    "apiextensions.k8s.io",
	Version:  "v1",
	Resource: "customresourcedefinitions",
}

// loadCRDs reads the CRDs in dir, by default <repo root>/deploy/crds.
func loadCRDs(dir string) ([]*unstructured.Unstructured, error) {
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		dir = filepath.Join(root, "deploy", "crds")
	}
	return readCRDs(dir)
}

// readCRDs returns the CustomResourceDefinitions in the .yaml, .yml and
// .json files under dir, which may hold several documents each. Documents
// of other kinds (a kustomization.yaml, say) are skipped. A missing dir
// holds none.
func readCRDs(dir string) ([]*unstructured.Unstructured, error) {
	var crds []*unstructured.Unstructured
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(path)) {
			return err
		}
		objs, err := readObjects(path)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if obj.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, obj)
			}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return crds, err
}

func readObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var objs []*unstructured.Unstructured
	decoder := yaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := decoder.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) > 0 { // an empty document between two "---"
			objs = append(objs, obj)
		}
	}
}

// installCRDs creates the CRDs and waits until each is Established and
// its resources are listed by discovery: only then do clients (and
// controllers using RESTMappers) see them.
func installCRDs(ctx context.Context, config *rest.Config, crds []*unstructured.Unstructured) error {
	if len(crds) == 0 {
		return nil
	}
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		return err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		_, err := client.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		if err := waitCRDReady(ctx, client, disco, crd.GetName()); err != nil {
			return err
		}
	}
	return nil
}

func waitCRDReady(ctx context.Context, client dynamic.Interface, disco discovery.DiscoveryInterface, name string) error {
	var notReady error
	err := wait.PollUntilContextTimeout(ctx, readyPollInterval, crdReadyTimeout, true, func(ctx context.Context) (bool, error) {
		crd, err := client.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		notReady = crdNotReady(crd, disco)
		return notReady == nil, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not ready: %w (%v)", name, err, notReady)
	}
	return nil
}

// crdNotReady returns why crd is not usable yet, or nil when it is
// Established and every served version lists its plural in discovery.
func crdNotReady(crd *unstructured.Unstructured, disco discovery.DiscoveryInterface) error {
	if !crdEstablished(crd) {
		return errors.New("not Established")
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		version, _ := v.(map[string]any)
		if served, _ := version["served"].(bool); !served {
			continue
		}
		gv := group + "/" + fmt.Sprint(version["name"])
		resources, err := disco.ServerResourcesForGroupVersion(gv)
		if err != nil {
			return fmt.Errorf("discovery of %s: %w", gv, err)
		}
		if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == plural }) {
			return fmt.Errorf("%s not yet in discovery of %s", plural, gv)
		}
	}
	return nil
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		condition, _ := c.(map[string]any)
		if condition["type"] == "Established" && condition["status"] == "True" {
			return true
		}
	}
	return false
}
