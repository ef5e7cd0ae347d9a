//go:build integration

package controlplane_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

const namespace = "hcc-test"

func TestControlPlane(t *testing.T) {
	cp := controlplane.Start(t, controlplane.Options{CRDDir: "testdata/crds"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin := clientset(t, cp.Config())
	createNamespaceAndConfigMap(ctx, t, admin)

	t.Run("CRDs are served", func(t *testing.T) {
		widgets := schema.GroupVersionResource{Group: "test.hcc.clerum.github.com", Version: "v1", Resource: "widgets"}
		client, err := dynamic.NewForConfig(cp.Config())
		if err != nil {
			t.Fatal(err)
		}
		widget := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "test.hcc.clerum.github.com/v1",
			"kind":       "Widget",
			"metadata":   map[string]any{"name": "w"},
			"spec":       map[string]any{"size": int64(3)},
		}}
		if _, err := client.Resource(widgets).Namespace(namespace).Create(ctx, widget, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Widget: %v", err)
		}
	})

	t.Run("RBAC denies an unprivileged user", func(t *testing.T) {
		alice := clientset(t, cp.ImpersonatingConfig("alice"))
		_, err := alice.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("alice listing ConfigMaps: got %v, want Forbidden", err)
		}
	})

	t.Run("kubeconfig works", func(t *testing.T) {
		config, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := clientset(t, config).CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{}); err != nil {
			t.Fatalf("get namespace through kubeconfig: %v", err)
		}
	})

	t.Run("restarted kube-apiserver keeps data", func(t *testing.T) {
		if err := cp.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		down, cancelDown := context.WithTimeout(ctx, 5*time.Second)
		defer cancelDown()
		if _, err := admin.CoreV1().ConfigMaps(namespace).Get(down, "settings", metav1.GetOptions{}); err == nil {
			t.Fatal("kube-apiserver still answers after StopAPIServer")
		}
		if err := cp.StartAPIServer(); err != nil {
			t.Fatal(err)
		}
		// admin was built before the restart: same address, same trust.
		cm, err := admin.CoreV1().ConfigMaps(namespace).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get ConfigMap after restart: %v", err)
		}
		if got := cm.Data["greeting"]; got != "hello" {
			t.Fatalf("ConfigMap data after restart: greeting=%q, want hello", got)
		}
	})

	cp.Stop()
	cp.Stop() // idempotent; the cleanup calls it a third time
}

func clientset(t *testing.T, config *rest.Config) *kubernetes.Clientset {
	t.Helper()
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func createNamespaceAndConfigMap(ctx context.Context, t *testing.T, admin *kubernetes.Clientset) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: namespace},
		Data:       map[string]string{"greeting": "hello"},
	}
	if _, err := admin.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ConfigMap: %v", err)
	}
}
