package wasmtest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus/gen"
)

// leasedEdges starts n edges in front of o, each holding a lease for
// tok's organisation on target, and returns them with the target's ETag.
func leasedEdges(t *testing.T, b *build, o *origin, n int, tok, target string) ([]*leaseEdge, string) {
	t.Helper()
	var edges []*leaseEdge
	var tag string
	for range n {
		e := newLeaseEdge(t, b, o, nil)
		tag, _ = e.acquire(t, tok, target)
		edges = append(edges, e)
	}
	return edges, tag
}

// sameAsDirect sends the revalidation through every edge and directly
// (one request id each time) and wants the same answer, with status want
// (0: any).
func sameAsDirect(t *testing.T, name string, edges []*leaseEdge, o *origin, tok, target, tag string, want int) {
	t.Helper()
	for i, e := range edges {
		id := fmt.Sprintf("%s-%d", name, i)
		viaEdge, leased := e.cond(t, tok, target, tag, "X-Request-Id", id)
		direct := do(t, o.api, "GET", target, "", "Authorization", "Bearer "+tok, "If-None-Match", tag, "X-Request-Id", id)
		if want != 0 && direct.status != want {
			t.Errorf("%s: directly %d %.200s, want %d", name, direct.status, direct.body, want)
		}
		if leased {
			t.Errorf("%s: edge %d answered on a lease the change should have revoked", name, i)
		}
		compare(t, fmt.Sprintf("%s, edge %d", name, i), viaEdge, direct)
	}
}

// TestLeaseRevocations: the changes that must apply on the next call
// revoke the leases first (issue 19, point 3): right after each is
// acknowledged, every edge that held a lease answers as the origin does.
// An organisation deleted: 403 NO_ORGANIZATION. A corpus reload (every
// organisation's epoch): the old tag no longer matches, a 200 with the
// new one. The enumeration alarm tripping: the lesson read that trips it
// is answered after the revocation, so the next revalidation through
// any edge is 403 ORG_SUSPENDED. (The admin API has no route that
// removes a client: that revocation is not tested here.)
func TestLeaseRevocations(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startLeaseOrigin(t, "LECTERN_LEASE_TTL=60s")
	midHour(t, o)
	forDeployedBuild(t, func(t *testing.T, b *build) {
		target := "/v1/tiers"
		newOrg := func(name, grants string) string {
			id, sec := o.org(t, `{"orgId":"`+name+`-`+b.name+`","contentGrants":`+grants+`}`, "content.read")
			return o.token(t, id, sec, "content.read")
		}

		t.Run("deleted", func(t *testing.T) {
			tok := newOrg("ldel", allTiers)
			edges, tag := leasedEdges(t, b, o, 2, tok, target)
			if code, m := o.adminCall(t, "DELETE", "/admin/v1/orgs/ldel-"+b.name, ""); code != 204 {
				t.Fatalf("delete: %d %v", code, m)
			}
			sameAsDirect(t, "ldel-"+b.name, edges, o, tok, target, tag, 403)
		})

		t.Run("alarm", func(t *testing.T) {
			// The tier with the fewest lessons: the alarm trips past 40% of them.
			counts := map[string]int{}
			for _, l := range content.Lessons {
				counts[l.Subject.Tier]++
			}
			tier := ""
			for name, n := range counts {
				if tier == "" || n < counts[tier] {
					tier = name
				}
			}
			tok := newOrg("lalarm", `["`+tier+`"]`)
			edges, tag := leasedEdges(t, b, o, 2, tok, target)
			tripped := false
			for _, l := range content.Lessons {
				if l.Subject.Tier != tier {
					continue
				}
				r := do(t, o.api, "GET", "/v1/lessons/"+l.ID, "", "Authorization", "Bearer "+tok)
				if r.status == 403 {
					tripped = r.code() == "ORG_SUSPENDED"
					break
				}
				if r.status != 200 {
					t.Fatalf("GET /v1/lessons/%s: %d %.200s", l.ID, r.status, r.body)
				}
			}
			if !tripped {
				t.Fatalf("reading every lesson of %s (%d) did not trip the alarm", tier, counts[tier])
			}
			sameAsDirect(t, "lalarm-"+b.name, edges, o, tok, target, tag, 403)
		})

		t.Run("reload", func(t *testing.T) {
			tok := newOrg("lreload", allTiers)
			sub := content.Subjects[0]
			target := "/v1/subjects/" + sub.Slug + "/classes?tier=" + sub.Tier
			edges, tag := leasedEdges(t, b, o, 2, tok, target)
			dir := filepath.Join(t.TempDir(), "corpus")
			if _, err := gen.Write(dir, gen.Options{Seed: 2, Small: true}); err != nil {
				t.Fatal(err)
			}
			body, _ := json.Marshal(map[string]string{"dir": dir})
			code, m := o.adminCall(t, "POST", "/admin/v1/corpus/reload", string(body))
			if code != 200 {
				t.Fatalf("reload: %d %v", code, m)
			}
			t.Cleanup(func() { // the next build's run starts from the suite's corpus
				body, _ := json.Marshal(map[string]string{"dir": corpusDir})
				if code, m := o.adminCall(t, "POST", "/admin/v1/corpus/reload", string(body)); code != 200 {
					t.Errorf("reload the suite's corpus: %d %v", code, m)
				}
			})
			// The new corpus's version is in the classes' tag: the old one no
			// longer matches.
			sameAsDirect(t, "lreload-"+b.name, edges, o, tok, target, tag, 200)
		})
	})
}
