package wasmtest

import (
	"sync"
	"testing"
	"time"
)

// TestLeaseGrantInFlight: a lease the origin granted whose answer is
// still on its way to the edge when the origin pushes to the edge. The
// edge answers that it does not hold it, and the origin closes it at
// what was reported (docs/edge.md, revoke): the edge must then never use
// it, or a change acknowledged later would not reach it (the origin no
// longer lists the lease to revoke). Both pushes: a revoke (an admin
// change) and a settle (the admin API's read of the organisation, keep);
// after each, the organisation is suspended and the next revalidation
// must be 403 ORG_SUSPENDED.
func TestLeaseGrantInFlight(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startLeaseOrigin(t, "LECTERN_LEASE_TTL=60s")
	midHour(t, o)
	forDeployedBuild(t, func(t *testing.T, b *build) {
		for _, push := range []string{"revoke", "settle"} {
			t.Run(push, func(t *testing.T) {
				org := "lrace-" + push + "-" + b.name
				id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
				tok := o.token(t, id, sec, "content.read")
				e := newLeaseEdge(t, b, o, nil)
				target := "/v1/tiers"
				tag, a := e.acquire(t, tok, target)
				// Uses up to half the lease: its renewal is asked for,
				// granted, and held on its way back.
				h := e.probe.holdNext()
				var once sync.Once
				release := func() { once.Do(func() { close(h.release) }) }
				// Released at the latest before the edge closes: Close waits
				// for its background calls.
				t.Cleanup(release)
				// acquire made the first use.
				for used := int64(2); used <= a.Calls/2; used++ {
					if r, ok := e.cond(t, tok, target, tag); !ok {
						t.Fatalf("use %d: %d, not on the lease", used, r.status)
					}
				}
				select {
				case <-h.held:
				case <-time.After(time.Minute):
					t.Fatalf("no renewal asked for and answered in a minute, after %d uses of %d", a.Calls/2, a.Calls)
				}
				bg := e.host.Stats().Backgrounds
				switch push {
				case "revoke":
					patch(t, o, org, `{"status":"suspended"}`)
				case "settle":
					o.calls(t, org)
				}
				release()
				waitFor(t, "the renewal's answer to reach the module", func() bool { return e.host.Stats().Backgrounds > bg })
				if push == "settle" {
					patch(t, o, org, `{"status":"suspended"}`)
				}
				if r, leased := e.cond(t, tok, target, tag); r.status != 403 || r.code() != "ORG_SUSPENDED" {
					e.mu.Lock()
					t.Errorf("after the %s and the suspension: %d %s (leased %v), want 403 ORG_SUSPENDED; pushes %+v", push, r.status, r.code(), leased, e.pushes)
					e.mu.Unlock()
				}
			})
		}
	})
}
