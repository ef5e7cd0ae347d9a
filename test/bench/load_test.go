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

// loadWarmup is discarded at the start of a target's first run of a
// route: its client opens its connections then.
const loadWarmup = time.Second

// statusMalformed is the status a 200 whose body failed its check is
// counted under: a failure, like a transport error (status 0).
const statusMalformed = -1

// loadRun is what one run of the load generator measured, over the
// requests scheduled after its warm-up.
type loadRun struct {
	latencies []time.Duration // of the requests that got want and a well-formed body
	sendLags  []time.Duration // of the same requests: from due to sent (the generator's own delay)
	requests  int             // scheduled after the warm-up
	seconds   float64         // from the end of the warm-up to the last answer
	failures  int             // transport errors, unexpected statuses, malformed bodies
	statuses  map[int]int     // every status seen, for the log
	malformed error           // the first malformed body's fault
}

type sample struct {
	latency time.Duration
	sendLag time.Duration // from its due time to a worker starting it
	done    time.Time
	status  int   // 0: a transport error; statusMalformed: a bad body
	fault   error // why the body is malformed
}

// offerLoad issues rps requests per second for d, open loop: the n-th
// request is due at start + n/rps whatever the earlier ones are doing (the
// scheduler catches up after a late wake-up, as a 1 ms ticker would), and
// is request first+n: do(i) returns its status and body. want is the
// status a request should get; check judges the body of each such answer
// after its latency is taken, so the check's cost is not in the request's
// latency. The requests due in the first warmup are not measured.
func offerLoad(rps int, d, warmup time.Duration, first int, want int, do func(i int) (int, []byte, error), check func(i int, body []byte) error) loadRun {
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
				sendLag := time.Since(j.due)
				status, body, err := do(first + j.i)
				if err != nil {
					status = 0
				}
				now := time.Now()
				s := sample{latency: now.Sub(j.due), sendLag: sendLag, done: now, status: status}
				if status == want {
					if s.fault = check(first+j.i, body); s.fault != nil {
						s.status = statusMalformed
					}
				}
				samples[j.i] = s
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

	run := loadRun{statuses: map[int]int{}}
	skip := int(float64(rps) * warmup.Seconds())
	windowStart := start.Add(warmup)
	var last time.Time
	run.latencies = make([]time.Duration, 0, total-skip)
	run.sendLags = make([]time.Duration, 0, total-skip)
	for _, s := range samples[skip:] {
		run.requests++
		run.statuses[s.status]++
		if s.status != want {
			// Counted apart: a fast refusal is not a fast answer.
			run.failures++
			if s.fault != nil && run.malformed == nil {
				run.malformed = s.fault
			}
		} else {
			run.latencies = append(run.latencies, s.latency)
			run.sendLags = append(run.sendLags, s.sendLag)
		}
		if s.done.After(last) {
			last = s.done
		}
	}
	run.seconds = last.Sub(windowStart).Seconds()
	return run
}

// loadResult sums the runs of one target.
type loadResult struct {
	p50, p99 time.Duration
	// p99SendLag is the 99th percentile of the time from a request's due
	// time to its being sent: the generator's own delay (its dispatcher's
	// and workers' wake-ups), which every latency includes. On shared
	// cores it is the floor under the target's and the bare handler's p99.
	p99SendLag time.Duration
	requests   int     // measured: scheduled after the warm-up
	achieved   float64 // completed requests per second
	failures   int     // transport errors, unexpected statuses, malformed bodies: not in p50 and p99
	statuses   map[int]int
	malformed  error
}

func summarize(runs []loadRun) loadResult {
	res := loadResult{statuses: map[int]int{}}
	var latencies, sendLags []time.Duration
	seconds := 0.0
	for _, r := range runs {
		latencies = append(latencies, r.latencies...)
		sendLags = append(sendLags, r.sendLags...)
		res.requests += r.requests
		res.failures += r.failures
		seconds += r.seconds
		for s, n := range r.statuses {
			res.statuses[s] += n
		}
		if res.malformed == nil {
			res.malformed = r.malformed
		}
	}
	slices.Sort(latencies)
	res.p50, res.p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	slices.Sort(sendLags)
	res.p99SendLag = percentile(sendLags, 0.99)
	if seconds > 0 {
		res.achieved = float64(res.requests) / seconds
	}
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
