package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// monitoringGroup is the Prometheus Operator's API group.
const monitoringGroup = "monitoring.coreos.com"

// deploy/monitoring installs the two ServiceMonitors and the PrometheusRule
// hcc beside the Services in control-plane, and the dashboard as a
// ConfigMap Grafana's sidecar loads, holding dashboard.json as committed.
// The resync rule, which would fire on any cluster without the NetworkPolicy
// resync timer, is applied by hand, not by the kustomization.
func TestMonitoringInstall(t *testing.T) {
	objs := build(t, monitoringTree)
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	slices.Sort(got)
	assert.Equal(t, []string{
		"ConfigMap monitoring/hcc-dashboard",
		"PrometheusRule control-plane/hcc",
		"ServiceMonitor control-plane/hcc-api",
		"ServiceMonitor control-plane/hcc-controller",
	}, got)

	var dashboard corev1.ConfigMap
	typed(t, find(t, objs, "ConfigMap", "hcc-dashboard"), &dashboard)
	assert.Equal(t, "1", dashboard.Labels["grafana_dashboard"], "the label Grafana's dashboard sidecar loads")
	committed, err := os.ReadFile(filepath.Join(repoRoot(t), monitoringTree, "dashboard.json"))
	require.NoError(t, err)
	assert.Equal(t, string(committed), dashboard.Data["hcc.json"])
}

// `kubectl apply -k deploy/` and the overlays must not need the Prometheus
// Operator: one object of its CRDs would fail the whole apply on a cluster
// without them.
func TestNoOtherTreeNeedsThePrometheusOperator(t *testing.T) {
	for _, tree := range []string{productionTree, baseTree, minikubeTree} {
		for _, o := range build(t, tree) {
			assert.NotEqual(t, monitoringGroup, o.GroupVersionKind().Group, "%s holds %s %s", tree, o.GetKind(), o.GetName())
		}
	}
}
