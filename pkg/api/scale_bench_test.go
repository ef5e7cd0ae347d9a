package api

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/types"

	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/health"
)

// BenchmarkHandlerAtScale serves test/bench's fleet (10,000 servers with
// a Secret each, 1,000 Contexts of ten, 5,000 Hosts) from indexers, in
// process, with no network: what the handler itself spends and allocates
// per request (ns/op, B/op, allocs/op) once the Host's token is in the
// verified-token cache. Beside the handler with the inventory cache
// (cached) run the handler without it (uncached) and a plain handler
// writing the same bytes and headers (plain, the x-plain baseline).
//
//	go test -run '^$' -bench HandlerAtScale -benchmem ./pkg/api/
func BenchmarkHandlerAtScale(b *testing.B) {
	const servers, contexts, hosts, tokens = 10000, 1000, 5000, 256
	w := newWorld()
	per := servers / contexts
	for i := range servers {
		name := fmt.Sprintf("s%05d", i)
		put(b, w.servers, withAuth(newServer(name, v1alpha1.TransportSSE), name+"-auth", "token"))
		put(b, w.secrets, newSecret(name+"-auth", types.UID("uid-secret-"+name), map[string]string{"token": "token-of-" + name}))
	}
	for c := range contexts {
		names := make([]string, 0, per)
		for s := c * per; s < (c+1)*per; s++ {
			names = append(names, fmt.Sprintf("s%05d", s))
		}
		ctx := newContext(fmt.Sprintf("c%04d", c), names...)
		ctx.UID = types.UID("uid-" + ctx.Name)
		put(b, w.contexts, ctx)
	}
	for h := range hosts {
		put(b, w.hosts, newHost(fmt.Sprintf("h%04d", h), types.UID(fmt.Sprintf("uid-h%04d", h)), fmt.Sprintf("c%04d", h%contexts)))
	}
	handler := func(inventory *InventoryCache) http.Handler {
		reg := prometheus.NewRegistry()
		auth := hostAuth(b)
		auth.RateLimitPerMinute = math.MaxInt32
		return NewHandler(Options{
			Sources: w.sources(), Inventory: inventory, Namespace: serverNS, ClusterDomain: clusterDomain, HostAuth: auth,
			TokenCacheSize: DefaultTokenCacheSize, Readiness: health.NewReadiness(), Gatherer: reg, Metrics: NewMetrics(reg), Log: zerolog.Nop(),
		})
	}
	// Request i is Host h(i)'s, asking in the credential route for one of
	// its Context's servers.
	host := func(i int) int { return (i % tokens) * (hosts / tokens) }
	bearer := make([]string, tokens)
	for i := range tokens {
		name, uid := fmt.Sprintf("h%04d", host(i)), types.UID(fmt.Sprintf("uid-h%04d", host(i)))
		bearer[i] = "Bearer " + sign(b, rs256Header(), claimsFor(name, uid, time.Now()))
	}
	credentialBody := func(i int) []byte {
		return fmt.Appendf(nil, `{"serverName":"s%05d"}`, (host(i)%contexts)*per+i%per)
	}
	routes := []struct {
		name    string
		body    func(i int) []byte // nil: a GET
		request func(i int) *http.Request
	}{
		{"inventory", nil, func(i int) *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/api/v2/hosts/self/mcpservers", nil)
			r.Header.Set("Authorization", bearer[i%tokens])
			return r
		}},
		{"credential", credentialBody, func(i int) *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/api/v2/hosts/self/mcpservers/credential", bytes.NewReader(credentialBody(i)))
			r.Header.Set("Authorization", bearer[i%tokens])
			r.Header.Set("Content-Type", "application/json")
			return r
		}},
	}
	for _, route := range routes {
		cached, uncached := handler(w.inventory), handler(nil)
		// Every token verified and every inventory built before timing.
		requests := make([]*http.Request, 4*tokens)
		for i := range requests {
			requests[i] = route.request(i)
			rec := httptest.NewRecorder()
			cached.ServeHTTP(rec, route.request(i))
			uncached.ServeHTTP(httptest.NewRecorder(), route.request(i))
			if rec.Code != http.StatusOK {
				b.Fatalf("%s: %d %s", route.name, rec.Code, rec.Body)
			}
		}
		body := httptest.NewRecorder()
		cached.ServeHTTP(body, route.request(0))
		plain := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { writeBody(w, http.StatusOK, body.Body.Bytes(), true) })
		for _, target := range []struct {
			name    string
			handler http.Handler
		}{{"plain", plain}, {"uncached", uncached}, {"cached", cached}} {
			b.Run(route.name+"/"+target.name, func(b *testing.B) {
				rw := &discardWriter{header: http.Header{}}
				b.ReportAllocs()
				var bodies [][]byte
				if route.body != nil {
					for i := range requests {
						bodies = append(bodies, route.body(i))
					}
				}
				for i := 0; b.Loop(); i++ {
					r := requests[i%len(requests)]
					if bodies != nil {
						// A body is read once: each request gets it anew, the
						// plain handler's too.
						r.Body = io.NopCloser(bytes.NewReader(bodies[i%len(requests)]))
					}
					clear(rw.header)
					target.handler.ServeHTTP(rw, r)
				}
			})
		}
	}
}

// discardWriter is the least a ResponseWriter does: it keeps the headers
// and drops the body.
type discardWriter struct{ header http.Header }

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}
