package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

const (
	// stopGracePeriod is how long a process gets to exit after SIGTERM
	// before it is killed.
	stopGracePeriod = 5 * time.Second
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

// loggedAddressInUse reports whether this run of the process logged that
// one of its ports was taken.
func (p *process) loggedAddressInUse() bool {
	data, err := os.ReadFile(p.logPath)
	if err != nil || int64(len(data)) < p.logStart {
		return false
	}
	return strings.Contains(string(data[p.logStart:]), "address already in use")
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

// Stop ends the process group: SIGTERM, then SIGKILL after 5 s.
func (p *Process) Stop() error { return p.p.stop() }

// Kill ends the process group with SIGKILL at once, as a crash would, and
// waits for the process to exit.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.p.done
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.p.done }

// Err is the exit status; valid once Done is closed.
func (p *Process) Err() error { return p.p.err }

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string { return fileTail(p.p.logPath, n) }
