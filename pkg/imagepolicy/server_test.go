package imagepolicy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

func TestEnforcedRefusesLocalImagesOutsideTheListOnly(t *testing.T) {
	p, err := Parse([]string{"mongodb/"})
	require.NoError(t, err)
	local := func(image string) *v1alpha1.McpServer {
		return &v1alpha1.McpServer{Spec: v1alpha1.McpServerSpec{Image: image}}
	}
	remote := &v1alpha1.McpServer{Spec: v1alpha1.McpServerSpec{Remote: &v1alpha1.Remote{URL: "https://x.example"}}}

	assert.Nil(t, Enforced(p, false), "audit mode refuses nothing")
	refused := Enforced(p, true)
	require.NotNil(t, refused)
	assert.False(t, refused(local("mongodb/x:1")))
	assert.True(t, refused(local("evil.io/x:1")))
	assert.True(t, refused(local("Not A Reference")), "an invalid reference is refused")
	assert.False(t, refused(remote), "a remote server runs the platform's proxy, which is never judged")
	assert.True(t, Enforced(nil, true)(local("mongodb/x:1")), "a nil Policy allows nothing")
}
