package pgmeter_test

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/internal/pgsession"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/metertest"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
)

// what names these tests in the message that skips them without
// LECTERN_TEST_PG.
const what = "the PostgreSQL meter suite"

func openStore(t *testing.T, dsn string, opts pgmeter.Options) meter.Store {
	t.Helper()
	s, err := pgmeter.New(t.Context(), dsn, opts)
	if err != nil {
		t.Fatalf("open meter store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// opener returns the suite's open: one schema per test, created on the
// test's first call and reopened on later ones.
func opener(opts pgmeter.Options) func(t *testing.T) meter.Store {
	var dsns sync.Map // *testing.T → DSN
	return func(t *testing.T) meter.Store {
		d, ok := dsns.Load(t)
		if !ok {
			d, _ = dsns.LoadOrStore(t, pgschema.ForTest(t, what))
		}
		return openStore(t, d.(string), opts)
	}
}

func TestMeter(t *testing.T) {
	pgschema.Base(t, what)
	metertest.Run(t, metertest.Shared, opener(pgmeter.Options{}))
}

// The baseline tools/meterbench measures against is a correct store too,
// and its many connections contend on row locks as two origins would.
func TestMeterNoGroupCommit(t *testing.T) {
	pgschema.Base(t, what)
	metertest.RunVariant(t, metertest.Shared, opener(pgmeter.Options{NoGroupCommit: true, MaxConns: 16}))
}

// dsnEnv names the database the crash test's child serves.
const dsnEnv = "LECTERN_METER_TEST_DSN"

func TestCrash(t *testing.T) {
	dsn := pgschema.ForTest(t, what)
	metertest.Crash(t, "TestHelperProcess", []string{dsnEnv + "=" + dsn}, func(t *testing.T) meter.Store {
		return openStore(t, dsn, pgmeter.Options{})
	})
}

// TestHelperProcess is the crash test's child: it serves a store until
// TestCrash kills it. In any other run it does nothing.
func TestHelperProcess(t *testing.T) {
	if !metertest.IsChild() {
		return
	}
	s, err := pgmeter.New(context.Background(), os.Getenv(dsnEnv), pgmeter.Options{})
	if err != nil {
		t.Fatalf("open meter store: %v", err)
	}
	metertest.Serve(s)
}

// Every connection of a Store runs with pgsession's meter bounds, and a
// DSN's own setting is kept.
func TestSessionBounds(t *testing.T) {
	dsn := pgschema.ForTest(t, what)
	s := openStore(t, dsn, pgmeter.Options{}).(*pgmeter.Store)
	for name, want := range map[string]string{
		"lock_timeout":                        "250ms",
		"idle_in_transaction_session_timeout": "500ms",
		"statement_timeout":                   "10s",
	} {
		if got, err := s.Setting(t.Context(), name); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	own := openStore(t, pgschema.WithParam(dsn, "lock_timeout", "1500ms"), pgmeter.Options{}).(*pgmeter.Store)
	if got, err := own.Setting(t.Context(), "lock_timeout"); err != nil || got != "1500ms" {
		t.Errorf("lock_timeout with the DSN's own = %q, %v; want 1500ms", got, err)
	}
}

// A peer that stops inside its transaction holding the meter rows' locks
// (an origin SIGSTOPped mid-batch; its connection has pgsession's meter
// bounds, as every origin's meter connection has) costs a batch of the
// same org at most MeterIdleInTransaction + MeterLockTimeout, well under
// a second: its lock waits give up after MeterLockTimeout and are tried
// again until PostgreSQL ends the peer's session. The batch then
// succeeds, after the peer's locks are gone.
func TestStalledPeer(t *testing.T) {
	dsn := pgschema.ForTest(t, what)
	s := openStore(t, dsn, pgmeter.Options{})
	op := meter.Op{Org: "acme", Now: time.Now(), Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}, {Meter: meter.HourCalls, N: 1}}}}
	if _, err := s.Apply(t.Context(), op); err != nil {
		t.Fatal(err)
	}

	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pgsession.ApplyMeter(cfg.RuntimeParams)
	peer, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close(context.Background())
	ptx, err := peer.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	if _, err := ptx.Exec(t.Context(), `SELECT 1 FROM meter_alarms WHERE org = 'acme' FOR UPDATE;
		SELECT 1 FROM meter_counters WHERE org = 'acme' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// The peer now sends nothing more.

	start := time.Now()
	bound := pgsession.MeterIdleInTransaction + pgsession.MeterLockTimeout + time.Second
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	res, err := s.Apply(ctx, op)
	end := time.Now()
	if err != nil {
		t.Fatalf("Apply while a stalled peer holds the rows: %v after %v", err, end.Sub(start))
	}
	if took := end.Sub(start); took > bound {
		t.Errorf("Apply took %v, want at most %v", took, bound)
	}
	if res.After.Get(meter.MonthCalls) != 2 {
		t.Errorf("month calls after = %d, want 2", res.After.Get(meter.MonthCalls))
	}
	// It did not pass the peer's locks: it committed only once PostgreSQL
	// had ended the peer's session, MeterIdleInTransaction after the
	// peer's last statement at the earliest.
	if waited := end.Sub(sent); waited < pgsession.MeterIdleInTransaction {
		t.Errorf("Apply committed %v after the peer took the locks, before its session could have ended (%v)", waited, pgsession.MeterIdleInTransaction)
	}
	if err := peer.Ping(t.Context()); err == nil {
		t.Errorf("the stalled peer's session is still open")
	}
}

// A batch whose connection the server ended before COMMIT (as
// idle_in_transaction_session_timeout ends that of an origin that stalled
// mid-batch) applied nothing; it is tried again on a new connection, by
// the committer's writer and without group commit alike.
func TestLostConnection(t *testing.T) {
	t.Run("group commit", func(t *testing.T) { lostConnection(t, pgmeter.Options{}) })
	t.Run("no group commit", func(t *testing.T) { lostConnection(t, pgmeter.Options{NoGroupCommit: true}) })
}

func lostConnection(t *testing.T, opts pgmeter.Options) {
	app := "pgmeter_lost_" + strings.ToLower(rand.Text()[:8])
	dsn := pgschema.WithParam(pgschema.ForTest(t, what), "application_name", app)
	s := openStore(t, dsn, opts)
	op := meter.Op{Org: "acme", Now: time.Now(), Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}}
	if _, err := s.Apply(t.Context(), op); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(t.Context(), pgschema.Base(t, what))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var ended int
	if err := admin.QueryRow(t.Context(), `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) t`, app).Scan(&ended); err != nil || ended == 0 {
		t.Fatalf("terminate the store's sessions: %d ended, %v", ended, err)
	}
	res, err := s.Apply(t.Context(), op)
	if err != nil {
		t.Fatalf("Apply after the server ended the store's sessions: %v", err)
	}
	if res.After.Get(meter.MonthCalls) != 2 {
		t.Errorf("month calls after = %d, want 2", res.After.Get(meter.MonthCalls))
	}
}

// A database of the per-version bitsets (migration 0001) upgrades: its
// counters stay, the day's count of lessons read restarts, and the alarm
// works.
func TestUpgradeFromBitsets(t *testing.T) {
	dsn := pgschema.ForTest(t, what)
	old, err := os.ReadFile("migrations/0001_meters.sql")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE meter_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		string(old),
		`INSERT INTO meter_migrations (version) VALUES ('0001_meters.sql')`,
		`INSERT INTO meter_counters VALUES ('acme', '2026-11', 'calls', 41)`,
		`INSERT INTO meter_reads VALUES ('acme', '2026-11-22', 'v1', '\xff', 8)`,
	} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close(t.Context())
	s := openStore(t, dsn, pgmeter.Options{})
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

// Ledger ids follow commit order across origins: a batch that writes
// ledger rows waits for a peer that took ids before it and has not
// committed, then numbers above it, so a listing that has read past an
// id never misses a row committed later with a lower one.
func TestLedgerIDsInCommitOrder(t *testing.T) {
	dsn := pgschema.ForTest(t, what)
	s := openStore(t, dsn, pgmeter.Options{})
	ctx := t.Context()
	peer, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close(context.Background())
	tx, err := peer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	// The peer's batch: ids taken, its row written, not committed yet.
	var peerID int64
	if err := tx.QueryRow(ctx, `UPDATE meter_ledger_seq SET last = last + 1 RETURNING last`).Scan(&peerID); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO meter_ledger (id, org, kind, target, format, client, scopes, content_version, request_id, created, key_id)
		VALUES ($1, 'acme', 'media', 'peer', 'url', 'c', '', 'v', 'r', now(), '')`, peerID); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	op := meter.Op{Org: "acme", Now: now, Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}},
		Ledger: []meter.Entry{{Kind: meter.KindMedia, Target: "ours", Format: "url"}}}
	done := make(chan meter.Result, 1)
	go func() {
		res, err := s.Apply(ctx, op)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		t.Fatalf("a batch committed ledger id %v while a peer holding id %d had not committed", res.LedgerIDs, peerID)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if len(res.LedgerIDs) != 1 || res.LedgerIDs[0] <= peerID {
		t.Fatalf("LedgerIDs %v after the peer's %d, want one above it", res.LedgerIDs, peerID)
	}
	rows, err := s.Ledger(ctx, "acme", 0, 10)
	if err != nil {
		t.Fatalf("Ledger: %v", err)
	}
	var targets []string
	for _, r := range rows {
		targets = append(targets, r.Target)
	}
	if diff := cmp.Diff([]string{"peer", "ours"}, targets); diff != "" {
		t.Errorf("the ledger's rows, by target: want the peer's, then ours (-want +got):\n%s", diff)
	}
}

// leaseOpener is opener for the lease suite.
func leaseOpener(opts pgmeter.Options) func(t *testing.T) metertest.LeaseStore {
	open := opener(opts)
	return func(t *testing.T) metertest.LeaseStore { return open(t).(*pgmeter.Store) }
}

func TestLeases(t *testing.T) {
	pgschema.Base(t, what)
	metertest.RunLeases(t, metertest.Shared, leaseOpener(pgmeter.Options{}))
}

// One transaction per op, on many connections: leases contend on the
// org's locks as two origins' would.
func TestLeasesNoGroupCommit(t *testing.T) {
	pgschema.Base(t, what)
	metertest.RunLeases(t, metertest.Shared, leaseOpener(pgmeter.Options{NoGroupCommit: true, MaxConns: 16}))
}

func TestCrashLeases(t *testing.T) {
	dsn := pgschema.ForTest(t, what)
	metertest.CrashLeases(t, "TestHelperProcess", []string{dsnEnv + "=" + dsn}, func(t *testing.T) metertest.LeaseStore {
		return openStore(t, dsn, pgmeter.Options{}).(*pgmeter.Store)
	})
}
