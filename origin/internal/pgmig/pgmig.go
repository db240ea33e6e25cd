// Package pgmig applies a PostgreSQL store's embedded migrations: each
// *.sql file in a directory of an fs.FS, in name order, once, recorded by
// name in the store's own record table. pgstore and pgmeter keep separate
// records and locks, so the two may share one database and schema.
package pgmig

import (
	"context"
	"fmt"
	"io/fs"
	"path"

	"github.com/jackc/pgx/v5"
)

// Beginner is what Apply needs of a connection: *pgx.Conn and
// *pgxpool.Pool both begin transactions.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Apply applies, in name order, the migrations dir/*.sql in fsys not yet
// recorded in table, each in its own transaction together with its
// record. Each transaction first takes the transaction-level advisory
// lock lock, so origins starting together take turns and later ones find
// the work done; the lock cannot outlive its transaction on a pooled
// connection. table is a trusted identifier, never input.
func Apply(ctx context.Context, db Beginner, fsys fs.FS, dir, table string, lock int64) error {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql")) // sorted
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := apply(ctx, db, fsys, name, table, lock); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, db Beginner, fsys fs.FS, name, table string, lock int64) error {
	version := path.Base(name)
	body, err := fs.ReadFile(fsys, name)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
			version    text PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+table+` WHERE version = $1)`, version).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		if _, err := tx.Exec(ctx, string(body)); err != nil { // no arguments: simple protocol, several statements
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+table+` (version) VALUES ($1)`, version)
		return err
	})
}
