package main

import (
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/clerum/hcc/internal/testing/metricsref"
	"github.com/clerum/hcc/pkg/config"
	hccfake "github.com/clerum/hcc/pkg/generated/clientset/versioned/fake"
)

// Every metric family the shipped alerts and dashboard read of
// hcc-controller (deploy/monitoring/metrics.txt) is one the leader's
// registry describes, with the labels they read. The registry is built as
// reconcile builds it, on fake clients: descriptors, unlike a scrape, list
// a vector before its first series (docs/monitoring.md).
func TestMonitoringReadsRegisteredMetrics(t *testing.T) {
	env := map[string]string{"INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET": "test"}
	cfg, err := config.LoadFrom(config.Controller, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	registry := newRegistry()
	clients := clientSet{kube: fake.NewClientset(), hcc: hccfake.NewClientset()}
	deps := newDeps(zerolog.Nop(), cfg, clients, record.NewFakeRecorder(100), newReadiness(cfg.Core), registry, nil)
	_, err = buildReconcilers(deps)
	require.NoError(t, err)
	metricsref.CheckDescribed(t, binary, metricsref.Described(t, registry))
}
