package wasmtest

import (
	"archive/zip"
	"bytes"
	"encoding/json"
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
		good := keys.Sign(link.Link{Kind: link.Media, Expires: exp, Row: 1, Name: "asset", Media: m.ID})
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
	forEachBuild(t, func(t *testing.T, b *build) {
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
