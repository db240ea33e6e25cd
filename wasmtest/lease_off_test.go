package wasmtest

import (
	"fmt"
	"testing"
)

// TestLeasesOffAtOrigin: with LECTERN_LEASES=off at the origin, an edge
// with leases on is refused a lease (calls 0, a retry of at least a
// second), gates every revalidation as the edge of today does, and does
// not ask again before the retry (issue 19, point 1: a setting turns
// leases off).
func TestLeasesOffAtOrigin(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startLeaseOrigin(t, "LECTERN_LEASES=off")
	forDeployedBuild(t, func(t *testing.T, b *build) {
		org := "loff-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`,"quota":{"calls":1000}}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		e := newLeaseEdge(t, b, o, nil)
		target := "/v1/tiers"
		first := do(t, e.url, "GET", target, "", "Authorization", "Bearer "+tok)
		tag := first.header.Get("ETag")
		const n = 20
		for i := range n {
			bg := e.host.Stats().Backgrounds
			asks := e.probe.asks.Load()
			hdr := []string{"Authorization", "Bearer " + tok, "If-None-Match", tag, "X-Request-Id", fmt.Sprintf("loff-%s-%02d", b.name, i)}
			g := e.probe.gates.Load()
			viaEdge := do(t, e.url, "GET", target, "", hdr...)
			if e.probe.gates.Load() != g+1 {
				t.Errorf("revalidation %d: %d gate calls, want 1", i, e.probe.gates.Load()-g)
			}
			// The direct call comes after: one call less remaining.
			sameButRateLimit(t, fmt.Sprintf("revalidation %d", i), viaEdge, do(t, o.api, "GET", target, "", hdr...))
			if e.probe.asks.Load() > asks {
				waitFor(t, "the lease answer", func() bool { return e.host.Stats().Backgrounds > bg })
			}
		}
		if asks := e.probe.asks.Load(); asks != 1 {
			t.Errorf("%d lease requests, want 1 (then the retry the refusal names)", asks)
		}
		if a, ok := e.probe.last(); !ok || a.Calls != 0 || a.RetryMs < 1000 {
			t.Errorf("the lease answer %+v (%v), want calls 0 and a retry of at least 1000 ms", a, ok)
		}
		if got := o.calls(t, org); got != 1+2*n {
			t.Errorf("billed %d, want %d", got, 1+2*n)
		}
	})
}
