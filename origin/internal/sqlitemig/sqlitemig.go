// Package sqlitemig applies a SQLite store's embedded migrations: each
// *.sql file in a directory of an fs.FS, in name order, once, recorded by
// name in the store's own record table. sqlitestore and sqlitemeter keep
// separate records, so the two may share one database file.
package sqlitemig

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"time"
)

// Apply applies, in name order, the migrations dir/*.sql in fsys not yet
// recorded in table, each in its own transaction together with its
// record. Write transactions begin IMMEDIATE (the callers' DSNs ask for
// _txlock=immediate), so two processes starting on one file take turns
// and the second finds the work done. table is a trusted identifier,
// never input.
func Apply(ctx context.Context, db *sql.DB, fsys fs.FS, dir, table string) error {
	create := `CREATE TABLE IF NOT EXISTS ` + table + ` (
		version    TEXT PRIMARY KEY,
		applied_at TEXT NOT NULL
	) STRICT`
	if _, err := db.ExecContext(ctx, create); err != nil {
		return err
	}
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql")) // sorted
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := apply(ctx, db, fsys, name, table); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, db *sql.DB, fsys fs.FS, name, table string) error {
	version := path.Base(name)
	body, err := fs.ReadFile(fsys, name)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+table+` WHERE version = ?`, version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return err
	}
	// The wall clock only stamps the record; nothing reads it back. The
	// layout is sqlitestore's: UTC, microseconds, fixed width.
	applied := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (version, applied_at) VALUES (?, ?)`, version, applied); err != nil {
		return err
	}
	return tx.Commit()
}
