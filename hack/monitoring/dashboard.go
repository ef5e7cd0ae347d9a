package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// dashboardUID is the dashboard's uid, stable so that links to it last.
const dashboardUID = "hcc-overview"

// query is one PromQL target of a panel and its legend.
type query struct {
	expr, legend string
}

// q is a query; $__rate_interval is Grafana's rate window.
func q(expr, legend string) query { return query{expr: expr, legend: legend} }

// figure is one panel: a time series, or a stat (the latest value, with
// optional value names).
type figure struct {
	title, description, unit string
	queries                  []query
	stat                     bool
	// states names the values of a stat (0: "closed", say), each with a
	// colour; noValue is what a stat shows without a series.
	states  []state
	noValue string
	// red and amber colour a stat at or above these values (at or below,
	// when below is set); nil: no thresholds.
	red, amber *float64
	below      bool
}

type state struct {
	value, text, color string
}

// section is a dashboard row and its figures, left to right.
type section struct {
	title   string
	figures []figure
}

func f(v float64) *float64 { return &v }

// job selects hcc-controller's target for the workqueue_* series, which
// other controllers export under the same names.
const job = `job="` + controllerJob + `"`

// sections are the figures an on-call engineer looks at first, in the
// order of docs/monitoring.md, "Dashboard".
var sections = []section{
	{title: "Gates", figures: []figure{
		{title: "NetworkPolicy certification", stat: true, unit: "none",
			description: "Whether the leader has revoked every stale allow and certified readiness. No value: no replica leads (HCCNoLeader).",
			queries:     []query{q(`max(clerum_hcc_netpol_certified)`, "certified")},
			states:      []state{{"0", "not certified", "red"}, {"1", "certified", "green"}}, noValue: "no leader"},
		{title: "Control API breaker", stat: true, unit: "none",
			description: "Open after three calls in a row found the Control API unavailable, until one succeeds (HCCControlAPIBreakerOpen).",
			queries:     []query{q(`max(clerum_hcc_host_control_api_breaker_open)`, "breaker")},
			states:      []state{{"0", "closed", "green"}, {"1", "open", "red"}}, noValue: "no leader"},
		{title: "hcc-api caches", stat: true, unit: "none",
			description: "Whether every hcc-api replica has synced its informer caches (HCCAPICachesNotSynced).",
			queries:     []query{q(`min(clerum_hcc_api_informer_synced)`, "synced")},
			states:      []state{{"0", "not synced", "red"}, {"1", "synced", "green"}}, noValue: "no hcc-api"},
		{title: "Orphan caps tripped (1 h)", stat: true, unit: "short", red: f(1),
			description: "Sweeps whose unexplained deletes a cap held back in the last hour (HCCNetworkPolicyOrphanCapTripped, HCCHostOrphanCapTripped).",
			queries: []query{
				q(`sum(increase(clerum_hcc_netpol_orphan_sweep_capped_total[1h]))`, "NetworkPolicy"),
				q(`sum(increase(clerum_hcc_host_orphan_cap_trips_total[1h]))`, "Host"),
			}},
		{title: "Names held, readiness withheld", stat: true, unit: "short", amber: f(1),
			description: "NetworkPolicy names held by objects HCC does not manage (HCCUnmanagedConflict), deny-all names held by a policy that is not a default deny (readiness withheld), contextIds whose new allows are withheld, and policy namespaces missing.",
			queries: []query{
				q(`max(clerum_hcc_netpol_unmanaged_conflicts)`, "unmanaged conflicts"),
				q(`max(clerum_hcc_netpol_default_deny_withheld)`, "default deny withheld"),
				q(`max(clerum_hcc_netpol_contextid_grants_withheld)`, "grants withheld"),
				q(`max(clerum_hcc_netpol_missing_namespaces)`, "missing namespaces"),
			}},
		{title: "Egress DNS failures (15 min)", stat: true, unit: "short", amber: f(1),
			description: "Failed lookups of McpServer egress hostnames in the last 15 minutes (HCCEgressDNSFailures).",
			queries:     []query{q(`sum(increase(clerum_hcc_netpol_dns_failures_total[15m])) or vector(0)`, "failures")}},
	}},
	{title: "NetworkPolicy passes", figures: []figure{
		{title: "Pass duration", unit: "s",
			description: "99th percentile of pass duration by kind, and how long the last pass of each kind took, whatever its result. A safe resync period is well above the slowest pass.",
			queries: []query{
				q(`histogram_quantile(0.99, sum by (kind, le) (rate(clerum_hcc_netpol_pass_duration_seconds_bucket[$__rate_interval])))`, "p99 {{kind}}"),
				q(`max by (kind) (clerum_hcc_netpol_last_pass_duration_seconds)`, "last {{kind}}"),
			}},
		{title: "Passes by outcome", unit: "short",
			description: "Passes per rate window by kind (full, defaults) and result (HCCNetworkPolicyPassesFailing).",
			queries: []query{
				q(`sum by (kind, result) (increase(clerum_hcc_netpol_pass_duration_seconds_count[$__rate_interval]))`, "{{kind}} {{result}}"),
			}},
		{title: "Since the last successful full pass", stat: true, unit: "s",
			description: "Time since a full pass last succeeded. Without CONTEXT_MAPPER_NETPOL_RESYNC_SEC a quiet cluster runs no pass, so this grows without anything being wrong.",
			queries:     []query{q(`time() - max(clerum_hcc_netpol_last_success_timestamp_seconds)`, "since")}},
		{title: "NetworkPolicy writes", unit: "ops",
			description: "Writes and failed writes by verb (HCCNetworkPolicyWriteErrors).",
			queries: []query{
				q(`sum by (verb) (rate(clerum_hcc_netpol_writes_total[$__rate_interval]))`, "{{verb}}"),
				q(`sum by (verb) (rate(clerum_hcc_netpol_write_errors_total[$__rate_interval]))`, "{{verb}} errors"),
			}},
	}},
	{title: "Servers, Hosts and file systems", figures: []figure{
		{title: "McpServers by state", unit: "short",
			queries: []query{q(`sum by (state) (clerum_hcc_mcpserver_servers)`, "{{state}}")}},
		{title: "Hosts by state", unit: "short",
			queries: []query{q(`sum by (state) (clerum_hcc_host_hosts)`, "{{state}}")}},
		{title: "Blocked by reason", unit: "short",
			description: "McpServers and Hosts kept from deploying, by reason (HCCMcpServersBlocked, HCCHostsBlocked).",
			queries: []query{
				q(`sum by (reason) (clerum_hcc_mcpserver_blocked) > 0`, "McpServer {{reason}}"),
				q(`sum by (reason) (clerum_hcc_host_blocked) > 0`, "Host {{reason}}"),
			}},
		{title: "File systems by phase", unit: "short",
			description: "SharedFileSystems and GlobalFileSystems by phase (HCCFileSystemsDegraded).",
			queries: []query{
				q(`sum by (phase) (clerum_hcc_sfs_filesystems)`, "SharedFileSystem {{phase}}"),
				q(`sum by (phase) (clerum_hcc_gfs_globalfilesystems)`, "GlobalFileSystem {{phase}}"),
			}},
	}},
	{title: "Work queues", figures: []figure{
		{title: "Depth", unit: "short",
			queries: []query{q(`sum by (name) (workqueue_depth{`+job+`})`, "{{name}}")}},
		{title: "Time in queue, 99th percentile", unit: "s",
			description: "How long items wait before a worker takes them (HCCWorkqueueBacklog).",
			queries:     []query{q(`histogram_quantile(0.99, sum by (name, le) (rate(workqueue_queue_duration_seconds_bucket{`+job+`}[$__rate_interval])))`, "{{name}}")}},
		{title: "Work duration, 99th percentile", unit: "s",
			queries: []query{q(`histogram_quantile(0.99, sum by (name, le) (rate(workqueue_work_duration_seconds_bucket{`+job+`}[$__rate_interval])))`, "{{name}}")}},
		{title: "Retries", unit: "ops",
			description: "Items requeued after a failed sync, by queue.",
			queries:     []query{q(`sum by (name) (rate(workqueue_retries_total{`+job+`}[$__rate_interval]))`, "{{name}}")}},
	}},
	{title: "hcc-api", figures: []figure{
		{title: "Requests by route", unit: "reqps",
			queries: []query{q(`sum by (route) (rate(clerum_hcc_api_requests_total[$__rate_interval]))`, "{{route}}")}},
		{title: "Latency by route, 99th percentile", unit: "s",
			description: "HCCAPILatency fires above 250 ms on an API route.",
			queries:     []query{q(`histogram_quantile(0.99, sum by (route, le) (rate(clerum_hcc_api_request_duration_seconds_bucket[$__rate_interval])))`, "{{route}}")}},
		{title: "Errors by route and code", unit: "reqps",
			description: "Answers other than 2xx. 5xx on an API route is HCCAPIErrors; 401 and 404 are callers' mistakes, 429 the rate limit, 410 the tombstoned v1 routes.",
			queries:     []query{q(`sum by (route, code) (rate(clerum_hcc_api_requests_total{code!~"2.."}[$__rate_interval])) > 0`, "{{route}} {{code}}")}},
		{title: "Refused tokens and rate limits", unit: "reqps",
			description: "v2 requests refused by reason (HCCHostTokensRefused for signature, unknown_kid, issuer, audience) and answered 429 by action.",
			queries: []query{
				q(`sum by (reason) (rate(clerum_hcc_api_auth_failures_total[$__rate_interval])) > 0`, "refused {{reason}}"),
				q(`sum by (action) (rate(clerum_hcc_api_rate_limited_total[$__rate_interval])) > 0`, "429 {{action}}"),
			}},
	}},
	{title: "Credentials and the Control API", figures: []figure{
		{title: "Soonest credential expiry", stat: true, unit: "s", red: f(450), amber: f(900), below: true,
			description: "Time until the soonest Host bootstrap credential expires; refreshed 900 s before (HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC), so below that it is overdue (HCCHostCredentialRefreshFailing).",
			queries:     []query{q(`min(clerum_hcc_host_credential_expiry_seconds)`, "expires in")}, noValue: "no leader"},
		{title: "Credential expiry", unit: "s",
			queries: []query{q(`min(clerum_hcc_host_credential_expiry_seconds)`, "soonest")}},
		{title: "Control API requests by code", unit: "reqps",
			description: "Attempts by status code, or invalid, timeout, error, canceled (HCCControlAPIErrors).",
			queries:     []query{q(`sum by (code) (rate(clerum_hcc_host_control_api_requests_total[$__rate_interval]))`, "{{code}}")}},
		{title: "Control API latency, 99th percentile", unit: "s",
			queries: []query{q(`histogram_quantile(0.99, sum by (route, le) (rate(clerum_hcc_host_control_api_request_duration_seconds_bucket[$__rate_interval])))`, "{{route}}")}},
	}},
}

// datasource is every panel's data source: the dashboard's variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// buildDashboard is the HCC overview dashboard, in the classic JSON model
// that Grafana's file provisioning and dashboard sidecar load on every
// version; the SDK marks it deprecated for its v2 schema, which Grafana
// reads only from version 12 on.
//
//lint:ignore SA1019 the classic model is the one provisioning loads (above).
func buildDashboard() (dashboard.Dashboard, error) {
	//lint:ignore SA1019 as above.
	b := dashboard.NewDashboardBuilder("HCC").
		Uid(dashboardUID).
		Description("hcc-controller and hcc-api: gates, NetworkPolicy passes, inventory, work queues, hcc-api and credentials (docs/monitoring.md).").
		Tags([]string{"hcc"}).
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus"))
	id := uint32(0)
	for _, s := range sections {
		id++
		b.WithRow(dashboard.NewRowBuilder(s.title).Id(id))
		// A row of stats alone is low; a row with a graph is as high as it.
		width, height := uint32(24/len(s.figures)), uint32(5)
		for _, fig := range s.figures {
			if !fig.stat {
				height = 8
			}
		}
		for _, fig := range s.figures {
			id++
			b.WithPanel(panel(fig, id, width, height))
		}
	}
	return b.Build()
}

// panel builds one figure as panel id, width by height grid units.
func panel(fig figure, id, width, height uint32) cog.Builder[dashboard.Panel] {
	var targets []cog.Builder[variants.Dataquery]
	for i, qq := range fig.queries {
		targets = append(targets, prometheus.NewDataqueryBuilder().
			Datasource(datasource).
			RefId(string(rune('A'+i))).
			Expr(qq.expr).
			LegendFormat(qq.legend).
			Range())
	}
	if fig.stat {
		p := stat.NewPanelBuilder().Id(id).Title(fig.title).Description(fig.description).
			Datasource(datasource).Unit(fig.unit).Height(height).Span(width).
			Targets(targets).
			Orientation(common.VizOrientationAuto).
			ColorMode(common.BigValueColorModeBackground).
			GraphMode(common.BigValueGraphModeNone).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}))
		if len(fig.states) > 0 {
			p.Mappings(mappings(fig.states))
		}
		if fig.noValue != "" {
			p.NoValue(fig.noValue)
		}
		if th := thresholds(fig); th != nil {
			p.Thresholds(th)
		}
		return p
	}
	return timeseries.NewPanelBuilder().Id(id).Title(fig.title).Description(fig.description).
		Datasource(datasource).Unit(fig.unit).Height(height).Span(width).Min(0).
		Targets(targets).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom).ShowLegend(true))
}

// mappings names a stat's values.
func mappings(states []state) []dashboard.ValueMapping {
	m := dashboard.NewValueMap()
	for i, s := range states {
		m.Options[s.value] = dashboard.ValueMappingResult{Text: cog.ToPtr(s.text), Color: cog.ToPtr(s.color), Index: cog.ToPtr(int32(i))}
	}
	return []dashboard.ValueMapping{{ValueMap: m}}
}

// thresholds colours a stat by fig.red and fig.amber; nil without either.
func thresholds(fig figure) *dashboard.ThresholdsConfigBuilder {
	if fig.red == nil && fig.amber == nil {
		return nil
	}
	var steps []dashboard.Threshold
	if fig.below {
		// Red from minus infinity (nil), amber from red, green from amber.
		steps = append(steps, dashboard.Threshold{Value: nil, Color: "red"})
		if fig.amber != nil {
			steps = append(steps, dashboard.Threshold{Value: fig.red, Color: "orange"}, dashboard.Threshold{Value: fig.amber, Color: "green"})
		} else {
			steps = append(steps, dashboard.Threshold{Value: fig.red, Color: "green"})
		}
	} else {
		steps = append(steps, dashboard.Threshold{Value: nil, Color: "green"})
		if fig.amber != nil {
			steps = append(steps, dashboard.Threshold{Value: fig.amber, Color: "orange"})
		}
		if fig.red != nil {
			steps = append(steps, dashboard.Threshold{Value: fig.red, Color: "red"})
		}
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps)
}
