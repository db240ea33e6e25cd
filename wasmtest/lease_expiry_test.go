package wasmtest

import (
	"fmt"
	"testing"
	"time"
)

// TestLeaseLicenceExpiry: a lease never outlasts the licence (renewsAt):
// granted 30 s before it with a TTL of a minute, it is valid 30 s at
// most, and once the clock passes renewsAt the next revalidation through
// the edge is the origin's 403 LICENSE_EXPIRED, not a leased 304 (spec:
// no grace period; issue 19, point 1).
func TestLeaseLicenceExpiry(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startLeaseOrigin(t, "LECTERN_LEASE_TTL=60s")
	midHour(t, o)
	forDeployedBuild(t, func(t *testing.T, b *build) {
		org := "lexpiry-" + b.name
		renews := o.now().Add(30 * time.Second).UTC().Truncate(time.Second)
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`,"renewsAt":"`+renews.Format(time.RFC3339)+`"}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		e := newLeaseEdge(t, b, o, nil)
		target := "/v1/tiers"
		tag, a := e.acquire(t, tok, target)
		if a.ValidMs > 30000 {
			t.Errorf("a lease valid %d ms, past the licence's end 30 s away", a.ValidMs)
		}
		o.advance(t, 31)
		id1 := fmt.Sprintf("lexpiry-%s", b.name)
		viaEdge, leased := e.cond(t, tok, target, tag, "X-Request-Id", id1)
		direct := do(t, o.api, "GET", target, "", "Authorization", "Bearer "+tok, "If-None-Match", tag, "X-Request-Id", id1)
		if direct.status != 403 || direct.code() != "LICENSE_EXPIRED" {
			t.Errorf("directly: %d %s, want 403 LICENSE_EXPIRED", direct.status, direct.code())
		}
		if leased {
			t.Error("a leased 304 after the licence expired")
		}
		compare(t, "after the licence's end", viaEdge, direct)
	})
}
