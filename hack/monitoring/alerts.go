package main

import "strings"

// alert is one alerting rule of the PrometheusRule. Its meaning, what to do
// about it and why its threshold is what it is are in docs/monitoring.md,
// under a heading named after the alert (the runbook_url anchor).
type alert struct {
	name string
	// expr is the PromQL expression; every series it returns is an alert.
	expr string
	// hold is the rule's `for`: how long expr must hold before the alert
	// fires; "" fires at the first evaluation that returns a series.
	hold     string
	severity string
	// summary and description are annotation templates: {{ $labels.x }}
	// and {{ $value }} are the firing series' labels and value.
	summary     string
	description string
}

const (
	critical = "critical"
	warning  = "warning"
)

// controllerJob and apiJob are the job labels of the two binaries' targets:
// the ServiceMonitors keep Prometheus's default, the Service's name. The
// workqueue_* series carry no HCC prefix (kube-controller-manager exports
// the same names), so the rules that read them select the job.
const (
	controllerJob = controllerService
	apiJob        = apiService
)

// apiRoutes selects hcc-api's API routes: not /health, /ready (a replica
// that is not ready answers it 503 by design) or /metrics.
const apiRoutes = `route=~"/api/.*"`

// controllerAlerts read hcc-controller's series. The reconcilers' series
// exist only on the leader; a standby exports the Go and process series
// only.
var controllerAlerts = []alert{
	{
		name:        "HCCNoLeader",
		expr:        `absent(clerum_hcc_netpol_certified)`,
		hold:        "5m",
		severity:    critical,
		summary:     "No hcc-controller replica leads.",
		description: "No scraped hcc-controller exports clerum_hcc_netpol_certified, which only the leader does: nothing reconciles McpServers, Hosts, file systems or NetworkPolicies.",
	},
	{
		name:        "HCCNetworkPolicyNotCertified",
		expr:        `clerum_hcc_netpol_certified == 0`,
		hold:        "10m",
		severity:    critical,
		summary:     "The hcc-controller leader {{ $labels.pod }} has not certified NetworkPolicy revocation.",
		description: "The leader has not yet revoked every stale allow and certified readiness; until it does, allows that the inventory no longer grants may survive.",
	},
	{
		name: "HCCNetworkPolicyPassesFailing",
		expr: `sum(rate(clerum_hcc_netpol_pass_duration_seconds_count{kind="full",result="error"}[15m])) > 0
unless
sum(rate(clerum_hcc_netpol_pass_duration_seconds_count{kind="full",result="success"}[15m])) > 0`,
		hold:        "15m",
		severity:    critical,
		summary:     "Full NetworkPolicy passes keep failing.",
		description: "Full NetworkPolicy passes have failed and none has succeeded for 15 minutes: policy changes, revocations and the orphan sweep are not applied.",
	},
	{
		name:        "HCCNetworkPolicyWriteErrors",
		expr:        `sum by (verb) (rate(clerum_hcc_netpol_write_errors_total[10m])) > 0`,
		hold:        "15m",
		severity:    warning,
		summary:     "NetworkPolicy {{ $labels.verb }} writes are failing.",
		description: "NetworkPolicy {{ $labels.verb }} requests have failed for 15 minutes.",
	},
	{
		name:        "HCCNetworkPolicyOrphanCapTripped",
		expr:        `increase(clerum_hcc_netpol_orphan_sweep_capped_total[1h]) > 0`,
		severity:    warning,
		summary:     "The {{ $labels.rule }} orphan cap held back NetworkPolicy deletes.",
		description: "In the last hour the NetworkPolicy orphan sweep found more unexplained orphans than the {{ $labels.rule }} cap allows and deleted none of them.",
	},
	{
		name:        "HCCHostOrphanCapTripped",
		expr:        `increase(clerum_hcc_host_orphan_cap_trips_total[1h]) > 0`,
		severity:    warning,
		summary:     "The Host orphan cap held back deletes.",
		description: "In the last hour the Host orphan sweep found more unexplained per-Host objects than the caps allow and deleted none of them.",
	},
	{
		name:        "HCCUnmanagedConflict",
		expr:        `clerum_hcc_netpol_unmanaged_conflicts > 0`,
		hold:        "30m",
		severity:    warning,
		summary:     "NetworkPolicy names HCC needs are held by objects it does not manage ({{ $value }}).",
		description: "HCC leaves those objects alone and skips the policies it would write under their names.",
	},
	{
		// The window is 5 minutes shorter than the hold, so failures must
		// go on for over 5 minutes to fire it (with both 15 minutes, two
		// failures a minute apart did); a lookup that keeps failing is
		// retried at most 5 minutes apart, so each window holds one.
		name:        "HCCEgressDNSFailures",
		expr:        `sum by (server) (increase(clerum_hcc_netpol_dns_failures_total[10m])) > 0`,
		hold:        "15m",
		severity:    warning,
		summary:     "Egress hostnames of McpServer {{ $labels.server }} do not resolve.",
		description: "Lookups of the McpServer's egress hostnames have failed for 15 minutes; its external egress keeps the last proven addresses, or none.",
	},
	{
		name:        "HCCMcpServersBlocked",
		expr:        `sum by (reason) (clerum_hcc_mcpserver_blocked) > 0`,
		hold:        "15m",
		severity:    warning,
		summary:     "McpServers are blocked: {{ $labels.reason }} ({{ $value }}).",
		description: "McpServers kept from deploying for 15 minutes; their status conditions say why.",
	},
	{
		name:        "HCCHostsBlocked",
		expr:        `sum by (reason) (clerum_hcc_host_blocked) > 0`,
		hold:        "15m",
		severity:    warning,
		summary:     "Hosts are blocked: {{ $labels.reason }} ({{ $value }}).",
		description: "Hosts kept from deploying for 15 minutes; their status conditions say why.",
	},
	{
		// 450 is half of HCC_MCP_HOST_RUNTIME_BOOTSTRAP_REFRESH_BEFORE_SEC's
		// default (900): a credential is replaced 900 s before it expires,
		// so one with less than 450 s left has missed its refresh by more
		// than 7 minutes.
		name:        "HCCHostCredentialRefreshFailing",
		expr:        `clerum_hcc_host_credential_expiry_seconds < 450`,
		hold:        "5m",
		severity:    critical,
		summary:     "A Host's bootstrap credential expires in {{ $value | humanizeDuration }} and has not been refreshed.",
		description: "The soonest Host credential should have been replaced 15 minutes before its expiry; refreshes are failing (see HCCControlAPIBreakerOpen and HCCControlAPIErrors). A negative value has expired.",
	},
	{
		name:        "HCCControlAPIBreakerOpen",
		expr:        `clerum_hcc_host_control_api_breaker_open == 1`,
		hold:        "5m",
		severity:    warning,
		summary:     "The Control API breaker has been open for 5 minutes.",
		description: "Three calls in a row found the Control API unavailable and none has succeeded since: Hosts due for a credential get none, and one probe goes out per pause (15 s doubling to 5 min).",
	},
	{
		// canceled is the controller's own context ending (a shutdown or a
		// lost lease), not an answer of the Control API. The window is 5
		// minutes shorter than the hold, so errors must go on for over 5
		// minutes to fire it; a Host that keeps failing is retried, and the
		// breaker probes, at most 5 minutes apart.
		name:        "HCCControlAPIErrors",
		expr:        `sum by (code) (rate(clerum_hcc_host_control_api_requests_total{code!~"200|canceled"}[10m])) > 0`,
		hold:        "15m",
		severity:    warning,
		summary:     "Control API requests fail with {{ $labels.code }}.",
		description: "Bootstrap credential requests to the Control API have answered {{ $labels.code }} for 15 minutes.",
	},
	{
		// Items wait five minutes on average, or a queue never empties
		// while nothing is processed (a stuck worker).
		name: "HCCWorkqueueBacklog",
		expr: `(
  sum by (name) (rate(workqueue_queue_duration_seconds_sum{job="` + controllerJob + `"}[10m]))
  /
  sum by (name) (rate(workqueue_queue_duration_seconds_count{job="` + controllerJob + `"}[10m]))
) > 300
or
(
  min by (name) (min_over_time(workqueue_depth{job="` + controllerJob + `"}[10m])) > 0
  unless
  sum by (name) (increase(workqueue_work_duration_seconds_count{job="` + controllerJob + `"}[10m])) > 0
)`,
		hold:        "15m",
		severity:    warning,
		summary:     "The {{ $labels.name }} work queue has a backlog.",
		description: "Items of the {{ $labels.name }} queue have waited more than five minutes on average, or the queue has not emptied while no item was processed, for 15 minutes.",
	},
	{
		// The kind label tells the two gauges apart: without it their
		// series have the same labels once the alert drops the metric
		// name, and `or` keeps only the first.
		name: "HCCFileSystemsDegraded",
		expr: `label_replace(clerum_hcc_sfs_filesystems{phase="Degraded"} > 0, "kind", "SharedFileSystem", "", "")
or
label_replace(clerum_hcc_gfs_globalfilesystems{phase="Degraded"} > 0, "kind", "GlobalFileSystem", "", "")`,
		hold:        "15m",
		severity:    warning,
		summary:     "{{ $labels.kind }}s are Degraded ({{ $value }}).",
		description: "SharedFileSystems or GlobalFileSystems have been Degraded for 15 minutes; their status conditions say why.",
	},
}

// resyncAlerts are meaningful only with CONTEXT_MAPPER_NETPOL_RESYNC_SEC
// set (default 0, off): without the timer a quiet cluster runs no pass, and
// the last success ages with nothing wrong. They are a PrometheusRule of
// their own, which deploy/monitoring's kustomization leaves out.
var resyncAlerts = []alert{
	{
		// 1800 s is three periods of a 600 s timer; use a few periods.
		name:        "HCCNetworkPolicyStale",
		expr:        `time() - clerum_hcc_netpol_last_success_timestamp_seconds > 1800`,
		hold:        "10m",
		severity:    warning,
		summary:     "No full NetworkPolicy pass has succeeded for {{ $value | humanizeDuration }}.",
		description: "With the resync timer set a full pass runs every period; none has succeeded for three periods of a 600 s timer.",
	},
}

// apiAlerts read hcc-api's series; every replica exports them.
var apiAlerts = []alert{
	{
		// The window is 5 minutes shorter than the hold: refusals must go
		// on for over 5 minutes to fire it.
		name:        "HCCHostTokensRefused",
		expr:        `sum by (reason) (rate(clerum_hcc_api_auth_failures_total{reason=~"signature|unknown_kid|issuer|audience"}[5m])) > 0`,
		hold:        "10m",
		severity:    warning,
		summary:     "hcc-api refuses Host tokens: {{ $labels.reason }}.",
		description: "Host tokens have been refused for their key, issuer or audience for 10 minutes: hcc-api and the Control API disagree on the signing keys or the JWT settings.",
	},
	{
		name:        "HCCAPICachesNotSynced",
		expr:        `min by (pod) (clerum_hcc_api_informer_synced) == 0`,
		hold:        "5m",
		severity:    warning,
		summary:     "hcc-api {{ $labels.pod }} has not synced its caches.",
		description: "The replica answers its API routes 503 and is not ready until every informer cache has synced.",
	},
	{
		// A 5-minute window under a 10-minute hold: errors must go on for
		// over 5 minutes to fire it.
		name: "HCCAPIErrors",
		expr: `sum by (route) (rate(clerum_hcc_api_requests_total{` + apiRoutes + `,code=~"5.."}[5m]))
/
sum by (route) (rate(clerum_hcc_api_requests_total{` + apiRoutes + `}[5m]))
> 0.05`,
		hold:        "10m",
		severity:    critical,
		summary:     "{{ $value | humanizePercentage }} of hcc-api requests to {{ $labels.route }} fail.",
		description: "More than 5% of the requests to the route have been answered 5xx for 10 minutes.",
	},
	{
		name: "HCCAPILatency",
		expr: `histogram_quantile(0.99,
  sum by (route, le) (rate(clerum_hcc_api_request_duration_seconds_bucket{` + apiRoutes + `}[5m]))
) > 0.25`,
		hold:        "15m",
		severity:    warning,
		summary:     "hcc-api answers {{ $labels.route }} in {{ $value | humanizeDuration }} at the 99th percentile.",
		description: "The route's 99th-percentile latency has been above 250 ms for 15 minutes; hcc-api answers from informer caches in well under a millisecond.",
	},
}

// runbookURL is where an alert's runbook is: its heading in
// docs/monitoring.md.
func runbookURL(name string) string {
	return docsURL + "#" + strings.ToLower(name)
}

// docsURL is docs/monitoring.md in the repository (the module path).
const docsURL = "https://github.com/clerum/hcc/blob/main/docs/monitoring.md"
