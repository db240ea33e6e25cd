package private

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// The dev stack's own directory, var/, and what an origin keeps there:
// the secret and the admin token when they are not configured. Each
// tightening of a path found open to others is logged.

// StateDir is the dev stack's own directory: its secret, and by default
// its database and corpus. It is kept 0700
// (docs/decisions/processes-and-files.md).
const StateDir = "var"

// SecretFile is where a dev stack keeps its secret when LECTERN_SECRET is
// unset.
const SecretFile = StateDir + "/secret"

// AdminTokenFile is where the stack keeps its admin token when
// LECTERN_ADMIN_TOKEN is unset. tools/stack reads it too: make run's
// origin and edge use the one token, the same after every restart.
const AdminTokenFile = StateDir + "/admin-token"

// Secret returns the deployment secret: LECTERN_SECRET (configured), or,
// when local allows it (SQLite: one origin, make run), the one in
// var/secret, created on first start (0600, in var/ 0700). A var/ or a
// var/secret found open to others is tightened, and logged. Origins
// sharing PostgreSQL must share the secret, so one of them making its own
// would break the others' cursors and their keys: there var/ is not
// touched.
func Secret(configured string, local bool, log *slog.Logger) ([]byte, error) {
	if configured != "" {
		if len(configured) < 32 {
			return nil, errors.New("LECTERN_SECRET must be at least 32 characters")
		}
		return []byte(configured), nil
	}
	if !local {
		return nil, errors.New("LECTERN_SECRET is required: origins sharing a database must share the secret")
	}
	s, err := kept(SecretFile, 32, log)
	return []byte(s), err
}

// AdminToken returns the admin API's token: LECTERN_ADMIN_TOKEN
// (configured), or the one kept in var/admin-token, created on first
// start (0600, in var/ 0700) and the same at every start after. file is
// where it is kept, "" when configured. The token is this host's, not the
// deployment's (each admin listener checks its own), so it is kept
// whatever the database.
func AdminToken(configured string, log *slog.Logger) (token, file string, err error) {
	if configured != "" {
		return configured, "", nil
	}
	token, err = kept(AdminTokenFile, 32, log)
	return token, AdminTokenFile, err
}

// kept returns the value kept in path, a file of var/, or, when it is
// missing or shorter than minLen, a new random one (32 bytes, in hex)
// written there 0600. var/ is created 0700, and var/ or the file found
// open to others is tightened, and logged.
func kept(path string, minLen int, log *slog.Logger) (string, error) {
	if err := tightened(log, Dir, StateDir); err != nil {
		return "", err
	}
	if err := tightened(log, Tighten, path); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if v := strings.TrimSpace(string(b)); err == nil && len(v) >= minLen {
		return v, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	var r [32]byte
	rand.Read(r[:])
	v := hex.EncodeToString(r[:])
	if err := os.WriteFile(path, []byte(v+"\n"), FileMode); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return v, nil
}

// SecureDB makes a SQLite database's files owner-only before anything
// opens them: its directory created 0700 when missing (var/ tightened
// too: it is the stack's own; an operator's existing directory is left as
// it is), the database created 0600, and the database, its -wal, -shm and
// lock files tightened when open to others, which is logged. The stores
// do the same on open (OpenSQLite), silently.
func SecureDB(log *slog.Logger, path string) error {
	dir := filepath.Dir(path)
	if filepath.Clean(dir) == StateDir {
		if err := tightened(log, Dir, dir); err != nil {
			return err
		}
	}
	loose, err := OpenSQLite(path)
	if err != nil {
		return err
	}
	for f, mode := range loose {
		log.Warn("a file holding secrets was readable by others: restricted to its owner", "path", f, "was", mode.String())
	}
	return nil
}

// tightened runs fix (Dir or Tighten) on path and logs a tightening.
func tightened(log *slog.Logger, fix func(string) (fs.FileMode, error), path string) error {
	loose, err := fix(path)
	if err != nil {
		return err
	}
	if loose != 0 {
		log.Warn("a path holding secrets was open to others: restricted to its owner", "path", path, "was", loose.String())
	}
	return nil
}
