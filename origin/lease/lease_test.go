package lease_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/lease/leasetest"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/edgesig"
	wire "github.com/lectern-api/lectern/shared/lease"
)

var edgeKeys = edgesig.KeysOf([]byte("a-test-secret-of-at-least-32-characters"))

// day is a time well inside an hour and a month.
var day = time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)

func n(v int64) *int64 { return &v }

func acme(mod func(*store.Org)) *store.Org {
	o := &store.Org{ID: "acme", Status: "active", RenewsAt: day.AddDate(1, 0, 0)}
	if mod != nil {
		mod(o)
	}
	return o
}

// grant asks m for a lease of o at now, reading the epoch first as
// Manager.Lease does.
func grant(t *testing.T, m *lease.Manager, o *store.Org, want int64, url string, now time.Time) lease.Grant {
	t.Helper()
	ep, err := m.Epoch(context.Background(), meter.Key(o))
	if err != nil {
		t.Fatal(err)
	}
	g, err := m.Grant(context.Background(), lease.Ask{Org: o, Epoch: ep, Want: want, RevokeURL: url, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func calls(t *testing.T, s meter.Store, org string, at time.Time) int64 {
	t.Helper()
	u, err := s.Usage(context.Background(), org, at)
	if err != nil {
		t.Fatal(err)
	}
	return u.Get(meter.MonthCalls)
}

// docs/edge.md, Leases: the block is Want, at most a quarter of what is
// left under each limit, none under the floor; the validity is the TTL
// cut at the next hour, the next month and the licence's expiry, none
// under 100 ms; no lease when leases are off, the epoch moved or the
// alarm is in force.
func TestGrant(t *testing.T) { eachBackend(t, testGrant) }

func testGrant(t *testing.T, s leaseStore) {
	m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, TTL: 5 * time.Second})
	for _, c := range []struct {
		name  string
		org   *store.Org
		want  int64
		now   time.Time
		calls int64
		valid time.Duration
	}{
		{"no cap", acme(nil), 64, day, 64, 5 * time.Second},
		{"want above the largest block", acme(nil), 5000, day, wire.MaxCalls, 5 * time.Second},
		{"a quarter of the quota", acme(func(o *store.Org) { o.Quota.Calls = n(100) }), 64, day, 25, 5 * time.Second},
		{"a quarter of the hourly cap", acme(func(o *store.Org) { o.RateLimits.CallsPerHour = n(40) }), 64, day, 10, 5 * time.Second},
		{"under the floor near the quota", acme(func(o *store.Org) { o.Quota.Calls = n(31) }), 64, day, 0, 0},
		{"at the hour", acme(nil), 8, day.Truncate(time.Hour).Add(time.Hour - 2*time.Second), 8, 2 * time.Second},
		{"at the month", acme(nil), 8, time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC), 8, time.Second},
		{"at the licence's expiry", acme(func(o *store.Org) { o.RenewsAt = day.Add(1500 * time.Millisecond) }), 8, day, 8, 1500 * time.Millisecond},
		{"under 100 ms", acme(func(o *store.Org) { o.RenewsAt = day.Add(99 * time.Millisecond) }), 8, day, 0, 0},
		{"expired", acme(func(o *store.Org) { o.RenewsAt = day.Add(-time.Second) }), 8, day, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.org.ID = "org-" + c.name // its own meters and leases
			g := grant(t, m, c.org, c.want, "", c.now)
			if g.Calls != c.calls || g.Valid != c.valid {
				t.Fatalf("got %d calls for %v, want %d for %v", g.Calls, g.Valid, c.calls, c.valid)
			}
			if c.calls == 0 && g.Retry < time.Second {
				t.Errorf("no lease, retry after %v", g.Retry)
			}
			if c.calls > 0 && (len(g.ID) != 32 || !wire.ValidID(g.ID)) {
				t.Errorf("lease id %q: want 128 bits in hex", g.ID)
			}
			if c.calls > 0 {
				l := recorded(t, s, c.org.ID, g.ID)
				if !l.Expires.Equal(c.now.Add(c.valid)) || !l.Settle.Equal(l.Expires.Add(lease.SettleGrace)) {
					t.Errorf("recorded %+v", l)
				}
			}
		})
	}

	t.Run("a second lease shares what is left", func(t *testing.T) {
		o := acme(func(o *store.Org) { o.ID, o.Quota.Calls = "shared", n(100) })
		if g := grant(t, m, o, 64, "", day); g.Calls != 25 {
			t.Fatalf("first: %d", g.Calls)
		}
		if g := grant(t, m, o, 64, "", day); g.Calls != 18 { // (100 - 25) / 4
			t.Errorf("second: %d, want 18", g.Calls)
		}
	})
	t.Run("off", func(t *testing.T) {
		off := lease.New(lease.Config{Store: s, Off: true})
		if g := grant(t, off, acme(nil), 8, "", day); g.Calls != 0 || g.Retry != lease.RetryOff {
			t.Errorf("leases off: %+v", g)
		}
	})
	t.Run("stale epoch", func(t *testing.T) {
		o := acme(func(o *store.Org) { o.ID = "stale" })
		g, err := m.Grant(context.Background(), lease.Ask{Org: o, Epoch: -1, Want: 8, Now: day})
		if err != nil || g.Calls != 0 {
			t.Errorf("a moved epoch granted %+v %v", g, err)
		}
	})
	t.Run("alarm", func(t *testing.T) {
		o := acme(func(o *store.Org) { o.ID = "alarmed" })
		if _, err := s.Apply(context.Background(), meter.Op{Org: o.ID, Now: day, Read: &meter.Read{Lesson: "a/b/1", Granted: 1}}); err != nil {
			t.Fatal(err)
		}
		if g := grant(t, m, o, 8, "", day); g.Calls != 0 {
			t.Errorf("the alarm in force granted %d", g.Calls)
		}
	})
}

// Reports are cumulative: what is above the recorded usage is billed in
// the lease's own month, once; a duplicate or a lower one changes
// nothing; a report past the block bills the block.
func TestReportIdempotent(t *testing.T) { eachBackend(t, testReportIdempotent) }

func testReportIdempotent(t *testing.T, s leaseStore) {
	m := lease.New(lease.Config{Store: s, Now: func() time.Time { return day }})
	g := grant(t, m, acme(nil), 16, "", day)
	for _, rs := range [][]wire.Report{
		{{Lease: g.ID, Used: 5}},
		{{Lease: g.ID, Used: 5}},
		{{Lease: g.ID, Used: 3}},
		{{Lease: g.ID, Used: 9}, {Lease: "unknown", Used: 4}},
	} {
		if err := m.Report(context.Background(), rs); err != nil {
			t.Fatal(err)
		}
	}
	if got := calls(t, s, "acme", day); got != 9 {
		t.Errorf("billed %d, want 9", got)
	}
	if err := m.Report(context.Background(), []wire.Report{{Lease: g.ID, Used: 99, Final: true}}); err != nil {
		t.Fatal(err)
	}
	if got := calls(t, s, "acme", day); got != 16 {
		t.Errorf("billed %d after a report past the block, want 16", got)
	}
}

// docs/edge.md, Leases: Revoke bumps the epoch, pushes a signed revoke to
// the lease's edge host, applies the usage it answers as final and
// closes a lease the host does not hold at its recorded usage.
func TestRevokePushes(t *testing.T) { eachBackend(t, testRevokePushes) }

func testRevokePushes(t *testing.T, s leaseStore) {
	clk := func() time.Time { return day }
	e := leasetest.NewEdge(t, edgeKeys, clk)
	m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, Now: clk, Edges: []string{e.Base()}})
	o := acme(nil)
	held := grant(t, m, o, 16, e.URL(), day)
	gone := grant(t, m, o, 16, e.URL(), day)
	e.Set(held.ID, 7)
	if err := m.Report(context.Background(), []wire.Report{{Lease: gone.ID, Used: 2}}); err != nil {
		t.Fatal(err)
	}
	before, _ := m.Epoch(context.Background(), "acme")
	if err := m.Revoke(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	if after, _ := m.Epoch(context.Background(), "acme"); after == before {
		t.Error("the epoch did not move")
	}
	if ps := e.Pushes(); len(ps) != 1 || ps[0].Keep || len(ps[0].Leases) != 2 {
		t.Errorf("pushes %+v, want one of both leases, not keep", ps)
	}
	open, _ := s.OpenLeases(context.Background(), "acme", day)
	if len(open) != 0 {
		t.Errorf("open after the revoke: %+v", open)
	}
	if got := calls(t, s, "acme", day); got != 9 {
		t.Errorf("billed %d, want 7 + 2", got)
	}
	// A lease granted on the epoch read before the revoke is refused.
	if g, _ := m.Grant(context.Background(), lease.Ask{Org: o, Epoch: before, Want: 8, Now: day}); g.Calls != 0 {
		t.Errorf("a grant on the old epoch: %+v", g)
	}
}

// A lease no push reaches (no revoke URL, a host that fails, a redirect,
// which is never followed) is waited for: Revoke returns only once the
// origin's clock has passed its expiry.
func TestRevokeWaitsForExpiry(t *testing.T) {
	var redirected atomic.Int64
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { redirected.Add(1) }))
	t.Cleanup(elsewhere.Close)
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL+wire.RevokePath, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	for _, c := range []struct {
		name string
		url  func(e *leasetest.Edge) string
	}{
		{"no push", func(*leasetest.Edge) string { return "" }},
		{"a failed push", func(e *leasetest.Edge) string { e.Fail(500); return e.URL() }},
		{"a redirect", func(*leasetest.Edge) string { return redirect.URL + wire.RevokePath }},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachBackend(t, func(t *testing.T, s leaseStore) {
				e := leasetest.NewEdge(t, edgeKeys, time.Now)
				var revokes []string // OnRevoke's waited, the metric's label
				m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, TTL: 200 * time.Millisecond,
					Edges:    []string{e.Base(), redirect.URL},
					OnRevoke: func(_ time.Duration, waited string) { revokes = append(revokes, waited) }})
				g := grant(t, m, acme(nil), 8, c.url(e), time.Now())
				l := recorded(t, s, "acme", g.ID)
				if err := m.Revoke(context.Background(), "acme"); err != nil {
					t.Fatal(err)
				}
				if now := time.Now(); now.Before(l.Expires) {
					t.Errorf("Revoke returned at %v, before the lease's expiry %v", now, l.Expires)
				}
				if len(revokes) != 1 || revokes[0] != lease.WaitedExpiry {
					t.Errorf("OnRevoke told %q, want one revocation that waited for expiry", revokes)
				}
			})
		})
	}
	if redirected.Load() != 0 {
		t.Errorf("a redirect was followed %d times", redirected.Load())
	}
}

// Settle collects the edges' usage and keeps the leases open; Recall
// takes them back, waiting for those no push reaches until their
// reservation ends.
func TestSettleAndRecall(t *testing.T) { eachBackend(t, testSettleAndRecall) }

func testSettleAndRecall(t *testing.T, s leaseStore) {
	e := leasetest.NewEdge(t, edgeKeys, time.Now)
	m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, TTL: 200 * time.Millisecond, Edges: []string{e.Base()}})
	now := time.Now()
	g := grant(t, m, acme(nil), 16, e.URL(), now)
	e.Set(g.ID, 4)
	m.Settle(context.Background(), "acme", 0)
	if got := calls(t, s, "acme", now); got != 4 {
		t.Errorf("settle billed %d, want 4", got)
	}
	if open, _ := s.OpenLeases(context.Background(), "acme", now); len(open) != 1 || !e.Pushes()[0].Keep {
		t.Fatalf("after a settle: open %+v, pushes %+v", open, e.Pushes())
	}
	e.Set(g.ID, 6)
	quiet := grant(t, m, acme(nil), 8, "", now)
	ql := recorded(t, s, "acme", quiet.ID)
	m.Recall(context.Background(), "acme")
	if got := calls(t, s, "acme", now); got != 6 {
		t.Errorf("recall billed %d, want 6", got)
	}
	if time.Now().Before(ql.Settle) {
		t.Errorf("Recall returned before the reservation of a lease without a push ended (%v)", ql.Settle)
	}
	if open, _ := s.OpenLeases(context.Background(), "acme", now); len(open) != 1 || open[0].ID != quiet.ID {
		t.Errorf("after the recall: open %+v, want only the lease without a push", open)
	}
}

// TestRecallPastTheGrace: a lease whose host was killed before it used
// it (no use in its usage log, so no replay reports it) reserves its
// block until its host answers for it. A recall after the lease's grace
// pushes to the host, running again, which does not hold it: the lease
// is closed at what was recorded, and the call refused for its
// reservation passes (wasmtest's TestLeaseKillPastGrace: a 429 with 21
// calls of the quota left).
func TestRecallPastTheGrace(t *testing.T) { eachBackend(t, testRecallPastTheGrace) }

func testRecallPastTheGrace(t *testing.T, s leaseStore) {
	e := leasetest.NewEdge(t, edgeKeys, time.Now)
	m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, TTL: 200 * time.Millisecond, Edges: []string{e.Base()}})
	// Granted, and over, longer than SettleGrace ago.
	g := grant(t, m, acme(func(o *store.Org) { o.Quota.Calls = n(40) }), 64, e.URL(), time.Now().Add(-3*lease.SettleGrace))
	if g.Calls != 10 {
		t.Fatalf("granted %d calls, want 10", g.Calls)
	}
	if got := direct(t, s, "acme", 50); got != 30 {
		t.Fatalf("%d direct calls passed with the lease's block reserved, want 30", got)
	}
	m.Recall(context.Background(), "acme")
	if ps := e.Pushes(); len(ps) != 1 || len(ps[0].Leases) != 1 || ps[0].Leases[0] != g.ID || ps[0].Keep {
		t.Errorf("the recall pushed %+v, want one revoke of the lease past its grace", ps)
	}
	if open, _ := s.OpenLeases(context.Background(), "acme", time.Now()); len(open) != 0 {
		t.Errorf("after the recall: open %+v, want none", open)
	}
	if got := direct(t, s, "acme", 50); got != 10 {
		t.Errorf("after the recall: %d direct calls passed, want the 10 the lease reserved", got)
	}
}

// The admin change is acknowledged only after the push was answered:
// Revoke does not return while the edge host holds its answer.
func TestRevokeWaitsForThePush(t *testing.T) { eachBackend(t, testRevokeWaitsForThePush) }

func testRevokeWaitsForThePush(t *testing.T, s leaseStore) {
	e := leasetest.NewEdge(t, edgeKeys, time.Now)
	m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, Edges: []string{e.Base()}})
	arrived := e.Hold()
	g := grant(t, m, acme(nil), 8, e.URL(), time.Now())
	e.Set(g.ID, 1)
	done := make(chan error, 1)
	go func() { done <- m.Revoke(context.Background(), "acme") }()
	<-arrived
	select {
	case err := <-done:
		t.Fatalf("Revoke returned (%v) while the push was unanswered", err)
	default:
	}
	e.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if ps := e.Pushes(); len(ps) != 1 {
		t.Errorf("pushes %+v, want one", ps)
	}
}

// Concurrent recalls of one organisation share one round of pushes, and
// each returns once it has ended.
func TestRecallsShareOneRound(t *testing.T) { eachBackend(t, testRecallsShareOneRound) }

func testRecallsShareOneRound(t *testing.T, s leaseStore) {
	e := leasetest.NewEdge(t, edgeKeys, time.Now)
	m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, Edges: []string{e.Base()}})
	arrived := e.Hold()
	g := grant(t, m, acme(nil), 8, e.URL(), time.Now())
	e.Set(g.ID, 3)
	done := make(chan struct{}, 3)
	for range 3 {
		go func() { m.Recall(context.Background(), "acme"); done <- struct{}{} }()
	}
	<-arrived
	select {
	case <-done:
		t.Fatal("a recall returned while the push was unanswered")
	default:
	}
	e.Release()
	for range 3 {
		<-done
	}
	if ps := e.Pushes(); len(ps) != 1 {
		t.Errorf("%d pushes, want one", len(ps))
	}
	if got := calls(t, s, "acme", time.Now()); got != 3 {
		t.Errorf("billed %d, want 3", got)
	}
}

// TestLoggedLeaseReservesUntilItsFinalReport: a lease granted to a host
// that takes pushes (a revoke URL: a host with a usage log) reserves its
// block past its expiry until its final report, so an edge that died
// with uses unreported and reports them at its next start is billed
// within the quota; a lease of a host without a log stops reserving
// SettleGrace after its expiry.
func TestLoggedLeaseReservesUntilItsFinalReport(t *testing.T) {
	eachBackend(t, testLoggedLeaseReserves)
}

func testLoggedLeaseReserves(t *testing.T, s leaseStore) {
	quota := func(o *store.Org) { o.Quota.Calls = n(40) }
	later := day.Add(time.Minute) // past every lease's expiry and grace
	direct := func(org string) (passed int64) {
		for range 50 {
			res, err := s.Apply(context.Background(), meter.Op{Org: org, Now: later,
				Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1, Limit: n(40)}}}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Refused == nil {
				passed++
			}
		}
		return passed
	}
	now := day
	m := lease.New(lease.Config{Store: s, Now: func() time.Time { return now }})

	logged := acme(quota)
	g := grant(t, m, logged, 8, "http://127.0.0.1:1/internal/revoke", day)
	if g.Calls != 8 {
		t.Fatalf("granted %d calls, want 8", g.Calls)
	}
	if got := direct("acme"); got != 32 {
		t.Errorf("with a logged lease unreported: %d direct calls passed, want 32", got)
	}
	now = later // the report comes after the lease's expiry and grace
	if err := m.Report(context.Background(), []wire.Report{{Lease: g.ID, Used: 8, Final: true}}); err != nil {
		t.Fatal(err)
	}
	if got := calls(t, s, "acme", later); got != 40 {
		t.Errorf("after the late final report: billed %d, want 40 (the quota, every use billed)", got)
	}

	now = day
	unlogged := acme(func(o *store.Org) { quota(o); o.ID = "globex" })
	g = grant(t, m, unlogged, 8, "", day)
	if got := direct("globex"); got != 40 {
		t.Errorf("with an unlogged lease past its grace: %d direct calls passed, want 40", got)
	}
}

// TestPruneKeepsRetention: Prune deletes what ended more than the
// retention ago on the manager's clock, and StartPruning prunes at once.
func TestPruneKeepsRetention(t *testing.T) {
	eachBackend(t, func(t *testing.T, s leaseStore) {
		t0 := day
		now := t0
		clk := func() time.Time { return now }
		m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, Now: clk, Retention: 2 * time.Hour})
		g, err := s.GrantLease(t.Context(), meter.LeaseGrant{Org: "acme", Now: t0, ID: "L1", Want: 16, Floor: 8, Share: 4,
			Expires: t0.Add(5 * time.Second), Settle: t0.Add(7 * time.Second)})
		if err != nil || g.Calls != 16 {
			t.Fatalf("grant: %+v, %v", g, err)
		}
		now = t0.Add(2*time.Hour + 6*time.Second) // 2 h after its validity, not after its settle
		if n, err := m.Prune(t.Context()); err != nil || n != 0 {
			t.Errorf("prune before the retention passed: %d, %v; want 0", n, err)
		}
		if ls, _ := s.OpenLeases(t.Context(), "", t0); len(ls) != 1 {
			t.Fatalf("leases held at t0: %+v, want L1", ls)
		}
		now = t0.Add(2*time.Hour + 8*time.Second)
		stop := m.StartPruning()
		defer stop()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if ls, _ := s.OpenLeases(t.Context(), "", t0); len(ls) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("StartPruning did not prune L1 within 10 s")
			}
		}
	})
}

// TestSettleWithinBound (issue #28, point 2; #33): a frozen edge (its
// push held, unanswered) does not hold up a settle beyond the bound it is
// given (lease.SettleTimeout, GET /v1/license's and the admin reading's),
// and the settle says what its reading lacks: that edge's lease, at most
// its block less what was reported. The push goes on: its answer, when it
// comes, is applied. A revocation whose push reached every lease tells
// OnRevoke it waited for the push.
func TestSettleWithinBound(t *testing.T) {
	eachBackend(t, func(t *testing.T, s leaseStore) {
		e := leasetest.NewEdge(t, edgeKeys, time.Now)
		var revokes []string
		m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, Edges: []string{e.Base()},
			OnRevoke: func(_ time.Duration, waited string) { revokes = append(revokes, waited) }})
		g := grant(t, m, acme(nil), 8, e.URL(), time.Now())
		if err := m.Report(context.Background(), []wire.Report{{Lease: g.ID, Used: 1}}); err != nil {
			t.Fatal(err)
		}
		e.Set(g.ID, 3)
		arrived := e.Hold()
		began := time.Now()
		u := m.Settle(context.Background(), "acme", lease.SettleTimeout)
		took := time.Since(began)
		<-arrived
		// The push was held throughout; the settle ended at its bound
		// (250 ms), not at the push's (2 s).
		if took > lease.PushTimeout/2 {
			t.Errorf("a settle bound at %s took %s with the edge frozen", lease.SettleTimeout, took)
		}
		if want := (lease.Unsettled{Leases: 1, Calls: 7}); u != want || u.Settled() {
			t.Errorf("the settle left %+v unsettled, want %+v", u, want)
		}
		if got := calls(t, s, "acme", time.Now()); got != 1 {
			t.Errorf("billed %d after a settle the edge did not answer, want 1 (its 3 uses are reported later)", got)
		}
		e.Release() // the held push is answered now, and applied
		waitFor(t, "the late answer of the settle's push billed", func() bool { return calls(t, s, "acme", time.Now()) == 3 })
		if u := m.Settle(context.Background(), "acme", lease.SettleTimeout); !u.Settled() {
			t.Errorf("a settle the edge answered left %+v", u)
		}
		e.Set(g.ID, 4)
		if err := m.Revoke(context.Background(), "acme"); err != nil {
			t.Fatal(err)
		}
		if got := calls(t, s, "acme", time.Now()); got != 4 {
			t.Errorf("billed %d after the revoke's push, want 4", got)
		}
		if len(revokes) != 1 || revokes[0] != lease.WaitedPush {
			t.Errorf("OnRevoke told %q, want one revocation that waited for the push", revokes)
		}
	})
}

// waitFor polls cond every 10 ms for at most 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
	}
}
