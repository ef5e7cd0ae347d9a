//go:build integration

package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
)

// TestFileSystemReconcilers runs the controller, under the shipped RBAC,
// against a real API server: a SharedFileSystem and a GlobalFileSystem
// with the ConfigMaps and Secret they read converge to their runtimes,
// and deleting them removes their children.
func TestFileSystemReconcilers(t *testing.T) {
	c := startCluster(t)
	kube := c.kube
	hcc := clientset.NewForConfigOrDie(c.cp.Config())
	ctx := context.Background()
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true,
			func(context.Context) (bool, error) { return cond(), nil }), what)
	}
	key := testenv.RSAPublicKeyPEM(t)
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "mcp-host-config"}, Data: map[string]string{"CLERUM_AUTH_JWT_PUBLIC_KEY": key}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "gfs", Name: "gfs-config"}, Data: map[string]string{"jwt-public-key": key}},
	} {
		_, err := kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := kube.CoreV1().Secrets("gfs").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gfs-controller-db"},
		StringData: map[string]string{"connection-string": "postgres://gfs@control-postgres:5432/gfs"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = hcc.ClerumV1alpha1().SharedFileSystems("mcp-host").Create(ctx, &clerumv1alpha1.SharedFileSystem{
		ObjectMeta: metav1.ObjectMeta{Name: "docs"}, Spec: clerumv1alpha1.SharedFileSystemSpec{HostRefs: []string{"h1"}, Directories: []string{"inbox"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = hcc.ClerumV1alpha1().GlobalFileSystems("gfs").Create(ctx, &clerumv1alpha1.GlobalFileSystem{
		ObjectMeta: metav1.ObjectMeta{Name: "main"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	startController(t, c, map[string]string{"HCC_LEADER_ELECT": "false"})

	type check func() error
	sfsChildren := []check{
		func() error {
			_, err := kube.AppsV1().Deployments("mcp-host").Get(ctx, "wfc-docs", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().Services("mcp-host").Get(ctx, "wfc-docs", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, "wfc-docs-data", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := kube.NetworkingV1().NetworkPolicies("mcp-host").Get(ctx, "wfc-docs-ingress", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := kube.NetworkingV1().NetworkPolicies("mcp-host").Get(ctx, "wfc-docs-egress", metav1.GetOptions{})
			return err
		},
	}
	gfsChildren := []check{
		func() error {
			_, err := kube.AppsV1().Deployments("gfs").Get(ctx, "gfsc-main", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().Services("gfs").Get(ctx, "gfsc-main", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := kube.NetworkingV1().NetworkPolicies("gfs").Get(ctx, "gfsc-main-egress", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := kube.BatchV1().Jobs("gfs").Get(ctx, "gfsc-main-seed", metav1.GetOptions{})
			return err
		},
	}
	all := func(checks []check, want func(error) bool) func() bool {
		return func() bool {
			for _, c := range checks {
				if !want(c()) {
					return false
				}
			}
			return true
		}
	}
	exists := func(err error) bool { return err == nil }
	waitUntil("the SharedFileSystem's runtime exists", all(sfsChildren, exists))
	waitUntil("the GlobalFileSystem's runtime exists", all(gfsChildren, exists))
	waitUntil("both report Initializing", func() bool {
		s, err1 := hcc.ClerumV1alpha1().SharedFileSystems("mcp-host").Get(ctx, "docs", metav1.GetOptions{})
		g, err2 := hcc.ClerumV1alpha1().GlobalFileSystems("gfs").Get(ctx, "main", metav1.GetOptions{})
		return err1 == nil && err2 == nil && s.Status.Phase == clerumv1alpha1.FileSystemInitializing &&
			g.Status.Phase == clerumv1alpha1.FileSystemInitializing
	})

	require.NoError(t, hcc.ClerumV1alpha1().SharedFileSystems("mcp-host").Delete(ctx, "docs", metav1.DeleteOptions{}))
	require.NoError(t, hcc.ClerumV1alpha1().GlobalFileSystems("gfs").Delete(ctx, "main", metav1.DeleteOptions{}))
	gone := func(err error) bool { return apierrors.IsNotFound(err) }
	// No controller-manager runs here: a claim held only by pvc-protection
	// with a deletion timestamp counts as gone.
	claimGone := func() error {
		pvc, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, "wfc-docs-data", metav1.GetOptions{})
		if err == nil && pvc.DeletionTimestamp != nil {
			return apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), pvc.Name)
		}
		return err
	}
	waitUntil("the SharedFileSystem's runtime is deleted", all(append(sfsChildren[:2:2], sfsChildren[3], sfsChildren[4], claimGone), gone))
	waitUntil("the GlobalFileSystem's runtime is deleted", all(gfsChildren, gone))
}
