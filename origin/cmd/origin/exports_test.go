package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/shared/link"
)

// TestExportsStack (issue #16, point 3) runs the export routes in the
// stack as an operator starts it, on both stores, over the deployed-scale
// corpus (the small one has no 30-class subject): the spec's cost
// examples read through the admin API (a 30-class subject exported in
// either format is 1 call, 30 downloads, 1 export; a class is 1, 1, 1; an
// inline 304 is 1 call and nothing else, from the route or the edge's
// gate call), a ledger row for each export shipped and none for a 304, a
// refusal or a download, the zip link
// downloading the same valid zip, unmetered, until the test clock passes
// its 15 minutes, and the export allowance and the download quota
// refusing as the spec says.
func TestExportsStack(t *testing.T) {
	onBothStores(t, "the exports", exportsStack)
}

var (
	fullOnce sync.Once
	fullDir  string
	fullErr  error
)

// fullCorpus is the full corpus of seed 1, written once for the test
// binary (both stores' runs reload it; an origin only reads it) and
// removed by TestMain.
func fullCorpus(t *testing.T) string {
	t.Helper()
	fullOnce.Do(func() {
		if fullDir, fullErr = os.MkdirTemp("", "lectern-full-"); fullErr == nil {
			_, fullErr = gen.Write(filepath.Join(fullDir, "full"), gen.Options{Seed: 1})
		}
	})
	if fullErr != nil {
		t.Fatal(fullErr)
	}
	return filepath.Join(fullDir, "full")
}

func exportsStack(t *testing.T, s *testStack) {
	s.reloadTo(fullCorpus(t))
	var sub *corpus.Subject
	for _, c := range s.Content().Subjects {
		if len(c.Lessons) == 30 {
			sub = c
			break
		}
	}
	if sub == nil {
		t.Fatal("the corpus has no 30-class subject")
	}
	subject := "/v1/exports/subjects/" + sub.Slug + "?tier=" + sub.Tier
	class := "/v1/exports/classes/" + sub.Tier + "/" + sub.Slug + "/3"
	id, sec := s.org(`{"orgId":"exporter","contentGrants":`+allTiers+`}`, "content.export")
	tok := s.token(id, sec, "content.export")
	rows := 0
	shipped := func(what, format, target string) {
		t.Helper()
		rows++
		r := s.ledgerRows("exporter")
		if len(r) != rows {
			t.Fatalf("%s: %d ledger rows, want %d", what, len(r), rows)
		}
		if row := r[rows-1]; row["kind"] != "export" || row["format"] != format || row["target"] != target {
			t.Errorf("%s: ledger row %v", what, row)
		}
	}

	// A 30-class subject as a link: 1 call, 1 export, 30 downloads.
	r := s.get("GET", subject, tok, "If-None-Match", "*") // never a 304
	var x struct {
		Format, URL, ExpiresAt string
		Classes                int
	}
	if err := json.Unmarshal(r.body, &x); r.status != 200 || err != nil || x.Format != "zip_url" || x.Classes != 30 ||
		r.header.Get("Cache-Control") != "no-store" || r.header.Get("ETag") != "" {
		t.Fatalf("zip_url export: %d, Cache-Control %q, ETag %q: %s", r.status, r.header.Get("Cache-Control"), r.header.Get("ETag"), r.body)
	}
	s.wantExportMeters("zip_url subject", "exporter", 1, 1, 30)
	shipped("zip_url subject", "zip_url", sub.Ref())

	// Its link: the same valid zip on every download, unmetered.
	_, rest, _ := strings.Cut(x.URL, link.Prefix)
	path := link.Prefix + rest
	z := s.get("GET", path, "")
	if z.status != 200 || z.header.Get("Content-Type") != "application/zip" {
		t.Fatalf("download: %d %q %.300s", z.status, z.header.Get("Content-Type"), z.body)
	}
	files := unzip(t, z.body)
	var m struct {
		ContentVersion string
		Stamp          struct{ OrgID string }
		Classes        []struct{ LessonID string }
	}
	if err := json.Unmarshal(files["manifest.json"], &m); err != nil || m.Stamp.OrgID != "exporter" || len(m.Classes) != 30 ||
		m.Classes[2].LessonID != sub.Lessons[2].ID ||
		m.ContentVersion != s.Content().ContentVersion {
		t.Errorf("manifest.json (%v): %.300s", err, files["manifest.json"])
	}
	var c3 struct {
		LessonID string
		Cards    []struct{ Body string }
	}
	if err := json.Unmarshal(files["class-3.json"], &c3); err != nil || c3.LessonID != sub.Lessons[2].ID || len(c3.Cards) == 0 {
		t.Errorf("class-3.json (%v): lessonId %q (want %q), %d cards", err, c3.LessonID, sub.Lessons[2].ID, len(c3.Cards))
	}
	if again := s.get("GET", path, ""); again.status != 200 || !bytes.Equal(again.body, z.body) {
		t.Errorf("a second download: %d, the same bytes %v", again.status, bytes.Equal(again.body, z.body))
	}
	s.wantExportMeters("two downloads", "exporter", 1, 1, 30)

	// The same subject inline: the same cost; its ETag answers 304 for
	// one call and nothing else, as * does.
	r = s.get("GET", subject+"&format=inline", tok)
	var in struct{ Format, Data string }
	if err := json.Unmarshal(r.body, &in); r.status != 200 || err != nil || in.Format != "inline" || in.Data == "" {
		t.Fatalf("inline export: %d %.300s", r.status, r.body)
	}
	tag := r.header.Get("ETag")
	s.wantExportMeters("inline subject", "exporter", 2, 2, 60)
	shipped("inline subject", "inline", sub.Ref())
	for _, inm := range []string{tag, "*", `"other", ` + tag} {
		nm := s.get("GET", subject+"&format=inline", tok, "If-None-Match", inm)
		if nm.status != 304 || len(nm.body) != 0 || nm.header.Get("ETag") != tag {
			t.Errorf("If-None-Match %s: %d, ETag %q, %d bytes", inm, nm.status, nm.header.Get("ETag"), len(nm.body))
		}
	}
	s.wantExportMeters("three 304s", "exporter", 5, 2, 60)

	// A class, either format: 1 call, 1 export, 1 download.
	s.expect(s.get("GET", class, tok), 200, "")
	s.wantExportMeters("zip_url class", "exporter", 6, 3, 61)
	shipped("zip_url class", "zip_url", sub.Lessons[2].ID)
	s.expect(s.get("GET", class+"?format=inline", tok), 200, "")
	s.wantExportMeters("inline class", "exporter", 7, 4, 62)
	shipped("inline class", "inline", sub.Lessons[2].ID)

	// A refusal: the call only, no row.
	s.expect(s.get("GET", "/v1/exports/classes/"+sub.Tier+"/"+sub.Slug+"/31", tok), 404, "LESSON_NOT_FOUND")
	s.wantExportMeters("LESSON_NOT_FOUND", "exporter", 8, 4, 62)

	// The link lives 15 minutes on the stack's clock.
	expires, err := time.Parse(time.RFC3339, x.ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	left := expires.Sub(s.Clock().Now())
	if left <= 14*time.Minute || left > 15*time.Minute {
		t.Fatalf("expiresAt %s is %v away", x.ExpiresAt, left)
	}
	s.advance(int(left/time.Second) - 2)
	if d := s.get("GET", path, ""); d.status != 200 || !bytes.Equal(d.body, z.body) {
		t.Errorf("download 2 s before expiresAt: %d", d.status)
	}
	s.advance(3) // past expiresAt, a whole second, whatever fraction of one is left
	s.expect(s.get("GET", path, ""), 404, "NOT_FOUND")
	if h := s.get("HEAD", path, ""); h.status != 404 {
		t.Errorf("HEAD after expiresAt: %d", h.status)
	}
	s.wantExportMeters("downloads and the refused one", "exporter", 8, 4, 62)

	// The edge's gate call decides an inline export's 304 as the route
	// does (one call, nothing else); a zip_url result is never one (412,
	// nothing billed), If-None-Match: * included.
	g := s.gate(subject+"&format=inline", tok, tag, "edge-export-0001", true)
	if g.StatusCode != 204 || g.Header.Get("ETag") != tag {
		t.Errorf("gate of the inline export: %d, ETag %q", g.StatusCode, g.Header.Get("ETag"))
	}
	s.wantExportMeters("the gate's 304", "exporter", 9, 4, 62)
	if g := s.gate(subject, tok, "*", "edge-export-0002", true); g.StatusCode != 412 {
		t.Errorf("gate of the zip_url export: %d, want 412", g.StatusCode)
	}
	if g := s.gate(subject+"&format=inline", tok, `W/"0000000000000000"`, "edge-export-0003", true); g.StatusCode != 412 {
		t.Errorf("gate of the inline export, another tag: %d, want 412", g.StatusCode)
	}
	s.wantExportMeters("the gate's 412s", "exporter", 9, 4, 62)
	if n := len(s.ledgerRows("exporter")); n != rows {
		t.Errorf("%d ledger rows at the end, want %d", n, rows)
	}

	// The export allowance: 429 EXPORT_LIMIT, the call only.
	lid, lsec := s.org(`{"orgId":"export-limit","contentGrants":`+allTiers+`,"quota":{"exports":1}}`, "content.export")
	ltok := s.token(lid, lsec, "content.export")
	s.expect(s.get("GET", class, ltok), 200, "")
	for _, format := range []string{"zip_url", "inline"} {
		r := s.get("GET", class+"?format="+format, ltok)
		s.expect(r, 429, "EXPORT_LIMIT")
		var e struct {
			Error struct {
				ExportsUsed, ExportsLimit *int64
				QuotaResetsAt             string
			}
		}
		if err := json.Unmarshal(r.body, &e); err != nil || e.Error.ExportsUsed == nil || *e.Error.ExportsUsed != 1 ||
			e.Error.ExportsLimit == nil || *e.Error.ExportsLimit != 1 || e.Error.QuotaResetsAt == "" || r.header.Get("Retry-After") == "" {
			t.Errorf("EXPORT_LIMIT %s: Retry-After %q: %s", format, r.header.Get("Retry-After"), r.body)
		}
	}
	s.wantExportMeters("EXPORT_LIMIT", "export-limit", 3, 1, 1)
	if n := len(s.ledgerRows("export-limit")); n != 1 {
		t.Errorf("%d ledger rows after EXPORT_LIMIT, want the one shipped", n)
	}

	// A spent download quota: QUOTA_EXCEEDED, the call only, no row.
	qid, qsec := s.org(`{"orgId":"export-quota","contentGrants":`+allTiers+`,"quota":{"downloads":29}}`, "content.export")
	qtok := s.token(qid, qsec, "content.export")
	for _, format := range []string{"zip_url", "inline"} {
		s.expect(s.get("GET", subject+"&format="+format, qtok), 429, "QUOTA_EXCEEDED")
	}
	s.wantExportMeters("QUOTA_EXCEEDED", "export-quota", 2, 0, 0)
	if n := len(s.ledgerRows("export-quota")); n != 0 {
		t.Errorf("%d ledger rows after QUOTA_EXCEEDED", n)
	}
}

// wantExportMeters checks the organisation's monthly calls, exports and
// downloads, and that no lesson read was billed.
func (s *testStack) wantExportMeters(what, org string, calls, exports, downloads float64) {
	s.t.Helper()
	m := s.meters(org)
	month, hour := m["month"].(map[string]any), m["hour"].(map[string]any)
	if month["calls"] != calls || month["exports"] != exports || month["downloads"] != downloads || hour["lessonreads"] != 0.0 {
		s.t.Errorf("%s: %s: calls %v, exports %v, downloads %v, lesson reads %v; want %v, %v, %v, 0", what, org,
			month["calls"], month["exports"], month["downloads"], hour["lessonreads"], calls, exports, downloads)
	}
}

// unzip reads a zip's files.
func unzip(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name], err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
	}
	return out
}

// TestExportResumeWithCurl (issue #25, point 2): an interrupted download of
// a zip link resumes with curl's `-C -` (curl reads Content-Length and
// asks for the rest with a Range), and the bundle is kept in
// LECTERN_BUNDLE_DIR, private to the origin. Skipped without curl.
func TestExportResumeWithCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not found: the resume through a real client is not checked")
	}
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	s := bootStack(t, testEnv(dir, nil), nil)
	defer s.Close()
	bundleDir := filepath.Join(dir, "bundles") // testEnv's LECTERN_BUNDLE_DIR
	id, sec := s.org(`{"orgId":"resumer","contentGrants":`+allTiers+`}`, "content.export")
	tok := s.token(id, sec, "content.export")
	sub := s.Content().Subjects[0]
	r := s.get("GET", "/v1/exports/subjects/"+sub.Slug+"?tier="+sub.Tier, tok)
	var res struct{ URL string }
	if r.status != 200 || json.Unmarshal(r.body, &res) != nil || res.URL == "" {
		t.Fatalf("export: %d %s", r.status, r.body)
	}
	whole := s.get("GET", res.URL[strings.Index(res.URL, link.Prefix):], "")
	if whole.status != 200 || len(whole.body) < 200 {
		t.Fatalf("download: %d, %d bytes", whole.status, len(whole.body))
	}
	out := filepath.Join(t.TempDir(), "bundle.zip")
	if err := os.WriteFile(out, whole.body[:len(whole.body)/3], 0o600); err != nil { // an interrupted download
		t.Fatal(err)
	}
	cmd := exec.Command(curl, "-sS", "--fail", "-C", "-", "-o", out, res.URL)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("curl -C -: %v: %s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, whole.body) {
		t.Fatalf("the resumed file is %d bytes, the whole zip %d (%v)", len(got), len(whole.body), err)
	}
	des, err := os.ReadDir(bundleDir)
	if err != nil || len(des) != 2 || des[0].Name() != ".lock" || len(des[1].Name()) != 64 {
		t.Fatalf("LECTERN_BUNDLE_DIR holds %v (%v), want its lock and the one bundle", des, err)
	}
	if info, err := os.Stat(bundleDir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("LECTERN_BUNDLE_DIR mode %v (%v), want 0700", info.Mode(), err)
	}
}
