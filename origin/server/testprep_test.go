package server

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/scope"
)

// TestTestprep runs the test-prep scenarios on one harness (each with its
// own organisations): starting the identity provider costs a bcrypt hash
// at the default cost.
func TestTestprep(t *testing.T) {
	h := newHarness(t)
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *harness)
	}{
		{"catalog", prepCatalog},
		{"refusals", prepItemsRefusals},
		{"walk", prepItemsWalk},
		{"allowance", prepItemsAllowance},
		{"shortened cursor", prepItemsShortenedCursor},
		{"etag", prepItemsETag},
	} {
		t.Run(c.name, func(t *testing.T) {
			hh := *h
			hh.t = t
			c.fn(t, &hh)
		})
	}
}

type prepPage = pageOf[prepItem]

func (r resp) itemPage(t testing.TB) prepPage {
	t.Helper()
	return strictPage[prepItem](t, r)
}

func prepPtr(n int64) *int64 { return &n }

func prepCatalog(t *testing.T, h *harness) {
	tok := h.scopedOrg("cat", nil, scope.ContentRead)
	c := h.content.Load()

	r := h.get("/v1/testprep", tok)
	wantStatus(t, r, 200)
	var got struct {
		Items          []prepTest        `json:"items"`
		Total          int               `json:"total"`
		HasMore        bool              `json:"hasMore"`
		NextCursor     *string           `json:"nextCursor"`
		ContentVersion string            `json:"contentVersion"`
		License        forensic.Envelope `json:"_license"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	specOrder := [][]string{{"digital-sat", "rw", "math"}, {"act", "english", "math", "reading", "science"},
		{"psat-nmsqt", "rw", "math"}, {"caaspp", "ela", "math", "science"}}
	if len(got.Items) != 4 || got.Total != 4 || got.HasMore || got.NextCursor != nil {
		t.Fatalf("catalog: %d tests, total %d, hasMore %v", len(got.Items), got.Total, got.HasMore)
	}
	for i, row := range got.Items {
		ids := []string{row.ID}
		sum := 0
		ct := c.Test(row.ID)
		for _, s := range row.Sections {
			ids = append(ids, s.ID)
			if n := len(ct.Section(s.ID).Items); s.ItemCount != n || n == 0 {
				t.Errorf("%s/%s: itemCount %d, corpus has %d", row.ID, s.ID, s.ItemCount, n)
			}
			if s.Label == "" || s.ItemsURL != "/v1/testprep/"+row.ID+"/items?section="+s.ID {
				t.Errorf("%s/%s: label %q itemsUrl %q", row.ID, s.ID, s.Label, s.ItemsURL)
			}
			sum += s.ItemCount
		}
		if !slices.Equal(ids, specOrder[i]) {
			t.Errorf("catalog row %d: %v, want %v", i, ids, specOrder[i])
		}
		if row.Name != ct.Name || row.ItemCount != sum {
			t.Errorf("%s: name %q itemCount %d (sections sum %d)", row.ID, row.Name, row.ItemCount, sum)
		}
	}
	if got.ContentVersion != c.ContentVersion || got.License.Lic == "" || got.License.Tag == "" {
		t.Errorf("contentVersion %q, _license %+v", got.ContentVersion, got.License)
	}
	tag := r.header.Get("ETag")
	if tag == "" || r.header.Get("X-Service-Content-Version") != c.ContentVersion {
		t.Fatalf("ETag %q, X-Service-Content-Version %q", tag, r.header.Get("X-Service-Content-Version"))
	}
	nm := h.get("/v1/testprep", tok, "If-None-Match", tag)
	wantStatus(t, nm, 304)
	if len(nm.body) != 0 || nm.header.Get("ETag") != tag {
		t.Errorf("304: body %q, ETag %q", nm.body, nm.header.Get("ETag"))
	}
	u := h.usage("cat")
	if u.Get(meter.MonthCalls) != 2 || u.Get(meter.HourLessonReads) != 0 || u.Get(meter.MonthTestprepItems) != 0 {
		t.Errorf("meters: calls %d, lesson reads %d, items %d; want 2, 0, 0",
			u.Get(meter.MonthCalls), u.Get(meter.HourLessonReads), u.Get(meter.MonthTestprepItems))
	}
	// The catalog takes no parameters.
	wantStatus(t, h.get("/v1/testprep?limit=5", tok), 400)
}

func prepItemsRefusals(t *testing.T, h *harness) {
	tok := h.scopedOrg("ref", nil, scope.ContentRead, scope.TestprepRead)
	reader := h.scopedOrg("reader", nil, scope.ContentRead)

	r := h.get("/v1/testprep/gre/items", tok)
	wantStatus(t, r, 404)
	if e := r.errorBody(t); e.Code != "UNKNOWN_TEST" || e.Parameter != "test" || e.Received != "gre" ||
		!slices.Equal(e.Allowed, []string{"digital-sat", "act", "psat-nmsqt", "caaspp"}) {
		t.Errorf("unknown test: %+v", e)
	}
	r = h.get("/v1/testprep/digital-sat/items?section=science", tok)
	wantStatus(t, r, 404)
	if e := r.errorBody(t); e.Code != "UNKNOWN_SECTION" || e.Parameter != "section" || !slices.Equal(e.Allowed, []string{"rw", "math"}) {
		t.Errorf("unknown section: %+v", e)
	}
	r = h.get("/v1/testprep/caaspp/items?section=english", tok)
	wantStatus(t, r, 404)
	if e := r.errorBody(t); !slices.Equal(e.Allowed, []string{"ela", "math", "science"}) {
		t.Errorf("caaspp sections: %v", e.Allowed)
	}
	// Each 404 passed the gate: one call each, no items, no lesson read.
	u := h.usage("ref")
	if u.Get(meter.MonthCalls) != 3 || u.Get(meter.MonthTestprepItems) != 0 || u.Get(meter.HourLessonReads) != 0 {
		t.Errorf("after three 404s: calls %d items %d lesson reads %d", u.Get(meter.MonthCalls), u.Get(meter.MonthTestprepItems), u.Get(meter.HourLessonReads))
	}

	// Refusals before the gate are free.
	r = h.get("/v1/testprep/act/items?section=chemistry", tok)
	wantStatus(t, r, 400)
	if e := r.errorBody(t); e.Code != "BAD_REQUEST" || e.Parameter != "section" {
		t.Errorf("section not in the enum: %+v", e)
	}
	wantStatus(t, h.get("/v1/testprep/act/items?limit=0", tok), 400)
	wantStatus(t, h.get("/v1/testprep/act/items?cursor=garbage", tok), 400)
	r = h.get("/v1/testprep/act/items", reader)
	wantStatus(t, r, 403)
	if e := r.errorBody(t); e.Code != "insufficient_scope" || e.Scope != "service-api/testprep.read" {
		t.Errorf("content.read only: %+v", e)
	}
	wantStatus(t, h.get("/v1/testprep/act/items", ""), 401)
	if u := h.usage("ref"); u.Get(meter.MonthCalls) != 3 {
		t.Errorf("free refusals billed: calls %d", u.Get(meter.MonthCalls))
	}
	if u := h.usage("reader"); u.Get(meter.MonthCalls) != 0 {
		t.Errorf("insufficient_scope billed: calls %d", u.Get(meter.MonthCalls))
	}
}

// walk follows nextCursor from path until hasMore is false.
func (h *harness) walkItems(path, tok string) (items []prepItem, pages int) {
	h.t.Helper()
	next := path
	for {
		r := h.get(next, tok)
		wantStatus(h.t, r, 200)
		p := r.itemPage(h.t)
		items = append(items, p.Items...)
		pages++
		if !p.HasMore {
			if p.NextCursor != nil {
				h.t.Errorf("last page has nextCursor %q", *p.NextCursor)
			}
			return items, pages
		}
		if p.NextCursor == nil || pages > 100 {
			h.t.Fatalf("page %d: hasMore without nextCursor", pages)
		}
		sep := "?"
		if bytes.ContainsRune([]byte(path), '?') {
			sep = "&"
		}
		next = path + sep + "cursor=" + *p.NextCursor
	}
}

func prepItemsWalk(t *testing.T, h *harness) {
	tok := h.scopedOrg("walk", nil, scope.TestprepRead)
	c := h.content.Load()
	act := c.Test("act")

	// One section: its items in file order.
	r := h.get("/v1/testprep/act/items?section=math&limit=100", tok)
	wantStatus(t, r, 200)
	p := r.itemPage(t)
	math := act.Section("math").Items
	if p.Total != len(math) || len(p.Items) != len(math) || p.HasMore || p.ContentVersion != c.ContentVersion || p.License == nil {
		t.Fatalf("section page: total %d, %d items, hasMore %v", p.Total, len(p.Items), p.HasMore)
	}
	for i, it := range p.Items {
		src := math[i]
		if it.ID != src.ID || it.Section != "math" || it.Domain != src.Domain || it.Difficulty != src.Difficulty ||
			it.Prompt != src.Prompt || !slices.Equal(it.Options, src.Options) || it.AnswerIndex != src.AnswerIndex ||
			it.Rationale != src.Rationale || !slices.Equal(it.OptionRationales, src.OptionRationales) || it.Passage != src.Passage {
			t.Fatalf("item %d: %+v, corpus %+v", i, it, *src)
		}
	}

	// Without section: every section of the test in catalog order, over
	// pages of 7.
	var all []*corpus.Item
	for _, s := range act.Sections {
		all = append(all, s.Items...)
	}
	before := h.usage("walk")
	items, pages := h.walkItems("/v1/testprep/act/items?limit=7", tok)
	if len(items) != len(all) {
		t.Fatalf("walk: %d items, want %d", len(items), len(all))
	}
	for i := range items {
		if items[i].ID != all[i].ID {
			t.Fatalf("walk item %d: %s, want %s", i, items[i].ID, all[i].ID)
		}
	}
	if wantPages := (len(all) + 6) / 7; pages != wantPages {
		t.Errorf("walk: %d pages, want %d", pages, wantPages)
	}
	after := h.usage("walk")
	if d := after.Get(meter.MonthTestprepItems) - before.Get(meter.MonthTestprepItems); d != int64(len(all)) {
		t.Errorf("walk billed %d items, returned %d", d, len(all))
	}
	if d := after.Get(meter.HourLessonReads) - before.Get(meter.HourLessonReads); d != int64(pages) {
		t.Errorf("walk billed %d lesson reads for %d pages", d, pages)
	}
	if d := after.Get(meter.MonthCalls) - before.Get(meter.MonthCalls); d != int64(pages) {
		t.Errorf("walk billed %d calls for %d pages", d, pages)
	}

	// Reading items carry a passage; some items carry per-option
	// rationales, one per option; absent members are left out.
	r = h.get("/v1/testprep/act/items?section=reading&limit=100", tok)
	wantStatus(t, r, 200)
	var raw struct{ Items []map[string]json.RawMessage }
	json.Unmarshal(r.body, &raw)
	withRationales := 0
	for _, it := range raw.Items {
		if _, ok := it["passage"]; !ok {
			t.Errorf("reading item %s has no passage", it["id"])
		}
		if or, ok := it["optionRationales"]; ok {
			withRationales++
			var rs, opts []string
			json.Unmarshal(or, &rs)
			json.Unmarshal(it["options"], &opts)
			if len(rs) != len(opts) {
				t.Errorf("item %s: %d option rationales for %d options", it["id"], len(rs), len(opts))
			}
		}
	}
	if withRationales == 0 || withRationales == len(raw.Items) {
		t.Errorf("%d of %d items carry optionRationales; want some", withRationales, len(raw.Items))
	}
}

func prepItemsAllowance(t *testing.T, h *harness) {
	tok := h.scopedOrg("quota", prepPtr(25), scope.TestprepRead)
	const first = "/v1/testprep/digital-sat/items?section=rw&limit=10"

	items := func() int64 { u := h.usage("quota"); return u.Get(meter.MonthTestprepItems) }
	r := h.get(first, tok)
	wantStatus(t, r, 200)
	full := r.header.Get("ETag")
	p := r.itemPage(t)
	if len(p.Items) != 10 || items() != 10 || !p.HasMore {
		t.Fatalf("first page: %d items, %d billed", len(p.Items), items())
	}
	if r.header.Get("RateLimit") == "" {
		t.Errorf("no RateLimit header on a page under an item allowance")
	}

	// An unchanged page answers 304: one call, no items, no lesson read.
	u0 := h.usage("quota")
	nm := h.get(first, tok, "If-None-Match", full)
	wantStatus(t, nm, 304)
	u1 := h.usage("quota")
	if d := u1.Get(meter.MonthCalls) - u0.Get(meter.MonthCalls); d != 1 {
		t.Errorf("304 billed %d calls", d)
	}
	if u1.Get(meter.MonthTestprepItems) != u0.Get(meter.MonthTestprepItems) || u1.Get(meter.HourLessonReads) != u0.Get(meter.HourLessonReads) {
		t.Errorf("304 billed items or a lesson read: %v -> %v", u0, u1)
	}

	r = h.get(first+"&cursor="+*p.NextCursor, tok)
	wantStatus(t, r, 200)
	if n := len(r.itemPage(t).Items); n != 10 || items() != 20 {
		t.Fatalf("second page: %d items, %d billed", n, items())
	}

	// 5 left: the same first query is shortened to 5, with another ETag,
	// so the full page's validator no longer matches.
	r = h.get(first, tok, "If-None-Match", full)
	wantStatus(t, r, 200)
	short := r.header.Get("ETag")
	sp := r.itemPage(t)
	if len(sp.Items) != 5 || items() != 25 {
		t.Fatalf("shortened page: %d items, %d billed; want 5, 25", len(sp.Items), items())
	}
	if short == "" || short == full {
		t.Errorf("shortened page ETag %q, full page %q: want different", short, full)
	}
	if !sp.HasMore || sp.NextCursor == nil || sp.Total != 20 {
		t.Fatalf("shortened page: hasMore %v total %d", sp.HasMore, sp.Total)
	}

	// Nothing left: 429 QUOTA_EXCEEDED, not a 304 and not an empty page.
	for _, c := range []struct {
		name string
		r    resp
	}{
		{"next page", h.get(first+"&cursor="+*sp.NextCursor, tok)},
		{"revalidation", h.get(first, tok, "If-None-Match", short)},
		{"If-None-Match *", h.get(first, tok, "If-None-Match", "*")},
	} {
		if c.r.status != 429 {
			t.Errorf("%s: status %d, want 429", c.name, c.r.status)
			continue
		}
		if e := c.r.errorBody(t); e.Code != "QUOTA_EXCEEDED" || e.QuotaResetsAt == "" || c.r.header.Get("Retry-After") == "" {
			t.Errorf("%s: %+v, Retry-After %q", c.name, e, c.r.header.Get("Retry-After"))
		}
	}
	if items() != 25 {
		t.Errorf("billed %d items after refusals, want 25", items())
	}
}

// A shortened page's cursor continues after the items actually returned.
func prepItemsShortenedCursor(t *testing.T, h *harness) {
	tok := h.scopedOrg("short", prepPtr(13), scope.TestprepRead)
	const path = "/v1/testprep/act/items?section=science&limit=10"
	src := h.content.Load().Test("act").Section("science").Items

	r := h.get(path, tok)
	wantStatus(t, r, 200)
	p := r.itemPage(t)
	r = h.get(path+"&cursor="+*p.NextCursor, tok)
	wantStatus(t, r, 200)
	p = r.itemPage(t)
	if len(p.Items) != 3 || p.Items[0].ID != src[10].ID || p.Items[2].ID != src[12].ID {
		t.Fatalf("shortened second page: %d items from %s", len(p.Items), p.Items[0].ID)
	}
	if u := h.usage("short"); u.Get(meter.MonthTestprepItems) != 13 {
		t.Errorf("billed %d items, returned 13", u.Get(meter.MonthTestprepItems))
	}
	// Lift the cap: the walk resumes at item 14.
	if _, err := h.store.UpdateOrg(context.Background(), "short", func(o *store.Org) error {
		o.Quota.TestprepItems = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r = h.get(path+"&cursor="+*p.NextCursor, tok)
	wantStatus(t, r, 200)
	p = r.itemPage(t)
	if len(p.Items) != 7 || p.Items[0].ID != src[13].ID || p.HasMore {
		t.Fatalf("after the cap: %d items from %s, hasMore %v", len(p.Items), p.Items[0].ID, p.HasMore)
	}
	if p.PageNum < 1 || p.TotalPages != 2 || p.Total != len(src) {
		t.Errorf("pageNum %d totalPages %d total %d", p.PageNum, p.TotalPages, p.Total)
	}
}

// The page an ETag describes has the size a fresh request would get.
func prepItemsETag(t *testing.T, h *harness) {
	tok := h.scopedOrg("tags", nil, scope.TestprepRead)
	get := func(q string) string {
		r := h.get("/v1/testprep/act/items"+q, tok)
		wantStatus(t, r, 200)
		return r.header.Get("ETag")
	}
	a, b, c := get(""), get("?limit=25"), get("?section=math")
	if a != b {
		t.Errorf("default limit and limit=25: %s, %s", a, b)
	}
	if a == c {
		t.Errorf("section filter did not move the ETag")
	}
	if get("?limit=24") == a {
		t.Errorf("limit did not move the ETag")
	}
	wantStatus(t, h.get("/v1/testprep/act/items?limit="+strconv.Itoa(25), tok, "If-None-Match", a), 304)
}
