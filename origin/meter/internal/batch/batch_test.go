package batch_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
	"github.com/lectern-api/lectern/origin/meter/metertest"
)

// TestMeter runs the conformance suite on the committer over a database
// in memory: what batch does, apart from any SQL, meets the contract.
func TestMeter(t *testing.T) {
	var dbs sync.Map // *testing.T → *mem
	metertest.Run(t, metertest.Shared, func(t *testing.T) meter.Store {
		db, _ := dbs.LoadOrStore(t, newMem())
		s := &store{db: db.(*mem)}
		s.c = batch.NewCommitter(s.db, 3, nil) // small batches exercise the cap
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestLeases runs the lease suite on the committer over a database in
// memory.
func TestLeases(t *testing.T) {
	var dbs sync.Map // *testing.T → *mem
	metertest.RunLeases(t, metertest.Shared, func(t *testing.T) metertest.LeaseStore {
		db, _ := dbs.LoadOrStore(t, newMem())
		s := &store{db: db.(*mem)}
		s.c = batch.NewCommitter(s.db, 3, nil)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// mem is a database in memory. A transaction holds mu from Begin to its
// end, as one holds SQLite's write lock.
type mem struct {
	mu      sync.Mutex
	counts  map[batch.Key]int64
	days    map[batch.Day]int
	lessons map[batch.Day]map[string]bool
	alarms  map[string]batch.Alarm
	ledger  []meter.Row // in id order
	leases  map[string]batch.Lease
	epochs  map[string]int64
	once    map[batch.OnceKey]batch.Once
}

func newMem() *mem {
	return &mem{counts: map[batch.Key]int64{}, days: map[batch.Day]int{}, lessons: map[batch.Day]map[string]bool{}, alarms: map[string]batch.Alarm{},
		leases: map[string]batch.Lease{}, epochs: map[string]int64{}, once: map[batch.OnceKey]batch.Once{}}
}

func (db *mem) Begin(ctx context.Context) (batch.Tx, error) {
	db.mu.Lock()
	return &tx{db: db, counts: map[batch.Key]int64{}, days: map[batch.Day]batch.DayChange{}, alarms: map[string]batch.Alarm{}, leases: map[string]batch.Lease{}}, nil
}

func (db *mem) Retry(error, int) bool { return false }

// tx keeps its writes apart until Commit.
type tx struct {
	db     *mem
	counts map[batch.Key]int64
	days   map[batch.Day]batch.DayChange
	alarms map[string]batch.Alarm
	ledger []meter.Row
	leases map[string]batch.Lease
	once   []batch.Once
	done   bool
}

func (t *tx) Leases(ctx context.Context, s *batch.State) error {
	for _, id := range s.LeaseIDs() {
		if l, ok := t.db.leases[id]; ok {
			s.AddLease(l)
		}
	}
	return nil
}

func (t *tx) Load(ctx context.Context, s *batch.State) error {
	for _, org := range s.Orgs() {
		if a, ok := t.db.alarms[org]; ok {
			s.SetAlarm(org, a)
		}
	}
	for _, p := range s.Periods() {
		for _, m := range meter.Meters {
			k := batch.Key{Org: p.Org, Meter: m, Period: p.Month}
			if m.Hourly() {
				k.Period = p.Hour
			}
			if n, ok := t.db.counts[k]; ok {
				s.Set(k, n)
			}
		}
	}
	for _, d := range s.Days() {
		s.SetDayCount(d, t.db.days[d])
		for _, l := range s.Lessons(d) {
			if t.db.lessons[d][l] {
				s.SetRead(d, l)
			}
		}
	}
	for _, l := range t.db.leases {
		if _, ok := slices.BinarySearch(s.LeaseOrgs(), l.Org); ok && !l.Closed && l.Settle.After(s.Floor()) {
			s.AddLease(l)
		}
	}
	if len(s.EpochOrgs()) > 0 {
		for _, org := range append(s.EpochOrgs(), "") {
			s.SetEpoch(org, t.db.epochs[org])
		}
	}
	s.SetClock(time.Now())
	for _, k := range s.OnceKeys() {
		if o, ok := t.db.once[k]; ok {
			s.SetOnce(o)
		}
	}
	return nil
}

func (t *tx) Save(ctx context.Context, s *batch.State) error {
	for k, n := range s.Changed() {
		t.counts[k] = n
	}
	for d, c := range s.ChangedDays() {
		t.days[d] = batch.DayChange{N: c.N, Added: slices.Clone(c.Added)}
	}
	for org, a := range s.ChangedAlarms() {
		t.alarms[org] = a
	}
	for _, l := range append(s.NewLeases(), s.ChangedLeases()...) {
		t.leases[l.ID] = *l
	}
	// The transaction holds mu: the next id is the last committed's + 1.
	next := int64(len(t.db.ledger)) + 1
	for _, r := range s.Ledger() {
		r.ID = next
		next++
		row := r.Row
		row.Scopes = slices.Clone(row.Scopes)
		t.ledger = append(t.ledger, row)
	}
	for _, o := range s.NewOnce() {
		rec := *o
		if rec.LedgerN > 0 {
			rec.LedgerFirst = s.Ledger()[rec.LedgerOffset].ID
		}
		t.once = append(t.once, rec)
	}
	return nil
}

func (t *tx) Commit(context.Context) error {
	for k, n := range t.counts {
		t.db.counts[k] = n
	}
	for d, c := range t.days {
		t.db.days[d] = c.N
		if t.db.lessons[d] == nil {
			t.db.lessons[d] = map[string]bool{}
		}
		for _, l := range c.Added {
			t.db.lessons[d][l] = true
		}
	}
	for org, a := range t.alarms {
		t.db.alarms[org] = a
	}
	t.db.ledger = append(t.db.ledger, t.ledger...)
	for _, o := range t.once {
		t.db.once[o.OnceKey] = o
	}
	for id, l := range t.leases {
		t.db.leases[id] = l
	}
	return t.Rollback(context.Background())
}

func (t *tx) Rollback(context.Context) error {
	if !t.done {
		t.done = true
		t.db.mu.Unlock()
	}
	return nil
}

// store is a meter.Store as the backends build theirs.
type store struct {
	db *mem
	c  *batch.Committer
}

func (s *store) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	if err := batch.Validate(op); err != nil {
		return meter.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return meter.Result{}, err
	}
	return s.c.Apply(ctx, op)
}

func (s *store) Usage(ctx context.Context, org string, now time.Time) (meter.Usage, error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	var u meter.Usage
	for _, m := range meter.Meters {
		u.Counters[m] = s.db.counts[batch.Key{Org: org, Meter: m, Period: m.Period(now)}]
	}
	u.LessonsRead = s.db.days[batch.Day{Org: org, Date: batch.DayOf(now)}]
	if a := s.db.alarms[org]; a.InForce {
		u.Alarm = &a.AlarmState
	}
	return u, nil
}

func (s *store) Ledger(ctx context.Context, org string, after int64, limit int) ([]meter.Row, error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	var out []meter.Row
	for _, r := range s.db.ledger {
		if r.Org == org && r.ID > after && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *store) LedgerRow(ctx context.Context, id int64) (meter.Row, bool, error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	if id < 1 || id > int64(len(s.db.ledger)) || s.db.ledger[id-1].ID == 0 {
		return meter.Row{}, false, nil
	}
	return s.db.ledger[id-1], true, nil
}

func (s *store) LedgerBefore(ctx context.Context, before time.Time, after int64, limit int) ([]meter.Row, error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	var out []meter.Row
	for _, r := range s.db.ledger {
		if r.ID > after && r.Created.Before(before) && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

// TrimLedger zeroes the rows it deletes (ID 0: none), so that ids stay
// their index + 1 and are never reused.
func (s *store) TrimLedger(ctx context.Context, before time.Time) (int64, error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	var n int64
	for i, r := range s.db.ledger {
		if r.ID != 0 && r.Created.Before(before) {
			s.db.ledger[i] = meter.Row{}
			n++
		}
	}
	return n, nil
}

// ApplyBatch applies ops in one transaction (metertest.Batcher).
func (s *store) ApplyBatch(ctx context.Context, ops []meter.Op) ([]meter.Result, error) {
	jobs := make([]batch.Job, len(ops))
	for i, op := range ops {
		if err := batch.Validate(op); err != nil {
			return nil, err
		}
		jobs[i] = batch.Job{Op: op}
	}
	outs, err := batch.Commit(ctx, s.db, jobs)
	if err != nil {
		return nil, err
	}
	return batch.Results(outs), nil
}

func (s *store) front() *batch.Front { return &batch.Front{Committer: s.c} }

func (s *store) Epoch(ctx context.Context, org string) (int64, error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	return s.db.epochs[org] + s.db.epochs[""], nil
}

func (s *store) BumpEpoch(ctx context.Context, org string) error {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	s.db.epochs[org]++
	return nil
}

func (s *store) GrantLease(ctx context.Context, g meter.LeaseGrant) (meter.Granted, error) {
	return s.front().GrantLease(ctx, g)
}

func (s *store) ReportLeases(ctx context.Context, now time.Time, rs []meter.Report) error {
	return s.front().ReportLeases(ctx, now, rs)
}

func (s *store) OpenLeases(ctx context.Context, org string, now time.Time) ([]meter.Lease, error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	var out []meter.Lease
	for _, l := range s.db.leases {
		if (org == "" || l.Org == org) && !l.Closed && now.Before(l.Settle) {
			out = append(out, l.Lease)
		}
	}
	slices.SortFunc(out, func(a, b meter.Lease) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (s *store) PruneLeases(ctx context.Context, before time.Time) (int64, error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	var n int64
	for id, l := range s.db.leases {
		if l.Closed && l.Expires.Before(before) || l.Settle.Before(before) {
			delete(s.db.leases, id)
			n++
		}
	}
	return n, nil
}

func (s *store) PruneOnce(ctx context.Context, before time.Time) (int64, error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	var n int64
	for k, o := range s.db.once {
		if o.Created.Before(before) {
			delete(s.db.once, k)
			n++
		}
	}
	return n, nil
}

func (s *store) Reinstate(ctx context.Context, org string) (bool, error) {
	return s.c.Reinstate(ctx, org)
}

func (s *store) Close() error {
	s.c.Close()
	return nil
}

// counting counts a backend's transactions.
type counting struct {
	*mem
	begun atomic.Int32
}

func (c *counting) Begin(ctx context.Context) (batch.Tx, error) {
	c.begun.Add(1)
	return c.mem.Begin(ctx)
}

// TestReadyOpsJoinTheBatch: ops of goroutines that are ready to run when
// the committer takes an op share its transaction. On one processor the
// first Apply wakes the committer ahead of the other two callers; only
// its yields let them queue their ops before it commits.
func TestReadyOpsJoinTheBatch(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	db := &counting{mem: newMem()}
	c := batch.NewCommitter(db, 0, nil)
	defer c.Close()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	op := meter.Op{Org: "acme", Now: now, Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := c.Apply(context.Background(), op); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := db.begun.Load(); n != 1 {
		t.Errorf("3 ops of ready goroutines took %d transactions, want 1", n)
	}
	if got := db.counts[batch.Key{Org: "acme", Meter: meter.MonthCalls, Period: meter.MonthCalls.Period(now)}]; got != 3 {
		t.Errorf("calls = %d, want 3", got)
	}
}

// flaky is a backend whose transactions fail: their Load, or their
// Commit, the first loadFails or commitFails times. It retries what
// failed before COMMIT only, as a backend must.
type flaky struct {
	*mem
	loadFails, commitFails int
	begun                  int
}

func (f *flaky) Begin(ctx context.Context) (batch.Tx, error) {
	f.begun++
	t, err := f.mem.Begin(ctx)
	return &flakyTx{Tx: t, f: f}, err
}

func (f *flaky) Retry(err error, attempt int) bool { return !batch.DuringCommit(err) && attempt < 10 }

type flakyTx struct {
	batch.Tx
	f *flaky
}

func (t *flakyTx) Load(ctx context.Context, s *batch.State) error {
	if t.f.loadFails > 0 {
		t.f.loadFails--
		return errors.New("lock timeout")
	}
	return t.Tx.Load(ctx, s)
}

func (t *flakyTx) Commit(ctx context.Context) error {
	if t.f.commitFails > 0 {
		t.f.commitFails--
		t.Tx.Rollback(ctx)
		return errors.New("connection lost during COMMIT")
	}
	return t.Tx.Commit(ctx)
}

// A batch that failed before COMMIT is tried again in a new transaction;
// one whose COMMIT failed is reported (DuringCommit), not tried again.
func TestDuringCommit(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	jobs := []batch.Job{{Op: meter.Op{Org: "acme", Now: now, Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}}}}
	f := &flaky{mem: newMem(), loadFails: 2}
	res, err := batch.Commit(context.Background(), f, jobs)
	if err != nil || f.begun != 3 || res[0].Result.After.Get(meter.MonthCalls) != 1 {
		t.Errorf("two failed loads: %v after %d transactions, calls %v; want success in 3, 1", err, f.begun, res)
	}
	f = &flaky{mem: newMem(), commitFails: 1}
	_, err = batch.Commit(context.Background(), f, jobs)
	if err == nil || !batch.DuringCommit(err) || f.begun != 1 {
		t.Errorf("a failed COMMIT: %v (DuringCommit %v) after %d transactions; want reported after 1", err, batch.DuringCommit(err), f.begun)
	}
	if batch.DuringCommit(errors.New("meter batch: lock timeout")) {
		t.Errorf("DuringCommit of another error")
	}
}
