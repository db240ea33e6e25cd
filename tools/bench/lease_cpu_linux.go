package main

import (
	"syscall"
	"time"
	"unsafe"
)

// haveProcCPU: procCPU reads another process's CPU clock.
const haveProcCPU = true

// procCPU is the CPU time (user + system, every thread, the exited ones
// too) that process pid has used: the same count as utime + stime of
// /proc/pid/stat, in nanoseconds instead of 10 ms ticks. It reads the
// process's CPU clock, the clock id clock_getcpuclockid(3) makes
// (CPUCLOCK_SCHED of the whole thread group).
func procCPU(pid int) (time.Duration, error) {
	clock := uintptr((^pid)<<3 | 2)
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clock, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, errno
	}
	return time.Duration(ts.Nano()), nil
}
