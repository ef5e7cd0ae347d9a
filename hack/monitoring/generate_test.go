package main

import (
	"os"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// The committed files of deploy/monitoring are what this command writes,
// and the directory holds nothing else but the hand-written
// kustomization.yaml. (make verify runs `go run . -check` too.)
func TestCommittedFilesAreGenerated(t *testing.T) {
	files, err := render()
	if err != nil {
		t.Fatal(err)
	}
	if stale := staleFiles(deployDir, files); len(stale) > 0 {
		t.Errorf("%v in %s are stale: run 'cd hack/monitoring && go run .' and commit the result", stale, deployDir)
	}
	entries, err := os.ReadDir(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok && e.Name() != "kustomization.yaml" {
			t.Errorf("%s/%s is neither generated nor kustomization.yaml", deployDir, e.Name())
		}
	}
}

func TestReferences(t *testing.T) {
	for _, c := range []struct {
		name, expr string
		want       []string // "BINARY FAMILY [LABELS]"
	}{
		{"a histogram's series are its family's, and le is no label of it",
			`histogram_quantile(0.99, sum by (route, le) (rate(clerum_hcc_api_request_duration_seconds_bucket{route=~"/api/.*"}[5m])))`,
			[]string{"hcc-api clerum_hcc_api_request_duration_seconds route"}},
		{"matchers and the grouping of an aggregation over one family are its labels; target labels are not",
			`sum by (verb, pod) (rate(clerum_hcc_netpol_write_errors_total{job="x",kind="full"}[10m]))`,
			[]string{"hcc-controller clerum_hcc_netpol_write_errors_total kind,verb"}},
		{"an aggregation over two families names no label of either",
			`sum by (reason) (clerum_hcc_mcpserver_blocked + clerum_hcc_host_blocked)`,
			[]string{"hcc-controller clerum_hcc_host_blocked", "hcc-controller clerum_hcc_mcpserver_blocked"}},
		{"the work queues are hcc-controller's",
			`workqueue_depth{name="host"}`,
			[]string{"hcc-controller workqueue_depth name"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			refs := references{}
			expr, err := promql.ParseExpr(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			if err := refs.add(expr); err != nil {
				t.Fatal(err)
			}
			got := refs.lines()
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestReferencesRefuseForeignAndNamelessSelectors(t *testing.T) {
	for _, expr := range []string{
		`up{job="hcc-controller-metrics"}`,
		`process_resident_memory_bytes`,
		`{__name__=~"clerum_hcc_.*"}`,
	} {
		e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
		if err != nil {
			t.Fatal(err)
		}
		if err := (references{}).add(e); err == nil {
			t.Errorf("%s: accepted; neither binary's test would check it", expr)
		}
	}
}
