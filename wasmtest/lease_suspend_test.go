package wasmtest

import (
	"testing"

	"github.com/lectern-api/lectern/worker/wazero"
)

// TestLeaseSuspend: an organisation suspended through the admin API
// answers 403 ORG_SUSPENDED on the next call through every edge instance,
// though each held a lease for it: the PATCH is acknowledged only once
// the leases are revoked (issue 19, point 3). Reinstated, it is served
// again.
func TestLeaseSuspend(t *testing.T) {
	forDeployedBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		org := "lsusp-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		target := "/v1/tiers"
		// Three instances each: each holds leases of its own, and the
		// revoke push must reach them all.
		const instances = 3
		var edges []*leaseEdge
		var tag string
		for range 3 {
			e := newLeaseEdge(t, b, o, func(c *wazero.Config) { c.Instances = instances })
			tag, _ = e.acquire(t, tok, target)
			edges = append(edges, e)
		}
		spread := func() { // revalidations on every instance: they ask for leases too
			for _, e := range edges {
				bg := e.host.Stats().Backgrounds
				asks := e.probe.asks.Load()
				for range 2 * instances {
					e.cond(t, tok, target, tag)
				}
				n := e.probe.asks.Load() - asks
				waitFor(t, "the lease answers", func() bool { return e.host.Stats().Backgrounds >= bg+n })
			}
		}
		spread()
		for round := range 2 {
			for i, e := range edges {
				if r, ok := e.cond(t, tok, target, tag); r.status != 304 || !ok {
					t.Fatalf("round %d, edge %d before the suspension: %d, leased %v", round, i, r.status, ok)
				}
			}
			patch(t, o, org, `{"status":"suspended"}`)
			for i, e := range edges {
				for range instances {
					if r, leased := e.cond(t, tok, target, tag); r.status != 403 || r.code() != "ORG_SUSPENDED" {
						t.Errorf("round %d: edge %d right after the suspension: %d %s (leased %v), want 403 ORG_SUSPENDED", round, i, r.status, r.code(), leased)
					}
				}
			}
			r := do(t, o.api, "GET", target, "", "Authorization", "Bearer "+tok, "If-None-Match", tag)
			if r.status != 403 || r.code() != "ORG_SUSPENDED" {
				t.Errorf("round %d: directly: %d %s", round, r.status, r.code())
			}
			patch(t, o, org, `{"status":"active"}`)
			for i, e := range edges {
				if r, _ := e.cond(t, tok, target, tag); r.status != 304 {
					t.Errorf("round %d: edge %d after the reinstatement: %d %.200s", round, i, r.status, r.body)
				}
				// A lease again, for the next suspension to revoke.
				e.acquire(t, tok, target)
			}
			spread()
		}
	})
}

// patch applies an admin PATCH to org and fails the test unless it is
// acknowledged.
func patch(t *testing.T, o *origin, org, body string) {
	t.Helper()
	if code, m := o.adminCall(t, "PATCH", "/admin/v1/orgs/"+org, body); code != 200 {
		t.Fatalf("PATCH %s: %d %v", body, code, m)
	}
}
