package sqlitemeter

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"time"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrate applies, in name order, the migrations not yet recorded in
// meter_migrations (the meters' own record, apart from the store's), each
// in its own transaction together with its record. Write transactions
// begin IMMEDIATE, so two processes starting on one file take turns and
// the second finds the work done.
func migrate(ctx context.Context, db *sql.DB) error {
	const create = `CREATE TABLE IF NOT EXISTS meter_migrations (
		version    TEXT PRIMARY KEY,
		applied_at TEXT NOT NULL
	) STRICT`
	if _, err := db.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("migrate meters: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql") // sorted
	if err != nil {
		return fmt.Errorf("migrate meters: %w", err)
	}
	for _, name := range names {
		if err := apply(ctx, db, name); err != nil {
			return fmt.Errorf("migrate meters %s: %w", name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, db *sql.DB, name string) error {
	version := path.Base(name)
	body, err := migrations.ReadFile(name)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM meter_migrations WHERE version = ?`, version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, string(body)); err != nil {
		return err
	}
	// The wall clock only stamps the record; meter periods never read it.
	applied := time.Now().UTC().Format(time.RFC3339Nano)
	if _, err := tx.ExecContext(ctx, `INSERT INTO meter_migrations (version, applied_at) VALUES (?, ?)`, version, applied); err != nil {
		return err
	}
	return tx.Commit()
}
