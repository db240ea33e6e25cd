package main

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

	"github.com/lectern-api/lectern/origin/internal/private"
)

// stateDir is the dev stack's own directory: its secret, and by default
// its database and corpus. It is kept 0700 (docs/decisions/processes-and-files.md).
const stateDir = "var"

// secretFile is where a dev stack keeps its secret when LECTERN_SECRET is
// unset.
const secretFile = stateDir + "/secret"

// bundleDir is where the export bundles are kept by default
// (LECTERN_BUNDLE_DIR).
const bundleDir = stateDir + "/bundles"

// loadSecret returns the deployment secret: LECTERN_SECRET, or, when
// local allows it (SQLite: one origin, make run), the one in var/secret,
// created on first start (0600, in var/ 0700). A var/ or a var/secret
// found open to others is tightened, and logged. Origins sharing
// PostgreSQL must share the secret, so one of them making its own would
// break the others' cursors and their keys: there var/ is not touched.
func loadSecret(configured string, local bool, log *slog.Logger) ([]byte, error) {
	if configured != "" {
		if len(configured) < 32 {
			return nil, errors.New("LECTERN_SECRET must be at least 32 characters")
		}
		return []byte(configured), nil
	}
	if !local {
		return nil, errors.New("LECTERN_SECRET is required: origins sharing a database must share the secret")
	}
	s, err := kept(secretFile, 32, log)
	return []byte(s), err
}

// adminTokenFile is where the stack keeps its admin token when
// LECTERN_ADMIN_TOKEN is unset. tools/stack reads it too: make run's
// origin and edge use the one token, the same after every restart.
const adminTokenFile = stateDir + "/admin-token"

// loadAdminToken returns the admin API's token: LECTERN_ADMIN_TOKEN, or
// the one kept in var/admin-token, created on first start (0600, in var/
// 0700) and the same at every start after. file is where it is kept, ""
// when configured. The token is this host's, not the deployment's (each
// admin listener checks its own), so it is kept whatever the database.
func loadAdminToken(configured string, log *slog.Logger) (token, file string, err error) {
	if configured != "" {
		return configured, "", nil
	}
	token, err = kept(adminTokenFile, 32, log)
	return token, adminTokenFile, err
}

// kept returns the value kept in path, a file of var/, or, when it is
// missing or shorter than minLen, a new random one (32 bytes, in hex)
// written there 0600. var/ is created 0700, and var/ or the file found
// open to others is tightened, and logged.
func kept(path string, minLen int, log *slog.Logger) (string, error) {
	if err := secureDir(log, stateDir); err != nil {
		return "", err
	}
	if err := tightened(log, private.Tighten, path); err != nil {
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
	if err := os.WriteFile(path, []byte(v+"\n"), private.FileMode); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return v, nil
}

// secureDB makes a SQLite database's files owner-only before anything
// opens them: its directory created 0700 when missing (var/ tightened
// too: it is the stack's own; an operator's existing directory is left as
// it is), the database created 0600, and the database, its -wal, -shm and
// lock files tightened when open to others, which is logged. The stores
// do the same on open (origin/internal/private), silently.
func secureDB(log *slog.Logger, path string) error {
	dir := filepath.Dir(path)
	if filepath.Clean(dir) == stateDir {
		if err := secureDir(log, dir); err != nil {
			return err
		}
	}
	loose, err := private.OpenSQLite(path)
	if err != nil {
		return err
	}
	for f, mode := range loose {
		log.Warn("a file holding secrets was readable by others: restricted to its owner", "path", f, "was", mode.String())
	}
	return nil
}

// secureDir creates dir 0700, or tightens it, and logs a tightening.
func secureDir(log *slog.Logger, dir string) error {
	return tightened(log, private.Dir, dir)
}

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
