//go:build integration

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/pkg/diff"
)

// BenchmarkDiff runs `hcc-controller diff -o json`, under
// deploy/examples/diff-rbac.yaml only, on the convergence benchmark's
// fleet before any controller ran: every server, Host and policy is to be
// created. Then it runs the controller on that fleet, at the shipped
// client budget, until it has converged. It reports diff's wall time and
// peak RSS beside the controller's convergence time, and what diff
// listed; the listing must be the whole fleet's first passes (a Deployment
// per server, two per Host), and exactly the controller's writes, status
// apart, counted from the audit log whatever their answer.
func BenchmarkDiff(b *testing.B) {
	f := fleet{
		contexts:          size(b, "HCC_BENCH_CONTEXTS", 100),
		serversPerContext: size(b, "HCC_BENCH_SERVERS_PER_CONTEXT", 10),
		hosts:             size(b, "HCC_BENCH_FLEET_HOSTS", 50),
	}
	bin := buildBinary(b, "hcc-controller")
	cp := startControlPlane(b, auditPolicy, "controller")
	defer cp.Stop()
	admin := cp.Config()
	admin.QPS, admin.Burst = 2000, 4000
	createFleet(b, admin, f)
	require.NoError(b, controlplane.ApplyFiles(context.Background(), admin, filepath.Join(repoRoot, "deploy", "examples", "diff-rbac.yaml")))
	kubeconfig := cp.ImpersonatingKubeconfig("diff-operator", "hcc-diff", "system:authenticated")
	environ := append(shippedEnv(b, "controller"), "INTERNAL_CONTROL_JWT_HCC_HMAC_SECRET="+hmacSecret)

	for b.Loop() {
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "diff", "--kubeconfig", kubeconfig, "-o", "json")
		cmd.Env, cmd.Stdout, cmd.Stderr = environ, &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		elapsed := time.Since(start)
		var exit *exec.ExitError
		require.ErrorAs(b, err, &exit, "diff exits 1 on a fleet to create; stderr: %s", stderr.String())
		require.Equal(b, 1, exit.ExitCode(), stderr.String())
		var report diff.Report
		require.NoError(b, json.Unmarshal(stdout.Bytes(), &report))
		deployments := 0
		for _, w := range report.Writes {
			if w.Verb == "create" && w.Resource == "deployments" {
				deployments++
			}
		}
		// Each Host has a channel reader beside its own Deployment.
		require.Equal(b, f.servers()+2*f.hosts, deployments, "a Deployment per server, two per Host")
		require.Equal(b, f.hosts, report.CredentialsIssued)
		b.ReportMetric(elapsed.Seconds(), "diff-s")
		b.ReportMetric(float64(len(report.Writes)), "writes")
		b.ReportMetric(float64(len(report.Refusals)), "refusals")
		b.ReportMetric(float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)/1024, "peak-rss-MiB")
		byReason := map[string]int{}
		for _, r := range report.Refusals {
			byReason[r.Type+" "+r.Kind+" "+r.Reason]++
		}
		run := converge(b, cp, bin, f, budgets[0], nil)
		var want, got []string
		for _, w := range report.Writes {
			want = append(want, w.Verb+" "+w.Resource+" "+w.Namespace+"/"+w.Name)
		}
		for _, ev := range run.events {
			if ev.write() && ev.ObjectRef.Subresource == "" {
				got = append(got, ev.Verb+" "+ev.ObjectRef.Resource+" "+ev.ObjectRef.Namespace+"/"+ev.ObjectRef.Name)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		for _, w := range report.Writes {
			if w.Error != "" {
				progressf("diff: %s %s %s/%s fails: %s", w.Verb, w.Resource, w.Namespace, w.Name, w.Error)
			}
		}
		require.Equal(b, want, got, "the controller's writes are diff's")
		controllerTime := run.lastWrite.Sub(run.controller.started)
		b.ReportMetric(controllerTime.Seconds(), "controller-s-converge")
		b.ReportMetric(elapsed.Seconds()/controllerTime.Seconds(), "x-controller")
		progressf("diff: %s, %d writes, %d status writes, refusals %v", elapsed.Round(time.Millisecond), len(report.Writes), report.StatusWrites, byReason)
	}
}
