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
func (p *Process) PeakRSSMiB() (float64, error) { return p.statusMiB("VmHWM:") }

// RSSMiB is the process's resident set now (VmRSS of /proc/PID/status) in
// MiB.
func (p *Process) RSSMiB() (float64, error) { return p.statusMiB("VmRSS:") }

// statusMiB reads the kB figure of field from /proc/PID/status, in MiB.
func (p *Process) statusMiB(field string) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				return 0, fmt.Errorf("%s of pid %d: %w", field, p.Pid(), err)
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, p.Pid())
}

// clockTicks is USER_HZ, the unit of the CPU times in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// CPUSeconds is the CPU time the process has used so far, user and system,
// all threads (utime and stime of /proc/PID/stat), in seconds.
func (p *Process) CPUSeconds() (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after it are counted from its closing parenthesis.
	end := strings.LastIndexByte(string(raw), ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", p.Pid())
	}
	fields := strings.Fields(string(raw[end+1:]))
	// utime and stime are fields 14 and 15; fields[0] is field 3.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", p.Pid(), len(fields)+2)
	}
	var ticks float64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", p.Pid(), err)
		}
		ticks += n
	}
	return ticks / clockTicks, nil
}
