//go:build integration

package bench

import (
	"math"
	"net/http"
	"slices"
	"time"
)

// loadWorkers is the load generator's pool: requests in flight at most.
// A stalled server delays the requests behind it, and each request's
// latency runs from its scheduled time, so a stall shows in the
// percentiles rather than lowering the offered rate unseen.
const loadWorkers = 256

// loadWarmup is discarded at the start of every run.
const loadWarmup = time.Second

// loadResult is what one run of the load generator measured, over the
// requests scheduled after the warm-up.
type loadResult struct {
	p50, p99 time.Duration
	achieved float64     // completed requests per second
	failures int         // transport errors and unexpected statuses, not in p50 and p99
	statuses map[int]int // every status seen, for the log
}

type sample struct {
	latency time.Duration
	done    time.Time
	status  int // 0: a transport error
}

// offerLoad issues rps requests per second for d, open loop: request i is
// due at start + i/rps whatever the earlier ones are doing (the scheduler
// catches up after a late wake-up, as a 1 ms ticker would), and do(i)
// returns its status. want is the status a request should get.
func offerLoad(rps int, d time.Duration, want int, do func(i int) (int, error)) loadResult {
	total := int(float64(rps) * d.Seconds())
	interval := time.Second / time.Duration(rps)
	type job struct {
		i   int
		due time.Time
	}
	jobs := make(chan job, total)
	samples := make([]sample, total)
	done := make(chan struct{})
	for range loadWorkers {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := range jobs {
				status, err := do(j.i)
				if err != nil {
					status = 0
				}
				now := time.Now()
				samples[j.i] = sample{latency: now.Sub(j.due), done: now, status: status}
			}
		}()
	}
	start := time.Now()
	for i := 0; i < total; {
		now := time.Now()
		for ; i < total && !start.Add(time.Duration(i)*interval).After(now); i++ {
			jobs <- job{i: i, due: start.Add(time.Duration(i) * interval)}
		}
		if i < total {
			time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		}
	}
	close(jobs)
	for range loadWorkers {
		<-done
	}

	res := loadResult{statuses: map[int]int{}}
	first := int(float64(rps) * loadWarmup.Seconds())
	windowStart := start.Add(loadWarmup)
	var last time.Time
	latencies := make([]time.Duration, 0, total-first)
	for _, s := range samples[first:] {
		res.statuses[s.status]++
		if s.status != want {
			// Counted apart: a fast refusal is not a fast answer.
			res.failures++
		} else {
			latencies = append(latencies, s.latency)
		}
		if s.done.After(last) {
			last = s.done
		}
	}
	slices.Sort(latencies)
	res.p50, res.p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	res.achieved = float64(len(samples)-first) / last.Sub(windowStart).Seconds()
	return res
}

// percentile is the nearest-rank q-th percentile of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// loadClient keeps a connection per worker alive.
func loadClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        loadWorkers,
			MaxIdleConnsPerHost: loadWorkers,
			IdleConnTimeout:     time.Minute,
		},
	}
}
