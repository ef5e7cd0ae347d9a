package netpol

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The counters the shipped alerts count with increase() and rate() exist
// at zero, for every value of their closed label sets, before their first
// event: Prometheus sees no increase in a counter that appears at 1, so a
// single cap trip would never fire HCCNetworkPolicyOrphanCapTripped
// (docs/monitoring.md).
func TestCountersExistBeforeTheirFirstEvent(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	families, err := reg.Gather()
	require.NoError(t, err)
	series := map[string][]string{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels string
			for _, l := range m.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			value := m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			assert.Zero(t, value, "%s{%s}", f.GetName(), labels)
			series[f.GetName()] = append(series[f.GetName()], labels)
		}
	}
	assert.ElementsMatch(t, []string{"rule=absolute ", "rule=percent "}, series["clerum_hcc_netpol_orphan_sweep_capped_total"])
	verbs := []string{"verb=create ", "verb=delete ", "verb=update "}
	assert.ElementsMatch(t, verbs, series["clerum_hcc_netpol_write_errors_total"])
	assert.ElementsMatch(t, verbs, series["clerum_hcc_netpol_writes_total"])
	assert.ElementsMatch(t, []string{
		"kind=defaults result=error ", "kind=defaults result=success ",
		"kind=full result=error ", "kind=full result=success ",
		"kind=incremental result=error ", "kind=incremental result=success ",
	}, series["clerum_hcc_netpol_pass_duration_seconds"])
}
