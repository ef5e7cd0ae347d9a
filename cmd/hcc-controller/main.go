// Command hcc-controller runs the HCC operators. Today that is the
// NetworkPolicy operator and the external-egress coordinator, which turn
// Contexts and McpServers into the platform's NetworkPolicies; the
// subcommands render (the offline plan), census (the live policy census)
// and diff (what a leader would write) help operators. Installed as
// kubectl-hcc, the same binary is the kubectl plugin `kubectl hcc`, which
// runs those three and never the controller (plugin.go).
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

	// The trusted roots when the system has none: the images hold the
	// binary alone (docs/deploy.md, "The images"). With a certificate
	// bundle on the system, that bundle is used instead.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/clerum/hcc/internal/startup"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/version"
)

const binary = "hcc-controller"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	var code int
	if isPlugin(os.Args[0]) {
		code = runPlugin(ctx, os.Args[1:], os.Stdout, os.Stderr)
	} else {
		code = run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}

// run is main with its exit code returned and its lifetime bound to ctx:
// configuration errors print one line on stderr and exit non-zero before
// anything contacts the cluster.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "render":
			return runRender(ctx, controllerCommand("render"), args[1:], stdout, stderr)
		case "diff":
			return runDiff(ctx, controllerCommand("diff"), args[1:], stdout, stderr)
		case "census":
			return runCensus(ctx, controllerCommand("census"), args[1:], stdout, stderr)
		}
	}
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

	cfg, log, err := startup.LoadConfig(binary, config.Controller)
	if err != nil {
		startup.PrintInvalidConfig(stderr, binary, err)
		return 1
	}
	startup.SetMemoryLimit(log)

	if err := runController(ctx, log, flags, cfg); err != nil {
		log.Error().Err(err).Msg("exiting")
		return 1
	}
	log.Info().Msg("stopped")
	return 0
}
