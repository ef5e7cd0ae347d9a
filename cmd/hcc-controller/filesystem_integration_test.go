//go:build integration

package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	gfsresources "github.com/clerum/hcc/pkg/controllers/globalfs/resources"
	"github.com/clerum/hcc/pkg/controllers/kit"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
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
	waitUntil := poller(t, 60*time.Second)
	createFileSystemConfig(t, kube, "postgres://gfs@control-postgres:5432/gfs")
	_, err := hcc.ClerumV1alpha1().SharedFileSystems("mcp-host").Create(ctx, &clerumv1alpha1.SharedFileSystem{
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

// TestFileSystemsTrustWhatHCCWrote runs the controller, under the shipped
// RBAC, against objects forged with HCC's labels: a seed Job that says it
// completed, a data claim that clones another claim and one that names a
// volume. None is believed nor taken over; a claim HCC created is marked,
// and the volume the binder then sets on it, static or not, is accepted.
// Then two GlobalFileSystems name one drive: only
// the older runs gfsc, and the younger takes the drive over when the
// older is deleted.
func TestFileSystemsTrustWhatHCCWrote(t *testing.T) {
	c := startCluster(t)
	kube := c.kube
	hcc := clientset.NewForConfigOrDie(c.cp.Config())
	ctx := context.Background()
	waitUntil := poller(t, 60*time.Second)
	createFileSystemConfig(t, kube, "postgres://gfs:hunter2@control-postgres:5432/gfs")

	managed := func(label, owner string) map[string]string {
		return map[string]string{names.LabelManagedBy: names.ManagedByValue, label: names.Label(owner)}
	}
	// A seed Job with HCC's labels, complete, created before its
	// GlobalFileSystem.
	forgedJob, err := kube.BatchV1().Jobs("gfs").Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "gfsc-main-seed", Labels: managed(names.LabelGlobalFileSystem, "main"),
			Annotations: map[string]string{gfsresources.AnnotationDrive: "main", mark.Annotation: "v1:forged"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "noop", Image: "busybox:1.36", Args: []string{"true"}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	now := metav1.Now()
	forgedJob.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	_, err = kube.BatchV1().Jobs("gfs").UpdateStatus(ctx, forgedJob, metav1.UpdateOptions{})
	require.NoError(t, err)
	// A data claim with HCC's labels that clones another claim.
	forgedClaim, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "wfc-docs-data", Labels: managed(names.LabelSharedFileSystem, "docs")},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			DataSource:  &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "alice-workspace"},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// A data claim with HCC's labels bound, at its creation, to a volume
	// of its creator's choice.
	_, err = kube.CoreV1().PersistentVolumeClaims("mcp-host").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "wfc-shelf-data", Labels: managed(names.LabelSharedFileSystem, "shelf")},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			VolumeName:  "another-pv",
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	for _, name := range []string{"docs", "shelf", "tidy"} {
		_, err = hcc.ClerumV1alpha1().SharedFileSystems("mcp-host").Create(ctx, &clerumv1alpha1.SharedFileSystem{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clerumv1alpha1.SharedFileSystemSpec{HostRefs: []string{"h1"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	main, err := hcc.ClerumV1alpha1().GlobalFileSystems("gfs").Create(ctx, &clerumv1alpha1.GlobalFileSystem{
		ObjectMeta: metav1.ObjectMeta{Name: "main"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// One second later, so the creation timestamps order them.
	time.Sleep(1100 * time.Millisecond)
	_, err = hcc.ClerumV1alpha1().GlobalFileSystems("gfs").Create(ctx, &clerumv1alpha1.GlobalFileSystem{
		ObjectMeta: metav1.ObjectMeta{Name: "also-main"}, Spec: clerumv1alpha1.GlobalFileSystemSpec{DriveName: "main"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	startController(t, c, map[string]string{"HCC_LEADER_ELECT": "false"})

	seedKey := mark.NewKey("integration-secret", mark.PurposeSeedJob)
	waitUntil("the forged seed Job is replaced by a Job HCC created and marked", func() bool {
		j, err := kube.BatchV1().Jobs("gfs").Get(ctx, "gfsc-main-seed", metav1.GetOptions{})
		return err == nil && j.UID != forgedJob.UID && gfsresources.SeedJobMarked(seedKey, main, j)
	})
	g, err := hcc.ClerumV1alpha1().GlobalFileSystems("gfs").Get(ctx, "main", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, g.Status.RootSeeded, "the forged Job's completion was never believed")
	d, err := kube.AppsV1().Deployments("gfs").Get(ctx, "gfsc-main", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []corev1.EnvVar{{Name: gfsresources.EnvPostgresHost, Value: "control-postgres"}, {Name: gfsresources.EnvPostgresPort, Value: "5432"}},
		d.Spec.Template.Spec.InitContainers[0].Env, "the init container gets the host and port, not the password")

	waitUntil("the forged claim is refused and no WFC mounts it", func() bool {
		s, err := hcc.ClerumV1alpha1().SharedFileSystems("mcp-host").Get(ctx, "docs", metav1.GetOptions{})
		if err != nil {
			return false
		}
		vb := meta.FindStatusCondition(s.Status.Conditions, clerumv1alpha1.ConditionVolumeBound)
		return vb != nil && vb.Reason == "NotOwned"
	})
	_, err = kube.AppsV1().Deployments("mcp-host").Get(ctx, "wfc-docs", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no WFC Deployment on a claim HCC did not set: %v", err)
	claim, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, "wfc-docs-data", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, claim.OwnerReferences, "not taken over")
	assert.Equal(t, forgedClaim.Spec.DataSource, claim.Spec.DataSource)

	volumeBound := func(name string) *metav1.Condition {
		s, err := hcc.ClerumV1alpha1().SharedFileSystems("mcp-host").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return meta.FindStatusCondition(s.Status.Conditions, clerumv1alpha1.ConditionVolumeBound)
	}
	waitUntil("the claim naming a volume HCC did not set is refused", func() bool {
		vb := volumeBound("shelf")
		return vb != nil && vb.Reason == "NotOwned"
	})
	_, err = kube.AppsV1().Deployments("mcp-host").Get(ctx, "wfc-shelf", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no WFC Deployment on a volume HCC did not set: %v", err)

	// HCC's own claim is marked; bound afterwards to a static volume (as
	// the volume binder does: no controller-manager runs here), it stays
	// HCC's.
	claimMarks := kit.NewMarker(mark.NewKey("integration-secret", mark.PurposeClaim))
	tidy, err := hcc.ClerumV1alpha1().SharedFileSystems("mcp-host").Get(ctx, "tidy", metav1.GetOptions{})
	require.NoError(t, err)
	waitUntil("the claim HCC created is marked", func() bool {
		c, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, "wfc-tidy-data", metav1.GetOptions{})
		return err == nil && claimMarks.Verify(kit.Owner{Object: tidy}, c)
	})
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := kube.CoreV1().PersistentVolumeClaims("mcp-host").Get(ctx, "wfc-tidy-data", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Spec.VolumeName = "local-pv-7"
		if c, err = kube.CoreV1().PersistentVolumeClaims("mcp-host").Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			return err
		}
		c.Status.Phase = corev1.ClaimBound
		_, err = kube.CoreV1().PersistentVolumeClaims("mcp-host").UpdateStatus(ctx, c, metav1.UpdateOptions{})
		return err
	}))
	waitUntil("the claim HCC created, bound to a static volume, is HCC's", func() bool {
		vb := volumeBound("tidy")
		return vb != nil && vb.Status == metav1.ConditionTrue && vb.Reason == reasons.ClaimBound
	})
	_, err = kube.AppsV1().Deployments("mcp-host").Get(ctx, "wfc-tidy", metav1.GetOptions{})
	assert.NoError(t, err, "its WFC runs")

	waitUntil("the younger GlobalFileSystem on the same drive gets DriveConflict and no gfsc", func() bool {
		a, err := hcc.ClerumV1alpha1().GlobalFileSystems("gfs").Get(ctx, "also-main", metav1.GetOptions{})
		if err != nil {
			return false
		}
		r := meta.FindStatusCondition(a.Status.Conditions, clerumv1alpha1.ConditionReady)
		return r != nil && r.Status == metav1.ConditionFalse && r.Reason == gfsresources.ReasonDriveConflict
	})
	_, err = kube.AppsV1().Deployments("gfs").Get(ctx, "gfsc-also-main", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "one writer per drive: %v", err)

	require.NoError(t, hcc.ClerumV1alpha1().GlobalFileSystems("gfs").Delete(ctx, "main", metav1.DeleteOptions{}))
	waitUntil("the next GlobalFileSystem takes the drive over once the holder and its gfsc are gone", func() bool {
		_, errOld := kube.AppsV1().Deployments("gfs").Get(ctx, "gfsc-main", metav1.GetOptions{})
		_, errNew := kube.AppsV1().Deployments("gfs").Get(ctx, "gfsc-also-main", metav1.GetOptions{})
		return apierrors.IsNotFound(errOld) && errNew == nil
	})
}

// createFileSystemConfig creates what the file-system reconcilers read
// before they deploy: the two JWT ConfigMaps, holding one fresh key, and
// the Secret of gfsc's connection string.
func createFileSystemConfig(t *testing.T, kube kubernetes.Interface, connectionString string) {
	t.Helper()
	ctx := context.Background()
	key := testenv.RSAPublicKeyPEM(t)
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "mcp-host", Name: "mcp-host-config"}, Data: map[string]string{"CLERUM_AUTH_JWT_PUBLIC_KEY": key}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "gfs", Name: "gfs-config"}, Data: map[string]string{"jwt-public-key": key}},
	} {
		_, err := kube.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := kube.CoreV1().Secrets("gfs").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gfs-controller-db"},
		StringData: map[string]string{"connection-string": connectionString}}, metav1.CreateOptions{})
	require.NoError(t, err)
}
