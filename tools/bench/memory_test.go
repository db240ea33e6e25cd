package main

import (
	"os"
	"testing"
)

// statusKB reads this process's figures from /proc, and says when a
// field is missing rather than reading 0.
func TestStatusKB(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc here")
	}
	pid := os.Getpid()
	kb, err := rss(pid)
	if err != nil || kb <= 0 {
		t.Fatalf("VmRSS: %d, %v", kb, err)
	}
	hwm, err := statusKB(pid, "VmHWM")
	if err != nil || hwm < kb {
		t.Fatalf("VmHWM %d below VmRSS %d (%v)", hwm, kb, err)
	}
	if _, err := statusKB(pid, "VmNoSuchField"); err == nil {
		t.Fatal("a missing field read without an error")
	}
	// peakRSS samples while f runs and returns f's error.
	peak, err := peakRSS(pid, func() error { return os.ErrClosed })
	if err != os.ErrClosed || peak <= 0 {
		t.Fatalf("peakRSS: %d, %v", peak, err)
	}
}
