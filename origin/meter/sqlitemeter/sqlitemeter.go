// Package sqlitemeter implements meter.Store over an embedded SQLite
// database (modernc.org/sqlite, no cgo), the origin's default. Its tables
// (meter_counters, meter_reads, and its own migration record
// meter_migrations) may live in the same file as sqlitestore's.
//
// Durability: the database runs in WAL mode, and this Store's connection
// with synchronous=NORMAL: when Apply returns, the op's transaction is in
// the WAL through write(2), so it survives the process being killed
// (SIGKILL included; metertest's crash test kills a child under load).
// It is not synced to the disk at each commit but at checkpoints, so an
// operating-system crash or power loss may lose the last commits since
// the last checkpoint. Syncing every commit (synchronous=FULL) halved
// the origin's lesson throughput in make bench (docs/decisions.md,
// "Meters"); sqlitestore's writes, rare, stay FULL.
//
// Group commit: Apply hands its op to one committer goroutine, which
// drains whatever ops are queued (up to Options.MaxBatch), applies them in
// order in one BEGIN IMMEDIATE transaction on the single write connection,
// commits, and only then answers each of them. Concurrent increments thus
// share one transaction.
//
// Exactness: a Store is its tables' only writer: New takes an exclusive
// lock beside the database (path + ".meters.lock"), and a second Store on
// the same file, in this process or another, is refused. Its batches run
// one after another on one connection, each holding SQLite's write lock,
// and evaluate their ops in order against the counters as the previous
// batch committed them. Those the Store has committed it remembers (the
// memo), so a batch reads from the database only counters and bitsets no
// earlier batch of this Store touched; a failed commit forgets them all.
// So caps are exact under any concurrency.
//
// Rows: one per org, meter and period (counters of past periods stay;
// nothing prunes them), and one per org and UTC day holding a bitset of
// the lesson ordinals read that day, its popcount and its corpus version.
package sqlitemeter

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/internal/filelock"
	"github.com/lectern-api/lectern/origin/internal/private"
	"github.com/lectern-api/lectern/origin/internal/sqlitemig"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

var _ meter.Store = (*Store)(nil)

// migrations are applied by Open and recorded in meter_migrations, the
// meters' own record, apart from the store's schema_migrations.
//
//go:embed migrations/*.sql
var migrations embed.FS

// ErrClosed is returned by Apply after Close.
var ErrClosed = batch.ErrClosed

// DefaultMaxBatch is the default cap on the ops committed in one
// transaction.
const DefaultMaxBatch = batch.DefaultMaxBatch

// MaxOrdinal bounds Read.Ordinal: a day's bitset holds at most MaxOrdinal
// bits (128 KiB), far above the corpus's 3,680 lessons.
const MaxOrdinal = batch.MaxOrdinal

// Options tune a Store. The zero value is the production setting.
type Options struct {
	// MaxBatch caps the ops committed in one transaction
	// (DefaultMaxBatch when zero).
	MaxBatch int
	// NoGroupCommit commits every op in its own transaction on the
	// caller's goroutine: the baseline tools/meterbench measures group
	// commit against. Not for production.
	NoGroupCommit bool
}

// Store is a meter.Store backed by one SQLite file.
type Store struct {
	db   *sql.DB // the one write connection; every transaction is BEGIN IMMEDIATE
	rdb  *sql.DB // read-only connections for Usage
	c    *batch.Committer
	lock *os.File

	noGroup   sync.RWMutex // NoGroupCommit: held for reading by Apply, for writing by Close
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// Connection settings, applied by the driver to every new connection.
// busy_timeout comes first so the others wait on a locked file too.
var (
	pragmas      = []string{"busy_timeout(10000)"}
	writePragmas = []string{"journal_mode(WAL)", "synchronous(NORMAL)"}
	readPragmas  = []string{"query_only(1)"}
)

// New opens the meters in the database at path, creating the file and
// its directory if missing, and applies any pending migrations.
func New(ctx context.Context, path string, opts Options) (*Store, error) {
	// Owner only, before the driver opens it: SQLite gives the -wal and
	// -shm files the database's mode (cmd/origin logs what it tightens).
	if _, err := private.OpenSQLite(path); err != nil {
		return nil, fmt.Errorf("prepare meter database: %w", err)
	}
	lock, err := filelock.Lock(path + ".meters.lock")
	if errors.Is(err, filelock.ErrHeld) {
		return nil, fmt.Errorf("meters of %s are in use by another origin process; several origins share meters through PostgreSQL: %w", path, err)
	}
	if err != nil {
		return nil, err
	}
	db, err := open(ctx, dsn(path, append(pragmas, writePragmas...), "_txlock=immediate"))
	if err != nil {
		lock.Close()
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	if err := sqlitemig.Apply(ctx, db, migrations, "migrations", "meter_migrations"); err != nil {
		db.Close()
		lock.Close()
		return nil, fmt.Errorf("migrate meters: %w", err)
	}
	rdb, err := open(ctx, dsn(path, append(pragmas, readPragmas...)))
	if err != nil {
		db.Close()
		lock.Close()
		return nil, err
	}
	rdb.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	s := &Store{db: db, rdb: rdb, lock: lock}
	if !opts.NoGroupCommit {
		// One committer goroutine runs every batch: the memo needs no lock.
		s.c = batch.NewCommitter(writer{db: db, memo: newMemo()}, opts.MaxBatch)
	}
	return s, nil
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
		return nil, fmt.Errorf("open meter database: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open meter database: %w", err)
	}
	return db, nil
}

// Apply applies op: its effects are committed, and survive the process
// being killed, when it returns (see Durability in the package doc).
// An error means nothing was applied: a ctx done while the op waits in
// the queue withdraws it; once its batch is committing, Apply waits for
// that transaction and reports its outcome.
func (s *Store) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	if err := batch.Validate(op); err != nil {
		return meter.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return meter.Result{}, err
	}
	if s.c != nil {
		return s.c.Apply(ctx, op)
	}
	s.noGroup.RLock()
	defer s.noGroup.RUnlock()
	if s.closed {
		return meter.Result{}, ErrClosed
	}
	// As under group commit, ctx is not the transaction's: once begun it
	// commits or fails on its own, so an error means nothing was applied.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batch.Timeout)
	defer cancel()
	res, err := batch.Commit(tctx, writer{db: s.db}, []meter.Op{op})
	if err != nil {
		return meter.Result{}, err
	}
	return res[0], nil
}

// writer is the batch.Backend of the one write connection. Its
// transactions begin IMMEDIATE, taking the write lock at once; they are
// not retried: a busy database is waited for (busy_timeout) instead. memo,
// when set, is used by one goroutine at a time (the committer's).
type writer struct {
	db   *sql.DB
	memo *memo
}

func (w writer) Begin(ctx context.Context) (batch.Tx, error) {
	t, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &tx{tx: t, memo: w.memo}, nil
}

func (writer) Retry(error, int) bool { return false }

// tx is a batch transaction holding the write lock since it began, so
// reading rows locks them and writing absolute values is exact.
type tx struct {
	tx    *sql.Tx
	memo  *memo        // nil: read everything
	state *batch.State // what Load read into, remembered at Commit
}

func (t *tx) Commit(context.Context) error {
	if err := t.tx.Commit(); err != nil {
		if t.memo != nil {
			t.memo.reset() // the database may hold either outcome now
		}
		return err
	}
	if t.memo != nil && t.state != nil {
		t.memo.remember(t.state)
	}
	return nil
}

func (t *tx) Rollback(context.Context) error { return t.tx.Rollback() }

// Load reads every counter in the periods of the batch's ops and the
// bitset of every day they read a lesson on, except those the memo has.
func (t *tx) Load(ctx context.Context, s *batch.State) error {
	t.state = s
	for _, p := range s.Periods() {
		if t.memo.load(p, s) {
			continue
		}
		if err := readCounters(ctx, t.tx, p.Org, p.Month, p.Hour, s.Set); err != nil {
			return err
		}
	}
	for _, d := range s.Days() {
		if b := t.memo.day(d); b != nil {
			s.SetDay(d, b)
			continue
		}
		b, err := readBitset(ctx, t.tx, d)
		if err != nil {
			return err
		}
		s.SetDay(d, b)
	}
	return nil
}

// q is a *sql.Tx or a *sql.DB.
type q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readCounters calls fn with each stored counter of org in the given
// month and hour.
func readCounters(ctx context.Context, db q, org, month, hour string, fn func(batch.Key, int64)) error {
	rows, err := db.QueryContext(ctx,
		`SELECT meter, period, n FROM meter_counters WHERE org = ? AND period IN (?, ?)`, org, month, hour)
	if err != nil {
		return fmt.Errorf("read counters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, period string
		var n int64
		if err := rows.Scan(&name, &period, &n); err != nil {
			return fmt.Errorf("read counters: %w", err)
		}
		if m, ok := batch.MeterOf(name, period == hour); ok {
			fn(batch.Key{Org: org, Meter: m, Period: period}, n)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read counters: %w", err)
	}
	return nil
}

// readBitset reads a day's bitset; a missing row is an empty one.
func readBitset(ctx context.Context, db q, d batch.Day) (*batch.Bitset, error) {
	b := &batch.Bitset{}
	err := db.QueryRowContext(ctx, `SELECT version, bits, n FROM meter_reads WHERE org = ? AND day = ?`, d.Org, d.Date).
		Scan(&b.Version, &b.Bits, &b.N)
	if errors.Is(err, sql.ErrNoRows) {
		return &batch.Bitset{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lessons read: %w", err)
	}
	return b, nil
}

// Save writes back what the batch changed, one row per statement: a
// statement that may write several rows needs a statement journal, and
// measured that costs more than parsing one statement per row.
func (t *tx) Save(ctx context.Context, s *batch.State) error {
	for k, n := range s.Changed() {
		if _, err := t.tx.ExecContext(ctx, `REPLACE INTO meter_counters (org, period, meter, n) VALUES (?, ?, ?, ?)`,
			k.Org, k.Period, k.Meter.String(), n); err != nil {
			return fmt.Errorf("write counters: %w", err)
		}
	}
	for d, b := range s.ChangedDays() {
		if _, err := t.tx.ExecContext(ctx, `REPLACE INTO meter_reads (org, day, version, bits, n) VALUES (?, ?, ?, ?, ?)`,
			d.Org, d.Date, b.Version, b.Bits, b.N); err != nil {
			return fmt.Errorf("write lessons read: %w", err)
		}
	}
	return nil
}

// Usage reads the counters of org in the periods of now, and the number
// of distinct lessons it read on now's UTC day under version (0 when the
// day's record is of another version). It sees committed ops only.
func (s *Store) Usage(ctx context.Context, org string, now time.Time, version string) (meter.Counters, int, error) {
	var c meter.Counters
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // one snapshot for both reads
	if err != nil {
		return c, 0, fmt.Errorf("meter usage: %w", err)
	}
	defer tx.Rollback()
	month, hour := meter.MonthCalls.Period(now), meter.HourCalls.Period(now)
	if err := readCounters(ctx, tx, org, month, hour, func(k batch.Key, n int64) { c[k.Meter] = n }); err != nil {
		return c, 0, fmt.Errorf("meter usage: %w", err)
	}
	b, err := readBitset(ctx, tx, batch.Day{Org: org, Date: batch.DayOf(now)})
	if err != nil {
		return c, 0, fmt.Errorf("meter usage: %w", err)
	}
	return c, b.Count(version), nil
}

// Close commits the ops already queued, then closes the database. Apply
// fails with ErrClosed afterwards. Close may be called more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.c != nil {
			s.c.Close()
		}
		s.noGroup.Lock()
		s.closed = true
		s.noGroup.Unlock()
		s.closeErr = errors.Join(s.rdb.Close(), s.db.Close(), s.lock.Close())
	})
	return s.closeErr
}
