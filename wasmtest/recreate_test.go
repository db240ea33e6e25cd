package wasmtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestRecreatedOrg (issue #13; docs/operations.md, the admin API): once an organisation
// is deleted and created again under its id, the old client's token gets
// 403 NO_ORGANIZATION through the edge as directly, on a forward and on
// the gate path (the edge still holds the organisation's ETag inputs, so
// a conditional request with the old tag goes to the gate), bills nothing,
// and the new organisation starts with no meters; a new client's token
// works through the edge.
func TestRecreatedOrg(t *testing.T) {
	forDeployedBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		org := "recreated-" + b.name
		body := `{"orgId":"` + org + `","contentGrants":` + allTiers + `}`
		id, sec := o.org(t, body, "content.read")
		old := o.token(t, id, sec, "content.read")
		e := newEdge(t, b, o, nil)
		sub := content.Subjects[0]
		lesson := fmt.Sprintf("/v1/lessons/%s/%s/1", sub.Tier, sub.Slug)
		get := func(base, target, tok string, hdr ...string) answer {
			t.Helper()
			return do(t, base, "GET", target, "", append([]string{"Authorization", "Bearer " + tok}, hdr...)...)
		}

		tiers := get(e.url, "/v1/tiers", old)
		tag := tiers.header.Get("ETag")
		if tiers.status != 200 || tag == "" {
			t.Fatalf("GET /v1/tiers through the edge: %d, ETag %q: %.300s", tiers.status, tag, tiers.body)
		}
		if r := get(e.url, lesson, old); r.status != 200 {
			t.Fatalf("GET %s through the edge: %d %.300s", lesson, r.status, r.body)
		}
		if r := get(e.url, "/v1/tiers", old, "If-None-Match", tag); r.status != 304 {
			t.Fatalf("If-None-Match through the edge before the delete: %d, want 304", r.status)
		}
		reading(t, o, org, "before the delete", 3, 1)

		if code, m := o.adminCall(t, "DELETE", "/admin/v1/orgs/"+org, ""); code != 204 {
			t.Fatalf("delete: %d %v", code, m)
		}
		id2, sec2 := o.org(t, body, "content.read")
		reading(t, o, org, "after re-creating", 0, 0)

		for _, base := range []string{e.url, o.api} {
			for _, target := range []string{"/v1/tiers", lesson, "/v1/license"} {
				if r := get(base, target, old); r.status != 403 || r.code() != "NO_ORGANIZATION" {
					t.Errorf("old token, GET %s%s: %d %.300s, want 403 NO_ORGANIZATION", base, target, r.status, r.body)
				}
			}
		}
		// The gate path: the edge's candidate for the old tag still matches
		// (same id, same grants), so the origin's gate decides.
		st := e.host.Stats()
		if r := get(e.url, "/v1/tiers", old, "If-None-Match", tag); r.status != 403 || r.code() != "NO_ORGANIZATION" {
			t.Errorf("old token, If-None-Match through the edge: %d %.300s, want 403 NO_ORGANIZATION", r.status, r.body)
		}
		if after := e.host.Stats(); after.Subrequests != st.Subrequests+1 || after.Forwards != st.Forwards {
			t.Errorf("the conditional request took %d gate calls and %d forwards, want 1 and 0",
				after.Subrequests-st.Subrequests, after.Forwards-st.Forwards)
		}
		reading(t, o, org, "after the old token's tries", 0, 0)

		tok := o.token(t, id2, sec2, "content.read")
		r := get(e.url, "/v1/license", tok)
		var l struct {
			Quota map[string]struct{ Used *int64 }
		}
		if err := json.Unmarshal(r.body, &l); r.status != 200 || err != nil || len(l.Quota) == 0 {
			t.Fatalf("license with the new client's token through the edge: %d %.300s", r.status, r.body)
		}
		for name, q := range l.Quota {
			if q.Used == nil {
				t.Errorf("license quota %s has no used", name)
			} else if *q.Used != 0 {
				t.Errorf("license quota %s used %d, want 0", name, *q.Used)
			}
		}
		if r := get(e.url, "/v1/tiers", tok); r.status != 200 {
			t.Errorf("new client's token through the edge: %d %.300s", r.status, r.body)
		}
		reading(t, o, org, "after the new token's call", 1, 0)
	})
}

// reading checks the admin reading of org: calls this month and hour, the
// enumeration count, and every other meter zero.
func reading(t *testing.T, o *origin, org, step string, calls, lessonsRead float64) {
	t.Helper()
	code, m := o.adminCall(t, "GET", "/admin/v1/orgs/"+org, "")
	if code != 200 {
		t.Fatalf("%s: get org: %d %v", step, code, m)
	}
	meters, _ := m["meters"].(map[string]any)
	month, _ := meters["month"].(map[string]any)
	hour, _ := meters["hour"].(map[string]any)
	want := map[string]float64{"month.calls": calls, "month.downloads": 0, "month.exports": 0, "month.testprepitems": 0,
		"hour.calls": calls, "hour.lessonreads": lessonsRead, "hour.mints": 0}
	for k, w := range want {
		p, n, _ := strings.Cut(k, ".")
		src := month
		if p == "hour" {
			src = hour
		}
		if v, ok := src[n].(float64); !ok || v != w {
			t.Errorf("%s: meters.%s = %v, want %v", step, k, src[n], w)
		}
	}
	enum, _ := m["enumeration"].(map[string]any)
	if v, ok := enum["lessonsRead"].(float64); !ok || v != lessonsRead {
		t.Errorf("%s: enumeration.lessonsRead = %v, want %v", step, enum["lessonsRead"], lessonsRead)
	}
}
