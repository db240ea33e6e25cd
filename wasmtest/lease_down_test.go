package wasmtest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLeaseOriginDown: with the origin down (its process killed), the
// edge answers revalidations on the leases it holds until each ends, by
// its calls (the renewal it asks for fails) or by its validity (the
// edge's clock moved past it); then it answers as the edge without
// leases does, byte for byte: 500 INTERNAL, the origin could not be
// reached (issue 19: an origin that is down).
func TestLeaseOriginDown(t *testing.T) {
	forDeployedBuild(t, func(t *testing.T, b *build) {
		o := startLeaseOrigin(t, "LECTERN_LEASE_TTL=60s")
		midHour(t, o)
		e, g := newLeaseEdge(t, b, o, nil), gatedEdge(t, b, o)
		toks := map[string]string{}
		for _, org := range []string{"calls", "clock"} {
			id, sec := o.org(t, `{"orgId":"ldown-`+org+`","contentGrants":`+allTiers+`}`, "content.read")
			toks[org] = o.token(t, id, sec, "content.read")
		}
		target := "/v1/tiers"
		tags := map[string]string{}
		for _, org := range []string{"calls", "clock"} {
			if r := do(t, g.url, "GET", target, "", "Authorization", "Bearer "+toks[org]); r.status != 200 {
				t.Fatalf("through the leases-off edge: %d", r.status)
			}
		}
		// acquire answers one 304 on the lease it returns, the lease's
		// first use: a renewal is asked for only at half its calls.
		var calls int64
		for _, org := range []string{"calls", "clock"} {
			tag, a := e.acquire(t, toks[org], target)
			tags[org] = tag
			if org == "calls" {
				calls = a.Calls
			}
		}
		if calls < 2 {
			t.Fatalf("the lease has %d calls", calls)
		}
		o.stop()

		n := 0
		bothEdges := func(org string) (leased answer, wasLeased bool, gated answer) {
			t.Helper()
			n++
			id := fmt.Sprintf("ldown-%s-%03d", b.name, n)
			leased, wasLeased = e.cond(t, toks[org], target, tags[org], "X-Request-Id", id)
			gated = do(t, g.url, "GET", target, "", "Authorization", "Bearer "+toks[org], "If-None-Match", tags[org], "X-Request-Id", id)
			return leased, wasLeased, gated
		}
		today := func(name string, leased, gated answer) {
			t.Helper()
			if gated.status != 500 || gated.code() != "INTERNAL" || !strings.Contains(string(gated.body), "could not be reached") {
				t.Errorf("%s: the edge without leases answered %d %.300s, want 500 INTERNAL, could not be reached", name, gated.status, gated.body)
			}
			compare(t, name, leased, gated)
		}

		// By its calls: the lease's calls, less its first use, then as today.
		for i := int64(1); i < calls; i++ {
			if r, ok, _ := bothEdges("calls"); !ok {
				t.Fatalf("use %d of %d with the origin down: %d %.300s, want a leased 304", i+1, calls, r.status, r.body)
			}
		}
		leased, ok, gated := bothEdges("calls")
		if ok {
			t.Fatalf("a 304 past the lease's %d calls", calls)
		}
		today("past the lease's calls", leased, gated)

		// By its validity: one more use, then the edge's clock past it.
		if r, ok, _ := bothEdges("clock"); !ok {
			t.Fatalf("with the origin down: %d %.300s, want a leased 304", r.status, r.body)
		}
		a, _ := e.probe.last()
		o.offset.Add(int64(time.Duration(a.ValidMs)*time.Millisecond + time.Second))
		leased, ok, gated = bothEdges("clock")
		if ok {
			t.Fatal("a 304 past the lease's validity")
		}
		today("past the lease's validity", leased, gated)
	})
}
