// Package pgmeter implements meter.Store over PostgreSQL (pgx), for
// origins that scale out: several origins may share one database and
// stay exact. Its tables (meter_counters, meter_reads, and its own
// migration record meter_migrations) live in the first schema of the
// connection's search_path, which the DSN may set (search_path=...); they
// may share a database and schema with pgstore's.
//
// Durability: a commit is acknowledged by PostgreSQL after its WAL flush
// (synchronous_commit is left at the server's setting, on by default),
// and Apply returns only after the commit.
//
// Group commit: Apply hands its op to one committer goroutine, which
// drains whatever ops are queued (up to Options.MaxBatch), applies them in
// order in one transaction on its own connection, commits, and only then
// answers each of them. Concurrent increments thus share one WAL flush
// and one handful of round trips.
//
// Exactness: nothing is cached between transactions. A batch first locks
// every counter row its ops may change (INSERT ... ON CONFLICT DO UPDATE
// ... WHERE false inserts the missing ones and locks them all), always in
// one order, so batches of two origins serialise on the rows they share
// and never deadlock; it then reads the counters, evaluates its ops one
// after another against them, and writes back what changed. The same
// holds for the per-day bitsets of lessons read, locked after the
// counters.
//
// A lost connection while COMMIT is in flight leaves its outcome unknown:
// Apply then reports an error for ops that may have been applied. That is
// the one exception to meter.Store's "an error means nothing was
// applied", and no client of a remote database can avoid it.
//
// Rows: one per org, meter and period (counters of past periods stay;
// nothing prunes them), and one per org and UTC day holding a bitset of
// the lesson ordinals read that day, its popcount and its corpus version.
//
// The Store manages its own few connections (pgx.Conn): the committer's,
// and up to Options.MaxConns for Usage.
package pgmeter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lectern-api/lectern/origin/internal/pgmig"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
)

var _ meter.Store = (*Store)(nil)

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
	// MaxConns caps the connections Usage uses, and Apply under
	// NoGroupCommit (4 when zero). The committer has one of its own.
	MaxConns int
	// NoGroupCommit commits every op in its own transaction on a
	// connection of its own: the baseline tools/meterbench measures
	// group commit against. Not for production.
	NoGroupCommit bool
}

// Store is a meter.Store backed by a PostgreSQL database.
type Store struct {
	pool *pool
	w    *writer // the committer's; used by its goroutine only
	c    *batch.Committer

	noGroup   sync.RWMutex // NoGroupCommit: held for reading by Apply, for writing by Close
	closed    bool
	closeOnce sync.Once
	closeErr  error
}

// New connects to the database named by dsn (a postgres:// URL or
// keyword/value string) and applies any pending migrations.
func New(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("meter database: %w", err)
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 4
	}
	p := newPool(cfg, opts.MaxConns)
	conn, err := p.dial(ctx)
	if err != nil {
		return nil, err
	}
	if err := pgmig.Apply(ctx, conn, migrations, "migrations", "meter_migrations", migrationLock); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("migrate meters: %w", err)
	}
	s := &Store{pool: p}
	if opts.NoGroupCommit {
		conn.Close(ctx)
	} else {
		s.w = &writer{backend: backend{conn}, pool: p}
		s.c = batch.NewCommitter(s.w, opts.MaxBatch)
	}
	return s, nil
}

// Apply applies op durably: its effects are committed when it returns.
// An error means nothing was applied (but see the package comment on a
// connection lost during COMMIT): a ctx done while the op waits in the
// queue withdraws it; once its batch is committing, Apply waits for that
// transaction and reports its outcome.
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
	conn, err := s.pool.get(ctx)
	if err != nil {
		return meter.Result{}, err
	}
	defer s.pool.put(conn)
	// As under group commit, ctx is not the transaction's: once begun it
	// commits or fails on its own.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batch.Timeout)
	defer cancel()
	res, err := batch.Commit(tctx, backend{conn}, []meter.Op{op})
	if err != nil {
		return meter.Result{}, err
	}
	return res[0], nil
}

// backend is the batch.Backend of one connection.
type backend struct{ conn *pgx.Conn }

func (b backend) Begin(ctx context.Context) (batch.Tx, error) {
	t, err := b.conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return tx{t}, nil
}

// Retry retries a batch a few times when PostgreSQL aborts it as a
// deadlock or serialisation failure (which the lock order should
// prevent).
func (backend) Retry(err error, attempt int) bool {
	var pe *pgconn.PgError
	return attempt < 5 && errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// writer is the committer's batch.Backend: a connection of its own,
// redialled when it was lost.
type writer struct {
	backend
	pool *pool
}

func (w *writer) Begin(ctx context.Context) (batch.Tx, error) {
	if w.conn == nil || w.conn.IsClosed() {
		if w.conn != nil {
			w.conn.Close(ctx)
			w.conn = nil
		}
		conn, err := w.pool.dial(ctx)
		if err != nil {
			return nil, err
		}
		w.conn = conn
	}
	return w.backend.Begin(ctx)
}

// tx is a batch transaction.
type tx struct{ tx pgx.Tx }

func (t tx) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t tx) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }

// SQL of a batch. Keys travel as parallel arrays. The ORDER BY ... COLLATE
// "C" fixes the order in which every batch locks rows.
const (
	lockCounters = `INSERT INTO meter_counters AS c (org, period, meter, n)
		SELECT k.org, k.period, k.meter, 0 FROM unnest($1::text[], $2::text[], $3::text[]) AS k (org, period, meter)
		ORDER BY k.org COLLATE "C", k.period COLLATE "C", k.meter COLLATE "C"
		ON CONFLICT (org, period, meter) DO UPDATE SET n = c.n WHERE false`
	readCounters = `SELECT c.org, c.period, c.meter, c.n FROM meter_counters c
		JOIN unnest($1::text[], $2::text[]) AS p (org, period) ON c.org = p.org AND c.period = p.period`
	lockDays = `INSERT INTO meter_reads AS r (org, day, version, bits, n)
		SELECT d.org, d.day, '', ''::bytea, 0 FROM unnest($1::text[], $2::text[]) AS d (org, day)
		ORDER BY d.org COLLATE "C", d.day COLLATE "C"
		ON CONFLICT (org, day) DO UPDATE SET n = r.n WHERE false`
	readDaysSQL = `SELECT r.org, r.day, r.version, r.bits, r.n FROM meter_reads r
		JOIN unnest($1::text[], $2::text[]) AS d (org, day) ON r.org = d.org AND r.day = d.day`
	writeCounters = `UPDATE meter_counters AS c SET n = v.n
		FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[]) AS v (org, period, meter, n)
		WHERE c.org = v.org AND c.period = v.period AND c.meter = v.meter`
	writeDays = `UPDATE meter_reads AS r SET version = v.version, bits = v.bits, n = v.n
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::int4[]) AS v (org, day, version, bits, n)
		WHERE r.org = v.org AND r.day = v.day`
)

// Load locks, in one round trip, the rows the batch's ops may change and
// reads those they see.
func (t tx) Load(ctx context.Context, s *batch.State) error {
	var b pgx.Batch
	if ks := s.Stepped(); len(ks) > 0 {
		orgs, periods, meters := make([]string, len(ks)), make([]string, len(ks)), make([]string, len(ks))
		for i, k := range ks {
			orgs[i], periods[i], meters[i] = k.Org, k.Period, k.Meter.String()
		}
		b.Queue(lockCounters, orgs, periods, meters)
	}
	var orgs, periods []string
	seen := map[[2]string]bool{}
	for _, p := range s.Periods() {
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
	if ds := s.Days(); len(ds) > 0 {
		orgs, days := make([]string, len(ds)), make([]string, len(ds))
		for i, d := range ds {
			orgs[i], days[i] = d.Org, d.Date
		}
		b.Queue(lockDays, orgs, days)
		b.Queue(readDaysSQL, orgs, days).Query(func(rows pgx.Rows) error {
			var d batch.Day
			var bs batch.Bitset
			_, err := pgx.ForEachRow(rows, []any{&d.Org, &d.Date, &bs.Version, &bs.Bits, &bs.N}, func() error {
				s.SetDay(d, &batch.Bitset{Version: bs.Version, Bits: slices.Clone(bs.Bits), N: bs.N})
				return nil
			})
			return err
		})
	}
	return t.tx.SendBatch(ctx, &b).Close()
}

// Save writes back, in one round trip, what the batch changed.
func (t tx) Save(ctx context.Context, s *batch.State) error {
	var w pgx.Batch
	var orgs, periods, meters []string
	var ns []int64
	for k, n := range s.Changed() {
		orgs, periods, meters, ns = append(orgs, k.Org), append(periods, k.Period), append(meters, k.Meter.String()), append(ns, n)
	}
	if len(orgs) > 0 {
		w.Queue(writeCounters, orgs, periods, meters, ns)
	}
	var dorgs, days, versions []string
	var bits [][]byte
	var dns []int32
	for d, bs := range s.ChangedDays() {
		dorgs, days, versions = append(dorgs, d.Org), append(days, d.Date), append(versions, bs.Version)
		bits, dns = append(bits, bs.Bits), append(dns, int32(bs.N))
	}
	if len(dorgs) > 0 {
		w.Queue(writeDays, dorgs, days, versions, bits, dns)
	}
	if w.Len() == 0 {
		return nil
	}
	return t.tx.SendBatch(ctx, &w).Close()
}

// isHour reports whether a period is an hour's ("2006-01-02T15") rather
// than a month's ("2006-01").
func isHour(period string) bool { return strings.Contains(period, "T") }

// Usage reads the counters of org in the periods of now, and the number
// of distinct lessons it read on now's UTC day under version (0 when the
// day's record is of another version). It sees committed ops only.
func (s *Store) Usage(ctx context.Context, org string, now time.Time, version string) (meter.Counters, int, error) {
	var c meter.Counters
	conn, err := s.pool.get(ctx)
	if err != nil {
		return c, 0, fmt.Errorf("meter usage: %w", err)
	}
	defer s.pool.put(conn)
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}) // one snapshot
	if err != nil {
		return c, 0, fmt.Errorf("meter usage: %w", err)
	}
	defer tx.Rollback(ctx)
	var b pgx.Batch
	b.Queue(`SELECT period, meter, n FROM meter_counters WHERE org = $1 AND period = ANY($2::text[])`,
		org, []string{meter.MonthCalls.Period(now), meter.HourCalls.Period(now)}).Query(func(rows pgx.Rows) error {
		var period, name string
		var n int64
		_, err := pgx.ForEachRow(rows, []any{&period, &name, &n}, func() error {
			if m, ok := batch.MeterOf(name, isHour(period)); ok {
				c[m] = n
			}
			return nil
		})
		return err
	})
	var read batch.Bitset
	b.Queue(`SELECT version, n FROM meter_reads WHERE org = $1 AND day = $2`, org, batch.DayOf(now)).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&read.Version, &read.N)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return meter.Counters{}, 0, fmt.Errorf("meter usage: %w", err)
	}
	return c, read.Count(version), nil
}

// Close commits the ops already queued, then closes the connections.
// Apply fails with ErrClosed afterwards. Close may be called more than
// once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.c != nil {
			s.c.Close()
		}
		s.noGroup.Lock()
		s.closed = true
		s.noGroup.Unlock()
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

// dial opens a connection outside the pool's count.
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

func (p *pool) close(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
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
