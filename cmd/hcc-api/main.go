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
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"k8s.io/client-go/kubernetes"

	// The trusted roots when the system has none: the images hold the
	// binary alone (docs/deploy.md, "The images"). With a certificate
	// bundle on the system, that bundle is used instead.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/clerum/hcc/internal/startup"
	"github.com/clerum/hcc/pkg/api"
	"github.com/clerum/hcc/pkg/apis/clerum/v1alpha1"
	"github.com/clerum/hcc/pkg/config"
	clientset "github.com/clerum/hcc/pkg/generated/clientset/versioned"
	"github.com/clerum/hcc/pkg/health"
	"github.com/clerum/hcc/pkg/imagepolicy"
	"github.com/clerum/hcc/pkg/version"
)

const (
	binary = "hcc-api"
	// drainTimeout bounds how long in-flight requests may finish on shutdown.
	drainTimeout = 20 * time.Second
	// fixturesCheck is the dev-mode readiness check: it passes once the
	// fixtures are loaded.
	fixturesCheck = "fixtures"
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
		startup.PrintInvalidConfig(stderr, binary, err)
		return 1
	}
	startup.SetMemoryLimit(log)

	if err := serve(ctx, log, flags, cfg); err != nil {
		log.Error().Err(err).Msg("exiting")
		return 1
	}
	log.Info().Msg("stopped")
	return 0
}

// serve builds the API over the cluster's informer caches (or, in dev
// mode, the fixtures) and serves it until ctx is done.
func serve(ctx context.Context, log zerolog.Logger, flags startup.Flags, cfg *config.Config) error {
	if err := serveProfiles(ctx, log); err != nil {
		return err
	}
	registry, metrics := newRegistry()
	logKeyIDs(log, cfg.HostAuth)
	refused, err := imageRefusal(log, cfg.ImagePolicy)
	if err != nil {
		return err
	}
	opts := api.Options{
		ImageRefused:   refused,
		Namespace:      cfg.Namespaces.McpServer,
		ClusterDomain:  cfg.Core.ClusterDomain,
		HostAuth:       cfg.HostAuth,
		DesktopToken:   cfg.Desktop.APIToken,
		TokenCacheSize: api.DefaultTokenCacheSize,
		Gatherer:       registry,
		Metrics:        metrics,
		Log:            log,
	}

	if cfg.Core.DevMode {
		opts.Readiness = health.NewReadiness(fixturesCheck)
		opts.Dev = api.LoadDevFixtures(cfg.Dev, cfg.Namespaces.McpServer, log)
		opts.Readiness.Set(fixturesCheck, true)
		metrics.SetCacheSynced(fixturesCheck, true)
		return startup.Serve(ctx, log, cfg.Core.Port, api.NewHandler(opts), drainTimeout)
	}

	restCfg, err := startup.Connect(ctx, binary, flags, cfg.Core)
	if err != nil {
		return err
	}
	log.Info().Str("server", restCfg.Host).Msg("connected to the Kubernetes API server")
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	hcc, err := clientset.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	caches, err := newCaches(kube, hcc, cfg.Namespaces, metrics)
	if err != nil {
		return err
	}
	opts.Sources = caches.sources
	opts.Inventory = caches.inventory
	opts.Readiness = health.NewReadiness(informersCheck)
	// Serve returns once in-flight requests drained after ctx ended; the
	// informers stop with ctx too and are waited for last.
	defer caches.shutdown()
	caches.run(ctx, opts.Readiness, metrics, log)
	return startup.Serve(ctx, log, cfg.Core.Port, api.NewHandler(opts), drainTimeout)
}

// newRegistry is the registry /metrics serves, and hcc-api's series in
// it: the Go and process collectors and the API's.
func newRegistry() (*prometheus.Registry, *api.Metrics) {
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return registry, api.NewMetrics(registry)
}

// logKeyIDs names the keys this replica verifies v2 tokens with, by the
// kid a token would use, so that an operator can see every replica hold
// the new key before the issuer signs with it (docs/http-api.md, key
// rotation).
func logKeyIDs(log zerolog.Logger, auth config.HostAuth) {
	kids := make([]string, 0, len(auth.PublicKeys))
	for _, k := range auth.PublicKeys {
		kids = append(kids, api.KeyID(k))
	}
	log.Info().Strs("keyIDs", kids).Msg("verifying v2 host tokens with these keys")
}

// imageRefusal is the controller's enforce-mode refusal, computed here from
// the same variables: hcc-api withholds a refused server from the first
// request, without waiting for the operator to write its status
// (docs/http-api.md). A list that does not parse stops hcc-api, as it stops
// the controller.
func imageRefusal(log zerolog.Logger, cfg config.ImagePolicy) (func(*v1alpha1.McpServer) bool, error) {
	images, err := imagepolicy.Parse(cfg.AllowedPrefixes)
	if err != nil {
		return nil, fmt.Errorf("CONTEXT_MAPPER_ALLOWED_IMAGE_PREFIXES: %w", err)
	}
	log.Info().Bool("enforce", cfg.Enforce).Strs("prefixes", images.Prefixes()).Msg("image allowlist")
	return imagepolicy.Enforced(images, cfg.Enforce), nil
}
