//go:build unix && !linux

package controlplane

import "syscall"

// sysProcAttr puts a child in its own process group, so stop can signal
// the group. Only Linux can also tie the child's life to the test binary's.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
