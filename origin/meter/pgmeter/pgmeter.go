// Package pgmeter implements meter.Store over PostgreSQL (pgx), for
// origins that scale out: several origins may share one database and
// stay exact. Its tables (meter_counters; meter_days, meter_lessons_read
// and meter_alarms for the enumeration alarm; meter_ledger and
// meter_ledger_seq, the export ledger; meter_leases and
// meter_lease_epochs, the edge leases (lease.go); and its own migration record
// meter_migrations) live in the first schema of the connection's
// search_path, which the DSN may set (search_path=...); they may share a
// database and schema with pgstore's.
//
// Durability: a commit is acknowledged by PostgreSQL after its WAL flush
// (synchronous_commit is left at the server's setting, on by default),
// and Apply returns only after the commit.
//
// Group commit: Apply hands its op to one committer goroutine, which
// drains whatever ops are queued (up to Options.MaxBatch), applies them in
// order in one transaction on its own connection, commits, and only then
// answers each of them. Concurrent increments thus share one WAL flush
// and two round trips: BEGIN and the locks and reads (Load), then the
// writes and COMMIT (SaveCommit).
//
// Exactness: nothing is cached between transactions. A batch first locks
// the enumeration alarm row of every org it has an op of, then every
// counter row its ops may change, then the per-day count row of every day
// they read a lesson on (INSERT ... ON CONFLICT DO UPDATE ... WHERE false
// inserts the missing ones and locks them all), always in this order, so
// batches of two origins serialise on the rows they share and never
// deadlock; it then reads the alarms, the counters, the day counts and
// which of its lessons each day's record holds, evaluates its ops one
// after another against them, and writes back what changed. Each read is
// a statement after the locks, and sees (READ COMMITTED) what every batch
// that held them committed: an op is refused if any batch committed
// before it tripped its org's alarm, whichever origin ran it. Leases are
// read last, after the locks: every lease of the batch's orgs that may
// reserve (a grant or a report holds its org's alarm row too), and, for a
// batch with grants, the epochs, held FOR SHARE until it commits.
//
// Stalled peers: every connection runs with the meters' bounds of
// pgsession. A peer that stops inside its transaction (SIGSTOP, a
// partition) holds its locks until PostgreSQL ends its session,
// MeterIdleInTransaction (500 ms) after its last statement; a batch
// waiting on them gives up after MeterLockTimeout (250 ms) and is tried
// again, as is a batch whose own connection the server ended before
// COMMIT (nothing of it was applied). So a stalled peer costs a batch
// well under a second, inside batch.Timeout.
//
// A lost connection while COMMIT is in flight leaves its outcome unknown:
// Apply then reports an error for ops that may have been applied. That is
// the one exception to meter.Store's "an error means nothing was
// applied", and no client of a remote database can avoid it. COMMIT
// travels with the batch's writes, so this is any loss during that last
// round trip (SaveCommit says which failures are known to come before).
//
// Rows: one per org, meter and period (counters of past periods stay;
// nothing prunes them); one per org and UTC day with the count of
// distinct lessons read that day, and one per lesson read (by id) that
// day; one per org that ever had an op, holding its alarm; one per
// ledger entry; one per lease granted (closed ones stay); and one per org
// that was ever granted a lease or had its epoch bumped, and the global
// one.
//
// Ledger ids: a batch that writes ledger rows takes their ids from the one
// row of meter_ledger_seq in its last statement before COMMIT and holds
// that row's lock until then, so batches of every origin number their
// rows in the order they commit.
//
// The Store manages its own few connections (pgx.Conn): the committer's,
// and up to Options.MaxConns for Usage.
package pgmeter

import (
	"context"
	"errors"
	"fmt"
	"github.com/lectern-api/lectern/origin/internal/pgretry"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lectern-api/lectern/origin/internal/pgmig"
	"github.com/lectern-api/lectern/origin/internal/pgsession"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
)

var _ meter.Store = (*Store)(nil)

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
	// MaxConns caps the connections Usage uses, and Apply and Reinstate
	// under NoGroupCommit (4 when zero). The committer has one of its own.
	MaxConns int
	// NoGroupCommit commits every op in its own transaction on a
	// connection of its own: the baseline tools/meterbench measures
	// group commit against. Not for production.
	NoGroupCommit bool
	// OnCommit, when set, is told of every group-commit transaction: its
	// ops, duration and error (the origin's metrics).
	OnCommit func(ops int, took time.Duration, err error)
}

// Store is a meter.Store backed by a PostgreSQL database.
type Store struct {
	pool  *pool
	w     *writer // the committer's; used by its goroutine only
	c     *batch.Committer
	front batch.Front // Apply, Reinstate and the leases' batches: to c, or to commit without it

	closeOnce sync.Once
	closeErr  error
}

// New connects to the database named by dsn (a postgres:// URL or
// keyword/value string) and applies any pending migrations. Its
// connections run with pgsession's bounds, except where the DSN sets them.
func New(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("meter database: %w", err)
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 4
	}
	// Migrations run on a connection of the DSN's own settings: origins
	// starting together wait for each other's migration (its advisory
	// lock), logged and bounded by pgmig (MaxWait).
	if err := migrate(ctx, cfg.Copy()); err != nil {
		return nil, err
	}
	pgsession.ApplyMeter(cfg.RuntimeParams)
	p := newPool(cfg, opts.MaxConns)
	s := &Store{pool: p}
	if !opts.NoGroupCommit {
		w := &writer{cfg: writerConfig(cfg)}
		conn, err := w.dial(ctx)
		if err != nil {
			return nil, err
		}
		w.conn = conn
		s.w = w
		s.c = batch.NewCommitter(s.w, opts.MaxBatch, opts.OnCommit)
	}
	s.front.Committer, s.front.Alone = s.c, s.commit
	return s, nil
}

func migrate(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to meter database: %w", err)
	}
	defer conn.Close(context.Background())
	if err := pgmig.Apply(ctx, conn, migrations, "migrations", "meter_migrations", migrationLock); err != nil {
		return fmt.Errorf("migrate meters: %w", err)
	}
	return nil
}

// Apply, Reinstate, GrantLease and ReportLeases hand their jobs to
// s.front, as sqlitemeter's do; they are written out rather than embedded
// so that each states this backend's guarantee (a connection lost during
// COMMIT) and batch.Front stays out of the exported API.

// Apply applies op durably: its effects are committed when it returns.
// An error means nothing was applied (but see the package comment on a
// connection lost during COMMIT): a ctx done while the op waits in the
// queue withdraws it; once its batch is committing, Apply waits for that
// transaction and reports its outcome.
func (s *Store) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	return s.front.Apply(ctx, op)
}

// Reinstate lifts the enumeration alarm of org, in a batch, and reports
// whether one was in force. An error means nothing was changed (but see
// the package comment on a connection lost during COMMIT).
func (s *Store) Reinstate(ctx context.Context, org string) (bool, error) {
	return s.front.Reinstate(ctx, org)
}

// commit runs j in a transaction of its own on a pooled connection
// (NoGroupCommit's batch.Front.Alone).
func (s *Store) commit(ctx, tctx context.Context, j batch.Job) (batch.Outcome, error) {
	for attempt := 1; ; attempt++ {
		conn, err := s.pool.get(ctx)
		if err != nil {
			return batch.Outcome{}, err
		}
		res, err := batch.Commit(tctx, backend{conn}, []batch.Job{j})
		// As the committer's writer, the job is tried again on another
		// connection (put closes the lost one).
		lost := err != nil && lostBeforeCommit(conn, err)
		s.pool.put(conn)
		if lost && attempt <= maxRedials {
			continue
		}
		if err != nil {
			return batch.Outcome{}, err
		}
		return res[0], nil
	}
}

// backend is the batch.Backend of one connection.
type backend struct{ conn *pgx.Conn }

// Begin sends nothing: BEGIN goes in the transaction's first batch (tx).
func (b backend) Begin(context.Context) (batch.Tx, error) {
	return &tx{conn: b.conn}, nil
}

// Retry tries a batch again when it failed before COMMIT (so nothing of
// it was applied) on a lock wait cut short by lock_timeout: a stalled
// peer holds the rows, and PostgreSQL ends its session, and releases
// them, IdleInTransaction after its last statement; the batch's own
// Timeout bounds the retries. It also retries a few times a deadlock or
// serialisation failure (which the lock order should prevent).
func (backend) Retry(err error, attempt int) bool {
	if batch.DuringCommit(err) {
		return false
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "55P03": // lock_not_available
		return true
	case "40P01", "40001": // deadlock_detected, serialization_failure
		return attempt < 5
	}
	return false
}

// writer is the committer's batch.Backend: a connection of its own,
// redialled when it was lost.
type writer struct {
	backend
	cfg *pgx.ConnConfig // writerConfig's
}

// writerConfig is cfg with plan_cache_mode force_generic_plan, unless the
// DSN set it. The committer runs the same dozen statements thousands of
// times a minute, and with the default (auto) PostgreSQL plans most of
// them afresh at every execution: their arrays make a custom plan look
// cheaper than the generic one, so it never switches. Their generic plans
// are the same index lookups (unnest's arrays are estimated at 10 rows),
// and the backend's CPU a batch of 15 lesson reads was about halved
// (850 -> 480 µs, docs/bench.md). The other connections (Usage, the
// ledger's reads and trims) keep the server's setting.
func writerConfig(cfg *pgx.ConnConfig) *pgx.ConnConfig {
	c := cfg.Copy()
	if _, ok := c.RuntimeParams["plan_cache_mode"]; !ok {
		c.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	return c
}

func (w *writer) dial(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, w.cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to meter database: %w", err)
	}
	return conn, nil
}

// maxRedials bounds the batch attempts that follow the loss of the
// writer's connection, so that a database that is down fails the batch
// instead of spinning until its Timeout.
const maxRedials = 3

// Retry retries what backend.Retry does, and a batch whose connection
// was lost before COMMIT: the server ended the session (its
// idle_in_transaction_session_timeout after this process stalled
// mid-batch, an administrator) or the network dropped it. The
// transaction died with the session, so nothing of the batch was
// applied; Begin redials.
func (w *writer) Retry(err error, attempt int) bool {
	if w.backend.Retry(err, attempt) {
		return true
	}
	return lostBeforeCommit(w.conn, err) && attempt <= maxRedials
}

// lostBeforeCommit reports whether a batch failed with err because its
// connection, conn, was lost before COMMIT: the server ended the session
// (idle_in_transaction_session_timeout after this process stalled
// mid-batch, an administrator) or the network dropped it. Nothing of the
// batch was applied, so it may be tried again on another connection.
func lostBeforeCommit(conn *pgx.Conn, err error) bool {
	return (conn == nil || conn.IsClosed()) && !batch.DuringCommit(err)
}

func (w *writer) Begin(ctx context.Context) (batch.Tx, error) {
	if w.conn == nil || w.conn.IsClosed() {
		if w.conn != nil {
			w.conn.Close(ctx)
			w.conn = nil
		}
		conn, err := w.dial(ctx)
		if err != nil {
			return nil, err
		}
		w.conn = conn
	}
	return w.backend.Begin(ctx)
}

// tx is a batch transaction whose BEGIN travels with its first batch and
// whose COMMIT with its writes (SaveCommit): a group pays two round trips
// (Load, then SaveCommit), not four, each a wakeup of a PostgreSQL backend
// on a machine whose cores it shares with the origin.
type tx struct {
	conn  *pgx.Conn
	begun bool // BEGIN was queued in a batch sent
}

var _ batch.SaveCommitter = (*tx)(nil)

// batch returns a new pgx batch, BEGIN first if no batch was sent yet.
func (t *tx) batch() *pgx.Batch {
	var b pgx.Batch
	if !t.begun {
		t.begun = true
		b.Queue("begin")
	}
	return &b
}

// Commit commits alone; batch.Commit uses SaveCommit instead.
func (t *tx) Commit(ctx context.Context) error {
	_, err := t.conn.Exec(ctx, "commit")
	return err
}

// Rollback ends a transaction still open on the connection (begun, not
// committed, or aborted by a failed statement); one that committed, or
// whose connection is gone, needs nothing.
func (t *tx) Rollback(ctx context.Context) error {
	if !t.begun || t.conn.IsClosed() || t.conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	_, err := t.conn.Exec(ctx, "rollback")
	return err
}

// SQL of a batch. Keys travel as parallel arrays. The ORDER BY ... COLLATE
// "C" fixes the order in which every batch locks rows.
const (
	lockAlarms = `INSERT INTO meter_alarms AS a (org)
		SELECT o FROM unnest($1::text[]) AS o ORDER BY o COLLATE "C"
		ON CONFLICT (org) DO UPDATE SET in_force = a.in_force WHERE false`
	readAlarms   = `SELECT org, in_force, day, tripped_at, lessons, granted FROM meter_alarms WHERE org = ANY($1::text[])`
	lockCounters = `INSERT INTO meter_counters AS c (org, period, meter, n)
		SELECT k.org, k.period, k.meter, 0 FROM unnest($1::text[], $2::text[], $3::text[]) AS k (org, period, meter)
		ORDER BY k.org COLLATE "C", k.period COLLATE "C", k.meter COLLATE "C"
		ON CONFLICT (org, period, meter) DO UPDATE SET n = c.n WHERE false`
	readCounters = `SELECT c.org, c.period, c.meter, c.n FROM meter_counters c
		JOIN unnest($1::text[], $2::text[]) AS p (org, period) ON c.org = p.org AND c.period = p.period`
	lockDays = `INSERT INTO meter_days AS d (org, day, n)
		SELECT k.org, k.day, 0 FROM unnest($1::text[], $2::text[]) AS k (org, day)
		ORDER BY k.org COLLATE "C", k.day COLLATE "C"
		ON CONFLICT (org, day) DO UPDATE SET n = d.n WHERE false`
	readDays = `SELECT d.org, d.day, d.n FROM meter_days d
		JOIN unnest($1::text[], $2::text[]) AS k (org, day) ON d.org = k.org AND d.day = k.day`
	readLessons = `SELECT r.org, r.day, r.lesson FROM meter_lessons_read r
		JOIN unnest($1::text[], $2::text[], $3::text[]) AS k (org, day, lesson)
		ON r.org = k.org AND r.day = k.day AND r.lesson = k.lesson`
	writeCounters = `UPDATE meter_counters AS c SET n = v.n
		FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[]) AS v (org, period, meter, n)
		WHERE c.org = v.org AND c.period = v.period AND c.meter = v.meter`
	writeDays = `UPDATE meter_days AS d SET n = v.n
		FROM unnest($1::text[], $2::text[], $3::int4[]) AS v (org, day, n)
		WHERE d.org = v.org AND d.day = v.day`
	addLessons = `INSERT INTO meter_lessons_read (org, day, lesson)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[])`
	// addLedger takes the batch's ids from meter_ledger_seq, locking its
	// row until the batch commits (so ids ascend in commit order, the
	// lock taken last of all, after Load's), and inserts the rows, the
	// i-th (from 1) numbered last - n + i.
	addLedger = `WITH seq AS (UPDATE meter_ledger_seq SET last = last + $1 RETURNING last)
		INSERT INTO meter_ledger (id, org, kind, target, format, client, scopes, content_version, request_id, created, expires, key_id)
		SELECT seq.last - $1 + v.i, v.org, v.kind, v.target, v.format, v.client, v.scopes, v.cv, v.rid, v.created, v.expires, v.kid
		FROM seq, unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
			$10::timestamptz[], $11::timestamptz[], $12::text[]) WITH ORDINALITY
			AS v (org, kind, target, format, client, scopes, cv, rid, created, expires, kid, i)
		RETURNING id`
	ledgerColumns = `id, org, kind, target, format, client, scopes, content_version, request_id, created, expires, key_id`
	readLedger    = `SELECT ` + ledgerColumns + ` FROM meter_ledger WHERE org = $1 AND id > $2 ORDER BY id LIMIT $3`
	readLedgerRow = `SELECT ` + ledgerColumns + ` FROM meter_ledger WHERE id = $1`
	writeAlarms   = `UPDATE meter_alarms AS a
		SET in_force = v.in_force, day = v.day, tripped_at = v.tripped_at, lessons = v.lessons, granted = v.granted
		FROM unnest($1::text[], $2::bool[], $3::text[], $4::timestamptz[], $5::int4[], $6::int4[])
			AS v (org, in_force, day, tripped_at, lessons, granted)
		WHERE a.org = v.org`
)

// scanAlarm is the columns of readAlarms after org.
func scanAlarm(row pgx.Row, org *string, a *batch.Alarm) error {
	var at *time.Time
	if err := row.Scan(org, &a.InForce, &a.Day, &at, &a.LessonsRead, &a.Granted); err != nil {
		return err
	}
	if at != nil {
		a.TrippedAt = *at
	}
	return nil
}

// Load locks, in one round trip, the rows the batch's jobs may change and
// reads those they see, each read after its locks.
func (t *tx) Load(ctx context.Context, s *batch.State) error {
	b := t.batch()
	orgs := s.Orgs()
	b.Queue(lockAlarms, orgs)
	b.Queue(readAlarms, orgs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var org string
			var a batch.Alarm
			if err := scanAlarm(rows, &org, &a); err != nil {
				return err
			}
			s.SetAlarm(org, a)
		}
		return rows.Err()
	})
	if ks := s.Stepped(); len(ks) > 0 {
		orgs, periods, meters := make([]string, len(ks)), make([]string, len(ks)), make([]string, len(ks))
		for i, k := range ks {
			orgs[i], periods[i], meters[i] = k.Org, k.Period, k.Meter.String()
		}
		b.Queue(lockCounters, orgs, periods, meters)
	}
	if ps := s.Periods(); len(ps) > 0 {
		var orgs, periods []string
		seen := map[[2]string]bool{}
		for _, p := range ps {
			for _, period := range []string{p.Month, p.Hour} {
				if k := [2]string{p.Org, period}; !seen[k] {
					seen[k] = true
					orgs, periods = append(orgs, p.Org), append(periods, period)
				}
			}
		}
		b.Queue(readCounters, orgs, periods).Query(func(rows pgx.Rows) error {
			var org, period, name string
			var n int64
			_, err := pgx.ForEachRow(rows, []any{&org, &period, &name, &n}, func() error {
				if m, ok := batch.MeterOf(name, isHour(period)); ok {
					s.Set(batch.Key{Org: org, Meter: m, Period: period}, n)
				}
				return nil
			})
			return err
		})
	}
	if ds := s.Days(); len(ds) > 0 {
		orgs, days := make([]string, len(ds)), make([]string, len(ds))
		var lorgs, ldays, lessons []string
		for i, d := range ds {
			orgs[i], days[i] = d.Org, d.Date
			for _, l := range s.Lessons(d) {
				lorgs, ldays, lessons = append(lorgs, d.Org), append(ldays, d.Date), append(lessons, l)
			}
		}
		b.Queue(lockDays, orgs, days)
		b.Queue(readDays, orgs, days).Query(func(rows pgx.Rows) error {
			var d batch.Day
			var n int
			_, err := pgx.ForEachRow(rows, []any{&d.Org, &d.Date, &n}, func() error {
				s.SetDayCount(d, n)
				return nil
			})
			return err
		})
		b.Queue(readLessons, lorgs, ldays, lessons).Query(func(rows pgx.Rows) error {
			var d batch.Day
			var l string
			_, err := pgx.ForEachRow(rows, []any{&d.Org, &d.Date, &l}, func() error {
				s.SetRead(d, l)
				return nil
			})
			return err
		})
	}
	queueLoadOnce(b, s)
	queueLeases(b, s)
	return t.conn.SendBatch(ctx, b).Close()
}

// Save writes back, in one round trip, what the batch changed (batch.Tx;
// batch.Commit calls SaveCommit instead).
func (t *tx) Save(ctx context.Context, s *batch.State) error {
	w := t.batch()
	queueSave(w, s)
	if w.Len() == 0 {
		return nil
	}
	return t.conn.SendBatch(ctx, w).Close()
}

// SaveCommit writes back what the batch changed and commits, in one round
// trip. PostgreSQL runs a batch's statements in order and, once one
// fails, skips the rest up to the batch's end (its Sync), COMMIT
// included: so an error the server reports for a statement before
// COMMIT, or one before anything was sent, means nothing was applied,
// and the transaction is rolled back and may be tried again. Any other
// error (COMMIT's own, a connection lost while the batch was out, a
// reply that did not read) may have come after COMMIT ran, and is
// reported as during COMMIT, never tried again.
func (t *tx) SaveCommit(ctx context.Context, s *batch.State) error {
	w := t.batch()
	queueSave(w, s)
	reached := false // COMMIT's reply is being read: every statement before it succeeded
	w.Queue("commit").Fn = func(br pgx.BatchResults) error {
		reached = true
		_, err := br.Exec()
		return err
	}
	err := t.conn.SendBatch(ctx, w).Close()
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if !reached && (errors.As(err, &pe) || pgconn.SafeToRetry(err)) {
		return err
	}
	return batch.InCommit(err)
}

// queueSave queues the writing of what the batch changed.
func queueSave(w *pgx.Batch, s *batch.State) {
	var orgs, periods, meters []string
	var ns []int64
	for k, n := range s.Changed() {
		orgs, periods, meters, ns = append(orgs, k.Org), append(periods, k.Period), append(meters, k.Meter.String()), append(ns, n)
	}
	if len(orgs) > 0 {
		w.Queue(writeCounters, orgs, periods, meters, ns)
	}
	var dorgs, days, lorgs, ldays, lessons []string
	var dns []int32
	for d, c := range s.ChangedDays() {
		dorgs, days, dns = append(dorgs, d.Org), append(days, d.Date), append(dns, int32(c.N))
		for _, l := range c.Added {
			lorgs, ldays, lessons = append(lorgs, d.Org), append(ldays, d.Date), append(lessons, l)
		}
	}
	if len(dorgs) > 0 {
		w.Queue(writeDays, dorgs, days, dns)
		w.Queue(addLessons, lorgs, ldays, lessons)
	}
	var aorgs, adays []string
	var inForce []bool
	var at []time.Time
	var alessons, granted []int32
	for org, a := range s.ChangedAlarms() {
		aorgs, inForce, adays, at = append(aorgs, org), append(inForce, a.InForce), append(adays, a.Day), append(at, a.TrippedAt)
		alessons, granted = append(alessons, int32(a.LessonsRead)), append(granted, int32(a.Granted))
	}
	if len(aorgs) > 0 {
		w.Queue(writeAlarms, aorgs, inForce, adays, at, alessons, granted)
	}
	queueSaveLeases(w, s)
	queueLedger(w, s.Ledger()) // last: it takes the ledger ids' lock
	queueSaveOnce(w, s)        // after the ledger rows: it reads their ids
}

// queueLedger queues the insertion of rows, in their order, and numbers
// them from the ids it returns (consecutive: the lowest is the first's).
func queueLedger(w *pgx.Batch, rows []*batch.LedgerRow) {
	n := len(rows)
	if n == 0 {
		return
	}
	var orgs, kinds, targets, formats, clients, scopes, cvs, rids, kids []string
	var created []time.Time
	expires := make([]*time.Time, n)
	for i, r := range rows {
		orgs, kinds, targets, formats = append(orgs, r.Org), append(kinds, r.Kind), append(targets, r.Target), append(formats, r.Format)
		clients, scopes, cvs = append(clients, r.Client), append(scopes, batch.ScopesText(r.Scopes)), append(cvs, r.ContentVersion)
		rids, kids, created = append(rids, r.RequestID), append(kids, r.KeyID), append(created, r.Created)
		if !r.Expires.IsZero() {
			expires[i] = &r.Expires
		}
	}
	w.Queue(addLedger, int64(n), orgs, kinds, targets, formats, clients, scopes, cvs, rids, created, expires, kids).Query(func(got pgx.Rows) error {
		first := int64(-1)
		var id int64
		k, err := pgx.ForEachRow(got, []any{&id}, func() error {
			if first < 0 || id < first {
				first = id
			}
			return nil
		})
		if err != nil {
			return err
		}
		if int(k.RowsAffected()) != n {
			return fmt.Errorf("write ledger: %d rows written, want %d", k.RowsAffected(), n)
		}
		for i, r := range rows {
			r.ID = first + int64(i)
		}
		return nil
	})
}

// scanRow reads a row of ledgerColumns.
func scanRow(row pgx.Row) (meter.Row, error) {
	var r meter.Row
	var scopes string
	var expires *time.Time
	if err := row.Scan(&r.ID, &r.Org, &r.Kind, &r.Target, &r.Format, &r.Client, &scopes, &r.ContentVersion, &r.RequestID,
		&r.Created, &expires, &r.KeyID); err != nil {
		return r, err
	}
	r.Created = r.Created.UTC()
	r.Scopes = batch.ParseScopes(scopes)
	if expires != nil {
		r.Expires = expires.UTC()
	}
	return r, nil
}

// Ledger lists the ledger rows of org with an id above after, in id
// order (the order they committed), at most limit of them.
func (s *Store) Ledger(ctx context.Context, org string, after int64, limit int) ([]meter.Row, error) {
	if limit < 1 {
		return nil, fmt.Errorf("meter ledger: limit %d, want at least 1", limit)
	}
	conn, err := s.pool.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("meter ledger: %w", err)
	}
	defer s.pool.put(conn)
	rows, err := conn.Query(ctx, readLedger, org, after, limit)
	if err != nil {
		return nil, fmt.Errorf("meter ledger: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (meter.Row, error) { return scanRow(row) })
	if err != nil {
		return nil, fmt.Errorf("meter ledger: %w", err)
	}
	return out, nil
}

// LedgerRow reads the ledger row numbered id.
func (s *Store) LedgerRow(ctx context.Context, id int64) (meter.Row, bool, error) {
	conn, err := s.pool.get(ctx)
	if err != nil {
		return meter.Row{}, false, fmt.Errorf("meter ledger row %d: %w", id, err)
	}
	defer s.pool.put(conn)
	r, err := scanRow(conn.QueryRow(ctx, readLedgerRow, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return meter.Row{}, false, nil
	}
	if err != nil {
		return meter.Row{}, false, fmt.Errorf("meter ledger row %d: %w", id, err)
	}
	return r, true, nil
}

// isHour reports whether a period is an hour's ("2006-01-02T15") rather
// than a month's ("2006-01").
func isHour(period string) bool { return strings.Contains(period, "T") }

// Usage reads the counters of org in the periods of now, the number of
// distinct lessons it read on now's UTC day, and its enumeration alarm if
// one is in force. It sees committed ops only.
func (s *Store) Usage(ctx context.Context, org string, now time.Time) (meter.Usage, error) {
	return pgretry.Read(ctx, s.pool.reset, func() (meter.Usage, error) { return s.usage(ctx, org, now) })
}

// usage is one try of Usage: a connection lost under it is closed by put,
// so the next try dials a fresh one if no idle one is left.
func (s *Store) usage(ctx context.Context, org string, now time.Time) (meter.Usage, error) {
	var u meter.Usage
	conn, err := s.pool.get(ctx)
	if err != nil {
		return u, fmt.Errorf("meter usage: %w", err)
	}
	defer s.pool.put(conn)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}) // one snapshot
	if err != nil {
		return u, fmt.Errorf("meter usage: %w", err)
	}
	defer tx.Rollback(ctx)
	var b pgx.Batch
	b.Queue(`SELECT period, meter, n FROM meter_counters WHERE org = $1 AND period = ANY($2::text[])`,
		org, []string{meter.MonthCalls.Period(now), meter.HourCalls.Period(now)}).Query(func(rows pgx.Rows) error {
		var period, name string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&period, &name, &n}, func() error {
			if m, ok := batch.MeterOf(name, isHour(period)); ok {
				u.Counters[m] = n
			}
			return nil
		})
		return err
	})
	b.Queue(`SELECT n FROM meter_days WHERE org = $1 AND day = $2`, org, batch.DayOf(now)).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&u.LessonsRead)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	var a batch.Alarm
	b.Queue(readAlarms, []string{org}).QueryRow(func(row pgx.Row) error {
		var o string
		err := scanAlarm(row, &o, &a)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return meter.Usage{}, fmt.Errorf("meter usage: %w", err)
	}
	if a.InForce {
		u.Alarm = &a.AlarmState
	}
	return u, nil
}

// Close commits the ops already queued, then closes the connections.
// Apply fails with ErrClosed afterwards. Close may be called more than
// once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.front.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if s.w != nil && s.w.conn != nil {
			s.closeErr = s.w.conn.Close(ctx)
		}
		s.pool.close(ctx)
	})
	return s.closeErr
}

// pool is a few connections for Usage (and NoGroupCommit's Apply). pgx's
// own pool (pgxpool) needs a module this one does not require.
type pool struct {
	cfg   *pgx.ConnConfig
	slots chan struct{}  // one token per open connection
	idle  chan *pgx.Conn // as large as slots: put never blocks

	mu     sync.Mutex
	closed bool
}

func newPool(cfg *pgx.ConnConfig, n int) *pool {
	return &pool{cfg: cfg, slots: make(chan struct{}, n), idle: make(chan *pgx.Conn, n)}
}

// dial opens a connection; get counts it.
func (p *pool) dial(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to meter database: %w", err)
	}
	return conn, nil
}

func (p *pool) get(ctx context.Context) (*pgx.Conn, error) {
	select {
	case c := <-p.idle:
		return c, nil
	default:
	}
	select {
	case c := <-p.idle:
		return c, nil
	case p.slots <- struct{}{}:
		c, err := p.dial(ctx)
		if err != nil {
			<-p.slots
			return nil, err
		}
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put returns a connection, closing it instead when it is broken, left
// inside a transaction, or the pool is closed.
func (p *pool) put(c *pgx.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || c.IsClosed() || c.PgConn().TxStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.Close(ctx)
		cancel()
		<-p.slots
		return
	}
	p.idle <- c
}

// reset closes the idle connections (pgretry.Read: after a lost one).
func (p *pool) reset() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	p.drain(ctx)
}

func (p *pool) close(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.drain(ctx)
}

// drain closes the idle connections, giving back their slots.
func (p *pool) drain(ctx context.Context) {
	for {
		select {
		case c := <-p.idle:
			c.Close(ctx)
			<-p.slots
		default:
			return
		}
	}
}
