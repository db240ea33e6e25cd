// Package filelock makes a process the only owner of an embedded
// database: an exclusive flock(2) on a file beside it, held until Close
// or the process's end (SIGKILL included: the kernel drops it). The lock
// is advisory: it keeps out other origins, not a sqlite3 shell.
package filelock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrHeld is returned when another open file description — another
// process, or another Store in this one — holds the lock.
var ErrHeld = errors.New("held by another process")

// open opens (creating) the lock file, named by its directory's real
// path, so that two spellings of one database (a symlinked directory, a
// relative path) take the same lock.
func open(path string) (*os.File, error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err == nil {
		dir, err = filepath.Abs(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, filepath.Base(path)), os.O_RDWR|os.O_CREATE, 0o600) // owner only, like the database (origin/internal/private)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
