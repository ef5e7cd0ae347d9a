package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/hack/devcontrolapi"
)

// TestAPIAcceptsTheControlAPIsTokenLifetime: the shipped hcc-api accepts
// access tokens living exactly as long as the Control API issues them,
// the lifetime the development Control API uses and the docs state
// (docs/deploy.md, "hcc-api"), not the variable's default left silently.
func TestAPIAcceptsTheControlAPIsTokenLifetime(t *testing.T) {
	ttl := devcontrolapi.DefaultAccessTokenTTL
	require.Zero(t, ttl%time.Minute, "the docs state the lifetime in minutes")
	for _, tree := range []string{productionTree, minikubeTree} {
		got, ok := literalEnv(t, podSpecs(t, build(t, tree))[api], api)["HCC_MCP_HOST_JWT_MAX_TTL_SECONDS"]
		require.True(t, ok, "%s: hcc-api sets HCC_MCP_HOST_JWT_MAX_TTL_SECONDS", tree)
		assert.Equal(t, strconv.Itoa(int(ttl/time.Second)), got, "%s: the development Control API's access-token lifetime", tree)
	}
	minutes := int(ttl / time.Minute)
	for file, says := range map[string][]string{
		"make-run.md": {fmt.Sprintf("access tokens valid %d minutes", minutes), fmt.Sprintf("Access tokens live %d minutes", minutes)},
		"deploy.md": {fmt.Sprintf("`HCC_MCP_HOST_JWT_MAX_TTL_SECONDS=%d`", int(ttl/time.Second)),
			fmt.Sprintf("access tokens live %d minutes", minutes)},
		"configuration.md": {fmt.Sprintf("The shipped Deployment sets `%d`", int(ttl/time.Second))},
	} {
		raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", file))
		require.NoError(t, err)
		for _, s := range says {
			assert.Contains(t, string(raw), s, "docs/%s", file)
		}
	}
}
