package controlplane

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Pid is the process's id (the leader of its process group).
func (p *Process) Pid() int { return p.p.cmd.Process.Pid }

// PeakRSSMiB is the process's peak resident set (VmHWM of
// /proc/PID/status) in MiB, as the benchmarks report a binary's memory.
// It reads Linux's procfs: elsewhere, and once the process has exited, it
// is an error.
func (p *Process) PeakRSSMiB() (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				return 0, fmt.Errorf("VmHWM of pid %d: %w", p.Pid(), err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", p.Pid())
}
