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

// threadCPU is the CPU time the calling thread has used. The vDSO does
// not serve this clock, so it is a system call; a raw one, since it never
// blocks: the scheduler's bookkeeping around a blocking one would be
// counted in every edge request (f) measures, four reads each.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}

// threadCPUClock is threadCPU for worker/wazero.Config.ThreadCPU.
func threadCPUClock() func() time.Duration { return threadCPU }
