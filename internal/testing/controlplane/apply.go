package controlplane

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// applyFieldManager owns what ApplyFiles applies.
const applyFieldManager = "hcc-local-cluster"

// CreateNamespaces creates the named namespaces; existing ones are fine.
func CreateNamespaces(ctx context.Context, cfg *rest.Config, names []string) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, name := range names {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	return nil
}

// ApplyFiles applies, by server-side apply, every object of the YAML files
// in paths (files, or folders read recursively for .yaml and .yml).
func ApplyFiles(ctx context.Context, cfg *rest.Config, paths ...string) error {
	objects, err := readFiles(paths)
	if err != nil {
		return err
	}
	return ApplyObjects(ctx, cfg, objects...)
}

// ApplyObjects applies objects by server-side apply, in order.
func ApplyObjects(ctx context.Context, cfg *rest.Config, objects ...*unstructured.Unstructured) error {
	clientFor, err := dynamicClients(cfg)
	if err != nil {
		return err
	}
	for _, obj := range objects {
		client, err := clientFor(obj)
		if err != nil {
			return err
		}
		if _, err := client.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: applyFieldManager, Force: true}); err != nil {
			return fmt.Errorf("%s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}

// dynamicClients returns a function giving the dynamic client of an
// object's kind (namespaced where the kind is), found through discovery.
func dynamicClients(cfg *rest.Config) (func(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error), error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return func(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		if mapping.Scope.Name() == "namespace" {
			return dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace()), nil
		}
		return dyn.Resource(mapping.Resource), nil
	}, nil
}

// readFiles decodes the multi-document YAML of paths (files, or folders
// read recursively for .yaml and .yml), files in name order.
func readFiles(paths []string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, p := range paths {
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && slices.Contains([]string{".yaml", ".yml"}, filepath.Ext(path)) {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(files)
	var objects []*unstructured.Unstructured
	for _, file := range files {
		objs, err := readObjects(file)
		if err != nil {
			return nil, err
		}
		objects = append(objects, objs...)
	}
	return objects, nil
}

// DeleteFiles deletes every object of the YAML files in paths (as
// ApplyFiles reads them), last first; objects already gone are fine.
func DeleteFiles(ctx context.Context, cfg *rest.Config, paths ...string) error {
	objects, err := readFiles(paths)
	if err != nil {
		return err
	}
	clientFor, err := dynamicClients(cfg)
	if err != nil {
		return err
	}
	for _, obj := range slices.Backward(objects) {
		client, err := clientFor(obj)
		if err != nil {
			return err
		}
		if err := client.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}
