package main

import (
	"testing"

	"github.com/clerum/hcc/internal/testing/metricsref"
)

// Every metric family the shipped alerts and dashboard read of hcc-api
// (deploy/monitoring/metrics.txt) is one its registry describes, with the
// labels they read (docs/monitoring.md).
func TestMonitoringReadsRegisteredMetrics(t *testing.T) {
	registry, _ := newRegistry()
	metricsref.CheckDescribed(t, binary, metricsref.Described(t, registry))
}
