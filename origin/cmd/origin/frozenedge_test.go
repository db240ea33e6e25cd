package main

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/lease/leasetest"
)

// TestAdminWithAFrozenEdge (issue #33, point 3): through the whole origin
// and its admin API, with the edge host that holds the organisation's
// lease frozen (it takes every push and never answers, as a SIGSTOPped
// host does) for twice the lease TTL: every PATCH is answered within the
// TTL + 1 s (before: a 2 s push timeout and a 2 s settle per change,
// 4 s each, for as long as the edge stayed frozen), and those made after
// the lease expired at once; every GET of the organisation and every
// /v1/license within SettleTimeout's 250 ms and some slack (before: 2 s),
// the admin reading saying its meters lack the frozen edge's usage; the
// revocations are counted as waited="push_timeout". On SQLite and
// PostgreSQL.
func TestAdminWithAFrozenEdge(t *testing.T) {
	var stackClock atomic.Pointer[clock.Clock]
	e := leasetest.NewEdge(t, testEdgeKeys, func() time.Time { return stackClock.Load().Now() })
	const ttl = 3 * time.Second
	onBothStoresWith(t, "admin changes with a frozen edge", map[string]string{"LECTERN_EDGE_URLS": e.Base(), "LECTERN_LEASE_TTL": ttl.String()},
		func(t *testing.T, s *testStack) {
			stackClock.Store(s.Clock())
			testAdminWithAFrozenEdge(t, s, e, ttl)
		})
}

func testAdminWithAFrozenEdge(t *testing.T, s *testStack, e *leasetest.Edge, ttl time.Duration) {
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")
	code, a := s.lease(tok, e.URL())
	if code != 200 || a.Calls == 0 {
		t.Fatalf("lease: %d %+v", code, a)
	}
	granted := time.Now()
	expired := granted.Add(time.Duration(a.ValidMs) * time.Millisecond)
	e.Set(a.Lease, 4)
	e.Freeze()
	defer e.Thaw()

	var patches, late, reads, licences []time.Duration
	read := func() {
		began := time.Now()
		c, m := s.admin("GET", "/admin/v1/orgs/acme", "")
		took := time.Since(began)
		if c != 200 {
			t.Fatalf("GET: %d %v", c, m)
		}
		reads = append(reads, took)
		meters := m["meters"].(map[string]any)
		if meters["settled"] != false || meters["unreported"] != float64(a.Calls) {
			t.Errorf("the admin reading with the edge frozen: settled %v, unreported %v; want false and the lease's %d calls",
				meters["settled"], meters["unreported"], a.Calls)
		}

		began = time.Now()
		if r := s.get("GET", "/v1/license", tok); r.status != 200 {
			t.Fatalf("/v1/license: %d %s", r.status, r.body)
		}
		licences = append(licences, time.Since(began))
	}
	// Before any push timed out: each reading's push goes unanswered.
	read()
	for n := 0; time.Since(granted) < 2*ttl; n++ {
		began := time.Now()
		if c, m := s.admin("PATCH", "/admin/v1/orgs/acme", fmt.Sprintf(`{"orgName":"Acme %d"}`, n)); c != 200 {
			t.Fatalf("PATCH: %d %v", c, m)
		}
		took := time.Since(began)
		patches = append(patches, took)
		if began.After(expired) {
			late = append(late, took)
		}
		if took > ttl+1500*time.Millisecond {
			t.Errorf("a PATCH begun %s after the grant took %s with the edge frozen, want at most the TTL %s + 1 s",
				began.Sub(granted).Round(time.Millisecond), took.Round(time.Millisecond), ttl)
		}

		read()
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("edge frozen %s (TTL %s): %d PATCHes, slowest %s, %d begun after the lease expired, slowest of those %s; GET org p50 %s max %s; /v1/license p50 %s max %s",
		time.Since(granted).Round(time.Millisecond), ttl, len(patches), slowest(patches), len(late), slowest(late),
		median(reads), slowest(reads), median(licences), slowest(licences))
	if len(late) < 3 {
		t.Errorf("only %d PATCHes after the frozen edge's lease expired, want several", len(late))
	}
	// Generous bounds for a noisy machine, each under what the old
	// behaviour took: a 4 s PATCH, a 2 s reading.
	if got := slowest(late); got > time.Second {
		t.Errorf("a PATCH after the frozen edge's lease expired took %s, want no wait for it", got)
	}
	if got := slowest(reads); got > time.Second {
		t.Errorf("a GET of the organisation took %s with the edge frozen, want about 250 ms at most", got)
	}
	if got := slowest(licences); got > time.Second {
		t.Errorf("a GET /v1/license took %s with the edge frozen, want about 250 ms at most", got)
	}
	if m := metric(t, s, `lectern_lease_revoke_duration_seconds_count{waited="push_timeout"}`); m < 1 {
		t.Errorf("no revocation counted as waited=push_timeout")
	}
}

func slowest(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds).Round(time.Millisecond)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2].Round(time.Millisecond)
}
