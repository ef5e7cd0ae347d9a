package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
pkg: github.com/clerum/hcc/pkg/netpol
BenchmarkCompute1000x10-2   	      30	  40000000 ns/op	 3000 policies/op
BenchmarkFloor1000x10-2   	     100	  10000000 ns/op	 3000 policies/op
pkg: github.com/clerum/hcc/pkg/api
BenchmarkInventoryLatency/plain-2   	  100000	     10000 ns/op	 100 p50-µs
BenchmarkInventoryLatency/cached-2   	  100000	     12000 ns/op	 150 p50-µs
pkg: github.com/clerum/hcc/test/bench
BenchmarkFleetConvergence/qps50-burst100-2  	 1	 44621259465 ns/op	 57.36 plain-writes/s	 57.26 writes/s	 0.9982 x-plain
BenchmarkControllerFleetScale/baseline-2  	 1	 500000000000 ns/op	 800 MiB-rss	 0 resync-writes
BenchmarkControllerFleetScale/current-2  	 1	 400000000000 ns/op	 500 MiB-rss	 0 resync-writes
BenchmarkAPIScale/inventory-2  	 1	 10002948415 ns/op	 0.8195 p50-ms	 5.422 p99-ms	 1.162 x-bare-p50	 1.790 x-bare-p99	 999.9 req/s	 2.5 x-other-p75
--- BENCH: BenchmarkAPIScale/inventory-2
    BenchmarkAPIScale/inventory-2 is a log line
`

// ratios maps "package benchmark metric" to the ratio printed beside it.
func ratios(t *testing.T) map[string]string {
	t.Helper()
	lines, err := parse(strings.NewReader(sample), nil)
	require.NoError(t, err)
	for i := range lines {
		pairSameLine(&lines[i])
	}
	pairSiblings(lines)
	out := map[string]string{}
	for _, l := range lines {
		for _, m := range l.metrics {
			out[l.pkg+" "+l.name+" "+m.unit] = m.ratio
		}
	}
	return out
}

func TestEachRatioSitsBesideTheFigureItBelongsTo(t *testing.T) {
	got := ratios(t)
	for key, want := range map[string]string{
		"pkg/netpol BenchmarkCompute1000x10 ns/op":                           "4.00 x-floor",
		"pkg/netpol BenchmarkCompute1000x10 policies/op":                     "",
		"pkg/netpol BenchmarkFloor1000x10 ns/op":                             "",
		"pkg/api BenchmarkInventoryLatency/cached p50-µs":                    "1.50 x-plain",
		"pkg/api BenchmarkInventoryLatency/plain p50-µs":                     "",
		"test/bench BenchmarkFleetConvergence/qps50-burst100 writes/s":       "1.00 x-plain",
		"test/bench BenchmarkFleetConvergence/qps50-burst100 ns/op":          "",
		"test/bench BenchmarkAPIScale/inventory p50-ms":                      "1.16 x-bare",
		"test/bench BenchmarkAPIScale/inventory p99-ms":                      "1.79 x-bare",
		"test/bench BenchmarkAPIScale/inventory req/s":                       "",
		"test/bench BenchmarkAPIScale/inventory x-other-p75":                 "2.50 x-other-p75",
		"test/bench BenchmarkFleetConvergence/qps50-burst100 plain-writes/s": "",
		"test/bench BenchmarkControllerFleetScale/current MiB-rss":           "0.62 x-baseline",
		"test/bench BenchmarkControllerFleetScale/current resync-writes":     "",
		"test/bench BenchmarkControllerFleetScale/baseline MiB-rss":          "",
	} {
		assert.Equal(t, want, got[key], key)
	}
	assert.NotContains(t, got, "test/bench BenchmarkFleetConvergence/qps50-burst100 x-plain", "a paired ratio is no row of its own")
}
