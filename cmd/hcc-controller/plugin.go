package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/clerum/hcc/internal/startup"
	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/version"
)

// pluginBinary is the name under which this binary is the kubectl plugin
// `kubectl hcc` (docs/kubectl-plugin.md). make install-plugin installs
// bin/hcc-controller under it: one binary, so the plugin's render, census
// and diff are the subcommands' own code, built the same way.
const pluginBinary = "kubectl-hcc"

// isPlugin reports whether argv0, the name the process was started under,
// is the plugin's. kubectl starts a plugin by its full path; a symbolic
// link named kubectl-hcc counts too.
func isPlugin(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == pluginBinary
}

// command is how a subcommand was invoked: as a subcommand of
// hcc-controller, or through kubectl as the plugin. It decides what the
// subcommand calls itself and how it finds its cluster.
type command struct {
	name   string // in messages and usage: "hcc-controller diff", "kubectl hcc diff"
	plugin bool
}

func controllerCommand(sub string) command { return command{name: binary + " " + sub} }
func pluginCommand(sub string) command     { return command{name: "kubectl hcc " + sub, plugin: true} }

// clusterFlags are the flags that choose a subcommand's cluster.
type clusterFlags struct {
	kubeconfig, context string
}

// clusterFlags registers on fs the flags that choose the cluster. The
// plugin takes --context too, as kubectl does; kubectl passes a plugin
// none of its own flags, so the plugin reads them itself.
func (c command) clusterFlags(fs *flag.FlagSet) *clusterFlags {
	var f clusterFlags
	if !c.plugin {
		fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, else the in-cluster configuration)")
		return &f
	}
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, else ~/.kube/config, as kubectl)")
	fs.StringVar(&f.context, "context", "", "the kubeconfig context to use (default: its current-context)")
	return &f
}

// connect returns the client configuration of the cluster f chooses, once
// its API server answers: the controller's lookup for a subcommand
// (--kubeconfig, else $KUBECONFIG, else in-cluster), kubectl's for the
// plugin.
func (c command) connect(ctx context.Context, f *clusterFlags, core config.Core) (*rest.Config, error) {
	if c.plugin {
		return startup.ConnectAsKubectl(ctx, pluginBinary, f.kubeconfig, f.context, core)
	}
	return startup.Connect(ctx, binary, startup.Flags{Kubeconfig: f.kubeconfig}, core)
}

const pluginUsage = `kubectl hcc: HCC's offline plan, policy census and diff, on the cluster of
the current kubectl context (docs/kubectl-plugin.md).

Usage:
  kubectl hcc render -f PATH [-f PATH]... [--resolve HOST=IP[,IP]]...
  kubectl hcc census [--context NAME] [--kubeconfig PATH] [--from-deployment[=false]] [--deployment NAMESPACE/NAME]
  kubectl hcc diff   [--context NAME] [--kubeconfig PATH] [-o json] [--settle 2s] [--timeout 5m] [-v]
  kubectl hcc version

The cluster is kubectl's: --kubeconfig, else $KUBECONFIG, else ~/.kube/config,
at --context, else its current-context. Flags follow the command;
"kubectl hcc COMMAND -h" lists them.
`

// runPlugin is main for the plugin: render, census and diff as
// hcc-controller runs them, help and version. Anything else is a usage
// error; the plugin never runs the controller.
func runPlugin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, pluginUsage)
		return 0
	}
	switch args[0] {
	case "render":
		return runRender(ctx, pluginCommand("render"), args[1:], stdout, stderr)
	case "census":
		return runCensus(ctx, pluginCommand("census"), args[1:], stdout, stderr)
	case "diff":
		return runDiff(ctx, pluginCommand("diff"), args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, pluginUsage)
		return 0
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version.String(pluginBinary))
		return 0
	}
	fmt.Fprintf(stderr, "kubectl hcc: unknown command %q\n\n%s", args[0], pluginUsage)
	return 2
}
