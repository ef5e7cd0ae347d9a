package controlplane

import (
	"fmt"
	"syscall"
)

// Pause stops the process group with SIGSTOP, as a frozen node or a long
// stop-the-world pause would: the process keeps its connections and its
// state, and runs on from where it was when Resume continues it.
func (p *Process) Pause() error {
	if err := syscall.Kill(-p.p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %s: %w", p.p.name, err)
	}
	return nil
}

// Resume continues a paused process group with SIGCONT.
func (p *Process) Resume() error {
	if err := syscall.Kill(-p.p.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("SIGCONT %s: %w", p.p.name, err)
	}
	return nil
}
