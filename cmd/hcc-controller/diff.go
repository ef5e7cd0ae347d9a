package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/clerum/hcc/pkg/config"
	"github.com/clerum/hcc/pkg/controlapi"
	"github.com/clerum/hcc/pkg/controllers/kit"
	"github.com/clerum/hcc/pkg/diff"
	"github.com/clerum/hcc/pkg/logging"
)

// Exit codes of diff, as kubectl diff's.
const (
	diffNothing = 0
	diffChanges = 1
	diffError   = 2
)

// runDiff is `hcc-controller diff [--kubeconfig PATH] [-o json]`: what a
// leader would do on its first passes over the live cluster, computed by
// the reconcilers themselves over an overlay that writes nothing
// (docs/diff.md).
func runDiff(ctx context.Context, cmd command, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cluster := cmd.clusterFlags(fs)
	output := fs.String("o", "", `output format: "" (a table) or "json"`)
	settle := fs.Duration("settle", 2*time.Second, "how long the reconcilers must have had nothing to do before diff reports")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long the reconcilers may take to settle")
	verbose := fs.Bool("v", false, "print the reconcilers' logs on stderr (default: warnings and errors only)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return diffNothing
		}
		return diffError
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.name, err)
		return diffError
	}
	if fs.NArg() > 0 || (*output != "" && *output != "json") {
		usage := "usage: diff [--kubeconfig PATH] [-o json]"
		if cmd.plugin {
			usage = "usage: diff [--context NAME] [--kubeconfig PATH] [-o json]"
		}
		return fail(errors.New(usage))
	}
	// The controller's own configuration: the same variables decide the
	// same way, and the HMAC secret verifies HCC's marks.
	cfg, err := config.Load(config.Controller)
	if err != nil {
		return fail(fmt.Errorf("invalid configuration: %w", err))
	}
	level := "warn"
	if *verbose {
		level = cfg.Core.LogLevel
	}
	log := logging.Setup(binary+"-diff", level)
	restCfg, err := cmd.connect(ctx, cluster, cfg.Core)
	if err != nil {
		return fail(err)
	}
	live, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return fail(err)
	}
	issuer := &placeholderIssuer{lifetime: cfg.Host.CredentialMaxLifetime}
	report, err := diff.Run(ctx, diff.Options{
		Live: live,
		Build: func(deps kit.Deps) ([]kit.Reconciler, error) {
			return newReconcilers(deps, net.DefaultResolver, issuer)
		},
		Config:  cfg,
		Log:     log,
		Settle:  *settle,
		Timeout: *timeout,
	})
	if err != nil {
		return fail(err)
	}
	report.CredentialsIssued = int(issuer.issued.Load())
	if *output == "json" {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteTable(stdout)
	}
	if err != nil {
		return fail(err)
	}
	if report.Empty() {
		return diffNothing
	}
	return diffChanges
}

// placeholderIssuer stands in for the Control API in a diff: it counts the
// credentials a leader would ask for and answers each with a placeholder,
// so the Host reconciler goes on as after a real answer.
type placeholderIssuer struct {
	lifetime time.Duration
	issued   atomic.Int64
}

func (p *placeholderIssuer) BootstrapCredential(context.Context, controlapi.BootstrapRequest) (controlapi.Credential, error) {
	p.issued.Add(1)
	return controlapi.Credential{Value: "issued-by-the-control-api", ExpiresAt: time.Now().Add(p.lifetime).Truncate(time.Second)}, nil
}
