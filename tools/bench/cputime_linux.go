package main

import (
	"syscall"
	"time"
	"unsafe"
)

// haveThreadCPU: threadCPU reads the thread's CPU clock.
const haveThreadCPU = true

// clockThreadCPUTime is Linux's CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPUTime = 3

// threadCPU is the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// threadCPUClock is threadCPU for wasmtest/host.Config.ThreadCPU.
func threadCPUClock() func() time.Duration { return threadCPU }
