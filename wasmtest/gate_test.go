package wasmtest

import (
	"fmt"
	"strings"
	"testing"
)

// TestConditional: a conditional GET whose ETag matches is answered 304 by
// the edge after one gate call (no forward, no body), with the headers the
// origin's own 304 carries, and bills exactly one call (spec: Limits,
// meters: a 304 bills one call). A stale grants digest, a suspended
// organisation and a non-matching tag are the origin's to decide
// (docs/edge.md: Origin protocol).
func TestConditional(t *testing.T) {
	forEachBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		org := "cond-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read", "testprep.read")
		tok := o.token(t, id, sec, "content.read", "testprep.read")
		e := newEdge(t, b, o, nil)
		sub := content.Subjects[0]
		n := 0
		get := func(base, target string, hdr ...string) answer {
			t.Helper()
			n++
			return do(t, base, "GET", target, "", append([]string{"Authorization", "Bearer " + tok,
				"X-Request-Id", fmt.Sprintf("cond-%s-%04d", b.name, n)}, hdr...)...)
		}
		// both sends one request through the edge and the same directly.
		both := func(name, target string, hdr ...string) (viaEdge, direct answer) {
			t.Helper()
			viaEdge = get(e.url, target, hdr...)
			n-- // the same X-Request-Id
			direct = get(o.api, target, hdr...)
			compare(t, name, viaEdge, direct)
			return viaEdge, direct
		}

		for _, target := range []string{
			"/v1/tiers",
			"/v1/subjects/" + sub.Slug + "?tier=" + sub.Tier,
			"/v1/subjects/" + sub.Slug + "/classes?tier=" + sub.Tier,
			fmt.Sprintf("/v1/lessons/%s/%s/1?include=quiz", sub.Tier, sub.Slug),
			"/v1/testprep",
		} {
			first := get(e.url, target)
			tag := first.header.Get("ETag")
			if first.status != 200 || tag == "" {
				t.Fatalf("GET %s through the edge: %d, ETag %q: %.300s", target, first.status, tag, first.body)
			}
			calls, st := o.calls(t, org), e.host.Stats()
			viaEdge, _ := both("304 "+target, target, "If-None-Match", tag)
			if viaEdge.status != 304 {
				t.Fatalf("If-None-Match through the edge: %d, want 304: %.300s", viaEdge.status, viaEdge.body)
			}
			if got := o.calls(t, org) - calls; got != 2 { // one through the edge, one direct
				t.Errorf("%s: two 304s (edge, direct) billed %d calls, want 2", target, got)
			}
			after := e.host.Stats()
			if after.Forwards != st.Forwards || after.Subrequests != st.Subrequests+1 {
				t.Errorf("%s: the edge's 304 took %d forwards and %d other subrequests, want 0 and 1 (the gate); "+
					"docs/edge.md derives the candidate over route.Vars.String(): does the origin derive this route's tag over the same target?",
					target, after.Forwards-st.Forwards, after.Subrequests-st.Subrequests)
			}
			// Exactly one call for the edge's 304 alone.
			calls = o.calls(t, org)
			if r := get(e.url, target, "If-None-Match", tag); r.status != 304 {
				t.Fatalf("second 304: %d", r.status)
			}
			if got := o.calls(t, org) - calls; got != 1 {
				t.Errorf("%s: a 304 through the edge billed %d calls, want 1", target, got)
			}
			// A tag that does not match is forwarded: a 200 like the origin's.
			if r, _ := both("other tag "+target, target, "If-None-Match", `W/"0000000000000000"`); r.status != 200 {
				t.Errorf("%s: a non-matching tag answered %d", target, r.status)
			}
			// A weak comparison list with the tag in it is a 304 too (RFC 9110 §13.1.2).
			if r, _ := both("tag list "+target, target, "If-None-Match", `"x", `+strings.TrimPrefix(tag, "W/")); r.status != 304 {
				t.Errorf("%s: a list holding the tag answered %d", target, r.status)
			}
		}

		// The grants change: the edge's cached digest is stale; the origin
		// refuses the 304 (412 at the gate) and the edge forwards: a 200
		// with the new tag, one call.
		first := get(e.url, "/v1/tiers")
		tag := first.header.Get("ETag")
		if code, m := o.adminCall(t, "PATCH", "/admin/v1/orgs/"+org, `{"contentGrants":["high","middle"]}`); code != 200 {
			t.Fatalf("patch grants: %d %v", code, m)
		}
		calls := o.calls(t, org)
		r := get(e.url, "/v1/tiers", "If-None-Match", tag)
		if r.status != 200 || r.header.Get("ETag") == tag {
			t.Errorf("after a grants change: %d, ETag %q (old %q)", r.status, r.header.Get("ETag"), tag)
		}
		if got := o.calls(t, org) - calls; got != 1 {
			t.Errorf("after a grants change: billed %d calls, want 1", got)
		}
		newTag := r.header.Get("ETag")
		if r := get(e.url, "/v1/tiers", "If-None-Match", newTag); r.status != 304 {
			t.Errorf("the new tag: %d, want 304", r.status)
		}

		// Suspended: the gate answers the origin's error; nothing billed.
		if code, m := o.adminCall(t, "PATCH", "/admin/v1/orgs/"+org, `{"status":"suspended"}`); code != 200 {
			t.Fatalf("suspend: %d %v", code, m)
		}
		calls = o.calls(t, org)
		viaEdge, _ := both("suspended 304", "/v1/tiers", "If-None-Match", newTag)
		if viaEdge.status != 403 || viaEdge.code() != "ORG_SUSPENDED" {
			t.Errorf("suspended, conditional: %d %s", viaEdge.status, viaEdge.code())
		}
		if got := o.calls(t, org) - calls; got != 0 {
			t.Errorf("suspended: billed %d calls", got)
		}
		if st := e.host.Stats(); st.Failures != 0 {
			t.Errorf("the host failed %d requests", st.Failures)
		}
	})
}

// TestExpiredToken: the edge follows the origin's test clock, so a token
// expires at both tiers alike (900 s lifetime plus 30 s leeway), though
// the edge has it in its verified-token cache.
func TestExpiredToken(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startOrigin(t)
	forEachBuild(t, func(t *testing.T, b *build) {
		org := "exp-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		e := newEdge(t, b, o, nil)
		tokens := map[string]string{"tok": tok}
		parity(t, e, o, tokens, "fresh"+b.name, []scenario{
			{name: "fresh", method: "GET", target: "/v1/tiers", auth: "tok", status: 200},
		})
		o.advance(t, 931)
		parity(t, e, o, tokens, "expired"+b.name, []scenario{
			{name: "expired", method: "GET", target: "/v1/tiers", auth: "tok", status: 401, code: "invalid_token"},
			{name: "expired, bad parameter", method: "GET", target: "/v1/tiers?bogus=1", auth: "tok", status: 401, code: "invalid_token"},
		})
		r := do(t, e.url, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok)
		if ch := r.header.Get("WWW-Authenticate"); !strings.Contains(ch, `error_description="token expired"`) {
			t.Errorf("expired challenge %q", ch)
		}
		// A fresh token works at once: the clock only moved forward.
		tok = o.token(t, id, sec, "content.read")
		tokens["tok"] = tok
		parity(t, e, o, tokens, "new"+b.name, []scenario{
			{name: "new token", method: "GET", target: "/v1/tiers", auth: "tok", status: 200},
		})
	})
}
