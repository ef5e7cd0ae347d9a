package fakeapi

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// An update from a copy older than the stored object is a Conflict, as on
// the API server; one from the stored version, or naming none, is not.
func TestUpdateFromAStaleCopyConflicts(t *testing.T) {
	ctx := context.Background()
	kube := kubefake.NewClientset()
	kube.PrependReactor("*", "*", New(100, "uid-").Serve(kube.Tracker()))
	services := kube.CoreV1().Services("ns")

	created, err := services.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	stale := created.DeepCopy()

	created.Labels = map[string]string{"a": "1"}
	updated, err := services.Update(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err, "an update from the stored version")
	assert.NotEqual(t, created.ResourceVersion, updated.ResourceVersion)

	stale.Labels = map[string]string{"a": "2"}
	_, err = services.Update(ctx, stale, metav1.UpdateOptions{})
	assert.True(t, apierrors.IsConflict(err), "an update from a stale copy: %v", err)
	got, err := services.Get(ctx, "s", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "1", got.Labels["a"], "the stale update wrote nothing")

	stale.ResourceVersion = ""
	_, err = services.Update(ctx, stale, metav1.UpdateOptions{})
	assert.NoError(t, err, "an update naming no resourceVersion is unconditional")
}
