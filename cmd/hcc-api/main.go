// Command hcc-api serves the read-only HCC REST API: MCP server inventory
// and credential hand-out for mcp-host, answered from informer caches. It
// scales apart from hcc-controller and never writes to the cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/clerum/hcc/internal/startup"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/health"
	"github.com/clerum/hcc/pkg/version"
)

const (
	binary = "hcc-api"
	// drainTimeout bounds how long in-flight requests may finish on shutdown.
	drainTimeout = 20 * time.Second
	// routesCheck stays pending until the API routes are served; they arrive
	// with the hcc-api issue, so until then the process never reports ready
	// and no Service sends it traffic.
	routesCheck = "routes"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main with its exit code returned and its lifetime bound to ctx:
// configuration errors print one line on stderr and exit non-zero before
// anything contacts the cluster.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags, err := startup.ParseFlags(binary, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", binary, err)
		return 2
	}
	if flags.ShowVersion {
		fmt.Fprintln(stdout, version.String(binary))
		return 0
	}

	cfg, log, err := startup.LoadConfig(binary, config.API)
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration: %v\n", binary, err)
		return 1
	}

	if err := serve(ctx, log, flags, cfg); err != nil {
		log.Error().Err(err).Msg("exiting")
		return 1
	}
	log.Info().Msg("stopped")
	return 0
}

// serve checks the cluster (outside dev mode) and serves the health and
// metrics endpoints until ctx is done.
func serve(ctx context.Context, log zerolog.Logger, flags startup.Flags, cfg *config.Config) error {
	if !cfg.Core.DevMode {
		restCfg, err := startup.Connect(ctx, binary, flags, cfg.Core)
		if err != nil {
			return err
		}
		log.Info().Str("server", restCfg.Host).Msg("connected to the Kubernetes API server")
	}

	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	readiness := health.NewReadiness(routesCheck)
	mux := http.NewServeMux()
	health.Register(mux, readiness, registry)
	return startup.Serve(ctx, log, cfg.Core.Port, mux, drainTimeout)
}
