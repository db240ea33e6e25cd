package server

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/openapi/openapitest"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/scope"
)

// exportHarness is the harness with download keys, a canary key and a
// clock a test moves (the server's; the identity provider's is the
// real one).
type exportHarness struct {
	*harness
	clock *atomic.Int64 // unix nanoseconds
}

func newExportHarness(t *testing.T, ceiling int64) *exportHarness {
	t.Helper()
	keys, err := link.ParseKeys(filesKeys)
	if err != nil {
		t.Fatal(err)
	}
	clock := new(atomic.Int64)
	clock.Store(time.Now().UnixNano())
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{urlKeys: keys,
		canaryKey: []byte("test-harness-canary-key-0123456789ab"), inlineCeiling: ceiling,
		now: func() time.Time { return time.Unix(0, clock.Load()) }})
	return &exportHarness{h, clock}
}

// exporter creates an organisation granted every tier whose token has
// content.export and returns the token.
func (h *exportHarness) exporter(orgID string) string {
	h.t.Helper()
	return h.scopedOrg(orgID, nil, scope.ContentExport)
}

// cost checks the meters moved by exactly calls, exports and downloads
// since before, and never by a lesson read or a distinct lesson.
func (h *exportHarness) cost(what, orgID string, before usage, calls, exports, downloads int64) usage {
	h.t.Helper()
	now := h.usage(orgID)
	for _, m := range []struct {
		meter meter.Meter
		want  int64
	}{{meter.MonthCalls, calls}, {meter.MonthExports, exports}, {meter.MonthDownloads, downloads}, {meter.HourLessonReads, 0}} {
		if got := now.Get(m.meter) - before.Get(m.meter); got != m.want {
			h.t.Errorf("%s: meter %v moved by %d, want %d", what, m.meter, got, m.want)
		}
	}
	if now.distinct != before.distinct {
		h.t.Errorf("%s: the enumeration alarm saw %d lessons", what, now.distinct-before.distinct)
	}
	return now
}

// multiClass is a subject of the small corpus with at least two classes.
func multiClass(t *testing.T, c *corpus.Corpus) *corpus.Subject {
	t.Helper()
	for _, sub := range c.Subjects {
		if len(sub.Lessons) >= 2 {
			return sub
		}
	}
	t.Fatal("no subject with two classes")
	return nil
}

// classNums are sub's class numbers.
func classNums(sub *corpus.Subject) []int {
	var out []int
	for _, l := range sub.Lessons {
		out = append(out, l.Number)
	}
	return out
}

// exportBody is an export result as the wire carries it.
type exportBody struct {
	Format         string            `json:"format"`
	URL            string            `json:"url"`
	ExpiresAt      string            `json:"expiresAt"`
	Encoding       string            `json:"encoding"`
	Archive        string            `json:"archive"`
	Data           string            `json:"data"`
	Classes        int               `json:"classes"`
	ContentVersion string            `json:"contentVersion"`
	License        forensic.Envelope `json:"_license"`
}

func decodeExport(t *testing.T, r resp, fields ...string) exportBody {
	t.Helper()
	wantStatus(t, r, 200)
	obj := jsonObject(t, r.body)
	var keys []string
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(fields)
	if !slices.Equal(keys, fields) {
		t.Errorf("fields %v, want %v", keys, fields)
	}
	var b exportBody
	if err := json.Unmarshal(r.body, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// zipFiles reads a zip and returns its files.
func zipFiles(t *testing.T, b []byte) map[string][]byte {
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
			t.Fatal(err)
		}
	}
	return out
}

// tarFiles decodes an inline export's data: base64, then gzip, then tar.
func tarFiles(t *testing.T, data string) map[string][]byte {
	t.Helper()
	gz, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		t.Fatalf("data is not base64: %v", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("data is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not a tar: %v", err)
		}
		out[hdr.Name], _ = io.ReadAll(tr)
	}
	return out
}

// checkBundle checks a bundle's files: one class file per class and the
// manifest naming the organisation and the classes.
func checkBundle(t *testing.T, files map[string][]byte, orgID string, classes []int) {
	t.Helper()
	var m struct {
		ContentVersion string `json:"contentVersion"`
		Stamp          struct {
			OrgID   string `json:"orgId"`
			OrgName string `json:"orgName"`
		} `json:"stamp"`
		Classes []struct {
			ClassNum int `json:"classNum"`
		} `json:"classes"`
	}
	raw, ok := files["manifest.json"]
	if !ok {
		t.Fatalf("no manifest.json among %d files", len(files))
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Stamp.OrgID != orgID || len(m.Classes) != len(classes) {
		t.Errorf("manifest stamp %+v, %d classes; want %s, %d", m.Stamp, len(m.Classes), orgID, len(classes))
	}
	for _, n := range classes {
		if _, ok := files["class-"+strconv.Itoa(n)+".json"]; !ok {
			t.Errorf("no class-%d.json", n)
		}
	}
	for _, f := range []string{"media-manifest.json", "LICENSE.txt"} {
		if _, ok := files[f]; !ok {
			t.Errorf("no %s", f)
		}
	}
}

// A subject exported as a link: 1 call, 1 export, one download per class,
// no lesson read; no-store, no ETag, never 304; one ledger row whose id
// the link carries; the link downloads the zip, unmetered and the same
// each time, until it expires.
func TestExportZipURL(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	path := "/v1/exports/subjects/" + sub.Slug + "?tier=" + sub.Tier
	before := h.usage("org")
	r := h.get(path, tok, "Accept-Encoding", "gzip")
	if r.header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		r.body, _ = io.ReadAll(zr)
	}
	b := decodeExport(t, r, "format", "url", "expiresAt", "classes", "contentVersion", "_license")
	u := h.cost("zip_url", "org", before, 1, 1, int64(len(sub.Lessons)))
	if b.Format != "zip_url" || b.Classes != len(sub.Lessons) || b.ContentVersion != h.corpus().ContentVersion || b.License.Tag == "" {
		t.Errorf("result %+v", b)
	}
	if cc, et := r.header.Get("Cache-Control"), r.header.Get("ETag"); cc != "no-store" || et != "" {
		t.Errorf("Cache-Control %q, ETag %q; want no-store and none", cc, et)
	}
	exp, err := time.Parse(time.RFC3339, b.ExpiresAt)
	if err != nil || exp.Sub(h.srv.cfg.Now()) > exportLinkTTL || exp.Sub(h.srv.cfg.Now()) < exportLinkTTL-time.Second {
		t.Errorf("expiresAt %q (%v), want 15 minutes from now", b.ExpiresAt, err)
	}
	rows := h.ledger("org")
	if len(rows) != 1 {
		t.Fatalf("%d ledger rows, want 1", len(rows))
	}
	e := rows[0].Entry
	if e.Kind != meter.KindExport || e.Target != sub.Ref() || e.Format != "zip_url" || e.Client != "lc_test_org" ||
		!slices.Equal(e.Scopes, []string{scope.Full(scope.ContentExport)}) || e.ContentVersion != b.ContentVersion ||
		e.RequestID != r.header.Get("X-Request-Id") || !e.Expires.Equal(exp) || e.KeyID != "k1" {
		t.Errorf("ledger row %+v", rows[0])
	}
	rel, ok := strings.CutPrefix(b.URL, h.api)
	if !ok || !strings.HasPrefix(rel, link.Prefix+"e/") || !strings.Contains(rel, "&r="+strconv.FormatInt(rows[0].ID, 10)+"&") {
		t.Fatalf("url %q: not a link on the API carrying row %d", b.URL, rows[0].ID)
	}

	// Never 304, If-None-Match: * included: each is another export.
	r = h.get(path, tok, "If-None-Match", "*")
	decodeExport(t, r, "format", "url", "expiresAt", "classes", "contentVersion", "_license")
	u = h.cost("zip_url with If-None-Match: *", "org", u, 1, 1, int64(len(sub.Lessons)))
	if n := len(h.ledger("org")); n != 2 {
		t.Errorf("%d ledger rows, want 2", n)
	}

	// The download: a zip, no token, unmetered, the same bytes each time.
	d := h.get(rel, "")
	wantStatus(t, d, 200)
	if ct := d.header.Get("Content-Type"); ct != "application/zip" {
		t.Errorf("Content-Type %q", ct)
	}
	checkBundle(t, zipFiles(t, d.body), "org", classNums(sub))
	h.clock.Add(int64(exportLinkTTL - time.Second))
	again := h.get(rel, "")
	wantStatus(t, again, 200)
	if !bytes.Equal(again.body, d.body) {
		t.Error("a second download differs")
	}
	h.cost("downloads", "org", u, 0, 0, 0)
	if head := h.do("HEAD", rel, "", nil); head.status != 200 || head.header.Get("Content-Type") != "application/zip" || len(head.body) != 0 {
		t.Errorf("HEAD: %d %q, %d bytes", head.status, head.header.Get("Content-Type"), len(head.body))
	}

	// Expired on the server's clock.
	h.clock.Add(int64(time.Second))
	h.get(rel, "").wantError(t, 404, "NOT_FOUND")
}

// A class export as a link: one class, one download.
func TestExportClassZipURL(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	before := h.usage("org")
	b := decodeExport(t, h.get("/v1/exports/classes/"+sub.Tier+"/"+sub.Slug+"/2", tok),
		"format", "url", "expiresAt", "classes", "contentVersion", "_license")
	h.cost("class zip_url", "org", before, 1, 1, 1)
	if b.Classes != 1 {
		t.Errorf("classes %d", b.Classes)
	}
	if rows := h.ledger("org"); len(rows) != 1 || rows[0].Target != sub.Ref()+"/2" {
		t.Errorf("ledger %+v", rows)
	}
	d := h.get(strings.TrimPrefix(b.URL, h.api), "")
	wantStatus(t, d, 200)
	files := zipFiles(t, d.body)
	checkBundle(t, files, "org", []int{2})
	if _, ok := files["class-1.json"]; ok {
		t.Error("a class export holds another class")
	}
}

// A download reads the organisation as it is when downloaded: a renamed
// one's zip carries the new name; a deleted one's link is 404.
func TestExportLinkOrganisation(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	b := decodeExport(t, h.get("/v1/exports/classes/"+sub.Tier+"/"+sub.Slug+"/1", tok),
		"format", "url", "expiresAt", "classes", "contentVersion", "_license")
	rel := strings.TrimPrefix(b.URL, h.api)
	ctx := context.Background()
	if _, err := h.store.UpdateOrg(ctx, "org", func(o *store.Org) error { o.Name = "Renamed"; return nil }); err != nil {
		t.Fatal(err)
	}
	d := h.get(rel, "")
	wantStatus(t, d, 200)
	if m := zipFiles(t, d.body)["manifest.json"]; !bytes.Contains(m, []byte(`"Renamed"`)) {
		t.Errorf("manifest without the name at download: %s", m)
	}
	if err := h.store.DeleteOrg(ctx, "org"); err != nil {
		t.Fatal(err)
	}
	h.get(rel, "").wantError(t, 404, "NOT_FOUND")
	// Created again under the id: another organisation, whose meters
	// hold no such row.
	h.createOrg("org", []string{sub.Tier}, nil)
	h.get(rel, "").wantError(t, 404, "NOT_FOUND")
}

// An inline export: the bundle in data (base64 of gzip of tar), sent
// without Content-Encoding whatever Accept-Encoding says, with a derived
// ETag; billed as a link is; a match or * is 304 billing one call, with
// no export and no ledger row.
func TestExportInline(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	before := h.usage("org")
	path := "/v1/exports/subjects/" + sub.Slug + "?tier=" + sub.Tier + "&format=inline"
	r := h.get(path, tok, "Accept-Encoding", "gzip, br")
	if ce := r.header.Get("Content-Encoding"); ce != "" {
		t.Fatalf("Content-Encoding %q on an inline export", ce)
	}
	b := decodeExport(t, r, "format", "encoding", "archive", "data", "classes", "contentVersion", "_license")
	u := h.cost("inline", "org", before, 1, 1, int64(len(sub.Lessons)))
	if b.Format != "inline" || b.Encoding != "gzip+base64" || b.Archive != "tar" || b.Classes != len(sub.Lessons) ||
		b.ContentVersion != h.corpus().ContentVersion || b.License.Lic == "" {
		t.Errorf("result %+v", b)
	}
	checkBundle(t, tarFiles(t, b.Data), "org", classNums(sub))
	tag := r.header.Get("ETag")
	if tag == "" || r.header.Get("Cache-Control") != "private" {
		t.Fatalf("ETag %q, Cache-Control %q", tag, r.header.Get("Cache-Control"))
	}
	rows := h.ledger("org")
	if len(rows) != 1 || rows[0].Format != "inline" || !rows[0].Expires.IsZero() || rows[0].KeyID != "" || rows[0].Target != sub.Ref() {
		t.Fatalf("ledger %+v", rows)
	}

	for _, inm := range []string{tag, "*"} {
		nm := h.get(path, tok, "If-None-Match", inm)
		if nm.status != 304 || len(nm.body) != 0 || nm.header.Get("ETag") != tag {
			t.Errorf("If-None-Match %s: %d, ETag %q", inm, nm.status, nm.header.Get("ETag"))
		}
		u = h.cost("inline 304", "org", u, 1, 0, 0)
	}
	if n := len(h.ledger("org")); n != 1 {
		t.Errorf("%d ledger rows after the 304s, want 1", n)
	}
	// The link form's tag does not validate: another format, another tag.
	if r := h.get("/v1/exports/subjects/"+sub.Slug+"?tier="+sub.Tier, tok, "If-None-Match", tag); r.status != 200 {
		t.Errorf("zip_url with the inline tag: %d", r.status)
	}
}

// An inline export over the ceiling is 413 PAYLOAD_TOO_LARGE billing the
// call only; a class under it ships.
func TestExportInlineTooLarge(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	class := h.get("/v1/exports/classes/"+sub.Tier+"/"+sub.Slug+"/1?format=inline", tok)
	whole := h.get("/v1/exports/subjects/"+sub.Slug+"?tier="+sub.Tier+"&format=inline", tok)
	wantStatus(t, class, 200)
	wantStatus(t, whole, 200)
	if len(class.body) >= len(whole.body) {
		t.Fatalf("the class (%d bytes) is not smaller than the subject (%d)", len(class.body), len(whole.body))
	}

	low := newExportHarness(t, int64(len(class.body)))
	tok = low.exporter("org")
	before := low.usage("org")
	r := low.get("/v1/exports/subjects/"+sub.Slug+"?tier="+sub.Tier+"&format=inline", tok)
	r.wantError(t, 413, "PAYLOAD_TOO_LARGE")
	before = low.cost("413", "org", before, 1, 0, 0)
	if n := len(low.ledger("org")); n != 0 {
		t.Errorf("%d ledger rows after a 413", n)
	}
	// The ceiling counts the whole body: exactly the class's fits.
	ok := low.get("/v1/exports/classes/"+sub.Tier+"/"+sub.Slug+"/1?format=inline", tok)
	wantStatus(t, ok, 200)
	if len(ok.body) != len(class.body) {
		t.Errorf("class body %d bytes, want %d", len(ok.body), len(class.body))
	}
	low.cost("class under the ceiling", "org", before, 1, 1, 1)
}

// A spent export allowance is 429 EXPORT_LIMIT with exportsUsed,
// exportsLimit, Retry-After and quotaResetsAt, billing the call only and
// writing no ledger row.
func TestExportLimit(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	one := int64(1)
	if _, err := h.store.UpdateOrg(context.Background(), "org", func(o *store.Org) error { o.Quota.Exports = &one; return nil }); err != nil {
		t.Fatal(err)
	}
	path := "/v1/exports/classes/" + sub.Tier + "/" + sub.Slug + "/1"
	wantStatus(t, h.get(path, tok), 200)
	before := h.usage("org")
	for _, format := range []string{"zip_url", "inline"} {
		r := h.get(path+"?format="+format, tok)
		r.wantError(t, 429, "EXPORT_LIMIT")
		e := jsonObject(t, r.body)["error"].(map[string]any)
		if e["exportsUsed"] != json.Number("1") || e["exportsLimit"] != json.Number("1") || e["quotaResetsAt"] == nil || r.header.Get("Retry-After") == "" {
			t.Errorf("%s: %s, Retry-After %q", format, r.body, r.header.Get("Retry-After"))
		}
		before = h.cost("EXPORT_LIMIT "+format, "org", before, 1, 0, 0)
	}
	if n := len(h.ledger("org")); n != 1 {
		t.Errorf("%d ledger rows, want the one shipped", n)
	}
}

// The target is resolved as the lesson routes resolve theirs, and no
// refusal reads a lesson or writes a ledger row: AMBIGUOUS_SUBJECT and
// BAD_LESSON_ID bill the call; the entitlement refusal is free;
// UNKNOWN_SUBJECT and LESSON_NOT_FOUND bill the call only.
func TestExportRefusals(t *testing.T) {
	h := newExportHarness(t, 0)
	c := h.corpus()
	shared, tiers := sharedSlug(t, c)
	h.createOrg("org", []string{tiers[0]}, nil)
	tok := h.token("org", scope.ContentExport)
	n := len(c.Subject(tiers[0], shared).Lessons)
	before := h.usage("org")
	for _, tc := range []struct {
		path   string
		status int
		code   string
		calls  int64
	}{
		{"/v1/exports/subjects/" + shared, 400, "AMBIGUOUS_SUBJECT", 1},
		{"/v1/exports/subjects/" + shared + "?format=inline", 400, "AMBIGUOUS_SUBJECT", 1},
		{"/v1/exports/subjects/" + shared + "?tier=" + tiers[1], 403, "TIER_NOT_LICENSED", 0},
		{"/v1/exports/subjects/no-such-subject?tier=" + tiers[0], 404, "UNKNOWN_SUBJECT", 1},
		{"/v1/exports/subjects/no-such-subject?format=inline", 404, "UNKNOWN_SUBJECT", 1},
		{"/v1/exports/classes/" + tiers[0] + "/" + shared + "/0", 400, "BAD_LESSON_ID", 1},
		{"/v1/exports/classes/" + tiers[1] + "/" + shared + "/1", 403, "TIER_NOT_LICENSED", 0},
		{"/v1/exports/classes/" + tiers[0] + "/" + shared + "/" + strconv.Itoa(n+1), 404, "LESSON_NOT_FOUND", 1},
		{"/v1/exports/classes/" + tiers[0] + "/no-such-subject/1?format=inline", 404, "LESSON_NOT_FOUND", 1},
	} {
		r := h.get(tc.path, tok, "If-None-Match", "*")
		e := r.wantError(t, tc.status, tc.code)
		if tc.code == "AMBIGUOUS_SUBJECT" && !slices.Equal(e.Tiers, tiers) {
			t.Errorf("%s: tiers %v, want %v", tc.path, e.Tiers, tiers)
		}
		if tc.code == "LESSON_NOT_FOUND" && strings.Contains(tc.path, shared) && (e.Max == nil || *e.Max != int64(n)) {
			t.Errorf("%s: max %v, want %d", tc.path, e.Max, n)
		}
		before = h.cost(tc.path, "org", before, tc.calls, 0, 0)
	}
	if rows := h.ledger("org"); len(rows) != 0 {
		t.Errorf("%d ledger rows after refusals", len(rows))
	}
}

// The export results have exactly the members the OpenAPI description's
// closed ExportResult names for their format, and both export routes
// document 413.
func TestExportResultsMatchOpenAPI(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	_, doc := h.fetchDoc()
	members := map[string][]string{}
	for _, v := range openapitest.At(doc, "components", "schemas", "ExportResult", "oneOf").([]any) {
		if openapitest.At(v, "additionalProperties") != false {
			t.Errorf("an ExportResult form is open: %v", v)
		}
		format := openapitest.Strs(openapitest.At(v, "properties", "format", "enum"))
		members[format[0]] = openapitest.Strs(openapitest.At(v, "required"))
	}
	for _, format := range []string{"zip_url", "inline"} {
		if members[format] == nil {
			t.Fatalf("no ExportResult form for %s", format)
		}
		decodeExport(t, h.get("/v1/exports/classes/"+sub.Tier+"/"+sub.Slug+"/1?format="+format, tok), members[format]...)
	}
	for _, p := range []string{"/v1/exports/subjects/{subjectSlug}", "/v1/exports/classes/{tier}/{subjectSlug}/{classNum}"} {
		codes := openapitest.Strs(openapitest.At(doc, "paths", p, "get", "responses", "413", "content", "application/json", "schema", "properties", "error", "properties", "code", "enum"))
		if !slices.Equal(codes, []string{"PAYLOAD_TOO_LARGE"}) {
			t.Errorf("%s: 413 codes %v", p, codes)
		}
	}
}
