//go:build dataplane

package dataplane

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLayers: the four layers of docs/networkpolicy.md on deploy/examples
// and layers-objects.yaml, as packets (flows/layers.yaml): a Host reaches
// exactly its Context's servers on their transport port; rpc-proxy and
// mcp-proxy reach the granted servers; a pod HCC never made in a runtime
// namespace reaches nothing but DNS; DNS only to kube-system's kube-dns;
// the API server only with the opt-in label; exact-host CIDR and hostname
// egress reach their destination and nothing beside it; public-web
// reaches a public address on 80 and 443 and never a private, link-local
// or HCC_EGRESS_DENY_CIDRS range; the recipe binding and the file-system
// policies as documented.
func TestLayers(t *testing.T) {
	need(t)
	ctx := context.Background()
	require.NoError(t, env.SetDNS(map[string][]netip.Addr{"api.weather.example.com": {netip.MustParseAddr("93.184.216.34")}}))
	t.Cleanup(func() { require.NoError(t, env.SetDNS(nil)) })
	objects := []string{filepath.Join("..", "..", "deploy", "examples"), filepath.Join("flows", "layers-objects.yaml")}
	require.NoError(t, env.ApplyFiles(ctx, objects...))
	t.Cleanup(func() {
		require.NoError(t, env.DeleteFiles(context.Background(), objects...))
		require.NoError(t, env.WaitConverged(context.Background(), 3*time.Minute))
	})
	require.NoError(t, env.WaitConverged(ctx, 5*time.Minute))
	f, existing := loadFlows(t, "layers.yaml")
	runFlows(t, f, existing)
}
