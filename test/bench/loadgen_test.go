//go:build integration

package bench

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The send lag is the generator's delay before a request leaves, and the
// latency runs from the same due time to the answer: a server's time is
// in the latency and not in the send lag; the generator's own queueing
// (every worker busy) is in both.
func TestOfferLoadSeparatesTheGeneratorsDelayFromTheServers(t *testing.T) {
	const serverTime = 20 * time.Millisecond
	slow := func(int) (int, []byte, error) { time.Sleep(serverTime); return http.StatusOK, nil, nil }
	ok := func(int, []byte) error { return nil }

	run := offerLoad(200, 500*time.Millisecond, 0, 0, http.StatusOK, slow, ok)
	require.Len(t, run.latencies, 100)
	require.Len(t, run.sendLags, 100)
	for i := range run.latencies {
		assert.GreaterOrEqual(t, run.latencies[i]-run.sendLags[i], serverTime, "request %d: the server's time is latency, not send lag", i)
	}

	// Every request started in the first 400 ms is held until then: the
	// first loadWorkers (due in the first 256 ms, at 1,000 a second) take
	// every worker, so those due from 256 to 400 ms wait for one, up to
	// 144 ms. That wait is the generator's: it is in their send lag.
	var once sync.Once
	var until time.Time
	held := func(int) (int, []byte, error) {
		once.Do(func() { until = time.Now().Add(400 * time.Millisecond) })
		time.Sleep(time.Until(until))
		return http.StatusOK, nil, nil
	}
	res := summarize([]loadRun{offerLoad(1000, 500*time.Millisecond, 0, 0, http.StatusOK, held, ok)})
	require.Equal(t, 500, res.requests)
	assert.Greater(t, res.p99SendLag, 100*time.Millisecond, "the wait for a worker is send lag")
	assert.GreaterOrEqual(t, res.p99, res.p99SendLag, "and latency")
}
