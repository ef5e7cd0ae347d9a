// Package startup is the start-up sequence hcc-controller and hcc-api share:
// flags, configuration, logging, the cluster connection and the HTTP server
// lifecycle. Configuration errors surface before anything contacts the
// cluster, so a misconfigured process fails closed with one line on stderr.
package startup

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"

	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/kube"
	"github.com/clerum/hcc/pkg/logging"
	"github.com/clerum/hcc/pkg/version"
)

// reachTimeout bounds the start-up probe of the API server: long enough for a
// slow control plane, short enough that a wrong kubeconfig fails fast.
const reachTimeout = 15 * time.Second

// Flags are the command-line flags both binaries accept.
type Flags struct {
	Kubeconfig  string
	ShowVersion bool
}

// ParseFlags parses args for binary. It returns flag.ErrHelp after printing
// usage when asked to.
func ParseFlags(binary string, args []string, stderr io.Writer) (Flags, error) {
	var f Flags
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; defaults to $KUBECONFIG, then the in-cluster configuration")
	fs.BoolVar(&f.ShowVersion, "version", false, "print the version and commit, then exit")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return f, nil
}

// LoadConfig loads the configuration of component and, on success, the
// process logger. Boot warnings are logged once here.
func LoadConfig(binary string, component config.Component) (*config.Config, zerolog.Logger, error) {
	cfg, err := config.Load(component)
	if err != nil {
		return nil, zerolog.Nop(), err
	}
	log := logging.Setup(binary, cfg.Core.LogLevel)
	log.Info().Str("version", version.Version).Str("commit", version.Commit).
		Bool("devMode", cfg.Core.DevMode).Msg("starting")
	for _, w := range cfg.Warnings {
		log.Warn().Msg(w)
	}
	return cfg, log, nil
}

// FatalPrefix opens the line a binary prints on stderr before it exits for
// invalid configuration. Log alerts written for the system HCC replaces
// match it, so it stays (docs/configuration.md).
const FatalPrefix = "[HCC] FATAL "

var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// PrintInvalidConfig writes err as the one line on stderr a binary exits
// with when its configuration is invalid: FatalPrefix, the binary, then the
// error with any line breaks folded, so an alert sees the whole of it.
func PrintInvalidConfig(stderr io.Writer, binary string, err error) {
	msg := lineBreaks.Replace(err.Error())
	fmt.Fprintf(stderr, "%s%s: invalid configuration: %s\n", FatalPrefix, binary, msg)
}

// Connect returns the client configuration for the cluster found in the
// documented lookup order (docs/operating.md, "Running the binaries"),
// after checking that its API server answers.
func Connect(ctx context.Context, binary string, flags Flags, core config.Core) (*rest.Config, error) {
	restCfg, err := kube.RESTConfig(flags.Kubeconfig, binary+"/"+version.Version, core.KubeAPIQPS, core.KubeAPIBurst)
	return reachable(ctx, restCfg, err)
}

// ConnectAsKubectl is Connect for the kubectl plugin: the cluster is the
// one kubectl would talk to, from kubeconfig (else $KUBECONFIG, else
// ~/.kube/config) at kubeContext (else the current-context).
func ConnectAsKubectl(ctx context.Context, binary, kubeconfig, kubeContext string, core config.Core) (*rest.Config, error) {
	restCfg, err := kube.KubectlRESTConfig(kubeconfig, kubeContext, binary+"/"+version.Version, core.KubeAPIQPS, core.KubeAPIBurst)
	return reachable(ctx, restCfg, err)
}

// reachable returns restCfg once its API server answers.
func reachable(ctx context.Context, restCfg *rest.Config, err error) (*rest.Config, error) {
	if err != nil {
		return nil, err
	}
	if err := kube.CheckReachable(ctx, restCfg, reachTimeout); err != nil {
		return nil, err
	}
	return restCfg, nil
}

// Serve runs an HTTP server for handler on port until ctx is done, then drains
// in-flight requests for up to drain before returning.
func Serve(ctx context.Context, log zerolog.Logger, port int32, handler http.Handler, drain time.Duration) error {
	srv := &http.Server{
		Addr:              net.JoinHostPort("", strconv.Itoa(int(port))),
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info().Int32("port", port).Msg("serving HTTP")

	select {
	case err := <-errc:
		return fmt.Errorf("HTTP server on port %d: %w", port, err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
