//go:build !linux

package main

import (
	"errors"
	"time"
)

// haveProcCPU: no other process's CPU clock is read here; (c) is not
// measured.
const haveProcCPU = false

func procCPU(int) (time.Duration, error) { return 0, errors.New("no process CPU clock here") }
