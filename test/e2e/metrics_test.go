//go:build integration

package e2e

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scrape reads a binary's /metrics (the Prometheus text format) into a map
// from series, as written ("name{label=\"v\",...}"), to value.
func scrape(t *testing.T, b *binary) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	scrapeLines(t, b, func(line string) {
		if line == "" || strings.HasPrefix(line, "#") {
			return
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	})
	return out
}

// scrapeLines calls f with each line of b's /metrics.
func scrapeLines(t *testing.T, b *binary, f func(line string)) {
	t.Helper()
	resp, err := http.Get(b.base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f(sc.Text())
	}
	require.NoError(t, sc.Err())
}

// queueAdds is the series of workqueue_adds_total for the queue name.
func queueAdds(name string) string { return `workqueue_adds_total{name="` + name + `"}` }

// netpolPasses is the series counting successful NetworkPolicy passes of
// kind (full or defaults).
func netpolPasses(kind string) string {
	return `clerum_hcc_netpol_pass_duration_seconds_count{kind="` + kind + `",result="success"}`
}

// waitQueuesIdle waits until every work queue of b is idle on two reads a
// second apart: empty, no item in progress, and every item added processed
// (workqueue_work_duration_seconds_count equals workqueue_adds_total).
func (e *env) waitQueuesIdle(b *binary) {
	e.t.Helper()
	idle := 0
	e.eventually("the work queues of "+b.name+" are idle", time.Minute, func() bool {
		if queuesIdle(scrape(e.t, b)) {
			idle++
		} else {
			idle = 0
		}
		time.Sleep(time.Second)
		return idle >= 2
	})
}

func queuesIdle(m map[string]float64) bool {
	for series, adds := range m {
		name, ok := strings.CutPrefix(series, "workqueue_adds_total")
		if !ok {
			continue
		}
		if m["workqueue_depth"+name] != 0 || m["workqueue_unfinished_work_seconds"+name] != 0 ||
			m["workqueue_work_duration_seconds_count"+name] != adds {
			return false
		}
	}
	return true
}
