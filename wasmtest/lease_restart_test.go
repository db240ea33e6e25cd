package wasmtest

import (
	"strings"
	"testing"
)

// TestLeaseOriginRestart: the origin keeps its leases with its meters:
// restarted (same database, same addresses) while an edge holds a lease,
// it still knows the lease, so a suspension pushes the revocation to the
// edge, whose next revalidation is 403 ORG_SUSPENDED; while the origin
// was down the lease answered; and what the lease used is billed once.
func TestLeaseOriginRestart(t *testing.T) {
	forDeployedBuild(t, func(t *testing.T, b *build) {
		dir := t.TempDir()
		env := []string{"LECTERN_LEASE_TTL=60s"}
		o, err := launch(dir, nil, env...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.stop() })
		org := "lrestart-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		e := newLeaseEdge(t, b, o, nil)
		target := "/v1/tiers"
		tag, _ := e.acquire(t, tok, target)
		served := o.calls(t, org) // settled: the 200 and the 304s so far

		o.stop()
		if r, ok := e.cond(t, tok, target, tag); !ok {
			t.Fatalf("the origin down: %d %.200s, want a leased 304", r.status, r.body)
		}
		served++
		addr := func(base string) string { return strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/") }
		o2, err := launch(dir, nil, append(env, "LECTERN_ORIGIN_ADDR="+addr(o.api), "LECTERN_IDP_ADDR="+addr(o.idp),
			"LECTERN_ADMIN_ADDR="+addr(o.admin), "LECTERN_EDGE_URLS="+o.edgeURLs)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(o2.stop)
		if o2.api != o.api || o2.admin != o.admin {
			t.Fatalf("restarted on %s and %s, not %s and %s", o2.api, o2.admin, o.api, o.admin)
		}
		if r, _ := e.cond(t, tok, target, tag); r.status != 304 {
			t.Fatalf("after the restart: %d %.200s", r.status, r.body)
		}
		served++
		patch(t, o2, org, `{"status":"suspended"}`)
		if r, leased := e.cond(t, tok, target, tag); r.status != 403 || r.code() != "ORG_SUSPENDED" {
			t.Errorf("right after the suspension: %d %s (leased %v), want 403 ORG_SUSPENDED", r.status, r.code(), leased)
		}
		if got := billed(t, o2, org, e); got != served {
			t.Errorf("billed %d, served %d", got, served)
		}
	})
}
