package pgmeter

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key under which migrations run, so
// that origins starting together on one database take turns ("lectmetr").
const migrationLock int64 = 0x6c6563746d657472

// migrate applies, in name order, the migrations not yet recorded in
// meter_migrations (the meters' own record, apart from the store's), each
// in its own transaction together with its record, all under an advisory
// lock.
func migrate(ctx context.Context, conn *pgx.Conn) (err error) {
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("migrate meters: lock: %w", err)
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock); uerr != nil {
			err = errors.Join(err, fmt.Errorf("migrate meters: unlock: %w", uerr))
		}
	}()
	const create = `CREATE TABLE IF NOT EXISTS meter_migrations (
		version    text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`
	if _, err := conn.Exec(ctx, create); err != nil {
		return fmt.Errorf("migrate meters: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql") // sorted
	if err != nil {
		return fmt.Errorf("migrate meters: %w", err)
	}
	for _, name := range names {
		if err := apply(ctx, conn, name); err != nil {
			return fmt.Errorf("migrate meters %s: %w", name, err)
		}
	}
	return nil
}

func apply(ctx context.Context, conn *pgx.Conn, name string) error {
	version := path.Base(name)
	body, err := migrations.ReadFile(name)
	if err != nil {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM meter_migrations WHERE version = $1)`, version).Scan(&done); err != nil {
		return err
	}
	if done {
		return nil
	}
	if _, err := tx.Exec(ctx, string(body)); err != nil { // no arguments: simple protocol, several statements
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO meter_migrations (version) VALUES ($1)`, version); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
