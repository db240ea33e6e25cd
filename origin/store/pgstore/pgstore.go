// Package pgstore implements store.Store over PostgreSQL (pgx, pgxpool),
// for origins that scale out over one database.
//
// The DSN is a pgx connection string; runtime parameters pass through, so
// "postgres://host/db?search_path=tenant" confines the store to a schema
// (the tests give each run its own). Migrations apply at start under an
// advisory lock, so origins starting together do not race. Every
// connection runs with origin/internal/pgsession's bounds on lock waits,
// idle transactions and statements, unless the DSN sets its own.
//
// clock.go, orgs.go, clients.go, codes.go and keys.go have twins in
// sqlitestore that run the same statements. They stay two: the drivers
// share no interface (pgx's pool, rows and batches; database/sql's), the
// dialects differ ($n and ?, GREATEST and max, native lists and instants
// against JSON and fixed-width text), and so does what surrounds them
// (here reads retry on a lost connection, there organisations are
// cached). storetest holds each pair to one behaviour.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lectern-api/lectern/origin/internal/pgmig"
	"github.com/lectern-api/lectern/origin/internal/pgsession"
	"github.com/lectern-api/lectern/origin/store"
)

var _ store.Store = (*Store)(nil)

// Store is a store.Store backed by a PostgreSQL connection pool.
type Store struct {
	pool *pgxpool.Pool
}

// New connects to the database named by dsn and applies any pending
// migrations.
func New(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	// Every session bounds its lock waits, idle transactions and
	// statements (issue #14, point 4): a stalled origin holding locks
	// costs the others a short, stated delay.
	pgsession.Apply(cfg.ConnConfig.RuntimeParams)
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		// Instants read back in UTC rather than time.Local.
		c.TypeMap().RegisterType(&pgtype.Type{
			Name:  "timestamptz",
			OID:   pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC},
		})
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pgmig.Apply(ctx, pool, migrations, "migrations", "schema_migrations", migrationLock); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return &Store{pool: pool}, nil
}

// Close closes the pool.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// PostgreSQL error codes (Appendix A).
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

// mapErr turns what PostgreSQL reports into the store's sentinels: a
// missing row is ErrNotFound, a duplicate key ErrConflict, and a dangling
// foreign key (a client of no organisation) ErrNotFound.
func mapErr(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var e *pgconn.PgError
	if errors.As(err, &e) {
		switch e.Code {
		case uniqueViolation:
			return store.ErrConflict
		case foreignKeyViolation:
			return store.ErrNotFound
		}
	}
	return err
}

// list keeps lists out of NULL: pgx writes a nil slice as NULL, and every
// list reads back non-nil.
func list(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
