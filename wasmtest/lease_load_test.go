package wasmtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lectern-api/lectern/worker/wazero"
)

// TestLeaseChangesUnderLoad: clients revalidate without pause through
// three edges (two instances each, leases granted, renewed and reported
// all the while) when the organisation is suspended, reinstated and has
// its grants changed through the admin API. Every request sent after a
// change was acknowledged must see it: 403 ORG_SUSPENDED after a
// suspension; after a grants change, no 304 for the tag of the old
// grants (issue 19: a change applies to the next call after it is
// acknowledged, whatever leases were in flight).
func TestLeaseChangesUnderLoad(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startLeaseOrigin(t)
	forDeployedBuild(t, func(t *testing.T, b *build) {
		org := "lload-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		target := "/v1/tiers"
		var edges []*leaseEdge
		for range 3 {
			edges = append(edges, newLeaseEdge(t, b, o, func(c *wazero.Config) { c.Instances = 2 }))
		}
		grants := []string{allTiers, `["high","middle"]`}
		// tags[g] is /v1/tiers' ETag under grants[g].
		tags := make([]string, len(grants))
		for g := len(grants) - 1; g >= 0; g-- {
			patch(t, o, org, `{"contentGrants":`+grants[g]+`}`)
			tags[g] = do(t, o.api, "GET", target, "", "Authorization", "Bearer "+tok).header.Get("ETag")
		}
		if tags[0] == tags[1] {
			t.Fatalf("the grants do not move the tag %s", tags[0])
		}

		// state is what the last acknowledged change made: the grants in
		// force (index) and whether suspended; seq counts changes. While a
		// change is under way (changing) a request may see either side.
		type state struct {
			grants    int
			suspended bool
			changing  bool
			seq       int
		}
		var cur atomic.Pointer[state]
		cur.Store(&state{})
		var stop atomic.Bool
		var after atomic.Int64 // answers to requests sent after the last change
		var leased atomic.Int64
		var wg sync.WaitGroup
		for i, e := range edges {
			for c := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; !stop.Load(); n++ {
						s := cur.Load() // before the request is sent
						// Revalidate with the tag of the grants in force: a 304
						// is what the origin would answer, unless suspended.
						g := e.probe.gates.Load()
						r, err := send(e.url, "GET", target, "Authorization", "Bearer "+tok, "If-None-Match", tags[s.grants],
							"X-Request-Id", fmt.Sprintf("lload-%s-%d-%d-%06d", b.name, i, c, n))
						if err != nil {
							t.Errorf("edge %d: %v", i, err)
							return
						}
						if r.status == 304 && e.probe.gates.Load() == g {
							leased.Add(1)
						}
						// Judged only when no change began while it was out.
						if s.changing || cur.Load() != s {
							continue
						}
						switch {
						case s.suspended && (r.status != 403 || r.code() != "ORG_SUSPENDED"):
							t.Errorf("edge %d, change %d (suspended): %d %.200s", i, s.seq, r.status, r.body)
						case !s.suspended && r.status != 304:
							t.Errorf("edge %d, change %d (active, grants %d): %d %.200s", i, s.seq, s.grants, r.status, r.body)
						}
						after.Add(1)
					}
				}()
			}
		}
		// Each change once enough answers came after the one before.
		changes := []state{{suspended: true}, {}, {grants: 1}, {grants: 1, suspended: true}, {grants: 1}, {}, {suspended: true}, {}}
		for i, next := range changes {
			waitFor(t, "answers after the last change", func() bool { return after.Load() >= 150 || t.Failed() })
			if t.Failed() {
				break
			}
			status := "active"
			if next.suspended {
				status = "suspended"
			}
			was := *cur.Load()
			cur.Store(&state{grants: was.grants, suspended: was.suspended, changing: true})
			patch(t, o, org, `{"status":"`+status+`","contentGrants":`+grants[next.grants]+`}`)
			next.seq = i + 1
			after.Store(0)
			cur.Store(&next)
		}
		waitFor(t, "answers after the last change", func() bool { return after.Load() >= 150 || t.Failed() })
		stop.Store(true)
		wg.Wait()
		t.Logf("%d changes; %d 304s answered on leases", len(changes), leased.Load())
		if leased.Load() == 0 {
			t.Error("no 304 was answered on a lease: the test tested nothing")
		}
	})
}
