// Package sqlitemeter implements meter.Store over an embedded SQLite
// database (modernc.org/sqlite, no cgo), the origin's default. Its tables
// (meter_counters, meter_reads, and its own migration record
// meter_migrations) may live in the same file as sqlitestore's.
//
// Durability: the database runs in WAL mode with synchronous=FULL, so an
// op is on disk when Apply returns; nothing acknowledged is lost on
// SIGKILL or power loss.
//
// Group commit: Apply hands its op to one committer goroutine, which
// drains whatever ops are queued (up to Options.MaxBatch), applies them in
// order in one BEGIN IMMEDIATE transaction on the single write connection,
// commits, and only then answers each of them. Concurrent increments thus
// share one WAL flush.
//
// Exactness: every counter and bitset an op needs is read inside that
// transaction, which holds SQLite's write lock, and the ops are evaluated
// one after another against what it read; nothing is cached between
// transactions. So caps are exact under any concurrency, also with
// several Stores (or processes) on one file: their transactions take
// turns on the write lock (busy_timeout).
//
// Rows: one per org, meter and period (counters of past periods stay;
// nothing prunes them), and one per org and UTC day holding a bitset of
// the lesson ordinals read that day, its popcount and its corpus version.
package sqlitemeter

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

var _ meter.Store = (*Store)(nil)

// batchTimeout bounds one batch transaction, lock waits included.
const batchTimeout = 30 * time.Second

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
	db  *sql.DB // the one write connection; every transaction is BEGIN IMMEDIATE
	rdb *sql.DB // read-only connections for Usage
	c   *committer

	noGroup   sync.RWMutex // NoGroupCommit: held for reading by Apply, for writing by Close
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// Connection settings, applied by the driver to every new connection.
// busy_timeout comes first so the others wait on a locked file too.
var (
	pragmas      = []string{"busy_timeout(10000)"}
	writePragmas = []string{"journal_mode(WAL)", "synchronous(FULL)"}
	readPragmas  = []string{"query_only(1)"}
)

// New opens the meters in the database at path, creating the file and
// its directory if missing, and applies any pending migrations.
func New(ctx context.Context, path string, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create meter database directory: %w", err)
	}
	db, err := open(ctx, dsn(path, append(pragmas, writePragmas...), "_txlock=immediate"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	rdb, err := open(ctx, dsn(path, append(pragmas, readPragmas...)))
	if err != nil {
		db.Close()
		return nil, err
	}
	rdb.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	s := &Store{db: db, rdb: rdb}
	if !opts.NoGroupCommit {
		s.c = newCommitter(s.commit, opts.MaxBatch)
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

// Apply applies op durably: its effects are committed when it returns.
// An error means nothing was applied: a ctx done while the op waits in
// the queue withdraws it; once its batch is committing, Apply waits for
// that transaction and reports its outcome.
func (s *Store) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	if err := validate(op); err != nil {
		return meter.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return meter.Result{}, err
	}
	if s.c != nil {
		return s.c.apply(ctx, op)
	}
	s.noGroup.RLock()
	defer s.noGroup.RUnlock()
	if s.closed {
		return meter.Result{}, ErrClosed
	}
	// As under group commit, ctx is not the transaction's: once begun it
	// commits or fails on its own, so an error means nothing was applied.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	res, err := s.commit(tctx, []meter.Op{op})
	if err != nil {
		return meter.Result{}, err
	}
	return res[0], nil
}

// commit applies ops, in order, in one transaction (see the package
// comment).
func (s *Store) commit(ctx context.Context, ops []meter.Op) ([]meter.Result, error) {
	tx, err := s.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: takes the write lock now
	if err != nil {
		return nil, fmt.Errorf("meter batch: %w", err)
	}
	defer tx.Rollback()
	st, err := load(ctx, tx, ops)
	if err != nil {
		return nil, fmt.Errorf("meter batch: %w", err)
	}
	results := make([]meter.Result, len(ops))
	for i, op := range ops {
		results[i] = st.apply(op)
	}
	if err := store(ctx, tx, st); err != nil {
		return nil, fmt.Errorf("meter batch: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("meter batch: commit: %w", err)
	}
	return results, nil
}

// q is a *sql.Tx or a *sql.DB.
type q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// load reads every counter in the periods of ops and the bitset of every
// day they read a lesson on.
func load(ctx context.Context, tx *sql.Tx, ops []meter.Op) (*state, error) {
	st := newState()
	type periods struct{ org, month, hour string }
	seen := map[periods]bool{}
	for _, op := range ops {
		p := periods{op.Org, meter.MonthCalls.Period(op.Now), meter.HourCalls.Period(op.Now)}
		if seen[p] {
			continue
		}
		seen[p] = true
		for _, k := range opKeys(op) {
			st.counts[k] = 0
		}
		if err := readCounters(ctx, tx, p.org, p.month, p.hour, func(k key, n int64) { st.counts[k] = n }); err != nil {
			return nil, err
		}
	}
	for _, d := range readDays(ops) {
		b, err := readBitset(ctx, tx, d)
		if err != nil {
			return nil, err
		}
		st.days[d] = b
	}
	return st, nil
}

// readCounters calls fn with each stored counter of org in the given
// month and hour.
func readCounters(ctx context.Context, db q, org, month, hour string, fn func(key, int64)) error {
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
		if m, ok := meterOf(name, period == hour); ok {
			fn(key{org, m, period}, n)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read counters: %w", err)
	}
	return nil
}

// readBitset reads a day's bitset; a missing row is an empty one.
func readBitset(ctx context.Context, db q, d dayKey) (*bitset, error) {
	b := &bitset{}
	err := db.QueryRowContext(ctx, `SELECT version, bits, n FROM meter_reads WHERE org = ? AND day = ?`, d.org, d.day).
		Scan(&b.version, &b.bits, &b.n)
	if errors.Is(err, sql.ErrNoRows) {
		return &bitset{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lessons read: %w", err)
	}
	return b, nil
}

// store writes back what the batch changed. The transaction holds the
// write lock since it began, so writing absolute values is exact.
func store(ctx context.Context, tx *sql.Tx, st *state) error {
	if len(st.dirty) > 0 {
		up, err := tx.PrepareContext(ctx, `INSERT INTO meter_counters (org, period, meter, n) VALUES (?, ?, ?, ?)
			ON CONFLICT (org, period, meter) DO UPDATE SET n = excluded.n`)
		if err != nil {
			return fmt.Errorf("write counters: %w", err)
		}
		defer up.Close()
		for k := range st.dirty {
			if _, err := up.ExecContext(ctx, k.org, k.period, k.meter.String(), st.counts[k]); err != nil {
				return fmt.Errorf("write counters: %w", err)
			}
		}
	}
	for d, b := range st.days {
		if !b.dirty {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO meter_reads (org, day, version, bits, n) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (org, day) DO UPDATE SET version = excluded.version, bits = excluded.bits, n = excluded.n`,
			d.org, d.day, b.version, b.bits, b.n); err != nil {
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
	if err := readCounters(ctx, tx, org, month, hour, func(k key, n int64) { c[k.meter] = n }); err != nil {
		return c, 0, fmt.Errorf("meter usage: %w", err)
	}
	b, err := readBitset(ctx, tx, dayKey{org, dayOf(now)})
	if err != nil {
		return c, 0, fmt.Errorf("meter usage: %w", err)
	}
	return c, b.count(version), nil
}

// Close commits the ops already queued, then closes the database. Apply
// fails with ErrClosed afterwards. Close may be called more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.c != nil {
			s.c.close()
		}
		s.noGroup.Lock()
		s.closed = true
		s.noGroup.Unlock()
		s.closeErr = errors.Join(s.rdb.Close(), s.db.Close())
	})
	return s.closeErr
}
