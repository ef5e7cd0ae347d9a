//go:build dataplane

package dataplane

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The dataplane suite (make test-dataplane-suite): one Environment — the
// local cluster in the node's namespace, kube-router, hcc-controller —
// serves every test; each test removes what it created.

var (
	env *Environment
	// unavailable says why this machine cannot run the suite; every test
	// then skips with it.
	unavailable error
)

// publicDenyRange is a public range the suite's controller is told is the
// cluster's own (HCC_EGRESS_DENY_CIDRS): public-web must never reach it.
const publicDenyRange = "45.33.32.0/24"

// egressResync is the suite's HCC_EXTERNAL_EGRESS_RESYNC_SEC: short, so a
// changed DNS answer is seen within seconds.
const egressResync = "2"

func TestMain(m *testing.M) {
	MaybeRunChild()
	flag.Parse()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	if !InNode() {
		if err := Check(); err != nil {
			unavailable = err
			logf("dataplane suite: SKIPPED: %v", err)
			code := m.Run()
			// Said again last, where a reader of the log looks.
			logf("dataplane suite: SKIPPED: %v", err)
			os.Exit(code)
		}
		vars, cleanup, err := Prepare(context.Background(), logf)
		if err != nil {
			logf("dataplane suite: %v", err)
			os.Exit(1)
		}
		code, err := RunInNode(vars...)
		cleanup()
		if err != nil {
			logf("dataplane suite: %v", err)
			os.Exit(1)
		}
		os.Exit(code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	var err error
	env, err = Start(ctx, Options{
		Logf:    logf,
		LogDir:  os.Getenv("HCC_E2E_LOG_DIR"),
		Resolve: nil,
		ControllerEnv: []string{
			"HCC_EGRESS_DENY_CIDRS=10.244.0.0/16,10.0.0.0/16,10.250.0.1/32," + publicDenyRange,
			"HCC_EXTERNAL_EGRESS_RESYNC_SEC=" + egressResync,
		},
	})
	cancel()
	if err != nil {
		logf("dataplane suite: %v", err)
		os.Exit(1)
	}
	code := m.Run()
	env.Close()
	os.Exit(code)
}

// need skips the test where the suite cannot run.
func need(t *testing.T) {
	t.Helper()
	if unavailable != nil {
		t.Skipf("dataplane unavailable: %v", unavailable)
	}
}

// loadFlows reads a flows file of flows/ and finds the HCC pods it names.
func loadFlows(t testing.TB, name string) (*File, Pods) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("flows", name))
	require.NoError(t, err)
	f, existingNames, err := ParseWithExisting(raw)
	require.NoError(t, err, name)
	existing, err := env.ExistingPods(context.Background(), existingNames)
	require.NoError(t, err)
	return f, existing
}

// runFlows creates the flows' pods, waits until kube-router has programmed
// everything, runs every flow and fails t for each that did not do what
// it must. It returns the results.
func runFlows(t testing.TB, f *File, existing Pods) []Result {
	t.Helper()
	ctx := context.Background()
	pods, err := env.CreatePods(ctx, f, existing)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.DeletePods(context.Background(), f)) })
	require.NoError(t, env.PrepareDestinations(f))
	require.NoError(t, env.WaitConverged(ctx, 3*time.Minute))
	results := env.RunFlows(ctx, f, pods)
	for _, r := range results {
		if r.Pass() {
			t.Log(r.Line())
		} else {
			t.Error(r.Line())
		}
	}
	return results
}

// TestSmoke: one Context grants one server; a Host of that Context
// reaches it on its transport port and nothing else, a Host of another
// Context does not (flows/smoke.yaml, whose server pod is a stand-in with
// the labels of HCC's server pods).
func TestSmoke(t *testing.T) {
	need(t)
	ctx := context.Background()
	require.NoError(t, env.ApplyFiles(ctx, filepath.Join("flows", "smoke-objects.yaml")))
	t.Cleanup(func() {
		require.NoError(t, env.DeleteFiles(context.Background(), filepath.Join("flows", "smoke-objects.yaml")))
	})
	require.NoError(t, env.WaitConverged(ctx, 3*time.Minute))
	f, existing := loadFlows(t, "smoke.yaml")
	runFlows(t, f, existing)
}
