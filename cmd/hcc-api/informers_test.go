package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

func TestStripManagedFields(t *testing.T) {
	s := &v1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{
		Name:          "s",
		Generation:    3,
		Annotations:   map[string]string{"a": "b", corev1.LastAppliedConfigAnnotation: `{"spec":{}}`},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	got, err := stripManagedFields(s)
	require.NoError(t, err)
	assert.Nil(t, got.(*v1alpha1.McpServer).ManagedFields)
	assert.NotContains(t, got.(*v1alpha1.McpServer).Annotations, corev1.LastAppliedConfigAnnotation)
	assert.Equal(t, int64(3), got.(*v1alpha1.McpServer).Generation, "everything else is kept")
	assert.Equal(t, map[string]string{"a": "b"}, got.(*v1alpha1.McpServer).Annotations)

	tombstone := cache.DeletedFinalStateUnknown{Key: "ns/s", Obj: s}
	got, err = stripManagedFields(tombstone)
	require.NoError(t, err)
	assert.Equal(t, tombstone, got, "objects that are not API objects pass through")
}

func TestSecretDataOnly(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "creds",
			Namespace:       "mcp-server",
			UID:             "uid-1",
			ResourceVersion: "42",
			Labels:          map[string]string{"l": "v", "clerum.io/managed-by": "host-context-controller"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"token":"..."}}`},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			OwnerReferences: []metav1.OwnerReference{{Name: "owner"}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"token": []byte("v")},
	}
	got, err := secretDataOnly(s)
	require.NoError(t, err)
	assert.Equal(t, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "mcp-server", UID: "uid-1", ResourceVersion: "42",
			Labels: map[string]string{"clerum.io/managed-by": "host-context-controller"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"token": []byte("v")},
	}, got, "the type and the managed-by label say whether a server may name it")

	tombstone := cache.DeletedFinalStateUnknown{Key: "mcp-server/creds", Obj: s}
	got, err = secretDataOnly(tombstone)
	require.NoError(t, err)
	assert.Equal(t, tombstone, got)
}
