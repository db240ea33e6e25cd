package wasmtest

import (
	"encoding/json"
	"testing"
)

// TestLeaseSettle: without a flush, the licence status (GET /v1/license,
// directly and through an edge) and the admin API's reading of an
// organisation count the 304s the edges answered on their leases: both
// settle the open leases first, by a push to the edges (issue 19, point
// 2: exact on the local stack).
func TestLeaseSettle(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startLeaseOrigin(t)
	forDeployedBuild(t, func(t *testing.T, b *build) {
		org := "lsettle-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`,"quota":{"calls":100000}}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		target := "/v1/tiers"
		edges, tag := leasedEdges(t, b, o, 2, tok, target)
		served := 0
		before := o.calls(t, org)
		for round := range 3 {
			for _, e := range edges {
				for range 5 {
					if r, _ := e.cond(t, tok, target, tag); r.status != 304 {
						t.Fatalf("%d %.200s", r.status, r.body)
					}
					served++
				}
			}
			for _, base := range []string{o.api, edges[0].url} {
				r := do(t, base, "GET", "/v1/license", "", "Authorization", "Bearer "+tok)
				var l struct {
					Quota map[string]struct{ Used int64 }
				}
				if err := json.Unmarshal(r.body, &l); r.status != 200 || err != nil {
					t.Fatalf("GET /v1/license: %d %v %.200s", r.status, err, r.body)
				}
				if got := l.Quota["calls"].Used; got != int64(before+served) {
					t.Errorf("round %d: /v1/license via %s: calls used %d, want %d", round, base, got, before+served)
				}
			}
			if got := o.calls(t, org); got != before+served {
				t.Errorf("round %d: the admin API reads %d calls, want %d", round, got, before+served)
			}
		}
	})
}
