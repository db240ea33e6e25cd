// Package sqlitemeter implements meter.Store over an embedded SQLite
// database (modernc.org/sqlite, no cgo), the origin's default. Its tables
// (meter_counters; meter_days, meter_lessons_read and meter_alarms for the
// enumeration alarm; meter_ledger, the export ledger; meter_leases and
// meter_lease_epochs, the edge leases (lease.go); and its own migration
// record meter_migrations) may live in the same file as sqlitestore's.
//
// Durability: the database runs in WAL mode, and this Store's connection
// with synchronous=NORMAL: when Apply returns, the op's transaction is in
// the WAL through write(2), so it survives the process being killed
// (SIGKILL included; metertest's crash test kills a child under load).
// It is not synced to the disk at each commit but at checkpoints, so an
// operating-system crash or power loss may lose the last commits since
// the last checkpoint. Syncing every commit (synchronous=FULL) halved
// the origin's lesson throughput in make bench (docs/decisions/meters.md); sqlitestore's writes, rare, stay FULL.
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
// and evaluate their ops in order against the counters, records of
// lessons read and alarms as the previous batch committed them. What the
// Store has committed it remembers (the memo), so a batch reads from the
// database only what no earlier batch of this Store touched; a failed
// commit forgets it all. So caps and the enumeration alarm are exact under
// any concurrency. Reinstate is a batch too, and so are a lease's grant
// and reports; the memo keeps each org's leases that may reserve, so an
// op of an org without any reads nothing more. BumpEpoch is a statement
// of its own on the write connection, between two batches.
//
// Rows: one per org, meter and period (counters of past periods stay;
// nothing prunes them); one per org and UTC day with the count of
// distinct lessons read that day, and one per lesson read (by id) that
// day; one per org whose enumeration alarm ever tripped; one per ledger
// entry; one per lease granted (closed ones stay); and one per org whose
// lease epoch was ever bumped, and the global one.
package sqlitemeter

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
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

// Options tune a Store. The zero value is the production setting.
type Options struct {
	// MaxBatch caps the ops committed in one transaction
	// (DefaultMaxBatch when zero).
	MaxBatch int
	// NoGroupCommit commits every op in its own transaction on the
	// caller's goroutine: the baseline tools/meterbench measures group
	// commit against. Not for production.
	NoGroupCommit bool
	// OnCommit, when set, is told of every group-commit transaction: its
	// ops, duration and error (the origin's metrics).
	OnCommit func(ops int, took time.Duration, err error)
}

// Store is a meter.Store backed by one SQLite file.
type Store struct {
	db    *sql.DB // the one write connection; every transaction is BEGIN IMMEDIATE
	rdb   *sql.DB // read-only connections for Usage
	w     writer  // the batches' backend: the committer's, or Apply's under NoGroupCommit
	c     *batch.Committer
	front batch.Front // Apply, Reinstate and the leases' batches: to c, or to commit without it
	lock  *os.File

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
	s := &Store{db: db, rdb: rdb, w: writer{db: db}, lock: lock}
	if !opts.NoGroupCommit {
		// One committer goroutine runs every batch: the memo needs no lock.
		s.w.memo = newMemo()
		s.c = batch.NewCommitter(s.w, opts.MaxBatch, opts.OnCommit)
	}
	s.front.Committer, s.front.Alone = s.c, s.commit
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
	return s.front.Apply(ctx, op)
}

// Reinstate lifts the enumeration alarm of org, in a batch, and reports
// whether one was in force. An error means nothing was changed.
func (s *Store) Reinstate(ctx context.Context, org string) (bool, error) {
	return s.front.Reinstate(ctx, org)
}

// commit runs j in a transaction of its own (NoGroupCommit's
// batch.Front.Alone): tctx is not the caller's, so once begun it commits
// or fails on its own, and an error means nothing was applied.
func (s *Store) commit(_, tctx context.Context, j batch.Job) (batch.Outcome, error) {
	res, err := batch.Commit(tctx, s.w, []batch.Job{j})
	if err != nil {
		return batch.Outcome{}, err
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

// Load reads the alarm of every org of the batch, every counter in the
// periods of its ops, and for every day they read a lesson on the day's
// count and which of their lessons its record holds, except what the
// memo has.
func (t *tx) Load(ctx context.Context, s *batch.State) error {
	t.state = s
	for _, org := range s.Orgs() {
		a, ok := t.memo.alarm(org)
		if !ok {
			var err error
			if a, err = readAlarm(ctx, t.tx, org); err != nil {
				return err
			}
		}
		s.SetAlarm(org, a)
	}
	for _, p := range s.Periods() {
		if t.memo.load(p, s) {
			continue
		}
		if err := readCounters(ctx, t.tx, p.Org, p.Month, p.Hour, s.Set); err != nil {
			return err
		}
	}
	for _, d := range s.Days() {
		md := t.memo.day(d)
		n := 0
		if md != nil {
			n = md.n
		} else {
			var err error
			if n, err = readDayCount(ctx, t.tx, d); err != nil {
				return err
			}
		}
		s.SetDayCount(d, n)
		// Only the batch's own lessons are looked up, and only those the
		// memo cannot answer for.
		for _, l := range s.Lessons(d) {
			read := md != nil && md.read[l]
			if !read && n > 0 && !md.complete() {
				var err error
				if read, err = readLesson(ctx, t.tx, d, l); err != nil {
					return err
				}
			}
			if read {
				s.SetRead(d, l)
			}
		}
	}
	if err := loadOnce(ctx, t.tx, s); err != nil {
		return err
	}
	return t.loadLeases(ctx, s)
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

// readDayCount reads the count of lessons read on d; no row is 0.
func readDayCount(ctx context.Context, db q, d batch.Day) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT n FROM meter_days WHERE org = ? AND day = ?`, d.Org, d.Date).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read lessons read: %w", err)
	}
	return n, nil
}

// readLesson reports whether lesson is in d's record.
func readLesson(ctx context.Context, db q, d batch.Day, lesson string) (bool, error) {
	var one int
	err := db.QueryRowContext(ctx, `SELECT 1 FROM meter_lessons_read WHERE org = ? AND day = ? AND lesson = ?`, d.Org, d.Date, lesson).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read lessons read: %w", err)
	}
	return true, nil
}

// readAlarm reads the alarm of org; no row is one that never tripped.
func readAlarm(ctx context.Context, db q, org string) (batch.Alarm, error) {
	var a batch.Alarm
	var at string
	err := db.QueryRowContext(ctx, `SELECT in_force, day, tripped_at, lessons, granted FROM meter_alarms WHERE org = ?`, org).
		Scan(&a.InForce, &a.Day, &at, &a.LessonsRead, &a.Granted)
	if errors.Is(err, sql.ErrNoRows) {
		return batch.Alarm{}, nil
	}
	if err == nil {
		a.TrippedAt, err = time.Parse(time.RFC3339Nano, at)
	}
	if err != nil {
		return a, fmt.Errorf("read enumeration alarm: %w", err)
	}
	return a, nil
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
	for d, c := range s.ChangedDays() {
		if _, err := t.tx.ExecContext(ctx, `REPLACE INTO meter_days (org, day, n) VALUES (?, ?, ?)`, d.Org, d.Date, c.N); err != nil {
			return fmt.Errorf("write lessons read: %w", err)
		}
		for _, l := range c.Added {
			if _, err := t.tx.ExecContext(ctx, `INSERT INTO meter_lessons_read (org, day, lesson) VALUES (?, ?, ?)`, d.Org, d.Date, l); err != nil {
				return fmt.Errorf("write lessons read: %w", err)
			}
		}
	}
	if err := saveLedger(ctx, t.tx, s.Ledger()); err != nil {
		return err
	}
	if err := saveOnce(ctx, t.tx, s); err != nil {
		return err
	}
	if err := t.saveLeases(ctx, s); err != nil {
		return err
	}
	for org, a := range s.ChangedAlarms() {
		if _, err := t.tx.ExecContext(ctx, `REPLACE INTO meter_alarms (org, in_force, day, tripped_at, lessons, granted) VALUES (?, ?, ?, ?, ?, ?)`,
			org, a.InForce, a.Day, a.TrippedAt.UTC().Format(time.RFC3339Nano), a.LessonsRead, a.Granted); err != nil {
			return fmt.Errorf("write enumeration alarm: %w", err)
		}
	}
	return nil
}

// ledgerColumnsIn are the columns saveLedger writes, ledgerTuple a row of
// their placeholders, and ledgerChunk the rows one INSERT … VALUES writes
// at most. modernc.org/sqlite parses a statement at every Exec, even a
// prepared one (its Stmt keeps only the text), and its bind looks each
// placeholder's argument up by a scan of all of them, quadratic in the
// statement's width: a 100-row VALUES list measured slower than a row a
// statement, 20 to 40 rows best (docs/bench.md, "Meters"). 32 rows are 352
// parameters, far under SQLite's bound-parameter limit
// (SQLITE_MAX_VARIABLE_NUMBER, 32766 in modernc.org/sqlite).
const (
	ledgerColumnsIn = `org, kind, target, format, client, scopes, content_version, request_id, created, expires, key_id`
	ledgerTuple     = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	ledgerWidth     = 11
	ledgerChunk     = 32
	// ledgerRun writes rows that differ only in target (a mint's):
	// the shared columns bound once, the targets one JSON array.
	ledgerRun = `INSERT INTO meter_ledger (` + ledgerColumnsIn + `)
		SELECT ?, ?, value, ?, ?, ?, ?, ?, ?, ?, ? FROM json_each(?) ORDER BY key`
)

// saveLedger inserts rows in their order and numbers them: AUTOINCREMENT
// ids, ascending in the order of the transactions of the database's one
// writer. A run of rows differing only in target (a mint's) is one
// statement (ledgerRun); other rows go ledgerChunk to a multi-row
// INSERT … VALUES.
func saveLedger(ctx context.Context, tx *sql.Tx, rows []*batch.LedgerRow) error {
	var singles []*batch.LedgerRow
	for len(rows) > 0 {
		n := 1
		for n < len(rows) && sameButTarget(rows[0], rows[n]) {
			n++
		}
		if n == 1 {
			singles = append(singles, rows[0])
		}
		if len(singles) > 0 && (n > 1 || len(singles) == ledgerChunk) {
			if err := insertValues(ctx, tx, singles); err != nil {
				return err
			}
			singles = singles[:0]
		}
		if n > 1 {
			if err := insertRun(ctx, tx, rows[:n]); err != nil {
				return err
			}
		}
		rows = rows[n:]
	}
	if len(singles) > 0 {
		return insertValues(ctx, tx, singles)
	}
	return nil
}

// sameButTarget reports whether a and b are stored alike but for target.
func sameButTarget(a, b *batch.LedgerRow) bool {
	return a.Org == b.Org && a.Kind == b.Kind && a.Format == b.Format && a.Client == b.Client &&
		slices.Equal(a.Scopes, b.Scopes) && a.ContentVersion == b.ContentVersion && a.RequestID == b.RequestID &&
		a.Created.Equal(b.Created) && a.Expires.Equal(b.Expires) && a.KeyID == b.KeyID
}

// insertValues inserts rows by one INSERT … VALUES.
func insertValues(ctx context.Context, tx *sql.Tx, rows []*batch.LedgerRow) error {
	args := make([]any, 0, ledgerWidth*len(rows))
	for _, r := range rows {
		args = append(args, r.Org, r.Kind, r.Target, r.Format, r.Client, batch.ScopesText(r.Scopes),
			r.ContentVersion, r.RequestID, timeText(r.Created), timeText(r.Expires), r.KeyID)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO meter_ledger (`+ledgerColumnsIn+`) VALUES `+
		strings.Repeat(ledgerTuple+`, `, len(rows)-1)+ledgerTuple, args...)
	return number(res, err, rows)
}

// insertRun inserts rows differing only in target by one ledgerRun.
func insertRun(ctx context.Context, tx *sql.Tx, rows []*batch.LedgerRow) error {
	targets := make([]string, len(rows))
	for i, r := range rows {
		targets[i] = r.Target
	}
	list, err := json.Marshal(targets) // valid UTF-8 (batch.Validate): it round-trips
	if err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	r := rows[0]
	res, err := tx.ExecContext(ctx, ledgerRun, r.Org, r.Kind, r.Format, r.Client, batch.ScopesText(r.Scopes),
		r.ContentVersion, r.RequestID, timeText(r.Created), timeText(r.Expires), r.KeyID, string(list))
	return number(res, err, rows)
}

// number gives rows the ids of the statement that inserted them, whose
// result is res. A statement numbers its rows one after another in its
// order, from one above the largest id ever used, so they are the
// len(rows) ids up to LastInsertId (RETURNING would name them, but in an
// order SQLite leaves unspecified).
func number(res sql.Result, err error, rows []*batch.LedgerRow) error {
	if err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	last, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != int64(len(rows)) {
		return fmt.Errorf("write ledger: %d rows written (%v), want %d", n, err, len(rows))
	}
	for i, r := range rows {
		r.ID = last - int64(len(rows)-1-i)
	}
	return nil
}

// timeText is t as a ledger row stores it: RFC 3339 UTC, "" for zero.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// ledgerColumns are the columns scanRow reads, in its order.
const ledgerColumns = `id, ` + ledgerColumnsIn

// scanRow reads a row of ledgerColumns.
func scanRow(sc interface{ Scan(...any) error }) (meter.Row, error) {
	var r meter.Row
	var scopes, created, expires string
	if err := sc.Scan(&r.ID, &r.Org, &r.Kind, &r.Target, &r.Format, &r.Client, &scopes, &r.ContentVersion, &r.RequestID,
		&created, &expires, &r.KeyID); err != nil {
		return r, err
	}
	r.Scopes = batch.ParseScopes(scopes)
	var err error
	if r.Created, err = time.Parse(time.RFC3339Nano, created); err != nil {
		return r, fmt.Errorf("row %d: %w", r.ID, err)
	}
	if expires != "" {
		if r.Expires, err = time.Parse(time.RFC3339Nano, expires); err != nil {
			return r, fmt.Errorf("row %d: %w", r.ID, err)
		}
	}
	return r, nil
}

// Ledger lists the ledger rows of org with an id above after, in id
// order (the order they committed), at most limit of them.
func (s *Store) Ledger(ctx context.Context, org string, after int64, limit int) ([]meter.Row, error) {
	if limit < 1 {
		return nil, fmt.Errorf("meter ledger: limit %d, want at least 1", limit)
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+ledgerColumns+` FROM meter_ledger WHERE org = ? AND id > ? ORDER BY id LIMIT ?`,
		org, after, limit)
	if err != nil {
		return nil, fmt.Errorf("meter ledger: %w", err)
	}
	defer rows.Close()
	var out []meter.Row
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, fmt.Errorf("meter ledger: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("meter ledger: %w", err)
	}
	return out, nil
}

// LedgerRow reads the ledger row numbered id.
func (s *Store) LedgerRow(ctx context.Context, id int64) (meter.Row, bool, error) {
	r, err := scanRow(s.rdb.QueryRowContext(ctx, `SELECT `+ledgerColumns+` FROM meter_ledger WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return meter.Row{}, false, nil
	}
	if err != nil {
		return meter.Row{}, false, fmt.Errorf("meter ledger row %d: %w", id, err)
	}
	return r, true, nil
}

// Usage reads the counters of org in the periods of now, the number of
// distinct lessons it read on now's UTC day, and its enumeration alarm if
// one is in force. It sees committed ops only.
func (s *Store) Usage(ctx context.Context, org string, now time.Time) (meter.Usage, error) {
	var u meter.Usage
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // one snapshot for every read
	if err != nil {
		return u, fmt.Errorf("meter usage: %w", err)
	}
	defer tx.Rollback()
	month, hour := meter.MonthCalls.Period(now), meter.HourCalls.Period(now)
	if err := readCounters(ctx, tx, org, month, hour, func(k batch.Key, n int64) { u.Counters[k.Meter] = n }); err != nil {
		return meter.Usage{}, fmt.Errorf("meter usage: %w", err)
	}
	if u.LessonsRead, err = readDayCount(ctx, tx, batch.Day{Org: org, Date: batch.DayOf(now)}); err != nil {
		return meter.Usage{}, fmt.Errorf("meter usage: %w", err)
	}
	a, err := readAlarm(ctx, tx, org)
	if err != nil {
		return meter.Usage{}, fmt.Errorf("meter usage: %w", err)
	}
	if a.InForce {
		u.Alarm = &a.AlarmState
	}
	return u, nil
}

// Close commits the ops already queued, then closes the database. Apply
// fails with ErrClosed afterwards. Close may be called more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.front.Close()
		s.closeErr = errors.Join(s.rdb.Close(), s.db.Close(), s.lock.Close())
	})
	return s.closeErr
}
