// Package sqlitestore implements store.Store over an embedded SQLite
// database (modernc.org/sqlite, no cgo). It is the origin's default store.
//
// The database runs in WAL mode with synchronous=FULL, so a commit is on
// disk before it is acknowledged: nothing acknowledged is lost on SIGKILL
// or power loss (DESIGN: quality bars). SQLite admits one writer at a
// time, so the Store holds two pools: a single write connection whose
// transactions all begin IMMEDIATE, and a pool of query-only read
// connections that WAL lets run beside it.
package sqlitestore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/internal/private"
	"github.com/lectern-api/lectern/origin/internal/sqlitemig"
	"github.com/lectern-api/lectern/origin/store"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var _ store.Store = (*Store)(nil)

// migrations are applied by Open and recorded in schema_migrations.
//
//go:embed migrations/*.sql
var migrations embed.FS

// Store is a store.Store backed by one SQLite file.
type Store struct {
	db   *sql.DB // the one write connection; every transaction is BEGIN IMMEDIATE
	rdb  *sql.DB // read-only connections
	lock *os.File
	orgs orgCache
	// progress caches learners' records (progresscache.go).
	progress progressCache
}

// Connection settings, applied by the driver to every new connection.
// busy_timeout comes first so the others wait on a locked file too.
var (
	pragmas      = []string{"busy_timeout(10000)", "foreign_keys(1)"}
	writePragmas = []string{"journal_mode(WAL)", "synchronous(FULL)"}
	readPragmas  = []string{"query_only(1)"}
)

// New opens the database at path, creating it and its directory if
// missing, and applies any pending migrations.
func New(ctx context.Context, path string) (*Store, error) {
	// Owner only, before the driver opens it: SQLite gives the -wal and
	// -shm files the database's mode (cmd/origin logs what it tightens).
	if _, err := private.OpenSQLite(path); err != nil {
		return nil, fmt.Errorf("prepare database: %w", err)
	}
	lock, err := lockFile(path)
	if err != nil {
		return nil, err
	}
	db, err := open(ctx, dsn(path, append(pragmas, writePragmas...), "_txlock=immediate"))
	if err != nil {
		lock.Close()
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if err := sqlitemig.Apply(ctx, db, migrations, "migrations", "schema_migrations"); err != nil {
		db.Close()
		lock.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	rdb, err := open(ctx, dsn(path, append(pragmas, readPragmas...)))
	if err != nil {
		db.Close()
		lock.Close()
		return nil, err
	}
	rdb.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	return &Store{db: db, rdb: rdb, lock: lock}, nil
}

func dsn(path string, pragmas []string, params ...string) string {
	for _, p := range pragmas {
		params = append(params, "_pragma="+p)
	}
	return path + "?" + strings.Join(params, "&")
}

func open(ctx context.Context, dsn string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	return db, nil
}

// Close closes both pools, then releases the database's lock.
func (s *Store) Close() error {
	return errors.Join(s.rdb.Close(), s.db.Close(), s.lock.Close())
}

// mapErr turns what SQLite reports into the store's sentinels: a missing
// row is ErrNotFound, a duplicate key ErrConflict, and a dangling foreign
// key (a client of no organisation) ErrNotFound.
func mapErr(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return store.ErrConflict
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return store.ErrNotFound
		}
	}
	return err
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// list is a list of strings stored as a JSON array. nil is stored as [],
// so every list reads back non-nil.
type list []string

func (l list) Value() (driver.Value, error) {
	if l == nil {
		return "[]", nil
	}
	b, err := json.Marshal([]string(l))
	return string(b), err
}

func (l *list) Scan(src any) error {
	s, ok := src.(string)
	if !ok {
		return fmt.Errorf("scan list: got %T, want string", src)
	}
	return json.Unmarshal([]byte(s), (*[]string)(l))
}

// timeLayout stores instants in UTC with microseconds (PostgreSQL's
// resolution, so both stores agree) at a fixed width, so text order is
// time order.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// stamp is a time.Time stored as text in timeLayout.
type stamp time.Time

func (t stamp) Value() (driver.Value, error) {
	return time.Time(t).UTC().Format(timeLayout), nil
}

func (t *stamp) Scan(src any) error {
	s, ok := src.(string)
	if !ok {
		return fmt.Errorf("scan time: got %T, want string", src)
	}
	v, err := time.Parse(timeLayout, s)
	*t = stamp(v.UTC())
	return err
}
