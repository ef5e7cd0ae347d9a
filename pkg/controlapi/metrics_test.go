package controlapi

import (
	"context"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricsCountEveryAttempt(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	h := newHarness(t, func(h *harness, w http.ResponseWriter, _ *http.Request, call int) {
		if call == 1 {
			respond(w, http.StatusBadGateway, "")
			return
		}
		issue(h, w)
	})
	_, err := h.client(t, func(o *Options) { o.Observe = m.Observe }).BootstrapCredential(context.Background(), testRequest)
	require.NoError(t, err)

	families, err := reg.Gather()
	require.NoError(t, err)
	requests := map[string]float64{} // code -> count
	var observations uint64
	for _, f := range families {
		for _, metric := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range metric.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			assert.Equal(t, RouteBootstrapCredentials, labels["route"])
			switch f.GetName() {
			case "clerum_hcc_host_control_api_requests_total":
				requests[labels["code"]] = metric.GetCounter().GetValue()
			case "clerum_hcc_host_control_api_request_duration_seconds":
				observations += metric.GetHistogram().GetSampleCount()
			default:
				t.Errorf("unexpected family %s", f.GetName())
			}
		}
	}
	assert.Equal(t, map[string]float64{"200": 1, "502": 1}, requests)
	assert.EqualValues(t, 2, observations, "one latency sample per attempt")
}

func TestNewMetricsRegistersOnAFreshRegistryOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	NewMetrics(reg)
	assert.Panics(t, func() { NewMetrics(reg) }, "a second registration on one registry is a bug")
	assert.NotPanics(t, func() { NewMetrics(prometheus.NewRegistry()) })
}
