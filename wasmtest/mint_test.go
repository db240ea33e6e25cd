package wasmtest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/link"
)

// TestMintThroughEdge (issue #16, point 1): a batch minted through the
// edge in front of the real stack answers no-store with no ETag, bills one
// call, writes a ledger row per URL, and each link downloads through the
// edge with no token and nothing metered.
func TestMintThroughEdge(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := shared(t)
	ms := content.Subjects[0].Lessons[0].Media[:2]
	forEachBuild(t, func(t *testing.T, b *build) {
		org := "mint-edge-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "media.download")
		tok := o.token(t, id, sec, "media.download")
		e := newEdge(t, b, o, nil)
		body := `{"mediaIds":["` + ms[0].ID + `","` + ms[1].ID + `","` + ms[0].ID + `"]}`
		r := do(t, e.url, "POST", "/v1/media/urls", body, "Authorization", "Bearer "+tok, "Content-Type", "application/json")
		if r.status != 200 || r.header.Get("Cache-Control") != "no-store" || r.header.Get("ETag") != "" ||
			r.header.Get("X-Service-Content-Version") == "" {
			t.Fatalf("mint through the edge: %d, Cache-Control %q, ETag %q, X-Service-Content-Version %q: %.300s", r.status,
				r.header.Get("Cache-Control"), r.header.Get("ETag"), r.header.Get("X-Service-Content-Version"), r.body)
		}
		var a struct {
			Items []struct{ MediaID, URL string }
		}
		if err := json.Unmarshal(r.body, &a); err != nil || len(a.Items) != 3 {
			t.Fatalf("mint answer (%v): %s", err, r.body)
		}
		calls := o.calls(t, org)
		for i, it := range a.Items {
			want := ms[[]int{0, 1, 0}[i]]
			_, rest, ok := strings.Cut(it.URL, link.Prefix)
			if it.MediaID != want.ID || !ok {
				t.Fatalf("item %d: %+v, want %s under %s", i, it, want.ID, link.Prefix)
			}
			d := do(t, e.url, "GET", link.Prefix+rest, "")
			if d.status != 200 || int64(len(d.body)) != want.Bytes || d.header.Get("Content-Type") != want.MIME {
				t.Errorf("download %d through the edge: %d, %d bytes of %s", i, d.status, len(d.body), d.header.Get("Content-Type"))
			}
			if direct := do(t, o.api, "GET", link.Prefix+rest, ""); !bytes.Equal(direct.body, d.body) {
				t.Errorf("download %d: the edge's bytes are not the origin's", i)
			}
		}
		if got := o.calls(t, org); got != calls || calls != 1 {
			t.Errorf("calls %d after the mint, %d after the downloads; want 1 and 1", calls, got)
		}
		code, l := o.adminCall(t, "GET", "/admin/v1/orgs/"+org+"/ledger", "")
		rows, _ := l["items"].([]any)
		if code != 200 || len(rows) != 3 {
			t.Fatalf("ledger: %d, %d rows: %v", code, len(rows), l)
		}
		for i, row := range rows {
			rw, _ := row.(map[string]any)
			if rw["kind"] != "media" || rw["target"] != a.Items[i].MediaID || rw["format"] != "url" ||
				!strings.Contains(a.Items[i].URL, "&r="+strconv.FormatFloat(rw["id"].(float64), 'f', -1, 64)+"&") {
				t.Errorf("ledger row %d: %v; link %s", i, rw, a.Items[i].URL)
			}
		}
	})
}
