//go:build integration

package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/clerum/hcc/internal/testing/controlplane"
	"github.com/clerum/hcc/internal/testing/testenv"
)

// The kubelet restarts a container of a restartPolicy: Always pod after
// 10 s, doubling up to 300 s (CrashLoopBackOff). The supervisor keeps the
// shape and scales it down twentyfold, so a scenario pays seconds, not
// minutes, per restart. (The kubelet also resets the backoff after a
// container has run 10 minutes; no scenario runs that long.)
const (
	restartBackoff    = 500 * time.Millisecond // kubelet: 10 s
	restartBackoffCap = 15 * time.Second       // kubelet: 300 s
)

// supervisor runs one hcc-controller as a kubelet runs the container of a
// restartPolicy: Always pod: when it exits it is started again, with the
// same environment and port, after an exponential backoff. Each run logs to
// a file of its own, so an exit is judged by what that run printed.
type supervisor struct {
	t       *testing.T
	name    string
	bin     string
	args    []string
	environ []string
	base    string
	logDir  string

	mu       sync.Mutex
	current  *controlplane.Process
	run      int // the current run's number, 0 for the first
	restarts int
	exits    []string // why each run ended, as the test log shows it
	bad      []string // exits a healthy binary must not make
	stopping bool
	done     chan struct{}
}

// superviseController runs hcc-controller as identity under a supervisor
// and waits for its first run's /health. The supervisor stops when the
// test ends, after the test's own deferred clean-up.
func (e *env) superviseController(identity string, extra ...string) *supervisor {
	e.t.Helper()
	dir, err := binaries()
	require.NoError(e.t, err)
	port := testenv.FreePort(e.t)
	s := &supervisor{
		t:       e.t,
		name:    "hcc-controller " + identity,
		bin:     filepath.Join(dir, "hcc-controller"),
		args:    []string{"--kubeconfig", controllerKubeconfig},
		environ: append(controlplane.BinaryEnv(), e.controllerEnv(identity, port, extra...)...),
		base:    fmt.Sprintf("http://127.0.0.1:%d", port),
		logDir:  e.logDir(),
		done:    make(chan struct{}),
	}
	first, err := s.start(0)
	require.NoError(e.t, err)
	s.current = first
	go s.loop(first)
	e.t.Cleanup(s.stop)
	e.eventually(s.name+" healthy", time.Minute, func() bool {
		resp, err := http.Get(s.base + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

func (s *supervisor) logPath(run int) string {
	return filepath.Join(s.logDir, fmt.Sprintf("hcc-controller-run-%d.log", run))
}

func (s *supervisor) start(run int) (*controlplane.Process, error) {
	return controlplane.StartProcess(s.name, s.bin, s.args, s.environ, s.logPath(run))
}

// loop waits for each run to exit, judges the exit, and starts the next
// run after the backoff, until stop.
func (s *supervisor) loop(p *controlplane.Process) {
	defer close(s.done)
	backoff := restartBackoff
	for run := 0; ; run++ {
		<-p.Done()
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		log, _ := os.ReadFile(s.logPath(run))
		why, ok := classifyExit(p, string(log))
		s.exits = append(s.exits, fmt.Sprintf("run %d: %s", run, why))
		if !ok {
			s.bad = append(s.bad, fmt.Sprintf("run %d: %s\n%s", run, why, p.LogTail(40)))
		}
		s.mu.Unlock()

		time.Sleep(backoff)
		backoff = min(2*backoff, restartBackoffCap)

		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			return
		}
		next, err := s.start(run + 1)
		if err != nil {
			s.bad = append(s.bad, fmt.Sprintf("run %d: cannot start: %v", run+1, err))
			s.mu.Unlock()
			return
		}
		s.current = next
		s.run = run + 1
		s.restarts++
		s.mu.Unlock()
		p = next
	}
}

// classifyExit says why run p ended and whether a healthy binary may end
// that way under the faults the scenarios inject: losing the leader lease
// (the API server was away past the renew deadline: the binary exits by
// design, runLeaderElected in cmd/hcc-controller) or finding the API server
// unreachable at start. The harness's own check (Process.Unexpected) rules
// first, with the exit expected: a data race — the race detector's exit
// status 66, or its report in the log — or a failure to wait fails the
// test. So do a panic and any other exit.
func classifyExit(p *controlplane.Process, log string) (string, bool) {
	p.ExpectExit()
	if err := p.Unexpected(); err != nil {
		return err.Error(), false
	}
	code := 0
	var exit *exec.ExitError
	if errors.As(p.Err(), &exit) {
		code = exit.ExitCode()
	}
	switch {
	case strings.Contains(log, "panic:"):
		return fmt.Sprintf("exit %d: panic", code), false
	case code == 1 && strings.Contains(log, "lost the leader lease"):
		return "exit 1: lost the leader lease", true
	case code == 1 && strings.Contains(log, "cannot reach the Kubernetes API server"):
		return "exit 1: API server unreachable at start", true
	}
	return fmt.Sprintf("exit %d: unexpected", code), false
}

// Restarts is how many times the supervisor has started the binary again.
func (s *supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Exits is why each run so far ended.
func (s *supervisor) Exits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.exits...)
}

// Bad is every exit a healthy binary must not make; the test fails on any.
func (s *supervisor) Bad() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}

// stop ends supervision and the current run, and fails the test on any
// exit a healthy binary must not make, the final run's included.
func (s *supervisor) stop() {
	s.mu.Lock()
	s.stopping = true
	p, run := s.current, s.run
	s.mu.Unlock()
	_ = p.Stop()
	<-s.done
	// The last run was stopped on purpose: only what the harness's check
	// finds (a race it reported) fails.
	if err := p.Unexpected(); err != nil {
		s.bad = append(s.bad, fmt.Sprintf("run %d: %v\n%s", run, err, p.LogTail(40)))
	}
	for _, b := range s.bad {
		s.t.Errorf("%s: %s", s.name, b)
	}
	if s.t.Failed() {
		s.t.Logf("the end of %s's last log:\n%s", s.name, p.LogTail(40))
	}
}
