package main

import "syscall"

// sysProcAttr puts a child in its own process group, so that a terminal's
// Ctrl-C (SIGINT to the foreground group) reaches the stack alone and it
// stops the children in order, and has the kernel send the child SIGTERM
// should the stack die without stopping it (SIGKILL).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
