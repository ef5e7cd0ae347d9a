package api

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/health"
)

// The inventory benchmarks serve, from one loopback server, the
// authenticated v2 inventory with the token cache (/cached) and without it
// (/uncached), and a plain handler (/plain) writing the same bytes and
// headers with no authentication, no cache reads and no metrics. Clients
// keep their connections alive. Run them together:
//
//	go test -run '^$' -bench 'Inventory' -count 5 ./pkg/api/
//
// BenchmarkInventory reports throughput (req/s) and, for the API handlers,
// x-plain: their throughput over the plain handler's.
// BenchmarkInventoryLatency offers a fixed rate of half of each handler's
// peak and reports latency percentiles, measured from each request's
// scheduled time so a stall is not hidden by the requests it delays.

var benchTargets = []string{"plain", "cached", "uncached"}

type benchServer struct {
	srv    *httptest.Server
	client *http.Client
	token  string
}

var (
	benchOnce sync.Once
	benchEnv  *benchServer
)

// benchWorld is a typical Host: its Context grants three existing servers,
// two of them with a credential.
func benchWorld(b *testing.B) *world {
	w := newWorld()
	put(b, w.hosts, newHost("host-a", "uid-a", "ctx-a"))
	put(b, w.contexts, newContext("ctx-a", "alpha", "beta", "epsilon"))
	put(b, w.servers, withAuth(newServer("alpha", v1alpha1.TransportSSE), "alpha-creds", "token"))
	put(b, w.servers, newServer("beta", v1alpha1.TransportStdio))
	put(b, w.servers, withAuth(newServer("epsilon", v1alpha1.TransportStreamableHTTP), "epsilon-creds", "api-key"))
	put(b, w.secrets, newSecret("alpha-creds", "uid-secret-alpha", map[string]string{"token": "s3cret-alpha"}))
	put(b, w.secrets, newSecret("epsilon-creds", "uid-secret-epsilon", map[string]string{"api-key": "s3cret-epsilon"}))
	return w
}

// newBenchServer starts the one server all inventory benchmarks share.
func newBenchServer(b *testing.B) *benchServer {
	benchOnce.Do(func() {
		w := benchWorld(b)
		api := func(cacheSize int) http.Handler {
			reg := prometheus.NewRegistry()
			readiness := health.NewReadiness()
			auth := hostAuth(b)
			auth.RateLimitPerMinute = math.MaxInt32
			return NewHandler(Options{
				Sources:        w.sources(),
				Namespace:      serverNS,
				ClusterDomain:  clusterDomain,
				HostAuth:       auth,
				TokenCacheSize: cacheSize,
				Readiness:      readiness,
				Gatherer:       reg,
				Metrics:        NewMetrics(reg),
				Log:            zerolog.Nop(),
			})
		}
		cached := api(DefaultTokenCacheSize)
		token := sign(b, rs256Header(), claimsFor("host-a", "uid-a", time.Now()))

		// The plain handler's bytes are a real inventory response.
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/api/v2/hosts/self/mcpservers", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		cached.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("inventory: %d %s", rec.Code, rec.Body)
		}
		body := rec.Body.Bytes()

		mux := http.NewServeMux()
		mux.Handle("/cached/", http.StripPrefix("/cached", cached))
		mux.Handle("/uncached/", http.StripPrefix("/uncached", api(0)))
		mux.Handle("/plain/", http.StripPrefix("/plain", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeBody(w, http.StatusOK, body, true)
		})))
		srv := httptest.NewServer(mux)
		benchEnv = &benchServer{
			srv: srv,
			client: &http.Client{Transport: &http.Transport{
				MaxIdleConns:        256,
				MaxIdleConnsPerHost: 256,
				IdleConnTimeout:     time.Minute,
			}},
			token: token,
		}
	})
	return benchEnv
}

// get performs one inventory request against target and drains the body
// so the connection is reused.
func (s *benchServer) get(target string) error {
	req, err := http.NewRequest(http.MethodGet, s.srv.URL+"/"+target+"/api/v2/hosts/self/mcpservers", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: status %d", target, resp.StatusCode)
	}
	return err
}

// benchClients is how many concurrent keep-alive clients drive the
// server: enough to saturate it.
func benchClients() int { return 8 * runtime.GOMAXPROCS(0) }

// drive sends n inventory requests to target from benchClients() clients
// and returns how long they took.
func (s *benchServer) drive(b *testing.B, target string, n int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range benchClients() {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := s.get(target); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// pairChunk is how many requests drivePaired sends to one target before
// switching to the other.
const pairChunk = 256

// drivePaired sends n requests to target and n to the plain handler in
// alternating chunks, so both see the same background load, and returns
// the time spent on each. Only the target's chunks run on b's timer.
func (s *benchServer) drivePaired(b *testing.B, target string, n int) (targetTime, plainTime time.Duration) {
	b.StopTimer()
	for sent := 0; sent < n; sent += pairChunk {
		m := min(pairChunk, n-sent)
		b.StartTimer()
		targetTime += s.drive(b, target, m)
		b.StopTimer()
		plainTime += s.drive(b, "plain", m)
	}
	return targetTime, plainTime
}

// BenchmarkInventory measures each target's saturated throughput. An API
// target's x-plain ratio compares it with plain requests interleaved with
// its own, so the ratio holds steady even when other load on the machine
// comes and goes.
func BenchmarkInventory(b *testing.B) {
	s := newBenchServer(b)
	for _, target := range benchTargets {
		b.Run(target, func(b *testing.B) {
			if target == "plain" {
				elapsed := s.drive(b, target, b.N)
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
				return
			}
			elapsed, plain := s.drivePaired(b, target, b.N)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			b.ReportMetric(plain.Seconds()/elapsed.Seconds(), "x-plain")
		})
	}
}

// peakSample is how many requests measure a target's peak throughput.
const peakSample = 5000

// peakRates caches each target's measured peak throughput, so the repeated
// runs of a latency benchmark offer the same rate.
var (
	peakMu    sync.Mutex
	peakRates = map[string]float64{}
)

func peakRate(b *testing.B, s *benchServer, target string) float64 {
	peakMu.Lock()
	defer peakMu.Unlock()
	if r, ok := peakRates[target]; ok {
		return r
	}
	r := peakSample / s.drive(b, target, peakSample).Seconds()
	peakRates[target] = r
	return r
}

func BenchmarkInventoryLatency(b *testing.B) {
	s := newBenchServer(b)
	for _, target := range benchTargets {
		b.Run(target+"/half-peak", func(b *testing.B) {
			rate := peakRate(b, s, target) / 2
			interval := time.Duration(float64(time.Second) / rate)
			latencies := make([]time.Duration, b.N)
			scheduled := make(chan int, b.N)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			// Enough workers that a free one is always waiting at half load.
			for range 64 {
				wg.Go(func() {
					for i := range scheduled {
						due := start.Add(time.Duration(i) * interval)
						if err := s.get(target); err != nil {
							b.Error(err)
						}
						latencies[i] = time.Since(due)
					}
				})
			}
			for i := range b.N {
				if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
					time.Sleep(d)
				}
				scheduled <- i
			}
			close(scheduled)
			wg.Wait()
			b.StopTimer()

			slices.Sort(latencies)
			pct := func(p float64) float64 {
				return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds())
			}
			b.ReportMetric(rate, "offered-req/s")
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
		})
	}
}
