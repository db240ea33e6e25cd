// Package pgmig applies a PostgreSQL store's embedded migrations: each
// *.sql file in a directory of an fs.FS, in name order, once, recorded by
// name in the store's own record table. pgstore and pgmeter keep separate
// records and locks, so the two may share one database and schema.
package pgmig

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// MaxWait bounds how long a start waits for locks a peer holds (its
// migration, the signing-key table): a rolling deploy starts origins
// beside one that migrates, and they wait for it rather than exit. Each
// attempt waits at most LockSlice, so that the wait is logged.
const (
	MaxWait   = 10 * time.Minute
	LockSlice = 2 * time.Second
	LogEvery  = 5 * time.Second
)

type loggerKey struct{}

// WithLogger returns ctx carrying log, where Apply and Retry say what they
// wait for.
func WithLogger(ctx context.Context, log *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, log)
}

func loggerOf(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok && l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// Retry runs try again while it fails on a lock wait cut short by
// lock_timeout (SQLSTATE 55P03), for at most MaxWait, logging what it
// waits for every LogEvery; any other outcome is try's.
func Retry(ctx context.Context, what string, try func() error) error {
	start := time.Now()
	logAt := start.Add(LogEvery)
	for {
		err := try()
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
			return err
		}
		waited := time.Since(start)
		if waited >= MaxWait {
			return fmt.Errorf("%s: a lock another session holds was not released in %s: %w", what, MaxWait, err)
		}
		if time.Now().After(logAt) {
			loggerOf(ctx).Warn("waiting for a lock another origin holds", "what", what, "waited", waited.Round(time.Second).String(), "max", MaxWait.String())
			logAt = logAt.Add(LogEvery)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

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
// connection. A lock a peer holds is waited for in slices of LockSlice,
// logged, for at most MaxWait (Retry). table is a trusted identifier,
// never input.
func Apply(ctx context.Context, db Beginner, fsys fs.FS, dir, table string, lock int64) error {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql")) // sorted
	if err != nil {
		return err
	}
	for _, name := range names {
		err := Retry(ctx, "migration "+name, func() error { return apply(ctx, db, fsys, name, table, lock) })
		if err != nil {
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
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+fmt.Sprint(LockSlice.Milliseconds())+`ms'`); err != nil {
			return err
		}
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
