package lease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/lease/leasetest"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	wire "github.com/lectern-api/lectern/shared/lease"
)

// The tests of issue #33, point 3: an edge host that never answers (a
// SIGSTOPped one: leasetest.Edge.Freeze) costs an admin change at most
// the lease TTL + 1 s, however long it stays frozen and however many
// changes are made, and a reading nothing past its bound.

// revokes records OnRevoke's labels.
type revokes struct {
	mu     sync.Mutex
	waited []string
}

func (r *revokes) add(_ time.Duration, waited string) {
	r.mu.Lock()
	r.waited = append(r.waited, waited)
	r.mu.Unlock()
}

func (r *revokes) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.waited) == 0 {
		return ""
	}
	return r.waited[len(r.waited)-1]
}

// TestLeaseOverAtItsExpiry: a lease whose edge host never answers is over
// at its validity's end: a change waits for it until then and not after
// (no push, no wait), a reading does not wait for it once its host went
// silent; its block stays reserved until the host reports it, so the
// uses it reports late, after the lease ended, are billed exactly and the
// quota is never exceeded.
func TestLeaseOverAtItsExpiry(t *testing.T) { eachBackend(t, testLeaseOverAtItsExpiry) }

func testLeaseOverAtItsExpiry(t *testing.T, s leaseStore) {
	const ttl = 400 * time.Millisecond
	e := leasetest.NewEdge(t, edgeKeys, time.Now)
	var rv revokes
	m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, TTL: ttl, Edges: []string{e.Base()}, OnRevoke: rv.add})
	o := acme(func(o *store.Org) { o.Quota.Calls = n(40) })
	g := grant(t, m, o, 8, e.URL(), time.Now())
	if g.Calls != 8 {
		t.Fatalf("granted %d calls, want 8", g.Calls)
	}
	l := recorded(t, s, "acme", g.ID)
	e.Freeze()

	// While the lease serves, a change waits for it to expire, no longer.
	began := time.Now()
	if err := m.Revoke(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if time.Now().Before(l.Expires) {
		t.Errorf("Revoke returned before the lease's expiry, with its edge frozen")
	}
	if took > ttl+time.Second {
		t.Errorf("Revoke took %s with the edge frozen, want at most the TTL %s + 1 s", took, ttl)
	}
	if got := rv.last(); got != lease.WaitedPushTimeout {
		t.Errorf("OnRevoke told %q, want %q", got, lease.WaitedPushTimeout)
	}

	// Once it expired, a change neither pushes to it nor waits for it.
	received := e.Received()
	began = time.Now()
	if err := m.Revoke(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 200*time.Millisecond {
		t.Errorf("a change after the frozen edge's lease expired took %s, want none of the push's %s", took, lease.PushTimeout)
	}
	if got := rv.last(); got != lease.WaitedPush {
		t.Errorf("OnRevoke told %q for a change with no lease serving, want %q", got, lease.WaitedPush)
	}
	if e.Received() != received {
		t.Errorf("a change pushed to a lease that had expired")
	}

	// Nor does a reading once the push went unanswered (the host is
	// silent), and it says what it lacks: the whole block, unreported.
	waitFor(t, "the first push timed out", func() bool { return time.Since(l.Expires) > lease.PushTimeout })
	began = time.Now()
	u := m.Settle(context.Background(), "acme", lease.SettleTimeout)
	if took := time.Since(began); took > lease.SettleTimeout/2 {
		t.Errorf("a settle with the edge silent took %s", took)
	}
	if want := (lease.Unsettled{Leases: 1, Calls: 8}); u != want {
		t.Errorf("the settle left %+v unsettled, want %+v", u, want)
	}

	// The block stays reserved: 32 direct calls pass, not 40.
	if got := direct(t, s, "acme", 50); got != 32 {
		t.Errorf("with the frozen edge's lease unreported: %d direct calls passed, want 32", got)
	}
	// The edge runs again and reports the 8 uses it answered: billed
	// exactly, and the quota is met, not exceeded.
	e.Thaw()
	if err := m.Report(context.Background(), []wire.Report{{Lease: g.ID, Used: 8, Final: true}}); err != nil {
		t.Fatal(err)
	}
	if got := calls(t, s, "acme", time.Now()); got != 40 {
		t.Errorf("after the late final report: billed %d, want 40 (32 direct + the 8 uses)", got)
	}
	if got := direct(t, s, "acme", 5); got != 0 {
		t.Errorf("%d calls passed past the quota", got)
	}
	if u := m.Settle(context.Background(), "acme", lease.SettleTimeout); !u.Settled() {
		t.Errorf("after the final report the reading left %+v unsettled", u)
	}
}

// direct applies up to k calls of org's quota (40) now and returns how
// many passed.
func direct(t *testing.T, s meter.Store, org string, k int) (passed int) {
	t.Helper()
	for range k {
		res, err := s.Apply(context.Background(), meter.Op{Org: org, Now: time.Now(),
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

// TestChangesDuringAFrozenEdge: changes made back to back by three
// operators for twice the TTL while an edge host is frozen each take at
// most the TTL + 1 s; those made after its lease expired take no push
// timeout (2 s each before #33: a frozen edge's leases were pushed to
// until the month ended); no push is sent once one went unanswered;
// and an edge host that asks for a lease again is pushed to again.
func TestChangesDuringAFrozenEdge(t *testing.T) { eachBackend(t, testChangesDuringAFrozenEdge) }

func testChangesDuringAFrozenEdge(t *testing.T, s leaseStore) {
	// Longer than the push timeout, so that a push times out while its
	// lease still serves.
	const ttl = lease.PushTimeout + time.Second
	e := leasetest.NewEdge(t, edgeKeys, time.Now)
	var rv revokes
	m := lease.New(lease.Config{Store: s, EdgeKeys: edgeKeys, TTL: ttl, Edges: []string{e.Base()}, OnRevoke: rv.add})
	g := grant(t, m, acme(nil), 64, e.URL(), time.Now())
	l := recorded(t, s, "acme", g.ID)
	e.Freeze()

	type change struct {
		began time.Time
		took  time.Duration
	}
	var mu sync.Mutex
	var changes []change
	var wg sync.WaitGroup
	until := l.Expires.Add(ttl)
	for range 3 {
		wg.Go(func() {
			for time.Now().Before(until) {
				began := time.Now()
				if err := m.Revoke(context.Background(), "acme"); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				changes = append(changes, change{began, time.Since(began)})
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	// Once the first push timed out the host is silent: no push after.
	waitFor(t, "the first push timed out", func() bool { return time.Since(l.Expires.Add(-ttl)) > lease.PushTimeout+200*time.Millisecond })
	silent := e.Received()
	wg.Wait()

	var after, slowAfter int
	var total time.Duration
	for _, c := range changes {
		total += c.took
		if c.took > ttl+time.Second {
			t.Errorf("a change begun %s after the grant took %s, want at most the TTL %s + 1 s",
				c.began.Sub(l.Expires.Add(-ttl)).Round(time.Millisecond), c.took.Round(time.Millisecond), ttl)
		}
		if c.began.After(l.Expires) {
			after++
			if c.took > 500*time.Millisecond {
				slowAfter++
			}
		}
	}
	t.Logf("%d changes in %s with the edge frozen (TTL %s), %s waited in all; %d begun after the lease expired, %d of them over 500 ms; %d pushes sent",
		len(changes), time.Since(l.Expires.Add(-ttl)).Round(time.Millisecond), ttl, total.Round(time.Millisecond), after, slowAfter, e.Received())
	if after < 10 {
		t.Errorf("only %d changes after the lease expired (each took too long?)", after)
	}
	if slowAfter > 0 {
		t.Errorf("%d of the %d changes begun after the frozen edge's lease expired took over 500 ms", slowAfter, after)
	}
	if got := e.Received(); got != silent {
		t.Errorf("%d pushes sent to the frozen host after one timed out", got-silent)
	}

	// The host runs again and asks for a lease: it is pushed to again,
	// and a change takes its push, not the lease's expiry.
	e.Thaw()
	g = grant(t, m, acme(nil), 64, e.URL(), time.Now())
	e.Set(g.ID, 5)
	began := time.Now()
	if err := m.Revoke(context.Background(), "acme"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > ttl/2 {
		t.Errorf("a change after the edge ran again took %s", took)
	}
	if got := rv.last(); got != lease.WaitedPush || e.Holds(g.ID) {
		t.Errorf("after the edge ran again: OnRevoke told %q, the edge holds the lease %v; want %q and not", got, e.Holds(g.ID), lease.WaitedPush)
	}
	if got := calls(t, s, "acme", time.Now()); got != 5 {
		t.Errorf("billed %d, want the 5 uses the push answered", got)
	}
}
