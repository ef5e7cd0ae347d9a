// Command hcc-dataplane runs the flows of a flows file as real packets on
// the local cluster's dataplane (docs/local-cluster.md#the-dataplane), one
// line per flow and a last line "N/M flows as expected"; it exits non-zero
// if any flow did not do what it must. make test-dataplane runs it:
//
//	hcc-dataplane --flows PATH [--objects PATH]... [--resolve HOST=IP[,HOST=IP]...] [--controller-env NAME=VALUE]...
//	hcc-dataplane --check
//
// It builds what it needs (the cluster's binaries, kube-router,
// hcc-controller), starts the cluster in a network namespace of its own,
// applies the objects and waits for hcc-controller to converge on them,
// creates the pods of the flows file, and runs the flows. A machine that
// cannot create network namespaces, or lacks iptables, ipset or ip, gets a
// message saying so and exit status 3. --check only says whether this
// machine can run the dataplane (exit 0) or why not (exit 3); make test
// prints it beside its note that it skips the dataplane suite.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/clerum/hcc/test/dataplane"
)

// Exit statuses.
const (
	exitFailed      = 1 // a flow failed, or the run could not be made
	exitUsage       = 2
	exitUnavailable = 3 // this machine cannot run the dataplane
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	dataplane.MaybeRunChild()
	var objects, resolve, controllerEnv listFlag
	flows := flag.String("flows", "", "the flows file (required)")
	flag.Var(&objects, "objects", "a YAML file or folder of objects to apply first (repeatable)")
	flag.Var(&resolve, "resolve", "HOST=IP answers of the cluster's DNS server, comma-separated (repeatable)")
	flag.Var(&controllerEnv, "controller-env", "NAME=VALUE set in hcc-controller's environment (repeatable)")
	logDir := flag.String("log-dir", "", "keep every process's log in this directory")
	check := flag.Bool("check", false, "only say whether this machine can run the dataplane, and why not")
	flag.Parse()
	if *check && *flows == "" && flag.NArg() == 0 {
		if err := dataplane.Check(); err != nil {
			fmt.Fprintf(os.Stderr, "hcc-dataplane: %v\n", err)
			os.Exit(exitUnavailable)
		}
		fmt.Fprintln(os.Stderr, "hcc-dataplane: this machine can run the dataplane")
		return
	}
	if *flows == "" || *check || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: hcc-dataplane --flows PATH [--objects PATH]... [--resolve HOST=IP,...]... [--controller-env NAME=VALUE]... | --check")
		os.Exit(exitUsage)
	}
	file, err := dataplane.LoadFile(*flows)
	if err != nil {
		fail(exitUsage, err)
	}
	answers, err := parseResolve(resolve)
	if err != nil {
		fail(exitUsage, err)
	}
	for _, kv := range controllerEnv {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			fail(exitUsage, fmt.Errorf("--controller-env %q: want NAME=VALUE", kv))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !dataplane.InNode() {
		os.Exit(outside(ctx))
	}
	opts := dataplane.Options{Logf: progress, Resolve: answers, ControllerEnv: controllerEnv, LogDir: *logDir}
	os.Exit(inside(ctx, opts, file, objects))
}

// outside checks the machine, builds what the node runs, and runs this
// command again in the node.
func outside(ctx context.Context) int {
	if err := dataplane.Check(); err != nil {
		fmt.Fprintf(os.Stderr, "hcc-dataplane: SKIPPED, no flow was run: %v\n", err)
		return exitUnavailable
	}
	env, cleanup, err := dataplane.Prepare(ctx, progress)
	if err != nil {
		fail(exitFailed, err)
	}
	defer cleanup()
	code, err := dataplane.RunInNode(env...)
	if err != nil {
		fail(exitFailed, err)
	}
	return code
}

func inside(ctx context.Context, opts dataplane.Options, file *dataplane.File, objects []string) int {
	e, err := dataplane.Start(ctx, opts)
	if err != nil {
		progress("error: %v", err)
		return exitFailed
	}
	defer e.Close()
	if len(objects) > 0 {
		if err := e.ApplyFiles(ctx, objects...); err != nil {
			progress("error: applying the objects: %v", err)
			return exitFailed
		}
		progress("applied %s; waiting for hcc-controller to converge", strings.Join(objects, ", "))
		if err := e.WaitConverged(ctx, 5*time.Minute); err != nil {
			progress("error: %v", err)
			return exitFailed
		}
	}
	pods, err := e.CreatePods(ctx, file, nil)
	if err != nil {
		progress("error: %v", err)
		return exitFailed
	}
	if err := e.PrepareDestinations(file); err != nil {
		progress("error: %v", err)
		return exitFailed
	}
	if err := e.WaitConverged(ctx, 5*time.Minute); err != nil {
		progress("error: %v", err)
		return exitFailed
	}
	progress("running %d flows", len(file.Flows))
	results := e.RunFlows(ctx, file, pods)
	if dataplane.Report(os.Stdout, results) != len(results) {
		return exitFailed
	}
	return 0
}

// parseResolve reads HOST=IP entries, comma-separated; a host given
// several times resolves to all its addresses.
func parseResolve(values []string) (map[string][]netip.Addr, error) {
	answers := map[string][]netip.Addr{}
	for _, v := range values {
		for entry := range strings.SplitSeq(v, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			host, ip, ok := strings.Cut(entry, "=")
			addr, err := netip.ParseAddr(ip)
			if !ok || host == "" || err != nil || !addr.Is4() {
				return nil, fmt.Errorf("--resolve %q: want HOST=IPv4", entry)
			}
			answers[host] = append(answers[host], addr)
		}
	}
	return answers, nil
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "hcc-dataplane: "+format+"\n", args...)
}

func fail(code int, err error) {
	if errors.Is(err, context.Canceled) {
		err = errors.New("interrupted")
	}
	fmt.Fprintf(os.Stderr, "hcc-dataplane: %v\n", err)
	os.Exit(code)
}
