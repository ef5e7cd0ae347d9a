package host

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/controllers/host/resources"
	"github.com/clerum/hcc/pkg/controllers/host/resources/resourcestest"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/mark"
	"github.com/clerum/hcc/pkg/names"
	"github.com/clerum/hcc/pkg/reasons"
)

var claimsGVR = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")

func hostOwner(h *clerumv1alpha1.Host) kit.Owner {
	return kit.Owner{Object: h, GVK: gvk, IdentityLabel: names.LabelHost}
}

// TestTheWorkspaceClaimIsMarked: HCC marks the workspace claim it creates,
// so that the volume the binder gives it — dynamic or static, whatever its
// name — is trusted, on the local cluster's static volumes as anywhere
// (docs/ownership.md, "Claims").
func TestTheWorkspaceClaimIsMarked(t *testing.T) {
	f := deployed(t)
	ctx := context.Background()
	claim, err := f.Kube.CoreV1().PersistentVolumeClaims(hostNS).Get(ctx, "h1-workspace", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, claim.UID)
	assert.True(t, kit.NewMarker(resourcestest.Options.ClaimMark).Verify(hostOwner(f.host("h1")), claim), "marked over its UID and the Host's")

	// The binder binds it to a static volume.
	claim.Spec.VolumeName = "local-pv-42"
	claim.Status.Phase = corev1.ClaimBound
	require.NoError(t, f.Kube.Tracker().Update(claimsGVR, claim, hostNS))
	// The Deployment went (scaled down, rolled): it is written again.
	require.NoError(t, f.Kube.Tracker().Delete(appsv1.SchemeGroupVersion.WithResource("deployments"), hostNS, "h1"))
	f.SyncCaches()
	f.mustSync("h1")
	assert.Equal(t, []string{"create deployments/h1"}, f.Writes(), "the Host starts on the bound claim; the claim is not written")
	assert.NotEqual(t, reasons.NotOwned, f.condition("h1", clerumv1alpha1.ConditionReady).Reason)
	assert.Zero(t, counter(t, f.Registry, "clerum_hcc_host_children_refused_total",
		map[string]string{"kind": "PersistentVolumeClaim", "cause": string(kit.CauseForeignVolume)}))
	for _, e := range f.Events() {
		assert.NotContains(t, e, "Warning", e)
	}
}

// TestAForgedWorkspaceClaimIsRefused: a claim pre-created under the
// workspace's name with HCC's labels and a volume of its creator's choice —
// with no mark, or a mark copied from another claim — is refused, and no
// pod of the Host is started on it.
func TestAForgedWorkspaceClaimIsRefused(t *testing.T) {
	h := resourcestest.NewHost("h1")
	for name, forge := range map[string]func(c *corev1.PersistentVolumeClaim){
		"unmarked": func(*corev1.PersistentVolumeClaim) {},
		"under the mark of another claim": func(c *corev1.PersistentVolumeClaim) {
			other := c.DeepCopy()
			other.UID = "uid-hccs-own-claim"
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, mark.Annotation, kit.NewMarker(resourcestest.Options.ClaimMark).Sign(hostOwner(h), other))
		},
	} {
		t.Run(name, func(t *testing.T) {
			forged := resources.BuildWorkspaceClaim(h, resourcestest.Options)
			forged.UID, forged.ResourceVersion = "uid-forged", "3"
			forged.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(h, gvk)}
			forged.Spec.VolumeName = "another-pv"
			forged.Status.Phase = corev1.ClaimBound
			forge(forged)
			f := newFixture(t, h, context1(), forged)
			res, err := f.sync("h1")
			require.NoError(t, err)
			w := f.Writes()
			assert.NotContains(t, w, "create deployments/h1", "no pod mounts it")
			for _, x := range w {
				assert.False(t, strings.Contains(x, "persistentvolumeclaims"), "the claim is not taken over: %s", x)
			}
			ready := f.condition("h1", clerumv1alpha1.ConditionReady)
			assert.Equal(t, reasons.NotOwned, ready.Reason)
			assert.Contains(t, ready.Message, "it names volume another-pv and carries no valid mark of HCC's")
			assert.Equal(t, refusedRetry, res.RequeueAfter)
			assert.Contains(t, strings.Join(f.Events(), "\n"), "Warning UnmanagedConflict PersistentVolumeClaim mcp-host/h1-workspace is not written")
			assert.Equal(t, 1.0, counter(t, f.Registry, "clerum_hcc_host_children_refused_total",
				map[string]string{"kind": "PersistentVolumeClaim", "cause": string(kit.CauseForeignVolume)}))
		})
	}
}
