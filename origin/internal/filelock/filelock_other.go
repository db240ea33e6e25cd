//go:build !unix

package filelock

import "os"

// Lock opens the lock file but takes no lock: this build has no flock(2),
// so nothing stops a second origin on the same database here (the
// deployment targets are Unix). Run one origin per SQLite file.
func Lock(path string) (*os.File, error) { return open(path) }
