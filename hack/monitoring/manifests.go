package main

import (
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The namespace and labels of what deploy/monitoring installs beside the
// Services of deploy/base.
const (
	namespace = "control-plane"
	// controllerService and apiService are the Services of deploy/base that
	// front the binaries' /metrics (HCC_CONTROLLER_PORT 8082 and
	// CONTEXT_MAPPER_PORT 8081), both on the port named http.
	controllerService = "hcc-controller-metrics"
	apiService        = "host-context-controller-api-gateway"
	metricsPort       = "http"
	// controllerApp and apiApp are the app labels of those Services.
	controllerApp = "host-context-controller"
	apiApp        = "host-context-controller-api-gateway"
)

// ruleGroup is one group of a PrometheusRule.
type ruleGroup struct {
	name   string
	alerts []alert
}

// prometheusRule is one PrometheusRule and the file it is written to.
type prometheusRule struct {
	file, name string
	groups     []ruleGroup
}

// prometheusRules are the PrometheusRules: hcc, which the kustomization
// installs, with a group per binary, and hcc-resync, applied by hand where
// the NetworkPolicy resync timer is set.
var prometheusRules = []prometheusRule{
	{file: prometheusRuleFile, name: "hcc", groups: []ruleGroup{
		{name: "hcc-controller", alerts: controllerAlerts},
		{name: "hcc-api", alerts: apiAlerts},
	}},
	{file: resyncRuleFile, name: "hcc-resync", groups: []ruleGroup{
		{name: "hcc-resync", alerts: resyncAlerts},
	}},
}

// allAlerts is every alert of prometheusRules, in order.
func allAlerts() []alert {
	var out []alert
	for _, r := range prometheusRules {
		for _, g := range r.groups {
			out = append(out, g.alerts...)
		}
	}
	return out
}

// buildPrometheusRule is the PrometheusRule pr.
func buildPrometheusRule(pr prometheusRule) *monitoringv1.PrometheusRule {
	r := &monitoringv1.PrometheusRule{
		TypeMeta: metav1.TypeMeta{APIVersion: monitoringv1.SchemeGroupVersion.String(), Kind: monitoringv1.PrometheusRuleKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:      pr.name,
			Namespace: namespace,
			Labels:    map[string]string{"app.kubernetes.io/part-of": "hcc"},
		},
	}
	for _, g := range pr.groups {
		group := monitoringv1.RuleGroup{Name: g.name}
		for _, a := range g.alerts {
			rule := monitoringv1.Rule{
				Alert:  a.name,
				Expr:   intstr.FromString(a.expr),
				Labels: map[string]string{"severity": a.severity},
				Annotations: map[string]string{
					"summary":     a.summary,
					"description": a.description,
					"runbook_url": runbookURL(a.name),
				},
			}
			if a.hold != "" {
				hold := monitoringv1.Duration(a.hold)
				rule.For = &hold
			}
			group.Rules = append(group.Rules, rule)
		}
		r.Spec.Groups = append(r.Spec.Groups, group)
	}
	return r
}

// buildServiceMonitors are the ServiceMonitors of hcc-controller and
// hcc-api: each selects its binary's Service by its app label, in the
// Services' namespace, and scrapes /metrics on the port named http. The
// job label is Prometheus's default, the Service's name (controllerJob,
// apiJob).
func buildServiceMonitors() []*monitoringv1.ServiceMonitor {
	monitor := func(name, app string) *monitoringv1.ServiceMonitor {
		return &monitoringv1.ServiceMonitor{
			TypeMeta: metav1.TypeMeta{APIVersion: monitoringv1.SchemeGroupVersion.String(), Kind: monitoringv1.ServiceMonitorsKind},
			ObjectMeta: metav1.ObjectMeta{
				Name:      name,
				Namespace: namespace,
				Labels:    map[string]string{"app.kubernetes.io/part-of": "hcc"},
			},
			Spec: monitoringv1.ServiceMonitorSpec{
				Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				Endpoints: []monitoringv1.Endpoint{{
					Port:     metricsPort,
					Path:     "/metrics",
					Interval: "30s",
				}},
			},
		}
	}
	return []*monitoringv1.ServiceMonitor{
		monitor("hcc-controller", controllerApp),
		monitor("hcc-api", apiApp),
	}
}
