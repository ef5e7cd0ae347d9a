//go:build integration

package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/clerum/hcc/internal/testing/metricsref"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
)

// scrapeFamilies is every metric family b's /metrics shows: the names of
// its # TYPE lines. A vector with no series yet has none.
func scrapeFamilies(t *testing.T, b *binary) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	scrapeLines(t, b, func(line string) {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ := strings.Cut(rest, " ")
			out[name] = true
		}
	})
	return out
}

// Every metric family the shipped alerts and dashboard read
// (deploy/monitoring/metrics.txt) is in a scrape of the binary that exports
// it. The scenario makes the families that only an event creates appear:
// deploy/examples (every kind, so every state and phase gauge; a Host,
// whose credential is a Control API request), a server whose egress
// hostname does not resolve (a DNS failure), and a request to hcc-api.
// The binaries' unit tests check the same list against their registries'
// descriptors; this one checks what the running processes serve
// (docs/monitoring.md, "Every metric exists").
func TestMonitoringReadsExportedMetrics(t *testing.T) {
	e := newEnv(t)
	// Answers no name: every lookup of lookup's hostname fails.
	dns := startDNS(t, map[string]string{})
	ctrl := e.startController("solo", "HCC_LEADER_ELECT=false", "HCC_EXTERNAL_EGRESS_DNS_SERVER="+dns.addr)
	api := e.startAPI()
	defer e.cleanUp()

	e.createFiles(filepath.Join(repoRoot, "deploy", "examples"))
	lookup := sseServer("lookup")
	lookup.Spec.EgressBindings = []clerumv1alpha1.EgressBinding{{Name: "api", Mode: clerumv1alpha1.EgressModeExactHost, Host: "nowhere.example.com", Port: ptr.To[int32](443)}}
	e.create(lookup)
	e.waitConverged(3*time.Minute, "McpServer lookup")
	e.eventually("a lookup of nowhere.example.com failed", time.Minute, func() bool { return dns.Queries("nowhere.example.com") > 0 })
	resp, err := http.Get(api.base + "/api/v1/mcpservers")
	require.NoError(t, err)
	resp.Body.Close()

	for binaryName, b := range map[string]*binary{"hcc-controller": ctrl, "hcc-api": api} {
		refs := metricsref.Load(t, binaryName)
		// Gauges are set as their reconciler syncs: a minute at most.
		var missing []string
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
			families := scrapeFamilies(t, b)
			missing = missing[:0]
			for _, ref := range refs {
				if !families[ref.Family] {
					missing = append(missing, ref.Family)
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if assert.Empty(t, missing, "%s does not export what deploy/monitoring reads", binaryName) {
			t.Logf("%s exports the %d families deploy/monitoring reads of it", binaryName, len(refs))
		}
	}
}
