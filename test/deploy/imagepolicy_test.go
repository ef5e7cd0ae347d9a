package deploy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestAPIJudgesImagesLikeTheController: hcc-api evaluates the image
// allowlist itself (docs/http-api.md), so it must carry the controller's
// values. An overlay that enforces in one and not the other would hand
// out the credentials of servers the controller stopped.
func TestAPIJudgesImagesLikeTheController(t *testing.T) {
	for _, tree := range []string{productionTree, minikubeTree} {
		pods := podSpecs(t, build(t, tree))
		ctl := literalEnv(t, pods[controller], controller)
		a := literalEnv(t, pods[api], api)
		for _, name := range []string{"CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES", "CONTEXT_MAPPER_ENFORCE_IMAGE_ALLOWLIST"} {
			want, ok := ctl[name]
			assert.True(t, ok, "%s: the controller sets %s", tree, name)
			got, ok := a[name]
			assert.True(t, ok, "%s: hcc-api sets %s", tree, name)
			assert.Equal(t, want, got, "%s: %s differs between hcc-controller and hcc-api", tree, name)
		}
	}
}
