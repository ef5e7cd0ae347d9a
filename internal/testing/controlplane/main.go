package controlplane

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
)

// RunMain starts one control plane for all the tests of a package, runs
// them and stops it, returning the exit code for os.Exit. Starting etcd and
// kube-apiserver costs seconds, so a package's integration tests share one
// (each test works in namespaces of its own):
//
//	var cp *controlplane.ControlPlane
//
//	func TestMain(m *testing.M) {
//		os.Exit(controlplane.RunMain(m, controlplane.Options{}, func(c *controlplane.ControlPlane) { cp = c }))
//	}
//
// ready is called with the running control plane before any test runs. A
// control plane that does not start fails the package with its reason on
// stderr; when a test fails, the end of the etcd and kube-apiserver logs is
// printed as Start does for a single test.
func RunMain(m *testing.M, opts Options, ready func(*ControlPlane)) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	tb := &mainTB{}
	defer tb.runCleanups()

	// Start reports a failure through tb.Fatalf, which ends the goroutine
	// as testing.T.Fatalf ends a test.
	var cp *ControlPlane
	done := make(chan struct{})
	go func() {
		defer close(done)
		cp = Start(tb, opts)
	}()
	<-done
	if tb.Failed() {
		return 1
	}
	ready(cp)
	code := m.Run()
	if code != 0 {
		tb.fail() // so the cleanup prints the logs' tails
	}
	return code
}

// mainTB is the testing.TB a package-wide control plane reports to: there
// is no test to fail while TestMain runs, so it writes to stderr and
// remembers the failure. Only the methods the control plane calls are
// implemented; the embedded nil interface makes any other a loud panic.
type mainTB struct {
	testing.TB

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

var _ testing.TB = (*mainTB)(nil)

func (tb *mainTB) Helper() {}

func (tb *mainTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (tb *mainTB) Errorf(format string, args ...any) {
	tb.Logf(format, args...)
	tb.fail()
}

func (tb *mainTB) Fatalf(format string, args ...any) {
	tb.Errorf(format, args...)
	runtime.Goexit()
}

func (tb *mainTB) Failed() bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.failed
}

func (tb *mainTB) fail() {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.failed = true
}

func (tb *mainTB) Cleanup(f func()) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.cleanups = append(tb.cleanups, f)
}

// runCleanups runs the cleanups last registered first, as testing does.
func (tb *mainTB) runCleanups() {
	tb.mu.Lock()
	cleanups := tb.cleanups
	tb.cleanups = nil
	tb.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}
