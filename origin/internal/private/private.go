// Package private keeps the origin's files readable by their owner only
// (DESIGN: quality bars, "files holding secrets are readable by their
// owner only"): the directories it creates are 0700, the files 0600, and a
// file found open to others is tightened. The SQLite database holds the
// clients' secret hashes, the sealed signing keys and every meter; the
// dev stack's var/secret is the deployment secret itself. It also keeps
// what an origin keeps in var/ when it is not configured, the secret and
// the admin token, and logs each tightening (kept.go).
package private

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DirMode and FileMode are the modes of what the package creates.
const (
	DirMode  fs.FileMode = 0o700
	FileMode fs.FileMode = 0o600
)

// MkdirAll creates dir and its missing parents with DirMode. Directories
// that exist are left as they are: they may be the operator's, shared
// with others (Dir tightens one that is the origin's own).
func MkdirAll(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	return nil
}

// Dir creates dir (and missing parents) with DirMode, or takes the group
// and other permissions off an existing dir. loose is the mode it had when
// it was open to others, else zero.
func Dir(dir string) (loose fs.FileMode, err error) {
	if err := MkdirAll(dir); err != nil {
		return 0, err
	}
	return Tighten(dir)
}

// File makes path a regular file only its owner may read or write:
// created empty with FileMode when missing (so that SQLite, which gives
// the -wal and -shm files the database's mode, never creates them looser),
// else tightened. loose is the mode an existing file had when it was open
// to others, else zero.
func File(path string) (loose fs.FileMode, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	if err == nil {
		return 0, f.Close()
	}
	if !errors.Is(err, fs.ErrExist) {
		return 0, fmt.Errorf("create %s: %w", path, err)
	}
	return Tighten(path)
}

// Tighten takes the group and other permissions off path when it exists
// (a missing file is no error). loose is the mode it had when it was open
// to others, else zero.
func Tighten(path string) (loose fs.FileMode, err error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	perm := fi.Mode().Perm()
	if perm&0o077 == 0 {
		return 0, nil
	}
	if err := os.Chmod(path, perm&^0o077); err != nil {
		return 0, fmt.Errorf("restrict %s to its owner: %w", path, err)
	}
	return perm, nil
}

// SQLite returns the files of the SQLite database at path: the database,
// its write-ahead log and shared-memory index, and the origin's lock
// files beside it.
func SQLite(path string) []string {
	return []string{path, path + "-wal", path + "-shm", path + "-journal", path + ".lock", path + ".meters.lock"}
}

// OpenSQLite prepares the SQLite database at path before a driver opens
// it: its directory created with DirMode, the file created with FileMode,
// and the files beside it that exist tightened. It returns the files it
// tightened with their former modes.
func OpenSQLite(path string) (map[string]fs.FileMode, error) {
	if err := MkdirAll(filepath.Dir(path)); err != nil {
		return nil, err
	}
	out := map[string]fs.FileMode{}
	loose, err := File(path)
	if err != nil {
		return nil, err
	}
	if loose != 0 {
		out[path] = loose
	}
	for _, f := range SQLite(path)[1:] {
		loose, err := Tighten(f)
		if err != nil {
			return nil, err
		}
		if loose != 0 {
			out[f] = loose
		}
	}
	return out, nil
}
