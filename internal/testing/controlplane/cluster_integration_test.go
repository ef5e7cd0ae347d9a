//go:build integration

package controlplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// The local cluster of make run: a Deployment's pod is scheduled on the
// fake node and becomes Running and Ready, the Deployment available; a
// claim binds a static volume; deleting the Deployment cascades to its
// ReplicaSet and pods.
func TestCluster(t *testing.T) {
	cp := controlplane.Start(t, controlplane.Options{CRDDir: "testdata/crds", Cluster: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(cp.Config())
	const ns = "cluster-test"
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web:1"}}},
			},
		},
	}
	_, err = kube.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	require.NoError(t, err)
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
		},
	}
	_, err = kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2 && d.Status.UpdatedReplicas == 2
	}, time.Minute, 200*time.Millisecond, "the Deployment becomes available")
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 2)
	for _, p := range pods.Items {
		require.Equal(t, controlplane.NodeName, p.Spec.NodeName)
		require.Equal(t, corev1.PodRunning, p.Status.Phase)
		require.NotEmpty(t, p.Status.PodIP)
	}
	require.Eventually(t, func() bool {
		c, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound && c.Spec.StorageClassName != nil && *c.Spec.StorageClassName == controlplane.StorageClass
	}, time.Minute, 200*time.Millisecond, "the claim binds a static volume of the default class")

	require.NoError(t, kube.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		rs, err1 := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		pods, err2 := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err1 == nil && err2 == nil && len(rs.Items) == 0 && len(pods.Items) == 0
	}, time.Minute, 200*time.Millisecond, "garbage collection cascades")

	require.NoError(t, kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 200*time.Millisecond, "the namespace controller finishes the delete")
}
