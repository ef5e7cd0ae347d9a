// Command barehandler is BenchmarkAPIScale's baseline: a process, like
// hcc-api, whose handler writes a fixed 200 body per route and does
// nothing else. The benchmark runs it beside hcc-api under the same load
// generator, so the ratio measures hcc-api's work, not the process and
// network it shares with any HTTP server.
//
//	barehandler --port PORT --body ROUTE=FILE [--body ROUTE=FILE ...]
//
// A route is an exact path; anything else is 404.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

type bodies map[string][]byte

func (b bodies) String() string { return fmt.Sprint(len(b), " routes") }

func (b bodies) Set(v string) error {
	route, file, ok := strings.Cut(v, "=")
	if !ok || !strings.HasPrefix(route, "/") {
		return fmt.Errorf("%q is not ROUTE=FILE", v)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	b[route] = raw
	return nil
}

func main() {
	routes := bodies{}
	port := flag.Int("port", 0, "loopback port to listen on")
	flag.Var(routes, "body", "ROUTE=FILE: answer ROUTE with FILE's bytes (repeatable)")
	flag.Parse()
	if *port == 0 || len(routes) == 0 {
		fmt.Fprintln(os.Stderr, "barehandler: --port and at least one --body are required")
		os.Exit(2)
	}
	srv := &http.Server{
		Addr:              net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)),
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			if r.URL.Path == "/ready" {
				return
			}
			body, ok := routes[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(body)
		}),
	}
	fmt.Fprintf(os.Stderr, "barehandler: serving %d routes on %s\n", len(routes), srv.Addr)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "barehandler:", err)
		os.Exit(1)
	}
}
