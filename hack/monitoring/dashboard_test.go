package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// committedPanels are the panels of the committed dashboard.json, rows'
// nested panels included, decoded as plain JSON (not through the Go
// types the generator used).
func committedPanels(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []map[string]any `json:"panels"`
	}
	if err := json.Unmarshal(raw, &board); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	var walk func([]map[string]any)
	walk = func(panels []map[string]any) {
		for _, p := range panels {
			out = append(out, p)
			if nested, ok := p["panels"].([]any); ok {
				var inner []map[string]any
				for _, n := range nested {
					inner = append(inner, n.(map[string]any))
				}
				walk(inner)
			}
		}
	}
	walk(board.Panels)
	return out
}

// The dashboard is a valid Grafana dashboard as the foundation SDK models
// it: a strict decode refuses unknown fields and wrong types.
func TestDashboardDecodesStrictly(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	raw, err := os.ReadFile(filepath.Join(deployDir, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var board dashboard.Dashboard //lint:ignore SA1019 the model buildDashboard writes.
	// The SDK returns its error list typed even when it is empty.
	if err := board.UnmarshalJSONStrict(raw); err != nil {
		if errs, ok := err.(cog.BuildErrors); !ok || len(errs) > 0 {
			t.Fatal(err)
		}
	}
	if board.Uid == nil || *board.Uid != dashboardUID {
		t.Errorf("uid %v, want %s", board.Uid, dashboardUID)
	}
	// kubectl apply (client side) keeps the whole ConfigMap in an
	// annotation, and annotations are limited to 256 KiB together.
	if len(raw) > 128<<10 {
		t.Errorf("dashboard.json is %d bytes: too close to the 256 KiB annotation limit of kubectl apply", len(raw))
	}
}

// Every panel query parses as PromQL, reads the data source variable, and
// every metric the queries and the rules read is listed in metrics.txt,
// which the binaries' own tests check against what they export.
func TestQueriesReadListedMetrics(t *testing.T) {
	refs := references{}
	for _, p := range committedPanels(t) {
		if p["type"] == "row" {
			continue
		}
		title, _ := p["title"].(string)
		if ds, _ := p["datasource"].(map[string]any); ds["uid"] != "${datasource}" {
			t.Errorf("panel %q reads data source %v, not ${datasource}", title, p["datasource"])
		}
		targets, _ := p["targets"].([]any)
		if len(targets) == 0 {
			t.Errorf("panel %q has no query", title)
		}
		for _, target := range targets {
			expr, _ := target.(map[string]any)["expr"].(string)
			parsed, err := parseDashboardQuery(expr)
			if err != nil {
				t.Errorf("panel %q: %s: %v", title, expr, err)
				continue
			}
			if err := refs.add(parsed); err != nil {
				t.Errorf("panel %q: %v", title, err)
			}
		}
	}
	for _, g := range committedRuleGroups(t).Groups {
		for _, r := range g.Rules {
			expr, err := promql.ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			if err := refs.add(expr); err != nil {
				t.Errorf("%s: %v", r.Alert, err)
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join(deployDir, metricsListFile))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		if !strings.HasPrefix(line, "#") {
			listed = append(listed, line)
		}
	}
	if got := refs.lines(); !slices.Equal(got, listed) {
		t.Errorf("the committed rules and dashboard read\n\t%s\nmetrics.txt lists\n\t%s", strings.Join(got, "\n\t"), strings.Join(listed, "\n\t"))
	}
}

// The figures an on-call engineer looks at first are there: pass duration
// and outcome, the gates, servers and Hosts by state, the work queues'
// depth and latency, hcc-api's rate, latency and errors by route, and
// credential expiry.
func TestDashboardHasTheFirstFigures(t *testing.T) {
	type figureWant struct{ title, metric string }
	wants := []figureWant{
		{"Pass duration", "clerum_hcc_netpol_pass_duration_seconds_bucket"},
		{"Passes by outcome", "clerum_hcc_netpol_pass_duration_seconds_count"},
		{"NetworkPolicy certification", "clerum_hcc_netpol_certified"},
		{"Control API breaker", "clerum_hcc_host_control_api_breaker_open"},
		{"hcc-api caches", "clerum_hcc_api_informer_synced"},
		{"Orphan caps tripped (1 h)", "clerum_hcc_netpol_orphan_sweep_capped_total"},
		{"McpServers by state", "clerum_hcc_mcpserver_servers"},
		{"Hosts by state", "clerum_hcc_host_hosts"},
		{"Depth", "workqueue_depth"},
		{"Time in queue, 99th percentile", "workqueue_queue_duration_seconds_bucket"},
		{"Requests by route", "clerum_hcc_api_requests_total"},
		{"Latency by route, 99th percentile", "clerum_hcc_api_request_duration_seconds_bucket"},
		{"Errors by route and code", "clerum_hcc_api_requests_total"},
		{"Soonest credential expiry", "clerum_hcc_host_credential_expiry_seconds"},
	}
	panels := committedPanels(t)
	for _, w := range wants {
		i := slices.IndexFunc(panels, func(p map[string]any) bool { return p["title"] == w.title })
		if i < 0 {
			t.Errorf("no panel %q", w.title)
			continue
		}
		raw, _ := json.Marshal(panels[i]["targets"])
		if !strings.Contains(string(raw), w.metric) {
			t.Errorf("panel %q does not read %s", w.title, w.metric)
		}
	}
}
