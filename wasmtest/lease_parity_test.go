package wasmtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestLeaseParity: the parity table (parity_test.go) through an edge with
// leases on, after the edge holds leases and has flushed, stays green;
// revalidations of every served GET route are added to it, twice, so
// that the edge answers some of them on its lease: those 304s must be
// the origin's too (issue 19, point 5). The fixture has no caps, so no
// RateLimit field is in the way: TestLeasedRateLimit checks that one.
func TestLeaseParity(t *testing.T) {
	forEachBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		f := newFixture(t, o, "lparity-"+b.name)
		for k, v := range forged(f.tokens["content"]) {
			f.tokens[k] = v
		}
		e := newLeaseEdge(t, b, o, nil)
		e.acquire(t, f.tokens["full"], "/v1/tiers")
		scenarios := fixedScenarios()
		served := servedScenarios(t, o, f)
		scenarios = append(scenarios, served...)
		scenarios = append(scenarios, progressScenarios(t, o, f)...)
		scenarios = append(scenarios, fileScenarios(t, o, f)...)
		revalidations := revalidationScenarios(t, o, f, served)
		if len(revalidations) == 0 {
			t.Fatal("no served route gave an ETag to revalidate")
		}
		parity(t, e.edge, o, f.tokens, "lw"+b.name, revalidations) // leases asked for and used
		e.flush(t)
		g := e.probe.gates.Load()
		parity(t, e.edge, o, f.tokens, "lp"+b.name, append(scenarios, append(revalidations, revalidations...)...))
		gated := e.probe.gates.Load() - g
		t.Logf("%d revalidations, %d gated", 2*len(revalidations), gated)
		if len(revalidations) < 40 {
			t.Errorf("only %d revalidations", len(revalidations))
		}
		if gated >= int64(2*len(revalidations)) {
			t.Errorf("every one of %d revalidations was gated: no leased 304 was compared", 2*len(revalidations))
		}
		if st := e.host.Stats(); st.Failures != 0 {
			t.Errorf("the host failed %d requests", st.Failures)
		}
	})
}

// revalidationScenarios are the served GET routes asked again with the
// ETag the origin gave them: each a 304.
func revalidationScenarios(t *testing.T, o *origin, f fixture, served []scenario) []scenario {
	t.Helper()
	var out []scenario
	for _, sc := range served {
		if len(sc.hdr) != 0 { // the compressed variants: the same tag
			continue
		}
		r := do(t, o.api, "GET", sc.target, "", "Authorization", "Bearer "+f.tokens[sc.auth])
		tag := r.header.Get("ETag")
		if r.status != 200 || tag == "" {
			continue
		}
		out = append(out,
			scenario{name: "revalidate " + sc.name, method: "GET", target: sc.target, auth: sc.auth, hdr: []string{"If-None-Match", tag}, status: 304},
			scenario{name: "revalidate gzip " + sc.name, method: "GET", target: sc.target, auth: sc.auth,
				hdr: []string{"If-None-Match", tag, "Accept-Encoding", "gzip"}, status: 304},
			scenario{name: "revalidate a list " + sc.name, method: "GET", target: sc.target, auth: sc.auth,
				hdr: []string{"If-None-Match", `"x", ` + strings.TrimPrefix(tag, "W/")}, status: 304},
			scenario{name: "revalidate * " + sc.name, method: "GET", target: sc.target, auth: sc.auth,
				hdr: []string{"If-None-Match", "*"}, status: 304})
	}
	return out
}

// TestLeasedRateLimit: a leased 304 of an organisation with a calls quota
// and an hourly cap carries the gated 304's status and headers (a
// leases-off edge in front of the same origin gives that one), RateLimit
// but for its remaining counts; those are upper bounds: at least what
// the admin API reads, after a flush, as the limit less what was billed
// (docs/edge.md: the grant's remaining, less the lease's own uses; other
// clients' calls since are not in it).
func TestLeasedRateLimit(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startLeaseOrigin(t, "LECTERN_LEASE_TTL=60s")
	midHour(t, o)
	forDeployedBuild(t, func(t *testing.T, b *build) {
		org := "lrate-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`,"quota":{"calls":5000},"rateLimits":{"callsPerHour":4000}}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		leased, gated := newLeaseEdge(t, b, o, nil), gatedEdge(t, b, o)
		sub := content.Subjects[0]
		for _, target := range []string{"/v1/tiers", "/v1/subjects/" + sub.Slug + "?tier=" + sub.Tier} {
			tag, a := leased.acquire(t, tok, target)
			// The gated edge learns the organisation from a 200 too.
			if r := do(t, gated.url, "GET", target, "", "Authorization", "Bearer "+tok); r.status != 200 || r.header.Get("ETag") != tag {
				t.Fatalf("%s through the leases-off edge: %d, ETag %q, want 200 and %q", target, r.status, r.header.Get("ETag"), tag)
			}
			if len(a.RateLimits) != 2 {
				t.Errorf("%s: the lease's rateLimits %+v, want calls-month and calls-hour", target, a.RateLimits)
			}
			// Others' calls meanwhile: directly and through the gated edge.
			for range 3 {
				do(t, o.api, "GET", target, "", "Authorization", "Bearer "+tok, "If-None-Match", tag)
			}
			for i := range 3 {
				viaLease, ok := leased.cond(t, tok, target, tag, "X-Request-Id", fmt.Sprintf("lrate-%s-%d", b.name, i))
				if !ok {
					t.Fatalf("%s: not answered on the lease: %d (gate calls %d)", target, viaLease.status, leased.probe.gates.Load())
				}
				g := gated.probe.gates.Load()
				viaGate := do(t, gated.url, "GET", target, "", "Authorization", "Bearer "+tok, "If-None-Match", tag,
					"X-Request-Id", fmt.Sprintf("lrate-%s-%d", b.name, i))
				if viaGate.status != 304 || gated.probe.gates.Load() != g+1 {
					t.Fatalf("%s: the leases-off edge: %d after %d gate calls, want a gated 304", target, viaGate.status, gated.probe.gates.Load()-g)
				}
				sameButRateLimit(t, target, viaLease, viaGate)
				month, hour := usedCalls(t, o, org, leased)
				rl, _ := parseRateLimit(viaLease.header.Get("RateLimit"))
				for _, it := range rl {
					limit, used := int64(5000), month
					if it.name == "calls-hour" {
						limit, used = 4000, hour
					}
					if it.r < limit-used {
						t.Errorf("%s: leased RateLimit %s r=%d, below the true remaining %d (limit %d, billed %d)", target, it.name, it.r, limit-used, limit, used)
					}
				}
			}
		}
	})
}

// sameButRateLimit compares a leased 304 with a gated one: status, body,
// every header but Date and X-Request-Id, and RateLimit's items but
// their remaining counts (their reset times may be a second apart: each
// is counted from its own clock reading).
func sameButRateLimit(t *testing.T, name string, leased, gated answer) {
	t.Helper()
	if leased.status != gated.status || string(leased.body) != string(gated.body) {
		t.Errorf("%s: leased %d %q, gated %d %q", name, leased.status, leased.body, gated.status, gated.body)
	}
	keys := map[string]bool{}
	for k := range leased.header {
		keys[k] = true
	}
	for k := range gated.header {
		keys[k] = true
	}
	for k := range keys {
		switch k {
		case "Date", "X-Request-Id":
			continue
		case "Ratelimit":
			lr, err1 := parseRateLimit(leased.header.Get(k))
			gr, err2 := parseRateLimit(gated.header.Get(k))
			if err1 != nil || err2 != nil || len(lr) != len(gr) {
				t.Errorf("%s: RateLimit leased %q, gated %q", name, leased.header[k], gated.header[k])
				continue
			}
			for i := range lr {
				if lr[i].name != gr[i].name || lr[i].t < gr[i].t-1 || lr[i].t > gr[i].t+1 {
					t.Errorf("%s: RateLimit leased %q, gated %q", name, leased.header[k], gated.header[k])
				}
			}
			continue
		}
		if l, g := leased.header[k], gated.header[k]; !slices.Equal(l, g) {
			t.Errorf("%s: header %s: leased %q, gated %q", name, k, l, g)
		}
	}
	if strings.Contains(leased.header.Get("RateLimit"), "r=-") {
		t.Errorf("%s: negative remaining %q", name, leased.header.Get("RateLimit"))
	}
}

// usedCalls is org's billed month and hour calls after the edges flushed.
func usedCalls(t *testing.T, o *origin, org string, edges ...*leaseEdge) (month, hour int64) {
	t.Helper()
	for _, e := range edges {
		e.flush(t)
	}
	code, m := o.adminCall(t, "GET", "/admin/v1/orgs/"+org, "")
	if code != 200 {
		t.Fatalf("get org %s: %d %v", org, code, m)
	}
	meters, _ := m["meters"].(map[string]any)
	mo, _ := meters["month"].(map[string]any)
	ho, _ := meters["hour"].(map[string]any)
	mc, ok1 := mo["calls"].(float64)
	hc, ok2 := ho["calls"].(float64)
	if !ok1 || !ok2 {
		t.Fatalf("org %s: meters %v", org, m["meters"])
	}
	return int64(mc), int64(hc)
}
