package main

import (
	"os"
	"syscall"
)

// dieWithParent has the kernel send SIGTERM when make (the parent) dies,
// so that a killed make does not leave the cluster running; the SIGTERM
// takes the usual shutdown path. A parent that died before the call (the
// process was reparented) ends this one at once.
func dieWithParent() {
	parent := os.Getppid()
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
	if os.Getppid() != parent {
		os.Exit(1)
	}
}
