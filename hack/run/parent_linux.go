package main

import "syscall"

// dieWithParent has the kernel send SIGTERM when make (the parent) dies,
// so that a killed make does not leave the cluster running; the SIGTERM
// takes the usual shutdown path.
func dieWithParent() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
}
