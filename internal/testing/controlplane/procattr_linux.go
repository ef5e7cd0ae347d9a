package controlplane

import "syscall"

// sysProcAttr puts a child in its own process group, so stop can signal
// the group, and has the kernel SIGKILL it when the test binary dies
// without running its cleanups (a timeout panic, a kill -9), so no etcd or
// kube-apiserver outlives the test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
