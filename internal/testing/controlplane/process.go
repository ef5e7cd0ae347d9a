package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// stopGracePeriod is how long a process gets to exit after SIGTERM
	// before it is killed: a third of the kubelet's default (30 s), enough
	// for a leader to finish the writes it has in flight.
	stopGracePeriod = 10 * time.Second
	// readyPollInterval is how often readiness is probed while starting.
	readyPollInterval = 100 * time.Millisecond
	// logTailLines is how much of a process log is shown on failure.
	logTailLines = 50
)

// errAddressInUse marks a start failure caused by a port being taken
// between picking it and the process binding it; the caller retries with
// other ports.
var errAddressInUse = errors.New("address already in use")

// process is a running etcd or kube-apiserver, writing to a log file.
type process struct {
	name    string
	logPath string
	// logStart is the size of the log when the process started: a restart
	// appends to the log of the previous run.
	logStart int64
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process has exited
	err      error         // exit status; read only after done is closed
	// requested is set when stop or Kill signalled the process while it
	// still ran: its exit by that signal is expected.
	requested atomic.Bool
}

// startProcess runs bin in its own process group with stdout and stderr
// appended to logPath (appended, so a restart keeps the earlier log).
func startProcess(name, bin string, args []string, logPath string) (*process, error) {
	return startProcessEnv(name, bin, args, nil, logPath)
}

// startProcessEnv is startProcess with env as the environment (nil: this
// process's).
func startProcessEnv(name, bin string, args, env []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// The child gets its own copy of the descriptor, so ours can be closed
	// as soon as it has started.
	defer logFile.Close()
	info, err := logFile.Stat()
	if err != nil {
		return nil, err
	}

	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, logStart: info.Size(), cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls ready until it succeeds, the process exits or timeout
// passes. The error says which; the log itself is shown by the cleanup of
// the failed test.
func (p *process) waitReady(timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ticker := time.NewTicker(readyPollInterval)
	defer ticker.Stop()
	lastErr := errors.New("not probed yet")
	for {
		select {
		case <-p.done:
			if p.loggedAddressInUse() {
				return fmt.Errorf("%s exited: %w", p.name, errAddressInUse)
			}
			return fmt.Errorf("%s exited before becoming ready (%v); see %s", p.name, p.err, p.logPath)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %v; see %s", p.name, timeout, lastErr, p.logPath)
		case <-ticker.C:
			probeCtx, cancelProbe := context.WithTimeout(ctx, 2*time.Second)
			lastErr = ready(probeCtx)
			cancelProbe()
			if lastErr == nil {
				return nil
			}
		}
	}
}

// stop ends the process's group: SIGTERM for a clean shutdown, SIGKILL if
// that takes longer than stopGracePeriod. Signalling the group rather than
// the process also reaches anything it spawned.
func (p *process) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	p.requested.Store(true)
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGracePeriod):
	}
	_ = syscall.Kill(pgid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGracePeriod):
		return fmt.Errorf("%s (pid %d) still running after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// raceExitCode is the exit status the race detector gives a program
// that reported a data race (GORACE exitcode, default 66).
const raceExitCode = 66

// raceWarning starts every report of the race detector.
const raceWarning = "WARNING: DATA RACE"

// unexpected returns why the run's end fails the test, nil if it does
// not: the race detector reported a race (in the log, or by exit status
// 66 — also after a requested stop, as the detector reports at exit), or
// the process exited non-zero without being asked to. An exit by the
// signal stop or Kill sent is expected; so is any other status after a
// requested stop except 66. A process still running is not judged.
func (p *process) unexpected() error {
	select {
	case <-p.done:
	default:
		if p.loggedRace() {
			return fmt.Errorf("%s: the race detector reported a data race; see %s", p.name, p.logPath)
		}
		return nil
	}
	if p.loggedRace() {
		return fmt.Errorf("%s: the race detector reported a data race (%v); see %s", p.name, p.err, p.logPath)
	}
	var exit *exec.ExitError
	if !errors.As(p.err, &exit) {
		return p.err // nil, or a failure to wait
	}
	if exit.ExitCode() == raceExitCode {
		return fmt.Errorf("%s exited with the race detector's status %d; see %s", p.name, raceExitCode, p.logPath)
	}
	if !p.requested.Load() {
		return fmt.Errorf("%s exited unasked: %v; see %s", p.name, p.err, p.logPath)
	}
	return nil
}

// loggedRace reports whether this run of the process logged a report of
// the race detector.
func (p *process) loggedRace() bool { return p.logContains(raceWarning) }

// loggedAddressInUse reports whether this run of the process logged that
// one of its ports was taken.
func (p *process) loggedAddressInUse() bool { return p.logContains("address already in use") }

// logContains reports whether this run's part of the log contains s.
func (p *process) logContains(s string) bool {
	data, err := os.ReadFile(p.logPath)
	if err != nil || int64(len(data)) < p.logStart {
		return false
	}
	return strings.Contains(string(data[p.logStart:]), s)
}

// fileTail returns the last n lines of the file at path.
func fileTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Process is a child process run as the control plane runs its own: in a
// process group of its own, killed by the kernel if this process dies, its
// output appended to a log file. make run and the end-to-end tests run
// hcc-controller and hcc-api this way.
type Process struct{ p *process }

// StartProcess runs bin with args and env (nil: this process's), appending
// its output to logPath.
func StartProcess(name, bin string, args, env []string, logPath string) (*Process, error) {
	p, err := startProcessEnv(name, bin, args, env, logPath)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Stop ends the process group: SIGTERM, then SIGKILL after 10 s. A
// process that had already exited is not marked as stopped on purpose:
// Unexpected still judges its exit.
func (p *Process) Stop() error { return p.p.stop() }

// Kill ends the process group with SIGKILL at once, as a crash would, and
// waits for the process to exit.
func (p *Process) Kill() {
	select {
	case <-p.p.done:
		return
	default:
	}
	p.p.requested.Store(true)
	_ = syscall.Kill(-p.p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.p.done
}

// ExpectExit tells Unexpected that the process will exit by itself and
// that this is what the test wants (a leader that lost its lease exits):
// any exit status but the race detector's is then accepted.
func (p *Process) ExpectExit() { p.p.requested.Store(true) }

// Unexpected returns why the process's run must fail the test, nil if
// nothing does: its log holds a report of the race detector ("WARNING:
// DATA RACE"), it exited with the race detector's status 66 (after Stop
// too: the detector reports at exit), or it exited non-zero without Stop
// or Kill asking it to. Call it after Stop in the cleanup of every test
// that starts a -race binary.
func (p *Process) Unexpected() error { return p.p.unexpected() }

// LoggedAddressInUse reports whether this run of the process logged that
// its port was taken: the caller may retry on another port.
func (p *Process) LoggedAddressInUse() bool { return p.p.loggedAddressInUse() }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.p.done }

// Err is the exit status; valid once Done is closed.
func (p *Process) Err() error { return p.p.err }

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string { return fileTail(p.p.logPath, n) }
