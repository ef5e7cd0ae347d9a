package kit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

func TestStatusOnly(t *testing.T) {
	base := &clerumv1alpha1.McpServer{ObjectMeta: metav1.ObjectMeta{
		Name: "s", Generation: 3, ResourceVersion: "10",
		Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"},
	}}
	now := metav1.Now()
	tests := []struct {
		name   string
		change func(*clerumv1alpha1.McpServer)
		want   bool
	}{
		{name: "a status write with a new resourceVersion is status only", want: true, change: func(s *clerumv1alpha1.McpServer) {
			s.ResourceVersion = "11"
			s.Status.Ready = true
		}},
		{name: "a spec change bumps the generation", change: func(s *clerumv1alpha1.McpServer) { s.Generation = 4 }},
		{name: "a changed label is not status only", change: func(s *clerumv1alpha1.McpServer) { s.Labels["a"] = "9" }},
		{name: "an added annotation is not status only", change: func(s *clerumv1alpha1.McpServer) { s.Annotations["c"] = "3" }},
		{name: "a removed annotation is not status only", change: func(s *clerumv1alpha1.McpServer) { s.Annotations = nil }},
		{name: "a deletion timestamp is not status only", change: func(s *clerumv1alpha1.McpServer) { s.DeletionTimestamp = &now }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cur := base.DeepCopy()
			tc.change(cur)
			assert.Equal(t, tc.want, StatusOnly(base, cur))
		})
	}
	assert.False(t, StatusOnly("not an object", base), "an object without metadata is never filtered")
}
