package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"sigs.k8s.io/yaml"
)

// deployDir is deploy/monitoring: go test runs in hack/monitoring.
var deployDir = filepath.Join("..", "..", "deploy", "monitoring")

// committedRuleGroups are the groups of the committed PrometheusRules,
// each decoded strictly into the operator's type and its spec parsed by
// Prometheus's own rule file parser (rulefmt), which checks every
// expression and template. The rule tests evaluate exactly these rules.
func committedRuleGroups(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	all := &rulefmt.RuleGroups{}
	for _, pr := range prometheusRules {
		raw, err := os.ReadFile(filepath.Join(deployDir, pr.file))
		if err != nil {
			t.Fatal(err)
		}
		var rule monitoringv1.PrometheusRule
		if err := yaml.UnmarshalStrict(raw, &rule); err != nil {
			t.Fatalf("%s is not a PrometheusRule: %v", pr.file, err)
		}
		// The spec is a rule file (groups:), as prometheus-operator hands
		// it to Prometheus.
		spec, err := yaml.Marshal(rule.Spec)
		if err != nil {
			t.Fatal(err)
		}
		groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promql, promslog.NewNopLogger())
		if len(errs) > 0 {
			t.Fatalf("%s: %v", pr.file, errs)
		}
		all.Groups = append(all.Groups, groups.Groups...)
	}
	return all
}

func TestEveryRuleParses(t *testing.T) {
	groups := committedRuleGroups(t)
	var names []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
			if r.Record != "" {
				t.Errorf("%s: recording rules are not tested here", r.Record)
			}
			for _, key := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[key] == "" {
					t.Errorf("%s has no %s", r.Alert, key)
				}
			}
			if s := r.Labels["severity"]; s != critical && s != warning {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
		}
	}
	var want []string
	for _, a := range allAlerts() {
		want = append(want, a.name)
	}
	if !slices.Equal(names, want) {
		t.Errorf("the committed alerts are %v, want %v", names, want)
	}
}

// Every alert has a runbook: a heading in docs/monitoring.md whose anchor
// is its runbook_url's.
func TestEveryAlertHasARunbook(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := map[string]bool{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if title, ok := strings.CutPrefix(line, "### "); ok {
			headings[strings.ToLower(strings.TrimSpace(title))] = true
		}
	}
	for _, g := range committedRuleGroups(t).Groups {
		for _, r := range g.Rules {
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], docsURL+"#")
			if !ok || !headings[anchor] {
				t.Errorf("%s: runbook_url %s names no heading of docs/monitoring.md", r.Alert, r.Annotations["runbook_url"])
			}
		}
	}
}

// ruleCase is one test in the manner of `promtool test rules`: a series
// history, in promqltest's load notation at one sample a minute from time
// 0, and the alerts of one rule firing at time at.
type ruleCase struct {
	name   string
	alert  string
	series string
	at     time.Duration
	// want are the firing alerts: their labels besides alertname and
	// severity, and their expanded summary. None: the alert must not fire.
	want []firing
}

type firing struct {
	labels  map[string]string
	summary string
}

// Labels every series of the two binaries carries, as the ServiceMonitors
// scrape them.
const (
	ctrl = `job="hcc-controller-metrics",namespace="control-plane",pod="hcc-controller-0"`
	api0 = `job="host-context-controller-api-gateway",namespace="control-plane",pod="hcc-api-0"`
)

// controllerLabels is ctrl as alert labels, plus extra.
func controllerLabels(extra ...string) map[string]string {
	return withLabels(map[string]string{"job": "hcc-controller-metrics", "namespace": "control-plane", "pod": "hcc-controller-0"}, extra)
}

func withLabels(m map[string]string, kv []string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// only is a firing alert whose labels are kv alone (an aggregation's).
func only(summary string, kv ...string) firing {
	return firing{labels: withLabels(map[string]string{}, kv), summary: summary}
}

var ruleCases = []ruleCase{
	// HCCNoLeader
	{name: "only a standby is scraped", alert: "HCCNoLeader",
		series: `up{` + ctrl + `} 1x20`,
		at:     10 * time.Minute,
		want:   []firing{only("No hcc-controller replica leads.")}},
	{name: "the leader goes and none takes over for 10 minutes", alert: "HCCNoLeader",
		series: `clerum_hcc_netpol_certified{` + ctrl + `} 1x4 stale`,
		at:     12 * time.Minute,
		want:   []firing{only("No hcc-controller replica leads.")}},
	{name: "a leader exports its series", alert: "HCCNoLeader",
		series: `clerum_hcc_netpol_certified{` + ctrl + `} 1x20`,
		at:     10 * time.Minute},
	{name: "a handover leaves no leader for 3 minutes", alert: "HCCNoLeader",
		series: `clerum_hcc_netpol_certified{` + ctrl + `} 1x4 stale _x2 1x10`,
		at:     7 * time.Minute},

	// HCCNetworkPolicyNotCertified
	{name: "the leader never certifies", alert: "HCCNetworkPolicyNotCertified",
		series: `clerum_hcc_netpol_certified{` + ctrl + `} 0x20`,
		at:     12 * time.Minute,
		want:   []firing{{labels: controllerLabels(), summary: "The hcc-controller leader hcc-controller-0 has not certified NetworkPolicy revocation."}}},
	{name: "the leader certifies within 10 minutes", alert: "HCCNetworkPolicyNotCertified",
		series: `clerum_hcc_netpol_certified{` + ctrl + `} 0x8 1x20`,
		at:     20 * time.Minute},
	{name: "a leader 9 minutes into certifying", alert: "HCCNetworkPolicyNotCertified",
		series: `clerum_hcc_netpol_certified{` + ctrl + `} 0x20`,
		at:     9 * time.Minute},

	// HCCNetworkPolicyPassesFailing
	{name: "every full pass fails", alert: "HCCNetworkPolicyPassesFailing",
		series: `clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="full",result="error"} 0+1x40
clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="full",result="success"} 0x40`,
		at:   20 * time.Minute,
		want: []firing{only("Full NetworkPolicy passes keep failing.")}},
	{name: "a leader whose full passes never succeeded (no success series)", alert: "HCCNetworkPolicyPassesFailing",
		series: `clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="full",result="error"} 0+1x40`,
		at:     20 * time.Minute,
		want:   []firing{only("Full NetworkPolicy passes keep failing.")}},
	{name: "full passes have failed for 10 minutes so far", alert: "HCCNetworkPolicyPassesFailing",
		series: `clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="full",result="error"} 0+1x40
clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="full",result="success"} 0x40`,
		at: 10 * time.Minute},
	{name: "full passes fail but some succeed", alert: "HCCNetworkPolicyPassesFailing",
		series: `clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="full",result="error"} 0+1x40
clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="full",result="success"} 0+1x40`,
		at: 20 * time.Minute},
	{name: "full passes fail while incremental passes succeed", alert: "HCCNetworkPolicyPassesFailing",
		series: `clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="full",result="error"} 0+1x40
clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="incremental",result="success"} 0+1x40`,
		at:   20 * time.Minute,
		want: []firing{only("Full NetworkPolicy passes keep failing.")}},
	{name: "only defaults passes fail", alert: "HCCNetworkPolicyPassesFailing",
		series: `clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="defaults",result="error"} 0+1x40
clerum_hcc_netpol_pass_duration_seconds_count{` + ctrl + `,kind="full",result="success"} 0x40`,
		at: 20 * time.Minute},

	// HCCNetworkPolicyWriteErrors
	{name: "updates keep failing", alert: "HCCNetworkPolicyWriteErrors",
		series: `clerum_hcc_netpol_write_errors_total{` + ctrl + `,verb="update"} 0+1x40
clerum_hcc_netpol_write_errors_total{` + ctrl + `,verb="create"} 0x40`,
		at:   20 * time.Minute,
		want: []firing{only("NetworkPolicy update writes are failing.", "verb", "update")}},
	{name: "updates fail for 4 minutes, then succeed", alert: "HCCNetworkPolicyWriteErrors",
		series: `clerum_hcc_netpol_write_errors_total{` + ctrl + `,verb="update"} 0+1x4 4x40`,
		at:     12 * time.Minute},

	// HCCNetworkPolicyOrphanCapTripped
	{name: "the absolute cap trips once", alert: "HCCNetworkPolicyOrphanCapTripped",
		series: `clerum_hcc_netpol_orphan_sweep_capped_total{` + ctrl + `,rule="absolute"} 0x10 1x30
clerum_hcc_netpol_orphan_sweep_capped_total{` + ctrl + `,rule="percent"} 0x40`,
		at:   15 * time.Minute,
		want: []firing{{labels: controllerLabels("rule", "absolute"), summary: "The absolute orphan cap held back NetworkPolicy deletes."}}},
	{name: "no cap trips", alert: "HCCNetworkPolicyOrphanCapTripped",
		series: `clerum_hcc_netpol_orphan_sweep_capped_total{` + ctrl + `,rule="absolute"} 0x40`,
		at:     30 * time.Minute},
	{name: "a cap tripped more than an hour ago", alert: "HCCNetworkPolicyOrphanCapTripped",
		series: `clerum_hcc_netpol_orphan_sweep_capped_total{` + ctrl + `,rule="percent"} 0 1x80`,
		at:     75 * time.Minute},

	// HCCHostOrphanCapTripped
	{name: "the Host cap trips once", alert: "HCCHostOrphanCapTripped",
		series: `clerum_hcc_host_orphan_cap_trips_total{` + ctrl + `} 0x10 1x30`,
		at:     15 * time.Minute,
		want:   []firing{{labels: controllerLabels(), summary: "The Host orphan cap held back deletes."}}},
	{name: "the Host cap tripped more than an hour ago", alert: "HCCHostOrphanCapTripped",
		series: `clerum_hcc_host_orphan_cap_trips_total{` + ctrl + `} 0 1x80`,
		at:     75 * time.Minute},

	// HCCUnmanagedConflict
	{name: "two names stay held", alert: "HCCUnmanagedConflict",
		series: `clerum_hcc_netpol_unmanaged_conflicts{` + ctrl + `} 2x40`,
		at:     31 * time.Minute,
		want:   []firing{{labels: controllerLabels(), summary: "NetworkPolicy names HCC needs are held by objects it does not manage (2)."}}},
	{name: "a held name is released within 30 minutes", alert: "HCCUnmanagedConflict",
		series: `clerum_hcc_netpol_unmanaged_conflicts{` + ctrl + `} 2x20 0x20`,
		at:     20 * time.Minute},

	// HCCEgressDNSFailures
	{name: "a hostname keeps failing to resolve", alert: "HCCEgressDNSFailures",
		series: `clerum_hcc_netpol_dns_failures_total{` + ctrl + `,server="lookup"} 0+1x40`,
		at:     20 * time.Minute,
		want:   []firing{only("Egress hostnames of McpServer lookup do not resolve.", "server", "lookup")}},
	{name: "a lookup fails every 5 minutes", alert: "HCCEgressDNSFailures",
		series: `clerum_hcc_netpol_dns_failures_total{` + ctrl + `,server="lookup"} 1x4 2x4 3x4 4x4 5x4 6x4 7x4 8x4`,
		at:     30 * time.Minute,
		want:   []firing{only("Egress hostnames of McpServer lookup do not resolve.", "server", "lookup")}},
	{name: "a hostname has failed to resolve for 10 minutes so far", alert: "HCCEgressDNSFailures",
		series: `clerum_hcc_netpol_dns_failures_total{` + ctrl + `,server="lookup"} 0+1x40`,
		at:     10 * time.Minute},
	{name: "lookups fail for 3 minutes, then resolve", alert: "HCCEgressDNSFailures",
		series: `clerum_hcc_netpol_dns_failures_total{` + ctrl + `,server="lookup"} 0x4 1 2 3 4x40`,
		at:     21 * time.Minute},

	// HCCMcpServersBlocked
	{name: "a server stays blocked", alert: "HCCMcpServersBlocked",
		series: `clerum_hcc_mcpserver_blocked{` + ctrl + `,reason="ImageNotAllowed"} 1x30
clerum_hcc_mcpserver_blocked{` + ctrl + `,reason="SecretsMissing"} 0x30`,
		at:   20 * time.Minute,
		want: []firing{only("McpServers are blocked: ImageNotAllowed (1).", "reason", "ImageNotAllowed")}},
	{name: "a server is blocked for 10 minutes", alert: "HCCMcpServersBlocked",
		series: `clerum_hcc_mcpserver_blocked{` + ctrl + `,reason="SecretsMissing"} 1x10 0x20`,
		at:     10 * time.Minute},

	// HCCHostsBlocked
	{name: "a Host stays blocked", alert: "HCCHostsBlocked",
		series: `clerum_hcc_host_blocked{` + ctrl + `,reason="ContextMissing"} 3x30`,
		at:     20 * time.Minute,
		want:   []firing{only("Hosts are blocked: ContextMissing (3).", "reason", "ContextMissing")}},
	{name: "a Host is blocked for 10 minutes", alert: "HCCHostsBlocked",
		series: `clerum_hcc_host_blocked{` + ctrl + `,reason="ContextMissing"} 1x10 0x20`,
		at:     10 * time.Minute},
	{name: "no Host is blocked", alert: "HCCHostsBlocked",
		series: `clerum_hcc_host_blocked{` + ctrl + `,reason="ContextMissing"} 0x30`,
		at:     20 * time.Minute},

	// HCCHostCredentialRefreshFailing
	{name: "a credential runs down unrefreshed", alert: "HCCHostCredentialRefreshFailing",
		series: `clerum_hcc_host_credential_expiry_seconds{` + ctrl + `} 1000-30x40`,
		at:     25 * time.Minute,
		want:   []firing{{labels: controllerLabels(), summary: "A Host's bootstrap credential expires in 4m 10s and has not been refreshed."}}},
	{name: "a credential is refreshed in its window", alert: "HCCHostCredentialRefreshFailing",
		series: `clerum_hcc_host_credential_expiry_seconds{` + ctrl + `} 1000-30x15 3600-30x25`,
		at:     25 * time.Minute},
	{name: "a refresh comes late but within 5 minutes", alert: "HCCHostCredentialRefreshFailing",
		series: `clerum_hcc_host_credential_expiry_seconds{` + ctrl + `} 1000-60x12 3600x20`,
		at:     12 * time.Minute},
	{name: "no Host has a credential", alert: "HCCHostCredentialRefreshFailing",
		series: `clerum_hcc_host_credential_expiry_seconds{` + ctrl + `}` + strings.Repeat(" +Inf", 30),
		at:     20 * time.Minute},

	// HCCControlAPIBreakerOpen
	{name: "the breaker stays open", alert: "HCCControlAPIBreakerOpen",
		series: `clerum_hcc_host_control_api_breaker_open{` + ctrl + `} 0x5 1x20`,
		at:     15 * time.Minute,
		want:   []firing{{labels: controllerLabels(), summary: "The Control API breaker has been open for 5 minutes."}}},
	{name: "the breaker closes within 5 minutes", alert: "HCCControlAPIBreakerOpen",
		series: `clerum_hcc_host_control_api_breaker_open{` + ctrl + `} 0x5 1x3 0x20`,
		at:     7 * time.Minute},

	// HCCControlAPIErrors
	{name: "the Control API keeps answering 503", alert: "HCCControlAPIErrors",
		series: `clerum_hcc_host_control_api_requests_total{` + ctrl + `,route="/internal/v1/mcp-host/bootstrap-credentials",code="503"} 0+3x40
clerum_hcc_host_control_api_requests_total{` + ctrl + `,route="/internal/v1/mcp-host/bootstrap-credentials",code="200"} 0+1x40`,
		at:   20 * time.Minute,
		want: []firing{only("Control API requests fail with 503.", "code", "503")}},
	{name: "only canceled attempts, the controller's own shutdowns", alert: "HCCControlAPIErrors",
		series: `clerum_hcc_host_control_api_requests_total{` + ctrl + `,route="/internal/v1/mcp-host/bootstrap-credentials",code="canceled"} 0+1x40
clerum_hcc_host_control_api_requests_total{` + ctrl + `,route="/internal/v1/mcp-host/bootstrap-credentials",code="200"} 0+1x40`,
		at: 20 * time.Minute},
	{name: "timeouts for 3 minutes, then answers", alert: "HCCControlAPIErrors",
		series: `clerum_hcc_host_control_api_requests_total{` + ctrl + `,route="/internal/v1/mcp-host/bootstrap-credentials",code="timeout"} 0x4 1 2 3 4x40`,
		at:     16 * time.Minute},

	// HCCWorkqueueBacklog
	{name: "Host items wait 10 minutes", alert: "HCCWorkqueueBacklog",
		series: `workqueue_queue_duration_seconds_sum{` + ctrl + `,name="host"} 0+600x40
workqueue_queue_duration_seconds_count{` + ctrl + `,name="host"} 0+1x40
workqueue_depth{` + ctrl + `,name="host"} 5x40
workqueue_work_duration_seconds_count{` + ctrl + `,name="host"} 0+1x40`,
		at:   30 * time.Minute,
		want: []firing{only("The host work queue has a backlog.", "name", "host")}},
	{name: "the netpol queue is stuck: never empty, nothing processed", alert: "HCCWorkqueueBacklog",
		series: `workqueue_depth{` + ctrl + `,name="netpol"} 1x40
workqueue_queue_duration_seconds_count{` + ctrl + `,name="netpol"} 7x40
workqueue_queue_duration_seconds_sum{` + ctrl + `,name="netpol"} 1x40
workqueue_work_duration_seconds_count{` + ctrl + `,name="netpol"} 6x40`,
		at:   30 * time.Minute,
		want: []firing{only("The netpol work queue has a backlog.", "name", "netpol")}},
	{name: "Host items have waited 10 minutes for 10 minutes so far", alert: "HCCWorkqueueBacklog",
		series: `workqueue_queue_duration_seconds_sum{` + ctrl + `,name="host"} 0+600x40
workqueue_queue_duration_seconds_count{` + ctrl + `,name="host"} 0+1x40`,
		at: 11 * time.Minute},
	{name: "a busy queue drains: items wait a minute, work is done", alert: "HCCWorkqueueBacklog",
		series: `workqueue_queue_duration_seconds_sum{` + ctrl + `,name="host"} 0+60x40
workqueue_queue_duration_seconds_count{` + ctrl + `,name="host"} 0+1x40
workqueue_depth{` + ctrl + `,name="host"} 5x40
workqueue_work_duration_seconds_count{` + ctrl + `,name="host"} 0+1x40`,
		at: 30 * time.Minute},
	{name: "another controller's stuck queue", alert: "HCCWorkqueueBacklog",
		series: `workqueue_depth{job="kube-controller-manager",name="deployment"} 1x40
workqueue_work_duration_seconds_count{job="kube-controller-manager",name="deployment"} 6x40
workqueue_queue_duration_seconds_sum{job="kube-controller-manager",name="deployment"} 0+900x40
workqueue_queue_duration_seconds_count{job="kube-controller-manager",name="deployment"} 0+1x40`,
		at: 30 * time.Minute},

	// HCCFileSystemsDegraded
	{name: "a SharedFileSystem and a GlobalFileSystem are both Degraded", alert: "HCCFileSystemsDegraded",
		series: `clerum_hcc_sfs_filesystems{` + ctrl + `,phase="Degraded"} 1x30
clerum_hcc_gfs_globalfilesystems{` + ctrl + `,phase="Degraded"} 2x30`,
		at: 20 * time.Minute,
		want: []firing{
			{labels: controllerLabels("phase", "Degraded", "kind", "SharedFileSystem"), summary: "SharedFileSystems are Degraded (1)."},
			{labels: controllerLabels("phase", "Degraded", "kind", "GlobalFileSystem"), summary: "GlobalFileSystems are Degraded (2)."},
		}},
	{name: "a SharedFileSystem is Degraded for 10 minutes", alert: "HCCFileSystemsDegraded",
		series: `clerum_hcc_sfs_filesystems{` + ctrl + `,phase="Degraded"} 1x10 0x20`,
		at:     10 * time.Minute},
	{name: "every file system is Ready", alert: "HCCFileSystemsDegraded",
		series: `clerum_hcc_sfs_filesystems{` + ctrl + `,phase="Degraded"} 0x30
clerum_hcc_sfs_filesystems{` + ctrl + `,phase="Ready"} 3x30
clerum_hcc_gfs_globalfilesystems{` + ctrl + `,phase="Degraded"} 0x30`,
		at: 20 * time.Minute},

	// HCCHostTokensRefused
	{name: "tokens keep failing their signature", alert: "HCCHostTokensRefused",
		series: `clerum_hcc_api_auth_failures_total{` + api0 + `,reason="signature"} 0+5x30`,
		at:     15 * time.Minute,
		want:   []firing{only("hcc-api refuses Host tokens: signature.", "reason", "signature")}},
	{name: "tokens have failed their signature for 8 minutes so far", alert: "HCCHostTokensRefused",
		series: `clerum_hcc_api_auth_failures_total{` + api0 + `,reason="signature"} 0+5x30`,
		at:     8 * time.Minute},
	{name: "expired tokens, which clients renew", alert: "HCCHostTokensRefused",
		series: `clerum_hcc_api_auth_failures_total{` + api0 + `,reason="expired"} 0+5x30`,
		at:     15 * time.Minute},
	{name: "tokens for an unknown key for 3 minutes", alert: "HCCHostTokensRefused",
		series: `clerum_hcc_api_auth_failures_total{` + api0 + `,reason="unknown_kid"} 0x4 1 2 3 4x30`,
		at:     16 * time.Minute},

	// HCCNetworkPolicyStale (prometheusrule-resync.yaml)
	{name: "full passes stop succeeding", alert: "HCCNetworkPolicyStale",
		series: `clerum_hcc_netpol_last_success_timestamp_seconds{` + ctrl + `} 0 60 120 180 240 300 300x60`,
		at:     50 * time.Minute,
		want:   []firing{{labels: controllerLabels(), summary: "No full NetworkPolicy pass has succeeded for 45m 0s."}}},
	{name: "a full pass succeeds every 10 minutes", alert: "HCCNetworkPolicyStale",
		series: `clerum_hcc_netpol_last_success_timestamp_seconds{` + ctrl + `} 0x9 600x10 1200x10 1800x10 2400x10 3000x10`,
		at:     60 * time.Minute},
	{name: "passes stop for 35 minutes, then succeed", alert: "HCCNetworkPolicyStale",
		series: `clerum_hcc_netpol_last_success_timestamp_seconds{` + ctrl + `} 0 60 120 180 240 300x34 2400x20`,
		at:     39 * time.Minute},

	// HCCAPICachesNotSynced
	{name: "one informer of a replica never syncs", alert: "HCCAPICachesNotSynced",
		series: `clerum_hcc_api_informer_synced{` + api0 + `,informer="mcpservers"} 0x10
clerum_hcc_api_informer_synced{` + api0 + `,informer="hosts"} 1x10`,
		at:   8 * time.Minute,
		want: []firing{only("hcc-api hcc-api-0 has not synced its caches.", "pod", "hcc-api-0")}},
	{name: "caches sync within 5 minutes", alert: "HCCAPICachesNotSynced",
		series: `clerum_hcc_api_informer_synced{` + api0 + `,informer="mcpservers"} 0x3 1x10`,
		at:     3 * time.Minute},

	// HCCAPIErrors
	{name: "10% of inventory requests answer 503", alert: "HCCAPIErrors",
		series: `clerum_hcc_api_requests_total{` + api0 + `,route="/api/v2/hosts/self/mcpservers",code="200"} 0+90x30
clerum_hcc_api_requests_total{` + api0 + `,route="/api/v2/hosts/self/mcpservers",code="503"} 0+10x30`,
		at:   20 * time.Minute,
		want: []firing{only("10% of hcc-api requests to /api/v2/hosts/self/mcpservers fail.", "route", "/api/v2/hosts/self/mcpservers")}},
	{name: "10% of inventory requests have answered 503 for 8 minutes so far", alert: "HCCAPIErrors",
		series: `clerum_hcc_api_requests_total{` + api0 + `,route="/api/v2/hosts/self/mcpservers",code="200"} 0+90x30
clerum_hcc_api_requests_total{` + api0 + `,route="/api/v2/hosts/self/mcpservers",code="503"} 0+10x30`,
		at: 8 * time.Minute},
	{name: "2% of inventory requests answer 503", alert: "HCCAPIErrors",
		series: `clerum_hcc_api_requests_total{` + api0 + `,route="/api/v2/hosts/self/mcpservers",code="200"} 0+98x30
clerum_hcc_api_requests_total{` + api0 + `,route="/api/v2/hosts/self/mcpservers",code="503"} 0+2x30`,
		at: 20 * time.Minute},
	{name: "an unready replica answers /ready 503", alert: "HCCAPIErrors",
		series: `clerum_hcc_api_requests_total{` + api0 + `,route="/ready",code="503"} 0+10x30`,
		at:     20 * time.Minute},
	{name: "401s are callers' mistakes", alert: "HCCAPIErrors",
		series: `clerum_hcc_api_requests_total{` + api0 + `,route="/api/v2/hosts/self/mcpservers",code="401"} 0+50x30
clerum_hcc_api_requests_total{` + api0 + `,route="/api/v2/hosts/self/mcpservers",code="200"} 0+50x30`,
		at: 20 * time.Minute},

	// HCCAPILatency
	{name: "most inventory requests take half a second", alert: "HCCAPILatency",
		series: `clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="0.001"} 0+10x30
clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="0.25"} 0+10x30
clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="1"} 0+100x30
clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="+Inf"} 0+100x30`,
		at:   20 * time.Minute,
		want: []firing{only("hcc-api answers /api/v1/mcpservers in 991.7ms at the 99th percentile.", "route", "/api/v1/mcpservers")}},
	{name: "inventory requests have been slow for 10 minutes so far", alert: "HCCAPILatency",
		series: `clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="0.25"} 0+10x30
clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="1"} 0+100x30
clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="+Inf"} 0+100x30`,
		at: 10 * time.Minute},
	{name: "inventory requests take under a millisecond", alert: "HCCAPILatency",
		series: `clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="0.001"} 0+100x30
clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="0.25"} 0+100x30
clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="1"} 0+100x30
clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/api/v1/mcpservers",le="+Inf"} 0+100x30`,
		at: 20 * time.Minute},
	{name: "a slow scrape of /metrics", alert: "HCCAPILatency",
		series: `clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/metrics",le="0.25"} 0x30
clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/metrics",le="1"} 0+2x30
clerum_hcc_api_request_duration_seconds_bucket{` + api0 + `,route="/metrics",le="+Inf"} 0+2x30`,
		at: 20 * time.Minute},
}

// evaluationInterval is how often the rules are evaluated in the tests:
// prometheus-operator's default evaluationInterval.
const evaluationInterval = 30 * time.Second

func TestRules(t *testing.T) {
	groups := committedRuleGroups(t)
	for _, c := range ruleCases {
		t.Run(c.alert+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			got := evaluate(t, groups, c.series, c.alert, c.at)
			var want []string
			for _, w := range c.want {
				want = append(want, describeAlert(labels.FromMap(w.labels), w.summary))
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("at %s, firing:\n\t%s\nwant:\n\t%s", c.at, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
			}
		})
	}
}

// Each alert has a history that fires it and one that must not.
func TestEveryAlertIsTestedBothWays(t *testing.T) {
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, c := range ruleCases {
		if len(c.want) > 0 {
			fires[c.alert] = true
		} else {
			quiet[c.alert] = true
		}
	}
	for _, a := range allAlerts() {
		if !fires[a.name] {
			t.Errorf("%s: no series history fires it", a.name)
		}
		if !quiet[a.name] {
			t.Errorf("%s: no series history that must not fire it", a.name)
		}
	}
}

// evaluate loads series, evaluates the rule alert of groups every
// evaluationInterval from time 0 to at, as Prometheus does, and returns
// its firing alerts at time at, described by describeAlert and sorted. It
// follows promtool's rule unit tests (cmd/promtool/unittest.go): the same
// lazy loader, rule manager and evaluation loop, over the one rule under
// test (no rule reads another's output: there are no recording rules).
func evaluate(t *testing.T, groups *rulefmt.RuleGroups, series, alert string, at time.Duration) []string {
	t.Helper()
	var only rulefmt.RuleGroups
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == alert {
				g.Rules = []rulefmt.Rule{r}
				only.Groups = append(only.Groups, g)
			}
		}
	}
	if len(only.Groups) != 1 {
		t.Fatalf("%d rules %s", len(only.Groups), alert)
	}
	suite, err := promqltest.NewLazyLoader("load 1m\n"+indent(series), promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: promql,
	})
	if err != nil {
		t.Fatalf("loading the series: %v", err)
	}
	defer suite.Close()

	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       promql,
		GroupLoader:  committedLoader{&only},
	})
	loaded, errs := m.LoadGroups(evaluationInterval, labels.EmptyLabels(), "", nil, false, prometheusRuleFile)
	if len(errs) > 0 {
		t.Fatalf("loading the rules: %v", errs)
	}
	// As promtool: restored, so that the ALERTS series are written.
	var group *rules.Group
	var ruleOf *rules.AlertingRule
	for _, g := range loaded {
		group = g
		ruleOf = g.Rules()[0].(*rules.AlertingRule)
		ruleOf.SetRestored(true)
	}

	start := time.Unix(0, 0).UTC()
	for ts := start; !ts.After(start.Add(at)); ts = ts.Add(evaluationInterval) {
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				t.Fatal(err)
			}
			group.Eval(suite.Context(), ts)
			if err := ruleOf.LastError(); err != nil {
				t.Fatalf("rule %s at %s: %v", alert, ts.Sub(start), err)
			}
		})
	}
	var got []string
	for _, a := range ruleOf.ActiveAlerts() {
		if a.State == rules.StateFiring {
			got = append(got, describeAlert(a.Labels, a.Annotations.Get("summary")))
		}
	}
	slices.Sort(got)
	return got
}

// describeAlert is an alert's labels and summary as one line. The
// expected labels leave out alertname and severity, which the rule adds.
func describeAlert(l labels.Labels, summary string) string {
	b := labels.NewBuilder(l).Del(labels.AlertName, "severity")
	return fmt.Sprintf("%s %q", b.Labels(), summary)
}

// indent indents every line of series for a load command.
func indent(series string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(series), "\n") {
		b.WriteString("  " + strings.TrimSpace(line) + "\n")
	}
	return b.String()
}

// committedLoader hands the rule manager the committed rule groups,
// whatever file it is asked for.
type committedLoader struct{ groups *rulefmt.RuleGroups }

func (l committedLoader) Load(string, bool, model.ValidationScheme) (*rulefmt.RuleGroups, []error) {
	return l.groups, nil
}

func (committedLoader) Parse(query string) (parser.Expr, error) { return promql.ParseExpr(query) }
