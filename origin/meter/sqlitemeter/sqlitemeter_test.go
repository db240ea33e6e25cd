package sqlitemeter_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/metertest"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
)

// opener returns the suite's open: one database file per test, created on
// the test's first call and reopened on later ones.
func opener(opts sqlitemeter.Options) func(t *testing.T) meter.Store {
	var paths sync.Map // *testing.T → path
	return func(t *testing.T) meter.Store {
		p, ok := paths.Load(t)
		if !ok {
			// A directory that does not exist yet: New creates it.
			p, _ = paths.LoadOrStore(t, filepath.Join(t.TempDir(), "var", "meter.db"))
		}
		s, err := sqlitemeter.New(t.Context(), p.(string), opts)
		if err != nil {
			t.Fatalf("open meter store: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

func TestMeter(t *testing.T) {
	metertest.Run(t, metertest.Exclusive, opener(sqlitemeter.Options{}))
}

// The baseline tools/meterbench measures against is a correct store too.
func TestMeterNoGroupCommit(t *testing.T) {
	metertest.RunVariant(t, metertest.Exclusive, opener(sqlitemeter.Options{NoGroupCommit: true}))
}

// Small batches exercise the batch cap.
func TestMeterSmallBatches(t *testing.T) {
	metertest.RunVariant(t, metertest.Exclusive, opener(sqlitemeter.Options{MaxBatch: 3}))
}

// dbEnv names the database file the crash test's child serves.
const dbEnv = "LECTERN_METER_TEST_DB"

func TestCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meter.db")
	metertest.Crash(t, "TestHelperProcess", []string{dbEnv + "=" + path}, func(t *testing.T) meter.Store {
		s, err := sqlitemeter.New(t.Context(), path, sqlitemeter.Options{})
		if err != nil {
			t.Fatalf("reopen meter store: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestHelperProcess is the crash test's child: it serves a store until
// TestCrash kills it. In any other run it does nothing.
func TestHelperProcess(t *testing.T) {
	if !metertest.IsChild() {
		return
	}
	s, err := sqlitemeter.New(context.Background(), os.Getenv(dbEnv), sqlitemeter.Options{})
	if err != nil {
		t.Fatalf("open meter store: %v", err)
	}
	metertest.Serve(s)
}

// A Store is its database's only writer: a second one on the same file is
// refused while the first is open, and opens once it is closed.
func TestExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meter.db")
	a, err := sqlitemeter.New(t.Context(), path, sqlitemeter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := sqlitemeter.New(t.Context(), path, sqlitemeter.Options{}); err == nil {
		b.Close()
		t.Fatal("a second Store opened the meters while the first had them open")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := sqlitemeter.New(t.Context(), path, sqlitemeter.Options{})
	if err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	b.Close()
}

// A database of the per-version bitsets (migration 0001) upgrades: its
// counters stay, the day's count of lessons read restarts, and the alarm
// works.
func TestUpgradeFromBitsets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meter.db")
	old, err := os.ReadFile("migrations/0001_meters.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE meter_migrations (version TEXT PRIMARY KEY, applied_at TEXT NOT NULL) STRICT`,
		string(old),
		`INSERT INTO meter_migrations VALUES ('0001_meters.sql', '2026-11-01T00:00:00Z')`,
		`INSERT INTO meter_counters VALUES ('acme', '2026-11', 'calls', 41)`,
		`INSERT INTO meter_reads VALUES ('acme', '2026-11-22', 'v1', x'ff', 8)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err := sqlitemeter.New(t.Context(), path, sqlitemeter.Options{})
	if err != nil {
		t.Fatalf("open the old database: %v", err)
	}
	defer s.Close()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	u, err := s.Usage(t.Context(), "acme", now)
	if err != nil || u.Get(meter.MonthCalls) != 41 || u.LessonsRead != 0 {
		t.Fatalf("after the upgrade: month calls %d, lessons read %d, %v; want 41, 0", u.Get(meter.MonthCalls), u.LessonsRead, err)
	}
	res, err := s.Apply(t.Context(), meter.Op{Org: "acme", Now: now, Read: &meter.Read{Lesson: "high/algebra/1", Granted: 2}})
	if err != nil || !res.Tripped || res.LessonsRead != 1 {
		t.Errorf("a read of 2 granted after the upgrade: Tripped %v, LessonsRead %d, %v; want true, 1", res.Tripped, res.LessonsRead, err)
	}
}

// A batch's ledger rows are written several to a statement: an op's rows
// differing only in target as one run, other rows up to 32 to a VALUES
// list. Ops of runs (100, 31, 33 rows), of single rows (1, 40 ops of 1,
// an op whose 3 rows differ in expiry) and a refused op get consecutive
// ascending ids in batch order, each the id of its row.
func TestLedgerAcrossStatements(t *testing.T) {
	s, err := sqlitemeter.New(t.Context(), filepath.Join(t.TempDir(), "meter.db"), sqlitemeter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	op := func(first, n int, limit int64) meter.Op {
		o := meter.Op{Org: "acme", Now: now, Stages: []meter.Stage{{{Meter: meter.HourMints, N: int64(n), Limit: &limit}}}}
		for i := range n {
			o.Ledger = append(o.Ledger, meter.Entry{Kind: meter.KindMedia, Target: fmt.Sprintf("media-%d", first+i),
				Format: "url", Client: "c", ContentVersion: "v", RequestID: fmt.Sprintf("req-%d", first), KeyID: "k1",
				Expires: now.Add(time.Hour)})
		}
		return o
	}
	for round := range 2 { // the second round numbers above the first's
		ops := []meter.Op{op(0, 100, 1e6), op(100, 1, 1e6), op(101, 50, 0), op(151, 31, 1e6), op(182, 33, 1e6)}
		for i := range 40 {
			ops = append(ops, op(215+i, 1, 1e6))
		}
		expiries := op(255, 3, 1e6)
		for i := range expiries.Ledger {
			expiries.Ledger[i].Expires = now.Add(time.Duration(i+1) * time.Minute)
		}
		ops = append(ops, expiries, op(258, 100, 1e6))
		res, err := s.ApplyBatch(t.Context(), ops)
		if err != nil {
			t.Fatal(err)
		}
		byID := map[int64]meter.Entry{}
		var ids []int64
		for k, r := range res {
			if k == 2 {
				if r.Refused == nil || r.LedgerIDs != nil {
					t.Fatalf("round %d: the refused op: Refused %v, LedgerIDs %v", round, r.Refused, r.LedgerIDs)
				}
				continue
			}
			if len(r.LedgerIDs) != len(ops[k].Ledger) {
				t.Fatalf("round %d: op %d: %d ids, want %d", round, k, len(r.LedgerIDs), len(ops[k].Ledger))
			}
			for i, id := range r.LedgerIDs {
				byID[id] = ops[k].Ledger[i]
			}
			ids = append(ids, r.LedgerIDs...)
		}
		for i := range ids {
			if want := int64(round*308 + i + 1); ids[i] != want {
				t.Fatalf("round %d: ids %v, want %d from %d up, one by one", round, ids, len(ids), round*308+1)
			}
		}
		for _, id := range ids {
			r, ok, err := s.LedgerRow(t.Context(), id)
			if err != nil || !ok || r.Target != byID[id].Target || !r.Expires.Equal(byID[id].Expires) {
				t.Errorf("round %d: LedgerRow(%d) = %+v, %v, %v; want %+v", round, id, r.Entry, ok, err, byID[id])
			}
		}
	}
}

// leaseOpener is opener for the lease suite.
func leaseOpener(opts sqlitemeter.Options) func(t *testing.T) metertest.LeaseStore {
	open := opener(opts)
	return func(t *testing.T) metertest.LeaseStore { return open(t).(*sqlitemeter.Store) }
}

func TestLeases(t *testing.T) {
	metertest.RunLeases(t, metertest.Exclusive, leaseOpener(sqlitemeter.Options{}))
}

func TestLeasesNoGroupCommit(t *testing.T) {
	metertest.RunLeases(t, metertest.Exclusive, leaseOpener(sqlitemeter.Options{NoGroupCommit: true}))
}

func TestLeasesSmallBatches(t *testing.T) {
	metertest.RunLeases(t, metertest.Exclusive, leaseOpener(sqlitemeter.Options{MaxBatch: 3}))
}

func TestCrashLeases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meter.db")
	metertest.CrashLeases(t, "TestHelperProcess", []string{dbEnv + "=" + path}, func(t *testing.T) metertest.LeaseStore {
		s, err := sqlitemeter.New(t.Context(), path, sqlitemeter.Options{})
		if err != nil {
			t.Fatalf("open meter store: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// The hot path: once a batch read an org's leases, the memo answers for
// the next ones (ops up to a minute older than the batch's included), so
// an op of an org with no lease costs no query; a grant and a final
// report update it.
func TestMemoKeepsLeases(t *testing.T) {
	s, err := sqlitemeter.New(t.Context(), filepath.Join(t.TempDir(), "meter.db"), sqlitemeter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	quota := int64(100)
	op := meter.Op{Org: "acme", Now: now, Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1, Limit: &quota}}}}
	if n, ok := s.MemoLeases("acme", now); ok {
		t.Fatalf("before any op: the memo holds %d leases of acme", n)
	}
	if _, err := s.Apply(t.Context(), op); err != nil {
		t.Fatal(err)
	}
	if n, ok := s.MemoLeases("acme", now.Add(-30*time.Second)); !ok || n != 0 {
		t.Errorf("after an op: memo %d, %v; want no lease, known", n, ok)
	}
	if _, ok := s.MemoLeases("acme", now.Add(-2*time.Minute)); ok {
		t.Errorf("the memo answers for a batch 2 minutes older than the one it read")
	}
	// An op 30 s older is answered from the memo, which then answers no
	// further back than before: it never read older leases.
	older := op
	older.Now = now.Add(-30 * time.Second)
	if _, err := s.Apply(t.Context(), older); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.MemoLeases("acme", now.Add(-70*time.Second)); ok {
		t.Errorf("after an op 30 s older: the memo answers for 70 s older, past what was read")
	}
	g := meter.LeaseGrant{Org: "acme", Now: now, ID: "L1", Want: 8, Floor: 8, Share: 1, MonthLimit: &quota,
		Expires: now.Add(5 * time.Second), Settle: now.Add(7 * time.Second)}
	if got, err := s.GrantLease(t.Context(), g); err != nil || got.Calls != 8 {
		t.Fatalf("grant: %+v, %v", got, err)
	}
	if n, ok := s.MemoLeases("acme", now); !ok || n != 1 {
		t.Errorf("after a grant: memo %d, %v; want 1, known", n, ok)
	}
	if err := s.ReportLeases(t.Context(), now, []meter.Report{{Lease: "L1", Used: 3, Final: true}}); err != nil {
		t.Fatal(err)
	}
	if n, ok := s.MemoLeases("acme", now); !ok || n != 0 {
		t.Errorf("after its final report: memo %d, %v; want none, known", n, ok)
	}
}
