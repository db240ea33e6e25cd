//go:build !linux

package main

import "time"

// haveThreadCPU: no thread CPU clock is read here; (g) reports wall-clock
// time instead.
const haveThreadCPU = false

func threadCPU() time.Duration { return 0 }

// threadCPUClock is nil: the host then counts no module CPU.
func threadCPUClock() func() time.Duration { return nil }
