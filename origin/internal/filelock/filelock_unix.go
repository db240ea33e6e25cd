//go:build unix

// Package filelock makes a process the only owner of an embedded
// database: an exclusive flock(2) on a file beside it, held until Close
// or the process's end (SIGKILL included: the kernel drops it). The lock
// is advisory: it keeps out other origins, not a sqlite3 shell.
package filelock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Lock takes the lock file path, creating it if missing.
func Lock(path string) (*os.File, error) {
	path, err := canonical(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("lock %s: %w", path, ErrHeld)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
