package wasmtest

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/link"
)

// TestDownloadLinks (issue #16, point 2): a signed link through the edge
// in front of a real origin. A valid one is forwarded with no token and
// served (ranges, revalidation, HEAD); an altered one, another method and,
// once the test clock passes its expiry, the same link are refused by the
// edge itself, without a forward, with the origin's own answer.
func TestDownloadLinks(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startOrigin(t)                  // its clock moves
	keys := link.Derived([]byte(secret)) // neither tier has LECTERN_URL_KEYS: both derive this key
	m := content.Lessons[0].Media[0]
	forEachBuild(t, func(t *testing.T, b *build) {
		e := newEdge(t, b, o, nil)
		exp := o.now().Add(time.Minute).Unix()
		org, gen := linkOrg(t, o, "links-"+b.name, m.ID)
		good := keys.Sign(link.Link{Kind: link.Media, Expires: exp, Row: 1, Name: "asset", Media: m.ID, Org: org, Gen: gen})
		forwards := func() int64 { return e.host.Stats().Forwards }

		before := forwards()
		r := do(t, e.url, "GET", good, "")
		size := strconv.FormatInt(m.Bytes, 10)
		if r.status != 200 || int64(len(r.body)) != m.Bytes || r.header.Get("Content-Type") != m.MIME ||
			r.header.Get("X-Request-Id") == "" || forwards() != before+1 {
			t.Fatalf("GET through the edge: %d, %d bytes of %s (%s), forwards %d → %d", r.status, len(r.body), size,
				r.header.Get("Content-Type"), before, forwards())
		}
		if direct := do(t, o.api, "GET", good, ""); !bytes.Equal(direct.body, r.body) {
			t.Error("the edge's bytes are not the origin's")
		}
		tag := r.header.Get("ETag")
		if h := do(t, e.url, "HEAD", good, ""); h.status != 200 || len(h.body) != 0 || h.header.Get("Content-Length") != size {
			t.Errorf("HEAD: %d, %d body bytes, Content-Length %q", h.status, len(h.body), h.header.Get("Content-Length"))
		}
		if rg := do(t, e.url, "GET", good, "", "Range", "bytes=2-5"); rg.status != 206 || !bytes.Equal(rg.body, r.body[2:6]) {
			t.Errorf("range: %d %q", rg.status, rg.body)
		}
		if nm := do(t, e.url, "GET", good, "", "If-None-Match", tag); nm.status != 304 {
			t.Errorf("If-None-Match %s: %d, want 304", tag, nm.status)
		}

		refused := func(name, method, target string, status int, code, word string) {
			t.Helper()
			const id = "req-wasmtest-files-0001"
			before := forwards()
			a := do(t, e.url, method, target, "", "X-Request-Id", id)
			if a.status != status || a.code() != code || !strings.Contains(string(a.body), word) {
				t.Errorf("%s: got %d %s, want %d %s saying %q", name, a.status, a.body, status, code, word)
			}
			if forwards() != before {
				t.Errorf("%s: the edge forwarded it", name)
			}
			if d := do(t, o.api, method, target, "", "X-Request-Id", id); d.status != a.status || !bytes.Equal(d.body, a.body) ||
				d.header.Get("Allow") != a.header.Get("Allow") {
				t.Errorf("%s: the edge answered %d %s (Allow %q), the origin %d %s (Allow %q)", name,
					a.status, a.body, a.header.Get("Allow"), d.status, d.body, d.header.Get("Allow"))
			}
		}
		refused("altered", "GET", strings.Replace(good, "&r=1&", "&r=2&", 1), 404, "NOT_FOUND", "not valid")
		refused("another organisation", "GET", strings.Replace(good, "&o="+org+"&", "&o=other&", 1), 404, "NOT_FOUND", "not valid")
		refused("unknown key", "GET", strings.Replace(good, "?k=s&", "?k=gone&", 1), 404, "NOT_FOUND", "not valid")
		refused("POST", "POST", good, 405, "METHOD_NOT_ALLOWED", "GET or HEAD")

		o.advance(t, 60) // now == expiresAt: no longer valid
		refused("expired", "GET", good, 404, "NOT_FOUND", "expired")
	})
}

// TestExportLinkThroughTheEdge (issue #16, point 3): a class exported
// through the edge answers a link; the link, through the edge with no
// token, downloads the zip the origin builds, byte for byte the origin's
// own answer to it.
func TestExportLinkThroughTheEdge(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startOrigin(t)
	sub := content.Subjects[0]
	forDeployedBuild(t, func(t *testing.T, b *build) {
		e := newEdge(t, b, o, nil)
		f := newFixture(t, o, "export-"+b.name)
		r := do(t, e.url, "GET", "/v1/exports/classes/"+sub.Tier+"/"+sub.Slug+"/1", "", "Authorization", "Bearer "+f.tokens["full"])
		var res struct {
			URL string `json:"url"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &res) != nil || r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("export: %d %s (Cache-Control %q)", r.status, r.body, r.header.Get("Cache-Control"))
		}
		i := strings.Index(res.URL, link.Prefix)
		if i < 0 {
			t.Fatalf("url %q is not a download link", res.URL)
		}
		target := res.URL[i:]
		z := do(t, e.url, "GET", target, "")
		if z.status != 200 || z.header.Get("Content-Type") != "application/zip" {
			t.Fatalf("download through the edge: %d %q %.200s", z.status, z.header.Get("Content-Type"), z.body)
		}
		zr, err := zip.NewReader(bytes.NewReader(z.body), int64(len(z.body)))
		if err != nil {
			t.Fatalf("not a zip: %v", err)
		}
		if names := len(zr.File); names == 0 || zr.File[names-1].Name != "manifest.json" {
			t.Errorf("%d files, the last not manifest.json", names)
		}
		if d := do(t, o.api, "GET", target, ""); d.status != 200 || !bytes.Equal(d.body, z.body) {
			t.Errorf("the origin answers %d with other bytes", d.status)
		}
	})
}

// TestInlineExportThroughTheEdge (issue #16, point 3): an inline export's
// conditional request whose ETag matches (or is *) is answered 304 by the
// edge after one gate call, no forward, with the origin's own 304
// headers, billing one call and nothing else (no export, no download, no
// ledger row); a tag that does not match is forwarded. A zip_url export
// has no validator: its If-None-Match: * is forwarded and exported.
func TestInlineExportThroughTheEdge(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	forDeployedBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		org := "inline-gate-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.export")
		tok := o.token(t, id, sec, "content.export")
		e := newEdge(t, b, o, nil)
		sub := content.Subjects[0]
		n := 0
		get := func(base, target string, hdr ...string) answer {
			t.Helper()
			n++
			return do(t, base, "GET", target, "", append([]string{"Authorization", "Bearer " + tok,
				"X-Request-Id", "inline-gate-" + b.name + "-" + strconv.Itoa(n)}, hdr...)...)
		}
		// usage is the organisation's calls, exports, downloads and
		// ledger rows.
		usage := func() [4]float64 {
			t.Helper()
			_, m := o.adminCall(t, "GET", "/admin/v1/orgs/"+org, "")
			month := m["meters"].(map[string]any)["month"].(map[string]any)
			_, l := o.adminCall(t, "GET", "/admin/v1/orgs/"+org+"/ledger", "")
			rows, _ := l["items"].([]any)
			return [4]float64{month["calls"].(float64), month["exports"].(float64), month["downloads"].(float64), float64(len(rows))}
		}
		for _, target := range []string{
			"/v1/exports/subjects/" + sub.Slug + "?tier=" + sub.Tier + "&format=inline",
			"/v1/exports/classes/" + sub.Tier + "/" + sub.Slug + "/1?format=inline",
		} {
			first := get(e.url, target)
			tag := first.header.Get("ETag")
			if first.status != 200 || tag == "" {
				t.Fatalf("GET %s through the edge: %d, ETag %q: %.300s", target, first.status, tag, first.body)
			}
			for _, inm := range []string{tag, "*"} {
				before, st := usage(), e.host.Stats()
				viaEdge := get(e.url, target, "If-None-Match", inm)
				after, st2 := usage(), e.host.Stats()
				if viaEdge.status != 304 || len(viaEdge.body) != 0 {
					t.Fatalf("%s, If-None-Match %s through the edge: %d %.300s", target, inm, viaEdge.status, viaEdge.body)
				}
				if st2.Forwards != st.Forwards || st2.Subrequests != st.Subrequests+1 {
					t.Errorf("%s, If-None-Match %s: %d forwards, %d other subrequests; want 0 and 1 (the gate)",
						target, inm, st2.Forwards-st.Forwards, st2.Subrequests-st.Subrequests)
				}
				if want := [4]float64{before[0] + 1, before[1], before[2], before[3]}; after != want {
					t.Errorf("%s, If-None-Match %s: calls, exports, downloads, ledger rows %v → %v; want one call only", target, inm, before, after)
				}
				n-- // the same X-Request-Id
				compare(t, "304 "+target, viaEdge, get(o.api, target, "If-None-Match", inm))
			}
			st := e.host.Stats()
			if r := get(e.url, target, "If-None-Match", `W/"0000000000000000"`); r.status != 200 || e.host.Stats().Forwards != st.Forwards+1 {
				t.Errorf("%s, another tag: %d, %d forwards", target, r.status, e.host.Stats().Forwards-st.Forwards)
			}
		}

		zipURL := "/v1/exports/classes/" + sub.Tier + "/" + sub.Slug + "/1"
		before, st := usage(), e.host.Stats()
		if r := get(e.url, zipURL, "If-None-Match", "*"); r.status != 200 || r.header.Get("ETag") != "" {
			t.Errorf("zip_url, If-None-Match: * through the edge: %d, ETag %q", r.status, r.header.Get("ETag"))
		}
		if after := usage(); after != [4]float64{before[0] + 1, before[1] + 1, before[2] + 1, before[3] + 1} {
			t.Errorf("zip_url, If-None-Match: *: calls, exports, downloads, ledger rows %v → %v; want one of each", before, after)
		}
		if s := e.host.Stats(); s.Forwards != st.Forwards+1 || s.Subrequests != st.Subrequests {
			t.Errorf("zip_url, If-None-Match: *: %d forwards, %d other subrequests; want 1 and 0", s.Forwards-st.Forwards, s.Subrequests-st.Subrequests)
		}
	})
}

// linkOrg creates an organisation granted every tier, mints a link to
// mediaID with its token, and returns the organisation and generation the
// link names (a link is signed for both).
func linkOrg(t *testing.T, o *origin, orgID, mediaID string) (org, gen string) {
	t.Helper()
	id, sec := o.org(t, `{"orgId":"`+orgID+`","contentGrants":`+allTiers+`}`, "media.download")
	return mintedOrg(t, o, o.token(t, id, sec, "media.download"), mediaID)
}

// mintedOrg mints a link to mediaID with tok and returns the organisation
// and generation the link names.
func mintedOrg(t *testing.T, o *origin, tok, mediaID string) (org, gen string) {
	t.Helper()
	r := do(t, o.api, "POST", "/v1/media/urls", `{"mediaIds":["`+mediaID+`"]}`, "Authorization", "Bearer "+tok)
	var res struct{ Items []struct{ URL string } }
	if r.status != 200 || json.Unmarshal(r.body, &res) != nil || len(res.Items) != 1 {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	u, err := url.Parse(res.Items[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	l, err := link.Parse(u.EscapedPath(), u.RawQuery)
	if err != nil {
		t.Fatalf("minted link %s: %v", res.Items[0].URL, err)
	}
	return l.Org, l.Gen
}

// TestDownloadLinksEndWithOrganisation (issue #25, point 4): a media link
// and an export link, minted and exported through the API, are refused
// through the edge exactly as directly once their organisation is
// suspended, no longer granted, or deleted and created again; the edge
// forwards them (only the origin knows the organisation) and answers
// the origin's error body.
func TestDownloadLinksEndWithOrganisation(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := shared(t)
	sub := content.Subjects[0]
	m := sub.Lessons[0].Media[0]
	forDeployedBuild(t, func(t *testing.T, b *build) {
		e := newEdge(t, b, o, nil)
		orgID := "ends-" + b.name
		body := `{"orgId":"` + orgID + `","contentGrants":["` + sub.Tier + `"]}`
		id, sec := o.org(t, body, "media.download", "content.export")
		tok := o.token(t, id, sec, "media.download", "content.export")
		r := do(t, o.api, "POST", "/v1/media/urls", `{"mediaIds":["`+m.ID+`"]}`, "Authorization", "Bearer "+tok)
		var mint struct{ Items []struct{ URL string } }
		json.Unmarshal(r.body, &mint)
		x := do(t, o.api, "GET", "/v1/exports/classes/"+sub.Tier+"/"+sub.Slug+"/1", "", "Authorization", "Bearer "+tok)
		var exp struct{ URL string }
		if r.status != 200 || x.status != 200 || json.Unmarshal(x.body, &exp) != nil || len(mint.Items) != 1 {
			t.Fatalf("mint %d, export %d: %s %s", r.status, x.status, r.body, x.body)
		}
		links := []string{}
		for _, u := range []string{mint.Items[0].URL, exp.URL} {
			links = append(links, u[strings.Index(u, link.Prefix):])
		}
		both := func(step string, status int, code string) {
			t.Helper()
			for _, l := range links {
				const rid = "req-wasmtest-ends-0001"
				a := do(t, e.url, "GET", l, "", "X-Request-Id", rid)
				d := do(t, o.api, "GET", l, "", "X-Request-Id", rid)
				if a.status != status || code != "" && a.code() != code {
					t.Errorf("%s: %s through the edge: %d %.200s, want %d %s", step, l, a.status, a.body, status, code)
				}
				if d.status != a.status || code != "" && !bytes.Equal(d.body, a.body) {
					t.Errorf("%s: the edge answered %d %.200s, the origin %d %.200s", step, a.status, a.body, d.status, d.body)
				}
			}
		}
		both("active", 200, "")
		patch(t, o, orgID, `{"status":"suspended"}`)
		both("suspended", 403, "ORG_SUSPENDED")
		patch(t, o, orgID, `{"status":"active","contentGrants":["`+sub.Tier+`/not-`+sub.Slug+`"]}`)
		both("grant removed", 403, "CONTENT_NOT_GRANTED")
		patch(t, o, orgID, `{"contentGrants":["`+sub.Tier+`"]}`)
		both("granted again", 200, "")
		if code, _ := o.adminCall(t, "DELETE", "/admin/v1/orgs/"+orgID, ""); code != 204 {
			t.Fatalf("delete: %d", code)
		}
		both("deleted", 404, "NOT_FOUND")
		o.org(t, body, "media.download")
		both("created again", 404, "NOT_FOUND")
	})
}
