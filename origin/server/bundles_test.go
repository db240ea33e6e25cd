package server

import (
	"bytes"
	"context"
	"mime"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/scope"
)

// The bulk path (issue #25): bundles built once and kept, served as files
// with ranges; refusals decided before any bundle work; links that end
// with their organisation.

// builds is the number of bundles the server's store has built.
func (h *exportHarness) builds() int64 {
	h.t.Helper()
	st, err := h.srv.bundleStore()
	if err != nil {
		h.t.Fatal(err)
	}
	return st.Stats().Builds
}

// zipLink exports sub (class n, or the whole subject when n is 0) as a
// zip link and returns the link's path and query.
func (h *exportHarness) zipLink(tok string, sub *corpus.Subject, n int) string {
	h.t.Helper()
	path := "/v1/exports/subjects/" + sub.Slug + "?tier=" + sub.Tier
	if n > 0 {
		path = "/v1/exports/classes/" + sub.Ref() + "/" + strconv.Itoa(n)
	}
	b := decodeExport(h.t.(*testing.T), h.get(path, tok), "format", "url", "expiresAt", "classes", "contentVersion", "_license")
	return strings.TrimPrefix(b.URL, h.api)
}

var strongTag = regexp.MustCompile(`^"[0-9a-f]{64}"$`)

// A zip link's bundle is built once, by its first downloads however many
// ask at once; every download and HEAD after is a file read with its
// size, a strong ETag and byte ranges.
func TestExportLinkBuiltOnce(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	rel := h.zipLink(tok, sub, 0)
	if n := h.builds(); n != 0 {
		t.Fatalf("the export built %d bundles; the link builds", n)
	}

	// The first downloads, at once: one build.
	var wg sync.WaitGroup
	gets := make([]resp, 8)
	for i := range gets {
		wg.Add(1)
		go func() { defer wg.Done(); gets[i] = h.get(rel, "") }()
	}
	wg.Wait()
	whole := gets[0]
	for i, g := range gets {
		wantStatus(t, g, 200)
		if !bytes.Equal(g.body, whole.body) {
			t.Errorf("download %d differs", i)
		}
	}
	if n := h.builds(); n != 1 {
		t.Errorf("%d builds after 8 first downloads at once, want 1", n)
	}
	head := h.do("HEAD", rel, "", nil)
	wantStatus(t, head, 200)
	size, err := strconv.Atoi(head.header.Get("Content-Length"))
	if err != nil || size == 0 || len(head.body) != 0 {
		t.Fatalf("HEAD: Content-Length %q, %d body bytes", head.header.Get("Content-Length"), len(head.body))
	}
	checkBundle(t, zipFiles(t, whole.body), "org", classNums(sub))
	hd := whole.header
	tag := hd.Get("ETag")
	if len(whole.body) != size || hd.Get("Content-Length") != strconv.Itoa(size) || hd.Get("Accept-Ranges") != "bytes" ||
		!strongTag.MatchString(tag) || tag != head.header.Get("ETag") {
		t.Errorf("GET: %d bytes, Content-Length %q, Accept-Ranges %q, ETag %q (HEAD's %q); want %d, bytes, a strong tag",
			len(whole.body), hd.Get("Content-Length"), hd.Get("Accept-Ranges"), tag, head.header.Get("ETag"), size)
	}
	_, params, err := mime.ParseMediaType(hd.Get("Content-Disposition"))
	if err != nil || params["filename"] != sub.Tier+"-"+sub.Slug+".zip" {
		t.Errorf("Content-Disposition %q (%v)", hd.Get("Content-Disposition"), err)
	}

	// Resume: the rest from an offset, while the tag is current.
	part := h.get(rel, "", "Range", "bytes=100-", "If-Range", tag)
	wantStatus(t, part, 206)
	if !bytes.Equal(part.body, whole.body[100:]) || part.header.Get("Content-Range") != "bytes 100-"+strconv.Itoa(size-1)+"/"+strconv.Itoa(size) {
		t.Errorf("206: %d bytes, Content-Range %q", len(part.body), part.header.Get("Content-Range"))
	}
	stale := h.get(rel, "", "Range", "bytes=100-", "If-Range", `"0000"`)
	wantStatus(t, stale, 200)
	if !bytes.Equal(stale.body, whole.body) {
		t.Error("a stale If-Range did not send the whole zip")
	}
	wantStatus(t, h.get(rel, "", "Range", "bytes="+strconv.Itoa(size+10)+"-"), 416)
	wantStatus(t, h.get(rel, "", "If-None-Match", tag), 304)
	if n := h.builds(); n != 1 {
		t.Errorf("%d builds in all, want 1", n)
	}

	// Another organisation's bundle of the same subject is its own.
	other := h.zipLink(h.exporter("other"), sub, 0)
	o := h.get(other, "")
	wantStatus(t, o, 200)
	if o.header.Get("ETag") == tag || bytes.Equal(o.body, whole.body) {
		t.Error("two organisations share a bundle")
	}
	if n := h.builds(); n != 2 {
		t.Errorf("%d builds, want 2", n)
	}
}

// An inline export is built once too: the second is read from the store,
// and a bundle over the ceiling is 413 from its stored size.
func TestExportInlineStored(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	path := "/v1/exports/subjects/" + sub.Slug + "?tier=" + sub.Tier + "&format=inline"
	a, b := h.get(path, tok), h.get(path, tok)
	wantStatus(t, a, 200)
	if !bytes.Equal(a.body, b.body) || a.header.Get("Content-Length") != strconv.Itoa(len(a.body)) {
		t.Errorf("two inline exports differ, or Content-Length %q for %d bytes", a.header.Get("Content-Length"), len(a.body))
	}
	if n := h.builds(); n != 1 {
		t.Errorf("%d builds for two inline exports, want 1", n)
	}

	small := newExportHarness(t, 2000)
	tok = small.exporter("org")
	before := small.usage("org")
	for range 3 {
		small.get(path, tok).wantError(t, 413, "PAYLOAD_TOO_LARGE")
	}
	small.cost("413s", "org", before, 3, 0, 0)
	if n := small.builds(); n != 1 {
		t.Errorf("%d builds for three 413s, want 1", n)
	}
}

// Every refusal an export's meters decide comes before any bundle work:
// a spent allowance or quota, an hourly cap, the enumeration alarm, each
// billed as the spec says.
func TestExportRefusedBeforeBuild(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	zero, one := int64(0), int64(1)
	for _, tc := range []struct {
		org   string
		mod   func(*store.Org)
		code  string
		calls int64
	}{
		{"exports", func(o *store.Org) { o.Quota.Exports = &zero }, "EXPORT_LIMIT", 1},
		{"downloads", func(o *store.Org) { o.Quota.Downloads = &one }, "QUOTA_EXCEEDED", 1},
		{"calls", func(o *store.Org) { o.Quota.Calls = &zero }, "QUOTA_EXCEEDED", 0},
		{"hourly", func(o *store.Org) { o.RateLimits.CallsPerHour = &zero }, "RATE_LIMITED", 1},
	} {
		tok := h.exporter(tc.org)
		if _, err := h.store.UpdateOrg(context.Background(), tc.org, func(o *store.Org) error { tc.mod(o); return nil }); err != nil {
			t.Fatal(err)
		}
		before := h.usage(tc.org)
		for _, format := range []string{"inline", "zip_url"} {
			r := h.get("/v1/exports/subjects/"+sub.Slug+"?tier="+sub.Tier+"&format="+format, tok)
			status := 429
			r.wantError(t, status, tc.code)
			if r.header.Get("Retry-After") == "" {
				t.Errorf("%s %s: no Retry-After", tc.org, format)
			}
			before = h.cost(tc.org+" "+format, tc.org, before, tc.calls, 0, 0)
		}
	}
	// The enumeration alarm: 403, nothing billed.
	tok := h.exporter("alarmed")
	tripAlarm(t, h.harness, "alarmed")
	before := h.usage("alarmed")
	h.get("/v1/exports/subjects/"+sub.Slug+"?tier="+sub.Tier+"&format=inline", tok).wantError(t, 403, "ORG_SUSPENDED")
	h.cost("alarm", "alarmed", before, 0, 0, 0)
	if n := h.builds(); n != 0 {
		t.Errorf("refused exports built %d bundles", n)
	}
	if rows := h.ledger("exports"); len(rows) != 0 {
		t.Errorf("refusals wrote %d ledger rows", len(rows))
	}
}

// tripAlarm puts orgID's enumeration alarm in force, as a read past 40%
// of its granted lessons would.
func tripAlarm(t *testing.T, h *harness, orgID string) {
	t.Helper()
	o, err := h.store.GetOrg(context.Background(), orgID)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.meters.Apply(context.Background(), meter.Op{Org: meter.Key(o), Now: h.now(),
		Read: &meter.Read{Lesson: "topics/x/1", Granted: 1}})
	if err != nil || !res.Tripped {
		t.Fatalf("the alarm did not trip: %+v %v", res, err)
	}
}

// A download link ends with its organisation: at every download, of a
// zip or of a media asset, the organisation it names is read, and one
// suspended (by an operator or the alarm), expired, awaiting a newer
// agreement or no longer granted the subject is refused with the API's
// code; a deleted one, or one created again under its id, is 404.
func TestDownloadLinksEndWithOrganisation(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	ctx := context.Background()
	h.createOrg("org", []string{sub.Tier}, nil)
	tok := h.token("org", scope.ContentExport, scope.MediaDownload)
	zipRel := h.zipLink(tok, sub, 1)
	m := sub.Lessons[0].Media[0]
	mediaRel := strings.TrimPrefix(minted(t, h.mintRequest(tok, []string{m.ID}, 0)).Items[0].URL, h.api)
	both := func(what string, status int, code string) {
		t.Helper()
		for _, rel := range []string{zipRel, mediaRel} {
			for _, method := range []string{"GET", "HEAD"} {
				r := h.do(method, rel, "", nil)
				if code == "" || method == "HEAD" {
					wantStatus(t, r, status)
					continue
				}
				r.wantError(t, status, code)
			}
		}
	}
	update := func(mod func(*store.Org)) {
		t.Helper()
		if _, err := h.store.UpdateOrg(ctx, "org", func(o *store.Org) error { mod(o); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	both("active", 200, "")
	_, params, _ := mime.ParseMediaType(h.get(mediaRel, "").header.Get("Content-Disposition"))
	if want := mediaFileName(m); params["filename"] != want || !strings.Contains(mediaRel, "/"+want+"?") {
		t.Errorf("media link %s saves as %q, want %q", mediaRel, params["filename"], want)
	}

	update(func(o *store.Org) { o.Status = "suspended" })
	both("suspended", 403, "ORG_SUSPENDED")
	update(func(o *store.Org) { o.Status = "active"; o.RenewsAt = h.now().Add(-time.Second) })
	both("expired", 403, "LICENSE_EXPIRED")
	update(func(o *store.Org) { o.RenewsAt = h.now().Add(time.Hour); o.RequiredEclaVersion = o.EclaVersion + 1 })
	both("agreement", 403, "LICENSE_REQUIRED")
	update(func(o *store.Org) { o.RequiredEclaVersion = o.EclaVersion; o.Grants = []string{"primary"} })
	if sub.Tier == "primary" {
		t.Fatal("the subject is in primary")
	}
	both("tier revoked", 403, "TIER_NOT_LICENSED")
	update(func(o *store.Org) { o.Grants = []string{sub.Tier + "/not-" + sub.Slug} })
	both("subject revoked", 403, "CONTENT_NOT_GRANTED")
	update(func(o *store.Org) { o.Grants = []string{sub.Ref()} })
	both("granted again", 200, "")
	tripAlarm(t, h.harness, "org")
	both("alarm", 403, "ORG_SUSPENDED")

	if err := h.store.DeleteOrg(ctx, "org"); err != nil {
		t.Fatal(err)
	}
	both("deleted", 404, "NOT_FOUND")
	h.createOrg("org", []string{sub.Tier}, nil)
	both("created again", 404, "NOT_FOUND")
}

// At most DownloadsPerOrg downloads of one organisation are served at
// once: one more is 429 RATE_LIMITED with Retry-After, and served again
// once one ends.
func TestDownloadsPerOrg(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	rel := h.zipLink(tok, sub, 1)
	wantStatus(t, h.get(rel, ""), 200)
	downloadsEnded(t, h.srv)
	o, err := h.store.GetOrg(context.Background(), "org")
	if err != nil {
		t.Fatal(err)
	}
	var held []func()
	for range DefaultDownloadsPerOrg {
		release, err := h.srv.downloadSlot(meter.Key(o))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	r := h.get(rel, "")
	e := r.wantError(t, 429, "RATE_LIMITED")
	if r.header.Get("Retry-After") != "1" || e.RetryAfter == nil || *e.RetryAfter != 1 {
		t.Errorf("Retry-After %q, retryAfterSeconds %v", r.header.Get("Retry-After"), e.RetryAfter)
	}
	other := h.zipLink(h.exporter("other"), sub, 1)
	wantStatus(t, h.get(other, ""), 200) // another organisation's are its own
	held[0]()
	wantStatus(t, h.get(rel, ""), 200)
	for _, release := range held[1:] {
		release()
	}
	downloadsEnded(t, h.srv)
}

// downloadsEnded waits until s holds no download: a handler releases its
// download after the client has the answer.
func downloadsEnded(t *testing.T, s *Server) {
	t.Helper()
	for i := 0; ; i++ {
		s.downloads.mu.Lock()
		n := 0
		for _, o := range s.downloads.orgs {
			n += o.active
		}
		s.downloads.mu.Unlock()
		if n == 0 {
			return
		}
		if i == 100 {
			t.Fatalf("%d downloads in progress after all ended", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Downloads of one organisation start at most DownloadRate a second, in
// bursts of twice that: one more is 429 RATE_LIMITED with Retry-After,
// decided before the organisation is read; the bucket refills with time.
func TestDownloadRate(t *testing.T) {
	h := newExportHarness(t, 0)
	h.srv.cfg.DownloadRate = 1 // bursts of 2
	sub := multiClass(t, h.corpus())
	rel := h.zipLink(h.exporter("org"), sub, 1)
	wantStatus(t, h.get(rel, ""), 200)
	wantStatus(t, h.do("HEAD", rel, "", nil), 200)
	r := h.get(rel, "")
	e := r.wantError(t, 429, "RATE_LIMITED")
	if r.header.Get("Retry-After") != "1" || e.RetryAfter == nil || *e.RetryAfter != 1 {
		t.Errorf("Retry-After %q, retryAfterSeconds %v", r.header.Get("Retry-After"), e.RetryAfter)
	}
	wantStatus(t, h.get(h.zipLink(h.exporter("other"), sub, 1), ""), 200) // another organisation's bucket
	h.clock.Add(int64(time.Second))
	wantStatus(t, h.get(rel, ""), 200)
	h.get(rel, "").wantError(t, 429, "RATE_LIMITED")

	// Refusals spend the bucket too: a flood of links of a suspended
	// organisation reads the database at most the rate a second.
	h.clock.Add(int64(10 * time.Second))
	if _, err := h.store.UpdateOrg(context.Background(), "org", func(o *store.Org) error { o.Status = "suspended"; return nil }); err != nil {
		t.Fatal(err)
	}
	h.get(rel, "").wantError(t, 403, "ORG_SUSPENDED")
	h.get(rel, "").wantError(t, 403, "ORG_SUSPENDED")
	h.get(rel, "").wantError(t, 429, "RATE_LIMITED")
}

// usageReads counts the meters' Usage reads.
type usageReads struct {
	meter.Store
	n atomic.Int32
}

func (u *usageReads) Usage(ctx context.Context, org string, now time.Time) (meter.Usage, error) {
	u.n.Add(1)
	return u.Store.Usage(ctx, org, now)
}

// A refused inline export reads the meters once: the counts the refusal
// left show the next one certain, and it goes straight to the export's
// op, as a zip_url export's refusal does. A raised allowance is read
// again.
func TestExportRefusalRemembered(t *testing.T) {
	reads := &usageReads{}
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{meters: func(m meter.Store) meter.Store { reads.Store = m; return reads }})
	sub := multiClass(t, h.corpus())
	tok := h.scopedOrg("org", nil, scope.ContentExport)
	zero := int64(0)
	if _, err := h.store.UpdateOrg(context.Background(), "org", func(o *store.Org) error { o.Quota.Exports = &zero; return nil }); err != nil {
		t.Fatal(err)
	}
	path := "/v1/exports/subjects/" + sub.Slug + "?tier=" + sub.Tier + "&format=inline"
	before := h.usage("org")
	for range 3 {
		h.get(path, tok).wantError(t, 429, "EXPORT_LIMIT")
	}
	if n := reads.n.Load(); n != 1 {
		t.Errorf("three refusals read the meters %d times, want 1", n)
	}
	after := h.usage("org")
	if got := after.Get(meter.MonthCalls) - before.Get(meter.MonthCalls); got != 3 || after.Get(meter.MonthExports) != 0 {
		t.Errorf("billed %d calls, %d exports; want 3 and 0", got, after.Get(meter.MonthExports))
	}
	if _, err := h.store.UpdateOrg(context.Background(), "org", func(o *store.Org) error { o.Quota.Exports = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.get(path, tok), 200)
}

// An inline export whose bundle must be built counts among the
// organisation's downloads: past their rate it is 429 RATE_LIMITED before
// any bundle work, billing nothing. One whose bundle is stored is read.
func TestExportInlineBounded(t *testing.T) {
	h := newExportHarness(t, 0)
	h.srv.cfg.DownloadRate = 1 // bursts of 2
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	class := func(n int) string {
		return "/v1/exports/classes/" + sub.Ref() + "/" + strconv.Itoa(n) + "?format=inline"
	}
	wantStatus(t, h.get(class(1), tok), 200)
	wantStatus(t, h.get(class(2), tok), 200)
	for range 3 {
		wantStatus(t, h.get(class(1), tok), 200) // stored: read
	}
	path := class(3)
	before := h.usage("org")
	r := h.get(path, tok)
	r.wantError(t, 429, "RATE_LIMITED")
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After")
	}
	h.cost("bounded", "org", before, 0, 0, 0)
	if n := h.builds(); n != 2 {
		t.Errorf("%d builds, want 2", n)
	}
}
