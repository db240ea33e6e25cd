//go:build !unix

package filelock

import (
	"fmt"
	"os"
)

// Lock opens the lock file but takes no lock: this build has no flock(2),
// so nothing stops a second origin on the same database here (the
// deployment targets are Unix). Run one origin per SQLite file.
func Lock(path string) (*os.File, error) {
	path, err := canonical(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
