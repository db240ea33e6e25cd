package wasmtest

import (
	"encoding/json"
	"net/url"
	"testing"
)

// TestCursorGrantsChanged: a cursor issued before its organisation's
// grants changed is answered alike through the edge and directly, 400
// CURSOR_EXPIRED, and bills nothing either way. The edge cannot know the
// grants a cursor was issued under: it forwards the request, or gates a
// conditional one on its cached (older) grants digest, and the origin
// decides.
func TestCursorGrantsChanged(t *testing.T) {
	forDeployedBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		org := "cursor-grants-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		tokens := map[string]string{"content": o.token(t, id, sec, "content.read")}
		e := newEdge(t, b, o, nil)
		bearer := "Bearer " + tokens["content"]
		first := do(t, e.url, "GET", "/v1/subjects?limit=2", "", "Authorization", bearer)
		var p struct{ NextCursor string }
		if err := json.Unmarshal(first.body, &p); first.status != 200 || err != nil || p.NextCursor == "" {
			t.Fatalf("first page: %d %.300s", first.status, first.body)
		}
		target := "/v1/subjects?limit=2&cursor=" + url.QueryEscape(p.NextCursor)
		// Through the edge, so that it caches the grants digest the tag
		// below was derived with.
		second := do(t, e.url, "GET", target, "", "Authorization", bearer)
		tag := second.header.Get("ETag")
		if second.status != 200 || tag == "" {
			t.Fatalf("second page: %d, ETag %q", second.status, tag)
		}
		sub := content.Subjects[0]
		if code, m := o.adminCall(t, "PATCH", "/admin/v1/orgs/"+org,
			`{"contentGrants":["topics","college","high","middle","primary","`+sub.Tier+`/`+sub.Slug+`"]}`); code != 200 {
			t.Fatalf("patch grants: %d %v", code, m)
		}
		before := o.calls(t, org)
		parity(t, e, o, tokens, "cg"+b.name, []scenario{
			{name: "cursor after a grants change", method: "GET", target: target, auth: "content", status: 400, code: "CURSOR_EXPIRED"},
			{name: "cursor after a grants change, conditional", method: "GET", target: target, auth: "content",
				hdr: []string{"If-None-Match", tag}, status: 400, code: "CURSOR_EXPIRED"},
		})
		if got := o.calls(t, org) - before; got != 0 {
			t.Errorf("the refused cursors billed %d calls, want 0", got)
		}
	})
}
