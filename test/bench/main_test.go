//go:build integration

// Package bench measures hcc-controller and hcc-api as they ship: the real
// binaries, built without the race detector and run as processes under the
// RBAC of their shipped service accounts with the shipped Deployment env,
// against a local etcd and kube-apiserver (internal/testing/controlplane).
// Beside each absolute figure it reports a ratio against a baseline
// measured in the same run: a plain client-go client creating the same
// objects its converged state holds, each once, on the same client budget
// (BenchmarkFleetConvergence); a bare HTTP handler, a process of its own,
// under the same load generator (BenchmarkAPIScale). Counts (writes per
// object, failed writes and requests, Control API calls per Host, log
// errors) are asserted against named bounds; timings are only reported.
//
//	go test -tags integration -run '^$' -bench . -benchtime=1x -timeout 60m ./test/bench/
//
// Each benchmark starts its own control planes, so they run one at a time
// and need no TestMain. make bench prints their figures, with the other
// benchmarks', as one table (hack/benchtable). The HCC_BENCH_* variables
// shrink the fleets for a quick run (sizes below).
package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/clerum/hcc/internal/testing/controlplane"
)

// Service accounts of deploy/base and the groups a pod of theirs has.
const (
	controllerUser = "system:serviceaccount:control-plane:hcc-controller"
	apiUser        = "system:serviceaccount:control-plane:hcc-api"
)

var saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:control-plane"}

// platformNamespaces are the namespaces the shipped configuration names;
// they are fixed, so every measured configuration gets a control plane of
// its own.
var platformNamespaces = []string{"control-plane", "mcp-server", "mcp-host", "rpc-proxy", "sandbox-recipes", "sandbox-ui", "channels", "gfs"}

// repoRoot is the repository, two levels above this package.
var repoRoot = filepath.Join("..", "..")

func init() {
	// client-go's throttling notices (the plain client waits on its budget
	// by design) would bury the progress lines.
	klog.SetLogger(logr.Discard())
}

// progressf writes a progress or detail line, prefixed "bench: ", to
// stderr: a benchmark's own log is cut to ten lines. go test merges it
// into its output, where hack/benchtable reads only the result lines.
func progressf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// size is the HCC_BENCH_* override of a fleet size, else def.
func size(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(b, err, name)
	require.Positive(b, n, name)
	return n
}

// buildBinary builds cmd/name without the race detector, as it ships,
// into a folder that lives as long as the benchmark.
func buildBinary(b *testing.B, name string) string {
	b.Helper()
	return buildPackage(b, name, "github.com/clerum/hcc/cmd/"+name)
}

// buildPackage builds the main package pkg as buildBinary does, with
// any further go build flags.
func buildPackage(b *testing.B, name, pkg string, flags ...string) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), name)
	cmd := exec.Command("go", append(append([]string{"build", "-trimpath", "-o", bin}, flags...), pkg)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, "building %s: %s", name, out)
	return bin
}

// startControlPlane runs etcd and kube-apiserver with the CRDs, the
// platform namespaces and the shipped service accounts and RBAC of
// components (deploy/base/COMPONENT/{serviceaccount,rbac}.yaml).
func startControlPlane(b *testing.B, auditPolicy string, components ...string) *controlplane.ControlPlane {
	b.Helper()
	cp := controlplane.Start(b, controlplane.Options{AuditPolicy: auditPolicy})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(b, controlplane.CreateNamespaces(ctx, cp.Config(), platformNamespaces))
	for _, c := range components {
		dir := filepath.Join(repoRoot, "deploy", "base", c)
		require.NoError(b, controlplane.ApplyFiles(ctx, cp.Config(), filepath.Join(dir, "serviceaccount.yaml"), filepath.Join(dir, "rbac.yaml")))
	}
	return cp
}

// process is a running hcc-controller or hcc-api.
type process struct {
	*controlplane.Process
	name    string
	base    string // http://127.0.0.1:PORT
	log     string
	started time.Time
}

// startBinary runs bin with kubeconfig and environ on top of this process's
// environment minus anything the binaries read, and stops it when the
// benchmark ends.
func startBinary(b *testing.B, name, bin, kubeconfig string, port int, environ []string) *process {
	b.Helper()
	return startProcess(b, name, bin, []string{"--kubeconfig", kubeconfig}, port, environ)
}

// startProcess is startBinary with the arguments given.
func startProcess(b *testing.B, name, bin string, args []string, port int, environ []string) *process {
	b.Helper()
	log := filepath.Join(b.TempDir(), name+".log")
	started := time.Now()
	p, err := controlplane.StartProcess(name, bin, args, append(controlplane.BinaryEnv(), environ...), log)
	require.NoError(b, err)
	proc := &process{Process: p, name: name, base: fmt.Sprintf("http://127.0.0.1:%d", port), log: log, started: started}
	b.Cleanup(func() {
		_ = p.Stop()
		// A data race, or an exit nobody asked for, fails the benchmark.
		if err := p.Unexpected(); err != nil {
			b.Error(err)
		}
		if b.Failed() {
			b.Logf("the end of %s's log:\n%s", name, p.LogTail(40))
		}
	})
	return proc
}

// waitHTTP polls path every 50 ms until it answers 200, failing the
// benchmark if the process exits or timeout passes; it returns when.
func (p *process) waitHTTP(b *testing.B, path string, timeout time.Duration) time.Time {
	b.Helper()
	return waitAllHTTP(b, []*process{p}, path, timeout)[0]
}

// waitAllHTTP is waitHTTP for each of procs at once: it returns when each
// first answered 200.
func waitAllHTTP(b *testing.B, procs []*process, path string, timeout time.Duration) []time.Time {
	b.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	at := make([]time.Time, len(procs))
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		pending := false
		for i, p := range procs {
			if !at[i].IsZero() {
				continue
			}
			select {
			case <-p.Done():
				return false, fmt.Errorf("%s exited: %v\n%s", p.name, p.Err(), p.LogTail(40))
			default:
			}
			resp, err := client.Get(p.base + path)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					at[i] = time.Now()
				}
			}
			pending = pending || at[i].IsZero()
		}
		return !pending, nil
	})
	require.NoError(b, err, "%s", path)
	return at
}

// peakRSS is the process's VmHWM in MiB.
func (p *process) peakRSS(b *testing.B) float64 {
	b.Helper()
	rss, err := p.PeakRSSMiB()
	require.NoError(b, err)
	return rss
}

// logProblems returns the error and warning lines of the process's log
// (zerolog JSON), at most limit of each kind, and how many there were.
func (p *process) logProblems(b *testing.B, limit int) (errors, warnings []string, nErrors, nWarnings int) {
	b.Helper()
	raw, err := os.ReadFile(p.log)
	require.NoError(b, err)
	for line := range strings.SplitSeq(string(raw), "\n") {
		switch {
		case strings.Contains(line, `"level":"error"`) || strings.Contains(line, `"level":"fatal"`):
			nErrors++
			if len(errors) < limit {
				errors = append(errors, line)
			}
		case strings.Contains(line, `"level":"warn"`):
			nWarnings++
			if len(warnings) < limit {
				warnings = append(warnings, line)
			}
		}
	}
	return errors, warnings, nErrors, nWarnings
}

// shippedEnv is the literal env of deploy/base/COMPONENT/deployment.yaml.
func shippedEnv(b *testing.B, component string) []string {
	b.Helper()
	env, err := controlplane.ShippedEnv(filepath.Join(repoRoot, "deploy", "base", component, "deployment.yaml"))
	require.NoError(b, err)
	return env
}

// parallel runs f for 0..n-1 on workers goroutines and fails b on the
// first error once all have run (kittest.Parallel with a pool size).
func parallel(b *testing.B, workers, n int, f func(int) error) {
	b.Helper()
	next := make(chan int)
	errs := make(chan error, n)
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	for range workers {
		<-done
	}
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
}
