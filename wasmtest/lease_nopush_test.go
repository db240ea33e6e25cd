package wasmtest

import (
	"testing"

	"github.com/lectern-api/lectern/worker/wazero"
)

// TestLeaseSuspendNoPush: edges the origin cannot push to (revoke URL
// "", as on Cloudflare) hold leases when the organisation is suspended:
// the PATCH is acknowledged only once their leases have expired (the
// TTL bounds the wait), so the next revalidation through each is 403
// ORG_SUSPENDED all the same (issue 19, point 3).
func TestLeaseSuspendNoPush(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startLeaseOrigin(t, "LECTERN_LEASE_TTL=2s")
	midHour(t, o)
	forDeployedBuild(t, func(t *testing.T, b *build) {
		org := "lnopushsusp-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		target := "/v1/tiers"
		var edges []*leaseEdge
		var tag string
		for range 2 {
			e := newLeaseEdge(t, b, o, func(c *wazero.Config) { c.Revoke = "" })
			tag, _ = e.acquire(t, tok, target)
			edges = append(edges, e)
		}
		patch(t, o, org, `{"status":"suspended"}`)
		for i, e := range edges {
			if r, leased := e.cond(t, tok, target, tag); r.status != 403 || r.code() != "ORG_SUSPENDED" {
				t.Errorf("edge %d right after the suspension: %d %s (leased %v), want 403 ORG_SUSPENDED", i, r.status, r.code(), leased)
			}
			e.mu.Lock()
			if len(e.pushes) != 0 {
				t.Errorf("edge %d: the origin pushed to an edge that gave no revoke URL: %+v", i, e.pushes)
			}
			e.mu.Unlock()
		}
	})
}
