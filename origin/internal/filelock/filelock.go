package filelock

import (
	"errors"
	"fmt"
	"path/filepath"
)

// ErrHeld is returned when another open file description — another
// process, or another Store in this one — holds the lock.
var ErrHeld = errors.New("held by another process")

// canonical names the lock file by its directory's real path, so that
// two spellings of one database (a symlinked directory, a relative path)
// take the same lock.
func canonical(path string) (string, error) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return "", fmt.Errorf("lock %s: %w", path, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("lock %s: %w", path, err)
	}
	return filepath.Join(abs, filepath.Base(path)), nil
}
