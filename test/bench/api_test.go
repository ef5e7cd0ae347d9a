//go:build integration

package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/clerum/hcc/internal/testing/testenv"
	clerumv1alpha1 "github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
)

const (
	routeInventory  = "/api/v2/hosts/self/mcpservers"
	routeCredential = "/api/v2/hosts/self/mcpservers/credential"
)

// The counts BenchmarkAPIScale asserts.
const (
	// maxFailedRequests: under an offered load within the rate limit, every
	// request is a valid Host's and gets its 200 with a well-formed body
	// of that Host (checkInventory, checkCredential); a failure of hcc-api
	// or of the bare handler (a transport error, a 429, a 5xx, a body that
	// fails its check) fails the benchmark, and failed requests are
	// counted apart from the latencies.
	maxFailedRequests = 0
	// minAchievedShare: each target completes at least this share of the
	// offered rate over its runs; below it the server fell behind the
	// load, and its percentiles would describe a queue.
	minAchievedShare = 0.9
	// minChurnShare: the update generator applies at least this share of
	// its offered rate (the last updates may be in flight when it stops).
	minChurnShare = 0.95
	// minDeliveredShare: during each target's runs of a route, hcc-api's
	// informers deliver at least this share of the offered update rate,
	// counted from its own /metrics around the runs (an update in flight
	// at either end of a run may fall on either side of it), judged when
	// the runs last minUpdateWindow at least: the watch delivers in
	// bursts, and an hcc-api under its own load falls behind for a moment
	// and catches up in the next (measured on 1 s runs: 60/s during
	// hcc-api's, 153/s during the bare handler's next).
	minDeliveredShare = 0.9
	minUpdateWindow   = 10 * time.Second
	// maxFailedUpdates: every update of the fleet is one the API server
	// accepts; a refused one would not reach hcc-api.
	maxFailedUpdates = 0
	// shippedRateLimit is HCC_MCP_HOST_API_RATE_LIMIT_PER_MINUTE as
	// deploy/base/api ships it: unset there, so pkg/config's default.
	shippedRateLimit = 120
	// eventsTimeout bounds the wait for the last updates to reach
	// hcc-api's informers after the update generator stopped.
	eventsTimeout = 30 * time.Second
)

// apiFleet is what the hcc-api benchmark serves.
type apiFleet struct {
	servers, contexts, hosts int
}

func (f apiFleet) perContext() int { return f.servers / f.contexts }

// credentialServer is the server request i asks the credential of: one
// of those its Host's Context lists (request i is Host i mod hosts's).
func (f apiFleet) credentialServer(i int) string {
	c := (i % f.hosts) % f.contexts
	return serverName(c*f.perContext() + (i/f.hosts)%f.perContext())
}

// BenchmarkAPIScale creates, as the admin, McpServers (10,000) each with
// the Secret its spec.auth.secretRef names, in Contexts (1,000) that list
// them evenly, and Hosts (5,000) spread over the Contexts; then runs the
// real hcc-api under its shipped service account and measures the time
// from its start to /ready, its peak RSS, and the latency of the Host
// inventory and of a credential read at an offered, open-loop load (1,000
// requests/s over every Host), beside a bare handler on the same machine
// serving a fixed body of hcc-api's own response to the same load
// generator. The bare handler is a process of its own
// (test/bench/internal/barehandler), built and started as hcc-api is.
//
// During the load an update generator, a process of its own too
// (test/bench/internal/churn), edits the fleet at 100 updates/s
// (McpServer spec and status, Secret data, Context membership, Host
// spec), so hcc-api answers while its informers deliver those events. The
// load generator checks every 200 body (a well-formed inventory or
// credential of the Host that asked) after taking its latency; what each
// process shares is in docs/http-api.md, "Benchmark".
//
// The tokens are new to hcc-api at first: inventory-first-use is a pass
// of one request for each Host (5 s at 1,000 requests/s), each verifying
// its token (RSA) before the verified-token cache holds it. A mcp-host
// presents one token for up to its lifetime (HCC_MCP_HOST_JWT_MAX_TTL_SECONDS,
// 300 as shipped), so in a fleet polling at this rate about one request in
// sixty brings a new token; the routes' own figures are measured after
// that pass. Each route's load is 15 s a target, in five rounds of 3 s
// that alternate the targets so all see the same background load; the
// first round runs a second longer, not measured, to open the
// connections. hcc-api runs with the shipped rate limit unless the fleet
// is so small that a Host's share of the load would exceed it; then the
// limit is raised and the output says so (a progress line and
// rate-limit/min).
//
// HCC_BENCH_API_* override the sizes and rates (below).
// HCC_BENCH_API_REFERENCE=BIN also runs BIN, another build of hcc-api (the
// one before a change), as a further target in the same rounds: its
// figures are the lines *-reference. HCC_BENCH_API_PROFILE=DIR builds
// hcc-api with -tags pprof and, after the measured runs, takes a CPU and
// an allocation profile of each hcc-api (the reference too, if built with
// -tags pprof) for each route under the same load and updates, into DIR.
func BenchmarkAPIScale(b *testing.B) {
	f := apiFleet{
		servers:  size(b, "HCC_BENCH_API_SERVERS", 10000),
		contexts: size(b, "HCC_BENCH_API_CONTEXTS", 1000),
		hosts:    size(b, "HCC_BENCH_API_HOSTS", 5000),
	}
	require.Positive(b, f.perContext(), "fewer servers than Contexts")
	rps := size(b, "HCC_BENCH_API_RPS", 1000)
	churnRate := size(b, "HCC_BENCH_API_UPDATES", 100)
	duration := time.Duration(size(b, "HCC_BENCH_API_SECONDS", 15)) * time.Second
	rounds := size(b, "HCC_BENCH_API_ROUNDS", 5)
	round := duration / time.Duration(rounds)
	reference := os.Getenv("HCC_BENCH_API_REFERENCE")
	profileDir := os.Getenv("HCC_BENCH_API_PROFILE")

	var bin string
	if profileDir != "" {
		require.NoError(b, os.MkdirAll(profileDir, 0o755))
		bin = buildPackage(b, "hcc-api", "github.com/clerum/hcc/cmd/hcc-api", "-tags", "pprof")
	} else {
		bin = buildBinary(b, "hcc-api")
	}
	bareBin := buildPackage(b, "barehandler", "github.com/clerum/hcc/test/bench/internal/barehandler")
	churnBin := buildPackage(b, "churn", "github.com/clerum/hcc/test/bench/internal/churn")
	ctx := context.Background()
	cp := startControlPlane(b, "", "api")
	admin := cp.Config()
	admin.QPS, admin.Burst = 5000, 10000
	kube := kubernetes.NewForConfigOrDie(admin)
	hcc := clientset.NewForConfigOrDie(admin)

	created := time.Now()
	parallel(b, 64, f.servers, func(i int) error {
		name := serverName(i)
		_, err := kube.CoreV1().Secrets("mcp-server").Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-auth"},
			StringData: map[string]string{"token": "token-of-" + name},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		s := newServer(i)
		s.Spec.Auth = &clerumv1alpha1.Auth{SecretRef: clerumv1alpha1.SecretKeyReference{Name: name + "-auth", Key: "token"}}
		_, err = hcc.ClerumV1alpha1().McpServers("mcp-server").Create(ctx, s, metav1.CreateOptions{})
		return err
	})
	parallel(b, 64, f.contexts, func(i int) error {
		_, err := hcc.ClerumV1alpha1().Contexts("mcp-server").Create(ctx, newContext(i, f.perContext()), metav1.CreateOptions{})
		return err
	})
	uids := make([]types.UID, f.hosts)
	parallel(b, 64, f.hosts, func(i int) error {
		h, err := hcc.ClerumV1alpha1().Hosts("mcp-host").Create(ctx, newHost(i, f.contexts), metav1.CreateOptions{})
		if err == nil {
			uids[i] = h.UID
		}
		return err
	})
	progressf("created %d Secrets, %d McpServers, %d Contexts and %d Hosts in %s", f.servers, f.servers, f.contexts, f.hosts, time.Since(created).Round(time.Second))

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(b, err)
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	require.NoError(b, err)
	environ := append(shippedEnv(b, "api"),
		"HCC_MCP_HOST_JWT_PUBLIC_KEY="+string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})),
		"CONTEXT_MAPPER_DESKTOP_API_TOKEN=bench-desktop-token",
	)
	// The most one Host sends in a minute: both routes' runs with their
	// warm-ups and the profiled runs, if one clock-aligned window holds
	// them all, the first-use pass, the two body probes and, for each
	// hcc-api, the settled checks' inventories and credentials and the
	// probe's cached inventory.
	apis := 1
	if reference != "" {
		apis++
	}
	perHost := (2*rps*int(2*duration.Seconds()+loadWarmup.Seconds())+f.hosts-1)/f.hosts + 3 + apis*(2*f.perContext()+5)
	limit := shippedRateLimit
	if perHost > limit {
		limit = 2 * perHost
		progressf("hcc-api: HCC_MCP_HOST_API_RATE_LIMIT_PER_MINUTE=%d, not the shipped %d: %d Hosts share %d requests/s, up to %d a Host a minute",
			limit, shippedRateLimit, f.hosts, rps, perHost)
		environ = append(environ, "HCC_MCP_HOST_API_RATE_LIMIT_PER_MINUTE="+strconv.Itoa(limit))
	} else {
		progressf("hcc-api: the shipped rate limit, %d a Host a minute (up to %d sent)", shippedRateLimit, perHost)
	}
	// startAPI starts an hcc-api; when profiling, with its profiling
	// endpoints (a binary built without -tags pprof ignores the variable).
	// The hcc-apis start together and are timed to /ready together, so
	// neither meets the API server alone.
	startAPI := func(name, line, bin string) *apiTarget {
		port := testenv.FreePort(b)
		env := append(environ[:len(environ):len(environ)], "CONTEXT_MAPPER_PORT="+strconv.Itoa(port))
		t := &apiTarget{name: name, line: line}
		if profileDir != "" {
			pprofPort := testenv.FreePort(b)
			t.pprofBase = fmt.Sprintf("http://127.0.0.1:%d", pprofPort)
			env = append(env, "HCC_API_PPROF_ADDR=127.0.0.1:"+strconv.Itoa(pprofPort))
		}
		t.proc = startBinary(b, name, bin, cp.ImpersonatingKubeconfig(apiUser, saGroups...), port, env)
		return t
	}
	targets := []*apiTarget{startAPI("hcc-api", "", bin)}
	api := targets[0].proc
	if reference != "" {
		targets = append(targets, startAPI("hcc-api-reference", "-reference", reference))
	}
	procs := make([]*process, len(targets))
	for i, t := range targets {
		procs[i] = t.proc
	}
	for i, at := range waitAllHTTP(b, procs, "/ready", 10*time.Minute) {
		targets[i].readyAfter = at.Sub(targets[i].proc.started)
	}

	// The tokens the Control API would have issued, one per Host.
	tokens := make([]string, f.hosts)
	parallel(b, 4, f.hosts, func(i int) error {
		var err error
		tokens[i], err = hostToken(key, hostName(i), uids[i])
		return err
	})
	// ask sends Host host's request of route (for the credential route, of
	// server's credential).
	ask := func(client *http.Client, base, route string, host int, server string) (int, []byte, error) {
		method, body := http.MethodGet, []byte(nil)
		if route == routeCredential {
			method, body = http.MethodPost, fmt.Appendf(nil, `{"serverName":%q}`, server)
		}
		req, err := http.NewRequest(method, base+route, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tokens[host])
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return resp.StatusCode, raw, err
	}
	// send is request i of the load.
	send := func(client *http.Client, base, route string, i int) (int, []byte, error) {
		return ask(client, base, route, i%f.hosts, f.credentialServer(i))
	}
	checks := map[string]func(i int, body []byte) error{routeInventory: f.checkInventory, routeCredential: f.checkCredential}

	// The bare handler answers with hcc-api's own bodies (request 0's,
	// taken before the updates start), so both send the same bytes; its
	// answers are checked as request 0's, at the same cost.
	bodies := map[string][]byte{}
	for _, route := range []string{routeInventory, routeCredential} {
		for _, t := range targets {
			status, raw, err := send(http.DefaultClient, t.proc.base, route, 0)
			require.NoError(b, err)
			require.Equal(b, http.StatusOK, status, "%s %s: %s", t.name, route, raw)
			require.NoError(b, checks[route](0, raw), "%s %s: %s", t.name, route, raw)
			if t == targets[0] {
				bodies[route] = raw
			}
		}
	}
	bareArgs := []string{}
	for route, body := range bodies {
		file := filepath.Join(b.TempDir(), "body.json")
		require.NoError(b, os.WriteFile(file, body, 0o600))
		bareArgs = append(bareArgs, "--body", route+"="+file)
	}
	barePort := testenv.FreePort(b)
	bareProc := startProcess(b, "barehandler", bareBin, append([]string{"--port", strconv.Itoa(barePort)}, bareArgs...), barePort, nil)
	bareProc.waitHTTP(b, "/ready", time.Minute)
	bare := &apiTarget{name: "bare", proc: bareProc, bare: true}
	all := append(targets[:len(targets):len(targets)], bare)

	eventsBefore := informerUpdates(b, api)
	churnSummary := filepath.Join(b.TempDir(), "churn.json")
	churn := startProcess(b, "churn", churnBin, []string{
		"--kubeconfig", cp.Kubeconfig(), "--summary", churnSummary, "--rate", strconv.Itoa(churnRate),
		"--servers", strconv.Itoa(f.servers), "--contexts", strconv.Itoa(f.contexts), "--hosts", strconv.Itoa(f.hosts),
	}, 0, nil)
	// The updates arriving: the loads start once the first have reached
	// hcc-api's informers, and the update rate is judged from then.
	delivered := func() float64 {
		n := 0.0
		for _, v := range informerUpdates(b, api) {
			n += v
		}
		return n
	}
	before := delivered()
	require.NoError(b, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, eventsTimeout, true, func(context.Context) (bool, error) {
		return delivered() > before, nil
	}), "no update reached hcc-api's informers")
	churnStarted := time.Now()

	// report writes a route's lines, one per hcc-api, and stops the
	// benchmark if any check of them failed.
	report := func(line string, results map[*apiTarget]routeResult, bodyBytes, wantRequests int) {
		base := results[bare]
		for _, t := range targets {
			got := results[t]
			ok := b.Run(line+t.line, func(b *testing.B) {
				for b.Loop() {
					ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
					b.ReportMetric(ms(got.p50), "p50-ms")
					b.ReportMetric(ms(got.p99), "p99-ms")
					b.ReportMetric(ms(got.p50)/ms(base.p50), "x-bare-p50")
					b.ReportMetric(ms(got.p99)/ms(base.p99), "x-bare-p99")
					b.ReportMetric(got.achieved, "req/s")
					b.ReportMetric(float64(rps), "offered-req/s")
					b.ReportMetric(float64(got.failures), "failed-req")
					b.ReportMetric(got.cpuPerRequest, "cpu-µs/req")
					b.ReportMetric(got.bytesPerRequest, "B/req")
					b.ReportMetric(got.allocsPerRequest, "allocs/req")
					b.ReportMetric(got.gcPerSecond, "gc/s")
					if line != "credential" {
						b.ReportMetric(100*got.cacheHitShare, "cache-hit-%")
					}
					b.ReportMetric(got.cpuPerRequest/base.cpuPerRequest, "x-bare-cpu")
					b.ReportMetric(base.cpuPerRequest, "bare-cpu-µs/req")
					b.ReportMetric(ms(base.p50), "bare-p50-ms")
					b.ReportMetric(ms(base.p99), "bare-p99-ms")
					b.ReportMetric(ms(got.p99SendLag), "send-lag-p99-ms")
					b.ReportMetric(ms(base.p99SendLag), "bare-send-lag-p99-ms")
					b.ReportMetric(base.achieved, "bare-req/s")
					b.ReportMetric(float64(base.failures), "bare-failed-req")
					b.ReportMetric(float64(bodyBytes), "body-bytes")
					b.ReportMetric(float64(limit), "rate-limit/min")
					b.ReportMetric(float64(churnRate), "offered-updates/s")
					b.ReportMetric(got.updatesPerSecond, "informer-updates/s")
					// The bare handler is the process bareProc: it, not
					// this one, spent CPU on its load.
					if base.cpuPerRequest <= 0 {
						b.Errorf("the bare handler (pid %d) used no CPU under its load", bareProc.Pid())
					}
					for _, r := range []struct {
						name string
						res  routeResult
					}{{t.name, got}, {"bare handler", base}} {
						if r.res.updateSeconds >= minUpdateWindow.Seconds() && r.res.updatesPerSecond < minDeliveredShare*float64(churnRate) {
							b.Errorf("%s: %.1f update events/s reached hcc-api's informers during its runs, less than %.0f%% of the %d offered",
								r.name, r.res.updatesPerSecond, 100*minDeliveredShare, churnRate)
						}
						if r.res.failures > maxFailedRequests {
							b.Errorf("%s: %d failed requests (statuses %v; first malformed body: %v), at most %d",
								r.name, r.res.failures, r.res.statuses, r.res.malformed, maxFailedRequests)
						}
						if r.res.achieved < minAchievedShare*float64(rps) {
							b.Errorf("%s: %.0f requests/s completed of %d offered, less than %.0f%%", r.name, r.res.achieved, rps, 100*minAchievedShare)
						}
						if r.res.requests < wantRequests {
							b.Errorf("%s: %d requests measured, fewer than the %d offered after the warm-up", r.name, r.res.requests, wantRequests)
						}
					}
				}
			})
			if !ok {
				b.Fatalf("%s%s failed its checks (above)", line, t.line)
			}
		}
	}
	for _, route := range []struct{ name, path string }{{"inventory", routeInventory}, {"credential", routeCredential}} {
		workloads := map[*apiTarget]loadWorkload{}
		for _, t := range all {
			client := loadClient()
			defer client.CloseIdleConnections()
			do := func(i int) (int, []byte, error) { return send(client, t.proc.base, route.path, i) }
			check := checks[route.path]
			if t.bare {
				check = func(_ int, body []byte) error { return checks[route.path](0, body) }
			}
			workloads[t] = loadWorkload{do, check}
		}
		if route.path == routeInventory {
			// Each Host's first request, its token new to hcc-api (an RSA
			// verification, then cached until the token expires).
			firstUse := time.Duration(f.hosts) * time.Second / time.Duration(rps)
			report("inventory-first-use", measureRoute(b, all, rps, firstUse, 1, 0, workloads, delivered), len(bodies[route.path]), f.hosts)
		}
		report(route.name, measureRoute(b, all, rps, round, rounds, loadWarmup, workloads, delivered), len(bodies[route.path]), rounds*int(float64(rps)*round.Seconds()))
	}

	if profileDir != "" {
		for _, route := range []struct{ name, path string }{{"inventory", routeInventory}, {"credential", routeCredential}} {
			for _, t := range targets {
				// The reference may be a build without -tags pprof (one
				// from before the tag existed): it is not profiled. This
				// build is, or the benchmark fails.
				if t != targets[0] && !answers(t.pprofBase+"/debug/pprof/") {
					progressf("%s serves no profiling endpoints (built without -tags pprof): not profiled", t.name)
					continue
				}
				profileRoute(b, t, profileDir, route.name+t.line, rps, duration, func(client *http.Client) (func(int) (int, []byte, error), func(int, []byte) error) {
					return func(i int) (int, []byte, error) { return send(client, t.proc.base, route.path, i) }, checks[route.path]
				})
			}
		}
	}

	// The updates: all applied, at the rate offered, and each delivered to
	// hcc-api's informers.
	require.NoError(b, churn.Stop())
	churnSeconds := time.Since(churnStarted).Seconds()
	raw, err := os.ReadFile(churnSummary)
	require.NoError(b, err, "the update generator's summary")
	var updates churnResult
	require.NoError(b, json.Unmarshal(raw, &updates))
	progressf("updates: %s", bytes.Join(bytes.Fields(raw), []byte(" ")))
	var eventsAfter map[string]float64
	want := updates.byInformer()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, eventsTimeout, true, func(context.Context) (bool, error) {
		eventsAfter = informerUpdates(b, api)
		for informer, n := range want {
			if eventsAfter[informer]-eventsBefore[informer] < float64(n) {
				return false, nil
			}
		}
		return true, nil
	})
	arrived, applied := 0.0, 0
	for informer, n := range want {
		arrived += eventsAfter[informer] - eventsBefore[informer]
		applied += n
	}
	// The rate over the whole load, by this process's clock: a generator
	// that stopped early, whatever its own summary says, falls short.
	appliedRate := float64(applied) / churnSeconds
	ok := b.Run("updates", func(b *testing.B) {
		for b.Loop() {
			b.ReportMetric(appliedRate, "updates/s")
			b.ReportMetric(updates.Achieved, "churn-updates/s")
			b.ReportMetric(updates.Offered, "offered-updates/s")
			b.ReportMetric(float64(updates.Failed), "failed-updates")
			b.ReportMetric(arrived/churnSeconds, "informer-updates/s")
			b.ReportMetric(updates.MaxLagMs, "max-lag-ms")
			if updates.Failed > maxFailedUpdates {
				b.Errorf("%d updates failed (first: %v), at most %d", updates.Failed, updates.Errors, maxFailedUpdates)
			}
			if appliedRate < minChurnShare*float64(churnRate) || updates.Achieved < minChurnShare*float64(churnRate) {
				b.Errorf("%.1f updates/s applied over the %.1f s of the load (%.1f/s by the generator's count), less than %.0f%% of %d offered",
					appliedRate, churnSeconds, updates.Achieved, 100*minChurnShare, churnRate)
			}
			if err != nil {
				b.Errorf("within %s of the last update, hcc-api's informers had delivered %v update events (over the start), fewer than the updates applied %v",
					eventsTimeout, delta(eventsAfter, eventsBefore), want)
			}
		}
	})
	if !ok {
		b.Fatal("the updates failed their checks (above)")
	}

	// Settled: the updates stopped and every one delivered, each hcc-api
	// answers as the cluster now is. For one Host of every Context: its
	// inventory lists exactly the servers the Context does, each at its
	// server's current transport path and with the credentialRevision the
	// credential route gives, and that route gives the Secret's current
	// token. A body cached past an update that changed it fails here.
	settled := func(what string) {
		contextList, err := hcc.ClerumV1alpha1().Contexts("mcp-server").List(ctx, metav1.ListOptions{})
		require.NoError(b, err)
		serverList, err := hcc.ClerumV1alpha1().McpServers("mcp-server").List(ctx, metav1.ListOptions{})
		require.NoError(b, err)
		secretList, err := kube.CoreV1().Secrets("mcp-server").List(ctx, metav1.ListOptions{})
		require.NoError(b, err)
		live := settledFleet{contexts: map[string]*clerumv1alpha1.Context{}, servers: map[string]*clerumv1alpha1.McpServer{}, tokens: map[string]string{}}
		for i := range contextList.Items {
			live.contexts[contextList.Items[i].Name] = &contextList.Items[i]
		}
		for i := range serverList.Items {
			live.servers[serverList.Items[i].Name] = &serverList.Items[i]
		}
		for _, s := range secretList.Items {
			live.tokens[s.Name] = string(s.Data["token"])
		}
		for _, t := range targets {
			client := loadClient()
			parallel(b, 16, min(f.contexts, f.hosts), func(c int) error {
				// Host c is Context c's (newHost).
				err := live.check(contextName(c), func(route, server string) (int, []byte, error) {
					return ask(client, t.proc.base, route, c, server)
				})
				if err != nil {
					return fmt.Errorf("%s, %s, Host %s: %w", t.name, what, hostName(c), err)
				}
				return nil
			})
			client.CloseIdleConnections()
			progressf("%s: %s: the inventory of a Host of each of %d Contexts, and its servers' credentials, are the cluster's", t.name, what, min(f.contexts, f.hosts))
		}
	}
	settled("once the updates settled")

	// Cached, then changed: the load's last phase asks for credentials, and
	// in it the updates drop most inventories from the cache, so the check
	// above meets few bodies that an update should have dropped. Here a
	// Host of each of up to 100 Contexts asks for its inventory (cached
	// now), then one server of the Context gets a new Secret value (every
	// other Context) or a new transport path (the rest): one change a
	// Context, or the second would drop a body the first failed to. Once
	// hcc-api's informers delivered them, every answer must be the
	// cluster's again.
	probed := make([]int, 0, 100)
	for c := 0; c < min(f.contexts, f.hosts); c += max(1, f.contexts/100) {
		probed = append(probed, c)
	}
	for _, t := range targets {
		client := loadClient()
		parallel(b, 16, len(probed), func(k int) error {
			status, raw, err := ask(client, t.proc.base, routeInventory, probed[k], "")
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("%d %s", status, raw)
			}
			if err != nil {
				return fmt.Errorf("%s, priming the inventory of Host %s: %w", t.name, hostName(probed[k]), err)
			}
			return nil
		})
		client.CloseIdleConnections()
	}
	probeBefore := delivered()
	parallel(b, 16, len(probed), func(k int) error {
		server := serverName(probed[k] * f.perContext())
		if k%2 == 0 {
			token := base64.StdEncoding.EncodeToString([]byte("token-of-" + server + "-probe"))
			_, err := kube.CoreV1().Secrets("mcp-server").Patch(ctx, server+"-auth", types.MergePatchType,
				fmt.Appendf(nil, `{"data":{"token":%q}}`, token), metav1.PatchOptions{})
			return err
		}
		_, err := hcc.ClerumV1alpha1().McpServers("mcp-server").Patch(ctx, server, types.MergePatchType,
			[]byte(`{"spec":{"transport":{"path":"/sse/probe"}}}`), metav1.PatchOptions{})
		return err
	})
	require.NoError(b, wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, eventsTimeout, true, func(context.Context) (bool, error) {
		return delivered()-probeBefore >= float64(len(probed)), nil
	}), "the probe's %d updates reaching hcc-api's informers", len(probed))
	// The reference has no event count of its own: its informers get the
	// same watch events, and are given a moment more.
	time.Sleep(time.Second)
	settled(fmt.Sprintf("after %d cached inventories were changed", len(probed)))

	for _, t := range targets {
		b.Run("process"+t.line, func(b *testing.B) {
			for b.Loop() {
				errLines, warnLines, nErrors, nWarnings := t.proc.logProblems(b, 5)
				for _, l := range append(errLines, warnLines...) {
					progressf("%s: %s", t.proc.name, l)
				}
				b.ReportMetric(t.readyAfter.Seconds(), "s-ready")
				b.ReportMetric(t.proc.peakRSS(b), "MiB-rss")
				b.ReportMetric(float64(nErrors), "log-errors")
				b.ReportMetric(float64(nWarnings), "log-warnings")
				if nErrors > maxLogErrors {
					b.Fatalf("%s logged %d errors, more than %d (the first above)", t.proc.name, nErrors, maxLogErrors)
				}
			}
		})
	}
}

// apiTarget is one server under load: hcc-api, the reference build, the
// bare handler.
type apiTarget struct {
	name       string
	line       string // suffix of its benchmark lines
	proc       *process
	readyAfter time.Duration
	bare       bool   // serves no /metrics
	pprofBase  string // its profiling endpoints, when profiled
}

// routeResult is a target's load and what it cost the process around its
// runs: CPU per request (from /proc; for hcc-api its informers' work on
// the updates included) and, for an hcc-api, from its /metrics, heap
// bytes and objects allocated per request and garbage collections a
// second.
type routeResult struct {
	loadResult
	cpuPerRequest, bytesPerRequest, allocsPerRequest float64
	gcPerSecond                                      float64
	// cacheHitShare is the share of inventory cache lookups that hit.
	cacheHitShare float64
	// updatesPerSecond is the update events hcc-api's informers delivered
	// a second during the target's runs, updateSeconds their length.
	updatesPerSecond, updateSeconds float64
}

// loadWorkload is a target's request and the check of its answers.
type loadWorkload struct {
	do    func(i int) (int, []byte, error)
	check func(i int, body []byte) error
}

// measureRoute runs rounds rounds of round of the load on every target in
// turn, rotating who goes first, and sums each target's runs. A target's
// requests are numbered on from round to round. Its first round runs a
// warm-up longer, not measured, in which its client opens its
// connections; the workloads' clients keep them for the later rounds.
//
// updates is the count of update events hcc-api's informers have
// delivered so far; read around every run, whoever's, it gives the update
// rate each target's runs met (routeResult.updatesPerSecond).
func measureRoute(b *testing.B, targets []*apiTarget, rps int, round time.Duration, rounds int, warmup time.Duration,
	workloads map[*apiTarget]loadWorkload, updates func() float64,
) map[*apiTarget]routeResult {
	b.Helper()
	type acc struct {
		runs    []loadRun
		cost    processStats
		seconds float64
		sent    int
		// updates and updateSeconds: the update events delivered during
		// the target's runs, and the runs' length.
		updates, updateSeconds float64
	}
	accs := map[*apiTarget]*acc{}
	for _, t := range targets {
		accs[t] = &acc{}
	}
	for r := range rounds {
		d, skip := round, time.Duration(0)
		if r == 0 {
			d, skip = round+warmup, warmup
		}
		for k := range targets {
			t := targets[(k+r)%len(targets)]
			a := accs[t]
			var before processStats
			if !t.bare {
				before = scrapeStats(b, t.proc)
			}
			cpuBefore := processCPU(b, t.proc)
			updatesBefore := updates()
			started := time.Now()
			run := offerLoad(rps, d, skip, a.sent, http.StatusOK, workloads[t].do, workloads[t].check)
			a.updateSeconds += time.Since(started).Seconds()
			a.updates += updates() - updatesBefore
			a.sent += int(float64(rps) * d.Seconds())
			a.cost.cpuSeconds += processCPU(b, t.proc) - cpuBefore
			if !t.bare {
				after := scrapeStats(b, t.proc)
				a.cost.gcs += after.gcs - before.gcs
				a.cost.allocBytes += after.allocBytes - before.allocBytes
				a.cost.allocs += after.allocs - before.allocs
				a.cost.cacheHits += after.cacheHits - before.cacheHits
				a.cost.cacheMisses += after.cacheMisses - before.cacheMisses
				a.seconds += time.Since(started).Seconds()
			}
			a.runs = append(a.runs, run)
		}
	}
	out := map[*apiTarget]routeResult{}
	for _, t := range targets {
		a := accs[t]
		res := routeResult{loadResult: summarize(a.runs)}
		n := float64(a.sent)
		res.cpuPerRequest = a.cost.cpuSeconds / n * 1e6
		res.updatesPerSecond, res.updateSeconds = a.updates/a.updateSeconds, a.updateSeconds
		if !t.bare {
			res.bytesPerRequest = a.cost.allocBytes / n
			res.allocsPerRequest = a.cost.allocs / n
			res.gcPerSecond = a.cost.gcs / a.seconds
			if lookups := a.cost.cacheHits + a.cost.cacheMisses; lookups > 0 {
				res.cacheHitShare = a.cost.cacheHits / lookups
			}
		}
		progressf("%s %s: p50 %s, p99 %s, %.0f req/s, statuses %v; a request: %.0f CPU µs, %.0f B in %.0f allocations; %.2f GC/s; inventory cache hits %.1f%%; %.1f updates/s delivered meanwhile",
			t.name, t.proc.base, res.p50, res.p99, res.achieved, res.statuses, res.cpuPerRequest, res.bytesPerRequest, res.allocsPerRequest, res.gcPerSecond, 100*res.cacheHitShare, res.updatesPerSecond)
		out[t] = res
	}
	return out
}

// profileRoute offers the load to t for d and, from a second in to a
// second before the end, takes a CPU profile and, at both ends, a heap
// profile after a collection (heap?gc=1: its allocation counts are
// current). It writes them to dir as NAME.cpu.pprof, NAME.heap0.pprof and
// NAME.heap1.pprof and logs how many requests t answered in between, so
// that
//
//	go tool pprof -sample_index=alloc_space -base NAME.heap0.pprof NAME.heap1.pprof
//
// over that count is what a request allocates.
func profileRoute(b *testing.B, t *apiTarget, dir, name string, rps int, d time.Duration,
	workload func(client *http.Client) (func(int) (int, []byte, error), func(int, []byte) error),
) {
	b.Helper()
	client := loadClient()
	defer client.CloseIdleConnections()
	do, check := workload(client)
	seconds := int((d - 2*time.Second).Seconds())
	file := func(kind string) string { return filepath.Join(dir, name+"."+kind+".pprof") }
	type window struct {
		requests float64
		err      error
	}
	done := make(chan window, 1)
	go func() {
		time.Sleep(time.Second)
		if err := fetchTo(t.pprofBase+"/debug/pprof/heap?gc=1", file("heap0")); err != nil {
			done <- window{err: err}
			return
		}
		before, err := requestsServed(t.proc)
		if err == nil {
			err = fetchTo(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", t.pprofBase, seconds), file("cpu"))
		}
		after, errAfter := requestsServed(t.proc)
		if err == nil {
			err = errors.Join(errAfter, fetchTo(t.pprofBase+"/debug/pprof/heap?gc=1", file("heap1")))
		}
		done <- window{requests: after - before, err: err}
	}()
	run := offerLoad(rps, d, 0, 0, http.StatusOK, do, check)
	w := <-done
	require.NoError(b, w.err, "profiling %s", name)
	if run.failures > maxFailedRequests {
		b.Fatalf("profiling %s: %d failed requests (statuses %v; first malformed body: %v), at most %d",
			name, run.failures, run.statuses, run.malformed, maxFailedRequests)
	}
	progressf("profile %s: %.0f requests answered during the %d s CPU profile, %d failed; %s.{cpu,heap0,heap1}.pprof",
		name, w.requests, seconds, run.failures, filepath.Join(dir, name))
}

// answers reports whether a GET of url answers 200.
func answers(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func fetchTo(url, file string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, raw, 0o600)
}

// inventoryEntry is one server of the v2 inventory (docs/http-api.md),
// every member required.
type inventoryEntry struct {
	Name      *string `json:"name"`
	Transport *struct {
		Type *string `json:"type"`
		URL  *string `json:"url"`
	} `json:"transport"`
	Enabled *bool `json:"enabled"`
	Status  *struct {
		Deployed      *bool `json:"deployed"`
		Ready         *bool `json:"ready"`
		Authoritative *bool `json:"authoritative"`
	} `json:"status"`
	AuthRequired       *bool   `json:"authRequired"`
	CredentialRevision *string `json:"credentialRevision"`
}

// checkInventory reports what is wrong with body as Host i's inventory:
// exactly the members of docs/http-api.md; the servers its Context lists,
// sorted, each once (the update generator adds and takes away one server
// of the next Context); each enabled, with auth and a revision, at its
// URL (the update generator changes the path under /sse); a status whose
// authoritative is absent or false.
func (f apiFleet) checkInventory(i int, body []byte) error {
	var inv struct {
		Servers   []inventoryEntry `json:"servers"`
		Timestamp *string          `json:"timestamp"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&inv); err != nil {
		return fmt.Errorf("inventory %.80q: %w", body, err)
	}
	if inv.Timestamp == nil {
		return errors.New("inventory without a timestamp")
	}
	if _, err := time.Parse(time.RFC3339, *inv.Timestamp); err != nil {
		return fmt.Errorf("inventory timestamp: %w", err)
	}
	c := (i % f.hosts) % f.contexts
	per := f.perContext()
	want := map[string]bool{}
	for s := c * per; s < (c+1)*per; s++ {
		want[serverName(s)] = true
	}
	extra := serverName(((c + 1) * per) % f.servers)
	seen, previous := 0, ""
	for _, e := range inv.Servers {
		if e.Name == nil || e.Transport == nil || e.Transport.Type == nil || e.Transport.URL == nil || e.Enabled == nil ||
			e.Status == nil || e.Status.Deployed == nil || e.Status.Ready == nil || e.AuthRequired == nil || e.CredentialRevision == nil {
			return fmt.Errorf("inventory entry lacks a member: %+v", e)
		}
		name := *e.Name
		switch {
		case name <= previous:
			return fmt.Errorf("inventory: %s after %s", name, previous)
		case want[name]:
			seen++
		case name != extra:
			return fmt.Errorf("inventory of Host %d (Context %d) lists %s", i%f.hosts, c, name)
		}
		previous = name
		if !*e.Enabled || !*e.AuthRequired || *e.CredentialRevision == "" || *e.Transport.Type != "sse" ||
			!strings.HasPrefix(*e.Transport.URL, "http://"+name+".mcp-server.svc.cluster.local:3000/sse") ||
			(e.Status.Authoritative != nil && *e.Status.Authoritative) {
			return fmt.Errorf("inventory entry of %s: %.200s", name, body)
		}
	}
	if seen != len(want) {
		return fmt.Errorf("inventory of Host %d lists %d of its Context's %d servers", i%f.hosts, seen, len(want))
	}
	return nil
}

// checkCredential reports what is wrong with body as the credential of
// request i's server: exactly a token and a revision, the token that
// server's (token-of-NAME, or token-of-NAME-rN after an update).
func (f apiFleet) checkCredential(i int, body []byte) error {
	var cred struct {
		Token              *string `json:"token"`
		CredentialRevision *string `json:"credentialRevision"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cred); err != nil {
		return fmt.Errorf("credential %.80q: %w", body, err)
	}
	if cred.Token == nil || cred.CredentialRevision == nil || *cred.CredentialRevision == "" {
		return fmt.Errorf("credential lacks a member: %s", body)
	}
	want := "token-of-" + f.credentialServer(i)
	if *cred.Token != want && !strings.HasPrefix(*cred.Token, want+"-r") {
		return fmt.Errorf("credential of %s holds %q", f.credentialServer(i), *cred.Token)
	}
	return nil
}

// settledFleet is the fleet as the API server holds it once the updates
// stopped: Contexts and McpServers by name, each Secret's token by the
// Secret's name.
type settledFleet struct {
	contexts map[string]*clerumv1alpha1.Context
	servers  map[string]*clerumv1alpha1.McpServer
	tokens   map[string]string
}

// check reports what is wrong with the answers ask gets for a Host of
// Context name: its inventory, then each listed server's credential.
func (l settledFleet) check(name string, ask func(route, server string) (int, []byte, error)) error {
	c := l.contexts[name]
	if c == nil {
		return fmt.Errorf("no Context %s", name)
	}
	want := slices.Clone(c.Spec.McpServers)
	slices.Sort(want)
	want = slices.Compact(want)
	status, raw, err := ask(routeInventory, "")
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("inventory: %d %s", status, raw)
	}
	var inv struct {
		Servers []inventoryEntry `json:"servers"`
	}
	if err := json.Unmarshal(raw, &inv); err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	got := make([]string, 0, len(inv.Servers))
	for _, e := range inv.Servers {
		if e.Name == nil || e.Transport == nil || e.Transport.URL == nil || e.CredentialRevision == nil {
			return fmt.Errorf("inventory entry lacks a member: %s", raw)
		}
		got = append(got, *e.Name)
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("inventory lists %v, Context %s lists %v", got, name, want)
	}
	for _, e := range inv.Servers {
		s := l.servers[*e.Name]
		if s == nil {
			return fmt.Errorf("inventory lists %s, which does not exist", *e.Name)
		}
		path := s.Spec.Transport.Path
		if path == "" {
			path = "/sse"
		}
		if url := "http://" + s.Name + ".mcp-server.svc.cluster.local:3000" + path; *e.Transport.URL != url {
			return fmt.Errorf("inventory: %s at %s, its spec at %s", s.Name, *e.Transport.URL, url)
		}
		status, raw, err := ask(routeCredential, s.Name)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("credential of %s: %d %s", s.Name, status, raw)
		}
		var cred struct {
			Token              *string `json:"token"`
			CredentialRevision string  `json:"credentialRevision"`
		}
		if err := json.Unmarshal(raw, &cred); err != nil {
			return fmt.Errorf("credential of %s: %w", s.Name, err)
		}
		if token := l.tokens[s.Spec.Auth.SecretRef.Name]; cred.Token == nil || *cred.Token != token {
			return fmt.Errorf("credential of %s: %s, its Secret holds %q", s.Name, raw, token)
		}
		if cred.CredentialRevision != *e.CredentialRevision {
			return fmt.Errorf("%s: credentialRevision %s in the inventory, %s from the credential route", s.Name, *e.CredentialRevision, cred.CredentialRevision)
		}
	}
	return nil
}

// churnResult is the update generator's summary (test/bench/internal/churn).
type churnResult struct {
	Offered   float64        `json:"offered"`
	Scheduled int            `json:"scheduled"`
	Applied   map[string]int `json:"applied"`
	Failed    int            `json:"failed"`
	Errors    []string       `json:"errors"`
	Seconds   float64        `json:"seconds"`
	Achieved  float64        `json:"achieved"`
	MaxLagMs  float64        `json:"maxLagMs"`
}

// byInformer is the update events each of hcc-api's informers should
// see: one for every update applied to an object it watches.
func (c churnResult) byInformer() map[string]int {
	return map[string]int{
		"mcpservers": c.Applied["mcpserver-spec"] + c.Applied["mcpserver-status"],
		"secrets":    c.Applied["secret-data"],
		"contexts":   c.Applied["context-members"],
		"hosts":      c.Applied["host-spec"],
	}
}

// processStats are a process's figures: its CPU (processCPU) and, for an
// hcc-api, its /metrics.
type processStats struct {
	cpuSeconds, gcs, allocBytes, allocs float64
	// cacheHits and cacheMisses count inventory cache lookups (none in a
	// build without the cache).
	cacheHits, cacheMisses float64
}

func scrapeStats(b *testing.B, p *process) processStats {
	b.Helper()
	m := scrape(b, p)
	return processStats{
		gcs:         m["go_gc_duration_seconds_count"],
		allocBytes:  m["go_memstats_alloc_bytes_total"],
		allocs:      m["go_memstats_mallocs_total"],
		cacheHits:   m[`clerum_hcc_api_inventory_cache_lookups_total{result="hit"}`],
		cacheMisses: m[`clerum_hcc_api_inventory_cache_lookups_total{result="miss"}`],
	}
}

// processCPU is the CPU time p has used, user and system, in seconds
// (fields utime and stime of /proc/PID/stat, in clock ticks of 1/100 s).
func processCPU(b *testing.B, p *process) float64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	require.NoError(b, err)
	// The command name, in parentheses, may hold spaces: fields count
	// from after it, state being field 3.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	require.Greater(b, len(fields), 13, "%s", raw)
	utime, err := strconv.ParseFloat(fields[11], 64)
	require.NoError(b, err)
	stime, err := strconv.ParseFloat(fields[12], 64)
	require.NoError(b, err)
	return (utime + stime) / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on
// every Linux architecture the benchmark runs on.
const clockTicks = 100

// informerUpdates is the update events each informer of p has delivered
// (clerum_hcc_api_informer_events_total), by informer; empty for a build
// without the series.
func informerUpdates(b *testing.B, p *process) map[string]float64 {
	b.Helper()
	out := map[string]float64{}
	for series, v := range scrape(b, p) {
		rest, ok := strings.CutPrefix(series, `clerum_hcc_api_informer_events_total{`)
		if !ok || !strings.Contains(rest, `event="update"`) {
			continue
		}
		_, informer, _ := strings.Cut(rest, `informer="`)
		informer, _, _ = strings.Cut(informer, `"`)
		out[informer] += v
	}
	return out
}

// requestsServed is every request p answered, by its own count.
func requestsServed(p *process) (float64, error) {
	m, err := readMetrics(p)
	total := 0.0
	for series, v := range m {
		if strings.HasPrefix(series, "clerum_hcc_api_requests_total{") {
			total += v
		}
	}
	return total, err
}

// scrape reads p's /metrics: each sample's series, as written, to its
// value.
func scrape(b *testing.B, p *process) map[string]float64 {
	b.Helper()
	m, err := readMetrics(p)
	require.NoError(b, err)
	return m
}

func readMetrics(p *process) (map[string]float64, error) {
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %s", p.base, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("%s/metrics: %q: %w", p.base, line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

func delta(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// hostToken is what the Control API issues to a Host's mcp-host: a
// compact RS256 JWS with the claims of docs/http-api.md
// (internal/testing/apitest.HostToken, outside a *testing.T).
func hostToken(key *rsa.PrivateKey, host string, uid types.UID) (string, error) {
	now := time.Now()
	header, err := json.Marshal(map[string]any{"alg": "RS256", "typ": "JWT"})
	if err != nil {
		return "", err
	}
	claims, err := json.Marshal(map[string]any{
		"iss": "control-api",
		"aud": []string{"host-context-controller", "workflow-controller"},
		"iat": now.Unix(),
		// Within HCC_MCP_HOST_JWT_MAX_TTL_SECONDS as shipped (300): a
		// longer token is refused for its lifetime.
		"exp":          now.Add(5 * time.Minute).Unix(),
		"hostRefs":     []string{host},
		"host_uid":     string(uid),
		"capabilities": []string{"mcp:credential:read"},
	})
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(claims)
	digest := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
