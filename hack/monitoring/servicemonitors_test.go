package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// baseObjects are the Services, Deployments and NetworkPolicies of
// deploy/base, read from its YAML files.
type baseObjects struct {
	services    []corev1.Service
	deployments []appsv1.Deployment
	policies    []networkingv1.NetworkPolicy
}

func readBase(t *testing.T) baseObjects {
	t.Helper()
	var out baseObjects
	err := filepath.WalkDir(filepath.Join("..", "..", "deploy", "base"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || d.Name() == "kustomization.yaml" {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				return err
			}
			switch meta.Kind {
			case "Service":
				var s corev1.Service
				err = yaml.UnmarshalStrict(doc, &s)
				out.services = append(out.services, s)
			case "Deployment":
				var d appsv1.Deployment
				err = yaml.UnmarshalStrict(doc, &d)
				out.deployments = append(out.deployments, d)
			case "NetworkPolicy":
				var p networkingv1.NetworkPolicy
				err = yaml.UnmarshalStrict(doc, &p)
				out.policies = append(out.policies, p)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func committedServiceMonitors(t *testing.T) []monitoringv1.ServiceMonitor {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, serviceMonitorsFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []monitoringv1.ServiceMonitor
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var m monitoringv1.ServiceMonitor
		if err := yaml.UnmarshalStrict(doc, &m); err != nil {
			t.Fatalf("%s: %v", serviceMonitorsFile, err)
		}
		out = append(out, m)
	}
	return out
}

// Each ServiceMonitor selects exactly one Service of deploy/base, in its
// own namespace, and scrapes a port of it that the binary serves /metrics
// on and that the binary's NetworkPolicy admits from the monitoring
// namespace. The job label of its targets, the Service's name, is the one
// the rules select (controllerJob, apiJob).
func TestServiceMonitorsScrapeTheBinaries(t *testing.T) {
	base := readBase(t)
	wantJob := map[string]string{"hcc-controller": controllerJob, "hcc-api": apiJob}
	wantContainerPort := map[string]int32{"hcc-controller": 8082, "hcc-api": 8081} // HCC_CONTROLLER_PORT, CONTEXT_MAPPER_PORT
	monitors := committedServiceMonitors(t)
	if len(monitors) != len(wantJob) {
		t.Fatalf("%d ServiceMonitors, want one per binary", len(monitors))
	}
	for _, m := range monitors {
		selector, err := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if selector.Empty() {
			t.Errorf("%s selects every Service", m.Name)
		}
		if m.Spec.NamespaceSelector.Any || len(m.Spec.NamespaceSelector.MatchNames) > 0 {
			t.Errorf("%s looks beyond its own namespace", m.Name)
		}
		var selected []corev1.Service
		for _, s := range base.services {
			if s.Namespace == m.Namespace && selector.Matches(labels.Set(s.Labels)) {
				selected = append(selected, s)
			}
		}
		if len(selected) != 1 {
			t.Errorf("%s selects %d Services of deploy/base, want 1", m.Name, len(selected))
			continue
		}
		svc := selected[0]
		if svc.Name != wantJob[m.Name] {
			t.Errorf("%s scrapes Service %s, so its job is %s; the rules select job %q", m.Name, svc.Name, svc.Name, wantJob[m.Name])
		}
		if len(m.Spec.Endpoints) != 1 || m.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("%s: endpoints %+v, want /metrics on one port", m.Name, m.Spec.Endpoints)
			continue
		}
		var port *corev1.ServicePort
		for i := range svc.Spec.Ports {
			if svc.Spec.Ports[i].Name == m.Spec.Endpoints[0].Port {
				port = &svc.Spec.Ports[i]
			}
		}
		if port == nil {
			t.Errorf("%s scrapes port %q, which Service %s does not have", m.Name, m.Spec.Endpoints[0].Port, svc.Name)
			continue
		}
		// The port the Service sends to, on the pods it selects.
		number := containerPort(t, base, svc, port)
		if number != wantContainerPort[m.Name] {
			t.Errorf("%s reaches container port %d, want %d (/metrics)", m.Name, number, wantContainerPort[m.Name])
		}
		if !admitsMonitoring(base, svc, number) {
			t.Errorf("no NetworkPolicy of deploy/base admits the monitoring namespace to port %d of %s's pods", number, svc.Name)
		}
	}
}

// containerPort is the number of the container port svc's port targets on
// the pods of the Deployment svc selects.
func containerPort(t *testing.T, base baseObjects, svc corev1.Service, port *corev1.ServicePort) int32 {
	t.Helper()
	for _, d := range base.deployments {
		if d.Namespace != svc.Namespace || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				if p.Name == port.TargetPort.String() || p.ContainerPort == port.TargetPort.IntVal {
					return p.ContainerPort
				}
			}
		}
	}
	t.Errorf("no Deployment of deploy/base serves port %s of Service %s", port.TargetPort.String(), svc.Name)
	return 0
}

// admitsMonitoring reports whether a NetworkPolicy selecting svc's pods
// admits TCP port from the namespace monitoring.
func admitsMonitoring(base baseObjects, svc corev1.Service, port int32) bool {
	for _, p := range base.policies {
		if p.Namespace != svc.Namespace || !labels.SelectorFromSet(p.Spec.PodSelector.MatchLabels).Matches(labels.Set(svc.Spec.Selector)) {
			continue
		}
		for _, rule := range p.Spec.Ingress {
			fromMonitoring := false
			for _, peer := range rule.From {
				if peer.NamespaceSelector != nil && peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "monitoring" {
					fromMonitoring = true
				}
			}
			for _, rp := range rule.Ports {
				if fromMonitoring && rp.Port != nil && rp.Port.IntVal == port {
					return true
				}
			}
		}
	}
	return false
}

// Every job a rule or panel selects is one a ServiceMonitor scrapes.
func TestSelectedJobsAreScraped(t *testing.T) {
	scraped := map[string]bool{}
	for _, s := range readBase(t).services {
		for _, m := range committedServiceMonitors(t) {
			selector, _ := metav1.LabelSelectorAsSelector(&m.Spec.Selector)
			if s.Namespace == m.Namespace && selector.Matches(labels.Set(s.Labels)) {
				scraped[s.Name] = true
			}
		}
	}
	jobs := regexp.MustCompile(`job="([^"]*)"`)
	var texts []string
	for _, a := range allAlerts() {
		texts = append(texts, a.expr)
	}
	raw, err := os.ReadFile(filepath.Join(deployDir, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	texts = append(texts, strings.ReplaceAll(string(raw), `\"`, `"`))
	found := 0
	for _, text := range texts {
		for _, m := range jobs.FindAllStringSubmatch(text, -1) {
			found++
			if !scraped[m[1]] {
				t.Errorf("job %q is selected but no ServiceMonitor scrapes a Service of that name", m[1])
			}
		}
	}
	if found == 0 {
		t.Error("no rule or panel selects a job: this test checks nothing")
	}
}
