// Command churn is BenchmarkAPIScale's update generator: it edits the
// benchmark's fleet at a fixed rate while the load runs, so that hcc-api
// answers under the informer events a live cluster sends it. It is a
// process of its own, like hcc-api and the bare handler, so its work
// (encoding, API calls, their garbage) stays out of the load generator's
// process; it shares the machine, as the API server it writes to does.
//
//	churn --kubeconfig FILE --servers N --contexts N --hosts N --rate R --summary FILE
//
// It writes to the fleet test/bench creates: McpServers s00000… (each
// with the Secret s…-auth, key token), Contexts c0000… listing servers
// [i*per, (i+1)*per), Hosts h0000… in the MCP server and host namespaces.
// Every edit is one merge patch, in a repeating cycle of
// updatesPerCycle slots (see cycle). None of them takes away what a
// Host's requests in the benchmark ask for: a server stays enabled and in
// its Context, a Host in its Context, a Secret holds a token for its
// server (token-of-NAME, or token-of-NAME-rN after an edit).
//
// Updates are offered open loop, update i due at start + i/rate, on a
// pool of workers; on SIGTERM or SIGINT it stops offering, waits for the
// updates in flight and writes a JSON summary (summary) to --summary.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	serverNS = "mcp-server"
	hostNS   = "mcp-host"
	// workers bounds the updates in flight: at 100 a second and tens of
	// milliseconds a patch, a few are busy; the rest absorb a slow
	// moment of the API server without the rate falling behind.
	workers = 32
	// patchTimeout bounds one update.
	patchTimeout = 30 * time.Second
	// maxErrors is how many error messages the summary keeps.
	maxErrors = 10
)

// The kinds of update, each a share of the cycle.
const (
	kindServerSpec   = "mcpserver-spec"
	kindServerStatus = "mcpserver-status"
	kindSecret       = "secret-data"
	kindContext      = "context-members"
	kindHost         = "host-spec"
)

// cycle is the order of the kinds, repeated: per 20 updates, five each of
// McpServer spec, McpServer status and Secret data, three Context
// membership edits and two Host edits.
var cycle = []string{
	kindServerSpec, kindSecret, kindServerStatus, kindContext,
	kindServerSpec, kindSecret, kindServerStatus, kindHost,
	kindServerSpec, kindSecret, kindServerStatus, kindContext,
	kindServerSpec, kindSecret, kindServerStatus, kindHost,
	kindServerSpec, kindSecret, kindServerStatus, kindContext,
}

// phase is each server-editing kind's offset, in thirds of the fleet.
var phase = map[string]int{kindServerSpec: 0, kindServerStatus: 1, kindSecret: 2}

var (
	mcpServers = schema.GroupVersionResource{Group: "clerum.io", Version: "v1alpha1", Resource: "mcpservers"}
	contexts   = schema.GroupVersionResource{Group: "clerum.io", Version: "v1alpha1", Resource: "contexts"}
	hosts      = schema.GroupVersionResource{Group: "clerum.io", Version: "v1alpha1", Resource: "hosts"}
	secrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// Names as test/bench creates them.
func serverName(i int) string  { return fmt.Sprintf("s%05d", i) }
func contextName(i int) string { return fmt.Sprintf("c%04d", i) }
func hostName(i int) string    { return fmt.Sprintf("h%04d", i) }

// summary is what churn writes when it stops.
type summary struct {
	// Offered is the rate asked for, updates a second.
	Offered float64 `json:"offered"`
	// Scheduled counts the updates that fell due before the stop.
	Scheduled int `json:"scheduled"`
	// Applied counts the updates the API server accepted, by kind.
	Applied map[string]int `json:"applied"`
	// Failed counts the updates that failed; Errors holds the first few.
	Failed int      `json:"failed"`
	Errors []string `json:"errors,omitempty"`
	// Seconds runs from the first update's due time to the last
	// completion; Achieved is the applied updates over it.
	Seconds  float64 `json:"seconds"`
	Achieved float64 `json:"achieved"`
	// MaxLagMs is the longest any update waited past its due time for a
	// worker.
	MaxLagMs float64 `json:"maxLagMs"`
}

type fleet struct{ servers, contexts, hosts int }

func (f fleet) perContext() int { return f.servers / f.contexts }

// update is one edit: what it writes and where.
type update struct {
	kind        string
	resource    schema.GroupVersionResource
	namespace   string
	name        string
	patch       []byte
	subresource []string
}

// plan returns the n-th update of kind. Each kind walks its objects with
// a stride coprime to their count, so successive edits of a kind spread
// over the fleet and every object is edited once per count edits; the
// edit number r makes each value new. The three kinds that edit a server
// (its spec, its status, its Secret) walk the same order a third of the
// fleet apart (phase): in step, a server's spec or status edit would
// follow its Secret's within milliseconds, and a reader that missed the
// Secret's change would be set right by the next edit, unseen.
func plan(f fleet, kind string, n int) update {
	pick := func(count int) int { return (n*stride(count) + phase[kind]*count/3) % count }
	// r is new for every update of the kind; n/count is how often the
	// object picked was edited before (each is picked once per count).
	// Either way the patch changes the object: a patch that changed
	// nothing would send no event.
	r := n + 1
	switch kind {
	case kindServerSpec:
		// A new transport path: the server's URL in the inventory changes,
		// and its generation with it.
		return update{kind: kind, resource: mcpServers, namespace: serverNS, name: serverName(pick(f.servers)),
			patch: fmt.Appendf(nil, `{"spec":{"transport":{"path":"/sse/r%d"}}}`, r)}
	case kindServerStatus:
		return update{kind: kind, resource: mcpServers, namespace: serverNS, name: serverName(pick(f.servers)),
			patch: fmt.Appendf(nil, `{"status":{"deployed":true,"ready":%t}}`, (n/f.servers)%2 == 0), subresource: []string{"status"}}
	case kindSecret:
		// A new value: the server's credentialRevision changes.
		name := serverName(pick(f.servers))
		token := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "token-of-%s-r%d", name, r))
		return update{kind: kind, resource: secrets, namespace: serverNS, name: name + "-auth",
			patch: fmt.Appendf(nil, `{"data":{"token":%q}}`, token)}
	case kindContext:
		// The Context's own servers, and on every other edit of it one
		// server of the next Context as well: its Hosts see it come and go.
		c := pick(f.contexts)
		per := f.perContext()
		members := make([]string, 0, per+1)
		for s := c * per; s < (c+1)*per; s++ {
			members = append(members, serverName(s))
		}
		if (n/f.contexts)%2 == 0 {
			members = append(members, serverName(((c+1)*per)%f.servers))
		}
		list, _ := json.Marshal(members)
		return update{kind: kind, resource: contexts, namespace: serverNS, name: contextName(c),
			patch: fmt.Appendf(nil, `{"spec":{"mcpServers":%s}}`, list)}
	case kindHost:
		// The desktop on or off: the Host stays in its Context.
		desktop := `{"enabled":true}`
		if (n/f.hosts)%2 == 1 {
			desktop = `null`
		}
		return update{kind: kind, resource: hosts, namespace: hostNS, name: hostName(pick(f.hosts)),
			patch: fmt.Appendf(nil, `{"spec":{"desktop":%s}}`, desktop)}
	}
	panic("unknown kind " + kind)
}

// stride is a step coprime to count, near count/φ so that neighbours in
// time are far apart in the fleet.
func stride(count int) int {
	for s := max(1, count*618/1000); s > 1; s-- {
		if gcd(s, count) == 1 {
			return s
		}
	}
	return 1
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func main() {
	var f fleet
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of a user that may patch the fleet")
	flag.IntVar(&f.servers, "servers", 0, "McpServers in the fleet")
	flag.IntVar(&f.contexts, "contexts", 0, "Contexts in the fleet")
	flag.IntVar(&f.hosts, "hosts", 0, "Hosts in the fleet")
	rate := flag.Float64("rate", 100, "updates a second")
	out := flag.String("summary", "", "file the summary is written to on stop")
	flag.Parse()
	if *kubeconfig == "" || *out == "" || f.contexts <= 0 || f.hosts <= 0 || f.perContext() <= 0 || *rate <= 0 {
		fmt.Fprintln(os.Stderr, "churn: --kubeconfig, --summary, --servers ≥ --contexts > 0, --hosts > 0 and --rate > 0 are required")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "churn:", err)
		os.Exit(1)
	}
	cfg.QPS, cfg.Burst = float32(4**rate), int(4**rate)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "churn:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := run(ctx, client, f, *rate)
	raw, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(*out, raw, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "churn:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "churn: %s\n", raw)
}

// run offers updates at rate until ctx ends and reports what happened.
func run(ctx context.Context, client dynamic.Interface, f fleet, rate float64) summary {
	type job struct {
		u   update
		due time.Time
	}
	jobs := make(chan job, workers)
	var (
		mu   sync.Mutex
		s    = summary{Offered: rate, Applied: map[string]int{}}
		last time.Time
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				lag := time.Since(j.due)
				pctx, cancel := context.WithTimeout(context.Background(), patchTimeout)
				_, err := client.Resource(j.u.resource).Namespace(j.u.namespace).
					Patch(pctx, j.u.name, types.MergePatchType, j.u.patch, metav1.PatchOptions{}, j.u.subresource...)
				cancel()
				now := time.Now()
				mu.Lock()
				if err != nil {
					s.Failed++
					if len(s.Errors) < maxErrors {
						s.Errors = append(s.Errors, fmt.Sprintf("%s %s: %v", j.u.kind, j.u.name, err))
					}
				} else {
					s.Applied[j.u.kind]++
				}
				if now.After(last) {
					last = now
				}
				s.MaxLagMs = max(s.MaxLagMs, float64(lag)/float64(time.Millisecond))
				mu.Unlock()
			}
		})
	}
	interval := time.Duration(float64(time.Second) / rate)
	counts := map[string]int{}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
offer:
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		timer.Reset(time.Until(due))
		select {
		case <-ctx.Done():
			break offer
		case <-timer.C:
		}
		kind := cycle[i%len(cycle)]
		jobs <- job{u: plan(f, kind, counts[kind]), due: due}
		counts[kind]++
		s.Scheduled++
	}
	close(jobs)
	wg.Wait()
	applied := 0
	for _, n := range s.Applied {
		applied += n
	}
	if applied > 0 {
		s.Seconds = last.Sub(start).Seconds()
		s.Achieved = float64(applied) / s.Seconds
	}
	return s
}
