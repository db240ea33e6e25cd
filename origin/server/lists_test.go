package server

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/store"
	shid "github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/scope"
)

// listPage is the list envelope with raw rows, decoded strictly.
type listPage = pageOf[json.RawMessage]

// page checks r is a 200 list envelope with every member present (a
// missing items key would read as an empty page) and decodes it.
func (r resp) page(t testing.TB) listPage {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d, want 200: %s", r.status, r.body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatalf("not JSON: %v: %s", err, r.body)
	}
	for _, k := range []string{"items", "total", "pageNum", "totalPages", "hasMore", "nextCursor", "contentVersion", "_license"} {
		if _, ok := raw[k]; !ok {
			t.Fatalf("no %q member: %s", k, r.body)
		}
	}
	if s := string(raw["items"]); s == "null" {
		t.Fatalf("items is null: %s", r.body)
	}
	p := strictPage[json.RawMessage](t, r)
	if p.ContentVersion == "" || p.License == nil || p.License.Lic == "" || p.License.Tag == "" {
		t.Errorf("contentVersion/_license missing: %s", r.body)
	}
	if got := r.header.Get("X-Service-Content-Version"); got != p.ContentVersion {
		t.Errorf("X-Service-Content-Version %q, contentVersion %q", got, p.ContentVersion)
	}
	return p
}

// walk follows nextCursor from path (which has a query) until hasMore is
// false, checking the envelope of every page, and returns every row.
func (h *harness) walk(path, tok string, limit int) []json.RawMessage {
	h.t.Helper()
	sep := "&"
	if !strings.Contains(path, "?") {
		sep = "?"
	}
	first := path + sep + "limit=" + strconv.Itoa(limit)
	next := first
	var rows []json.RawMessage
	total := -1
	for n := 1; ; n++ {
		p := h.get(next, tok).page(h.t)
		if total < 0 {
			total = p.Total
		}
		wantPages := max(1, (total+limit-1)/limit)
		if p.Total != total || p.PageNum != n || p.TotalPages != wantPages {
			h.t.Fatalf("%s page %d: total %d pageNum %d totalPages %d, want %d, %d, %d", path, n, p.Total, p.PageNum, p.TotalPages, total, n, wantPages)
		}
		if len(p.Items) > limit {
			h.t.Fatalf("%s page %d: %d items over limit %d", path, n, len(p.Items), limit)
		}
		rows = append(rows, p.Items...)
		if !p.HasMore {
			if p.NextCursor != nil {
				h.t.Fatalf("%s: last page has nextCursor %q", path, *p.NextCursor)
			}
			if n != wantPages {
				h.t.Fatalf("%s: stopped at page %d of %d", path, n, wantPages)
			}
			break
		}
		if p.NextCursor == nil || *p.NextCursor == "" {
			h.t.Fatalf("%s page %d: hasMore without nextCursor", path, n)
		}
		if n > total+1 {
			h.t.Fatalf("%s: the walk does not end", path)
		}
		next = first + "&cursor=" + url.QueryEscape(*p.NextCursor)
	}
	if len(rows) != total {
		h.t.Fatalf("%s: walked %d rows, total %d", path, len(rows), total)
	}
	return rows
}

// subjectKeys are the members of every subject row, at every level.
var subjectKeys = []string{"slug", "tier", "name", "description", "classCount", "mediaCoverage", "difficulty",
	"tags", "prerequisites", "related", "classesUrl", "contentDigest"}

type subjectRowT struct {
	Slug          string
	Tier          string
	Name          string
	ClassCount    int
	Tags          []string
	Prerequisites []string
	Related       []string
	ClassesURL    string
}

func decodeRows[T any](t testing.TB, raws []json.RawMessage) []T {
	t.Helper()
	out := make([]T, len(raws))
	for i, r := range raws {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			t.Fatalf("row %s: %v", r, err)
		}
	}
	return out
}

// grantedSubjects is the reference: the corpus's subjects that grants
// cover, in listing order, optionally in one tier.
func grantedSubjects(c *corpus.Corpus, grants []string, tier string) []string {
	var out []string
	for _, sub := range c.Subjects {
		if (tier == "" || sub.Tier == tier) && licence.Entitled(grants, sub.Tier, sub.Slug) == nil {
			out = append(out, sub.Ref())
		}
	}
	return out
}

func refsOf(rows []subjectRowT) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Tier + "/" + r.Slug
	}
	return out
}

// The list counts and shows only the granted set, in tier then name
// order, and a walk of 7 a page visits every row once (spec: List
// envelope, route 3).
func TestSubjectListGrantedWalk(t *testing.T) {
	h := newHarness(t)
	c := h.content.Load().Corpus
	all := h.org("all", "topics", "college", "high", "middle", "primary")
	high := h.org("high", "high", "primary/phonics")

	rows := decodeRows[subjectRowT](t, h.walk("/v1/subjects", all, 7))
	want := grantedSubjects(c, []string{"topics", "college", "high", "middle", "primary"}, "")
	if got := refsOf(rows); !slices.Equal(got, want) {
		t.Errorf("every tier: got %v, want %v", got, want)
	}
	tierRank := map[string]int{"topics": 0, "college": 1, "high": 2, "middle": 3, "primary": 4}
	for i := 1; i < len(rows); i++ {
		a, b := rows[i-1], rows[i]
		if tierRank[a.Tier] > tierRank[b.Tier] || a.Tier == b.Tier && a.Name > b.Name {
			t.Errorf("order: %s/%s before %s/%s", a.Tier, a.Name, b.Tier, b.Name)
		}
	}
	narrow := decodeRows[subjectRowT](t, h.walk("/v1/subjects", high, 7))
	wantNarrow := grantedSubjects(c, []string{"high", "primary/phonics"}, "")
	if got := refsOf(narrow); !slices.Equal(got, wantNarrow) || len(wantNarrow) >= len(want) {
		t.Errorf("high and primary/phonics: got %v, want %v (fewer than %d)", got, wantNarrow, len(want))
	}
	if p := h.get("/v1/subjects?limit=100", high).page(t); p.Total != len(wantNarrow) {
		t.Errorf("total %d, want the granted %d", p.Total, len(wantNarrow))
	}
}

// tier filters before pagination: total is the tier's granted subjects,
// every page holds only that tier, and an ungranted tier is an empty page
// whose items key is still present.
func TestSubjectListTierFilter(t *testing.T) {
	h := newHarness(t)
	c := h.content.Load().Corpus
	tok := h.org("org", "high", "primary/phonics")
	for _, tier := range []string{"high", "primary", "college"} {
		want := grantedSubjects(c, []string{"high", "primary/phonics"}, tier)
		p := h.get("/v1/subjects?tier="+tier+"&limit=1", tok).page(t)
		if p.Total != len(want) || p.TotalPages != max(1, len(want)) {
			t.Errorf("tier=%s: total %d totalPages %d, want %d", tier, p.Total, p.TotalPages, len(want))
		}
		rows := decodeRows[subjectRowT](t, h.walk("/v1/subjects?tier="+tier, tok, 1))
		if got := refsOf(rows); !slices.Equal(got, want) {
			t.Errorf("tier=%s: got %v, want %v", tier, got, want)
		}
	}
	r := h.get("/v1/subjects?tier=college", tok)
	p := r.page(t)
	if !bytes.Contains(r.body, []byte(`"items":[]`)) || p.Total != 0 || p.HasMore || p.NextCursor != nil || p.PageNum != 1 || p.TotalPages != 1 {
		t.Errorf("empty page: %s", r.body)
	}
}

// detail=full adds tags, prerequisites and related subjects; brief and
// standard carry the same members with those null (detail changes how
// much, never which fields exist). The class list is never inlined.
func TestSubjectListDetail(t *testing.T) {
	h := newHarness(t)
	c := h.content.Load().Corpus
	tok := h.org("org", "topics", "college", "high", "middle", "primary")
	byLevel := map[string][]json.RawMessage{}
	for _, level := range []string{"", "brief", "standard", "full"} {
		path := "/v1/subjects?limit=100"
		if level != "" {
			path += "&detail=" + level
		}
		byLevel[level] = h.get(path, tok).page(t).Items
		if len(byLevel[level]) != len(c.Subjects) {
			t.Fatalf("detail=%s: %d rows, want %d", level, len(byLevel[level]), len(c.Subjects))
		}
	}
	for i, sub := range c.Subjects {
		for level, rows := range byLevel {
			var m map[string]json.RawMessage
			json.Unmarshal(rows[i], &m)
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			want := slices.Sorted(slices.Values(subjectKeys))
			if !slices.Equal(keys, want) {
				t.Fatalf("detail=%q: members %v, want %v", level, keys, want)
			}
			full := level == "full"
			for _, k := range []string{"tags", "prerequisites", "related"} {
				if isNull := string(m[k]) == "null"; isNull == full {
					t.Errorf("detail=%q %s: %s = %s", level, sub.Ref(), k, m[k])
				}
			}
			if want := `"/v1/subjects/` + sub.Slug + `/classes?tier=` + sub.Tier + `"`; string(m["classesUrl"]) != want {
				t.Errorf("classesUrl %s, want %s", m["classesUrl"], want)
			}
		}
		if !bytes.Equal(byLevel[""][i], byLevel["standard"][i]) || !bytes.Equal(byLevel["brief"][i], byLevel["standard"][i]) {
			t.Errorf("brief and standard rows differ: %s / %s", byLevel["brief"][i], byLevel["standard"][i])
		}
		full := decodeRows[subjectRowT](t, byLevel["full"][i:i+1])[0]
		if !slices.Equal(full.Tags, sub.Tags) || len(full.Prerequisites) != len(sub.Prerequisites) || len(full.Related) != len(sub.Related) {
			t.Errorf("%s full: %+v", sub.Ref(), full)
		}
	}
	// The full row is the single subject without its envelope: one
	// definition for both routes.
	sub := c.Subjects[0]
	var detail map[string]json.RawMessage
	json.Unmarshal(h.get("/v1/subjects/"+sub.Slug+"?tier="+sub.Tier, tok).body, &detail)
	delete(detail, "contentVersion")
	delete(detail, "_license")
	var row map[string]json.RawMessage
	json.Unmarshal(byLevel["full"][0], &row)
	d, _ := json.Marshal(detail)
	rw, _ := json.Marshal(row)
	if !bytes.Equal(d, rw) {
		t.Errorf("detail %s\nrow    %s", d, rw)
	}
}

// contentDigestOf decodes a subject row or detail's contentDigest.
func contentDigestOf(t *testing.T, raw []byte) string {
	t.Helper()
	var v struct {
		ContentDigest *string `json:"contentDigest"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.ContentDigest == nil {
		t.Fatalf("no contentDigest in %s (%v)", raw, err)
	}
	return *v.ContentDigest
}

// contentDigest is the subject's corpus digest at every detail level of
// the list and on the single subject, to every organisation whatever its
// grants (docs/decisions/lists-search-and-test-prep.md).
func TestSubjectContentDigest(t *testing.T) {
	h := newHarness(t)
	c := h.content.Load().Corpus
	all := h.org("all", "topics", "college", "high", "middle", "primary")
	narrow := h.org("narrow", "high")
	seen := map[string]string{}
	for _, level := range []string{"", "brief", "standard", "full"} {
		path := "/v1/subjects?limit=100"
		if level != "" {
			path += "&detail=" + level
		}
		items := h.get(path, all).page(t).Items
		if len(items) != len(c.Subjects) {
			t.Fatalf("detail=%s: %d rows, want %d", level, len(items), len(c.Subjects))
		}
		for i, sub := range c.Subjects {
			got := contentDigestOf(t, items[i])
			if !strings.HasPrefix(got, corpus.DigestPrefix) || got != sub.ContentDigest {
				t.Errorf("detail=%q %s: contentDigest %q, want the corpus's %q", level, sub.Ref(), got, sub.ContentDigest)
			}
		}
	}
	for _, sub := range c.Subjects {
		if prev, dup := seen[sub.ContentDigest]; dup {
			t.Errorf("%s and %s share the digest %s", prev, sub.Ref(), sub.ContentDigest)
		}
		seen[sub.ContentDigest] = sub.Ref()
		path := "/v1/subjects/" + sub.Slug + "?tier=" + sub.Tier
		for _, level := range []string{"brief", "standard", "full"} {
			if got := contentDigestOf(t, h.get(path+"&detail="+level, all).body); got != sub.ContentDigest {
				t.Errorf("GET %s&detail=%s: contentDigest %q, want %q", path, level, got, sub.ContentDigest)
			}
		}
		if sub.Tier == "high" {
			if got := contentDigestOf(t, h.get(path, narrow).body); got != sub.ContentDigest {
				t.Errorf("GET %s as an organisation granted only high: %q, want %q", path, got, sub.ContentDigest)
			}
		}
	}
}

// After a corpus rebuild that changes nothing of a subject, its ETag
// moves with contentVersion but its contentDigest does not: what a sync
// client compares to skip the export.
func TestSubjectContentDigestAcrossVersions(t *testing.T) {
	a := newHarnessWith(t, smallContent(t, ""))
	b := newHarnessWith(t, smallContent(t, "2027-03-04"))
	ta := a.org("org", "topics", "college", "high", "middle", "primary")
	tb := b.org("org", "topics", "college", "high", "middle", "primary")
	for _, sub := range a.content.Load().Corpus.Subjects {
		path := "/v1/subjects/" + sub.Slug + "?tier=" + sub.Tier
		ra, rb := a.get(path, ta), b.get(path, tb)
		if ra.status != 200 || rb.status != 200 {
			t.Fatalf("GET %s: %d and %d", path, ra.status, rb.status)
		}
		if ra.header.Get("ETag") == rb.header.Get("ETag") {
			t.Errorf("%s: one ETag %s under two contentVersions", path, ra.header.Get("ETag"))
		}
		if da, db := contentDigestOf(t, ra.body), contentDigestOf(t, rb.body); da != db {
			t.Errorf("%s: contentDigest %s, then %s after a rebuild of the same content", path, da, db)
		}
	}
}

// limit out of range is 400 BAD_REQUEST with parameter, received, min and
// max, never clamped, and not billed; on every list route.
func TestListLimitBounds(t *testing.T) {
	h := newHarness(t)
	tok := h.org("org", "topics", "college", "high", "middle", "primary")
	sub := h.content.Load().Subjects[0]
	for _, path := range []string{"/v1/subjects?", "/v1/subjects/" + sub.Slug + "/classes?tier=" + sub.Tier + "&", "/v1/search?q=the&"} {
		for _, limit := range []int{0, 101, -1} {
			before := h.calls("org")
			e := h.get(path+"limit="+strconv.Itoa(limit), tok).wantError(t, 400, "BAD_REQUEST")
			if e.Parameter != "limit" || e.Received != float64(limit) || e.Min == nil || *e.Min != 1 || e.Max == nil || *e.Max != 100 {
				t.Errorf("%slimit=%d: %+v", path, limit, e)
			}
			if after := h.calls("org"); after != before {
				t.Errorf("%slimit=%d billed %d calls", path, limit, after-before)
			}
		}
		for _, limit := range []int{1, 100} {
			if r := h.get(path+"limit="+strconv.Itoa(limit), tok); r.status != 200 {
				t.Errorf("%slimit=%d: %d %s", path, limit, r.status, r.body)
			}
		}
	}
}

// A cursor is bound to its route, query and organisation: replayed with
// another query or by another organisation it is 400 BAD_REQUEST naming
// cursor; after the content version moves it is 400 CURSOR_EXPIRED. Both
// bill the call only.
func TestListCursorBinding(t *testing.T) {
	h := newHarness(t)
	c := h.content.Load()
	a := h.org("a", "topics", "college", "high", "middle", "primary")
	b := h.org("b", "topics", "college", "high", "middle", "primary")
	sub := c.Subjects[0]
	classes := "/v1/subjects/" + sub.Slug + "/classes?tier=" + sub.Tier
	cases := []struct{ path, other string }{
		{"/v1/subjects?limit=2", "/v1/subjects?limit=2&tier=high"},
		{"/v1/subjects?limit=2", "/v1/subjects?limit=2&detail=full"},
		{classes + "&limit=2", "/v1/subjects/" + c.Subjects[1].Slug + "/classes?tier=" + c.Subjects[1].Tier + "&limit=2"},
		{"/v1/search?q=the&limit=2", "/v1/search?q=then&limit=2"},
		{"/v1/search?q=the&limit=2", "/v1/subjects?limit=2"},
	}
	for _, tc := range cases {
		p := h.get(tc.path, a).page(t)
		if p.NextCursor == nil {
			t.Fatalf("%s: no second page", tc.path)
		}
		cur := "&cursor=" + url.QueryEscape(*p.NextCursor)
		// The same walk may change its page size.
		h.get(strings.Replace(tc.path, "limit=2", "limit=3", 1)+cur, a).page(t)
		before := h.calls("a")
		e := h.get(tc.other+cur, a).wantError(t, 400, "BAD_REQUEST")
		if e.Parameter != "cursor" {
			t.Errorf("%s with another query: parameter %q", tc.path, e.Parameter)
		}
		if got := h.calls("a") - before; got != 1 {
			t.Errorf("%s: a bad cursor billed %d calls, want 1", tc.path, got)
		}
		if e := h.get(tc.path+cur, b).wantError(t, 400, "BAD_REQUEST"); e.Parameter != "cursor" {
			t.Errorf("%s by another org: parameter %q", tc.path, e.Parameter)
		}
	}

	p := h.get("/v1/subjects?limit=2", a).page(t)
	sp := h.get("/v1/search?q=the&limit=2", a).page(t)
	cp := h.get(classes+"&limit=2", a).page(t)
	h.content.Store(buildContent(t, filepath.Join(t.TempDir(), "corpus"), gen.Options{Seed: 2, Small: true})) // a reload
	if h.content.Load().ContentVersion == c.ContentVersion {
		t.Fatal("the reload did not move the content version")
	}
	for _, path := range []string{
		"/v1/subjects?limit=2&cursor=" + url.QueryEscape(*p.NextCursor),
		"/v1/search?q=the&limit=2&cursor=" + url.QueryEscape(*sp.NextCursor),
		classes + "&limit=2&cursor=" + url.QueryEscape(*cp.NextCursor),
	} {
		if h.content.Load().Subject(sub.Tier, sub.Slug) == nil && strings.Contains(path, "/classes") {
			continue // the subject went away with the reload
		}
		before := h.calls("a")
		h.get(path, a).wantError(t, 400, "CURSOR_EXPIRED")
		if got := h.calls("a") - before; got != 1 {
			t.Errorf("%s: CURSOR_EXPIRED billed %d calls, want 1", path, got)
		}
	}
}

// A cursor issued before the organisation's grants changed is 400
// CURSOR_EXPIRED on every list route, saying so (not that the client
// altered it), and bills nothing, as an entitlement refusal; under the
// grants it was issued with it walks on.
func TestCursorGrantsChanged(t *testing.T) {
	h := newHarness(t)
	c := h.corpus()
	h.createOrg("g", slices.Clone(shid.Tiers), nil)
	tok := h.token("g", scope.ContentRead, scope.TestprepRead)
	learner := h.learnerToken("g", "ana", progressScopes...)
	for _, l := range lessonsOf(c, 2) {
		h.ack(learner, l, `{"score":50}`)
	}
	var media *corpus.Lesson
	for _, l := range c.Lessons {
		if len(l.Media) > 1 {
			media = l
			break
		}
	}
	if media == nil || len(c.Tests) == 0 {
		t.Fatal("the corpus has no lesson with two media or no test")
	}
	sub := c.Subjects[0]
	paths := []struct{ path, tok string }{
		{"/v1/subjects?limit=1", tok},
		{"/v1/subjects/" + sub.Slug + "/classes?tier=" + sub.Tier + "&limit=1", tok},
		{"/v1/lessons/" + media.ID + "/media?limit=1", tok},
		{"/v1/search?q=the&limit=1", tok},
		{"/v1/testprep/" + c.Tests[0].ID + "/items?limit=1", tok},
		{"/v1/progress?limit=1", learner},
	}
	next := make([]string, len(paths))
	for i, p := range paths {
		r := h.get(p.path, p.tok)
		wantStatus(t, r, 200)
		cur, _ := jsonObject(t, r.body)["nextCursor"].(string)
		if cur == "" {
			t.Fatalf("%s: no nextCursor: %.300s", p.path, r.body)
		}
		next[i] = p.path + "&cursor=" + url.QueryEscape(cur)
	}
	setGrants := func(grants []string) {
		t.Helper()
		if _, err := h.store.UpdateOrg(t.Context(), "g", func(o *store.Org) error { o.Grants = grants; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	// Another grant that changes nothing the walks see: only the set of
	// grants moved.
	setGrants(append(slices.Clone(shid.Tiers), sub.Ref()))
	before := h.usage("g")
	for i, p := range paths {
		r := h.get(next[i], p.tok)
		e := r.wantError(t, 400, "CURSOR_EXPIRED")
		if e.Parameter != "cursor" || e.Message != "the organisation's content grants changed since this cursor was issued; restart from page 1" {
			t.Errorf("%s: parameter %q, message %q", p.path, e.Parameter, e.Message)
		}
		if hint, _ := jsonObject(t, r.body)["error"].(map[string]any)["hint"].(string); !strings.Contains(hint, "page 1") {
			t.Errorf("%s: hint %q, want it to say to restart from page 1", p.path, hint)
		}
	}
	h.billed("g", before, 0, 0)
	setGrants(slices.Clone(shid.Tiers))
	for i, p := range paths {
		wantStatus(t, h.get(next[i], p.tok), 200)
	}
}

// Each page bills one call, a 304 too; the 304 is empty and carries the
// validator and the content version; the validator depends on the grants.
func TestSubjectListBillingAndETag(t *testing.T) {
	h := newHarness(t)
	a := h.org("a", "topics", "college", "high", "middle", "primary")
	b := h.org("b", "high")
	r := h.get("/v1/subjects?limit=5", a)
	r.page(t)
	tag := r.header.Get("ETag")
	if tag == "" || r.header.Get("Cache-Control") != "private" || r.header.Get("Vary") != "Authorization, Accept-Encoding" {
		t.Fatalf("headers: %v", r.header)
	}
	if got := h.calls("a"); got != 1 {
		t.Errorf("one page billed %d calls", got)
	}
	nm := h.get("/v1/subjects?limit=5", a, "If-None-Match", tag)
	if nm.status != 304 || len(nm.body) != 0 || nm.header.Get("ETag") != tag || nm.header.Get("X-Service-Content-Version") == "" {
		t.Errorf("304: %d %v %q", nm.status, nm.header, nm.body)
	}
	if got := h.calls("a"); got != 2 {
		t.Errorf("a 304 billed %d calls in all, want 2", got)
	}
	if other := h.get("/v1/subjects?limit=5", b).header.Get("ETag"); other == tag {
		t.Error("another organisation with other grants has the same ETag")
	}
	if nm := h.get("/v1/subjects?limit=5&detail=full", a, "If-None-Match", tag); nm.status != 200 {
		t.Errorf("another detail level answered %d to the standard ETag", nm.status)
	}
	gz := h.get("/v1/subjects?limit=100&detail=full", a, "Accept-Encoding", "gzip")
	if gz.status != 200 || gz.header.Get("Content-Encoding") != "gzip" {
		t.Errorf("gzip: %d %q", gz.status, gz.header.Get("Content-Encoding"))
	}
}

type classEntryT struct {
	LessonID         string `json:"lessonId"`
	ClassNum         int    `json:"classNum"`
	Title            string `json:"title"`
	Subtitle         string `json:"subtitle"`
	HasVideo         bool   `json:"hasVideo"`
	HasNarration     bool   `json:"hasNarration"`
	HasTranscript    bool   `json:"hasTranscript"`
	MediaCount       int    `json:"mediaCount"`
	EstimatedMinutes int    `json:"estimatedMinutes"`
}

// The class list: class order, a ready-made lessonId of the form
// <tier>/<slug>/<n>, the availability flags; a walk of 7 visits each once.
func TestClassList(t *testing.T) {
	h := newHarness(t)
	c := h.content.Load().Corpus
	tok := h.org("org", "topics", "college", "high", "middle", "primary")
	for _, sub := range c.Subjects {
		raws := h.walk("/v1/subjects/"+sub.Slug+"/classes?tier="+sub.Tier, tok, 7)
		for _, raw := range raws {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			var e classEntryT
			if err := dec.Decode(&e); err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
		}
		rows := decodeRows[classEntryT](t, raws)
		if len(rows) != len(sub.Lessons) {
			t.Fatalf("%s: %d rows, want %d", sub.Ref(), len(rows), len(sub.Lessons))
		}
		for i, e := range rows {
			l := sub.Lessons[i]
			want := classEntryT{LessonID: sub.Tier + "/" + sub.Slug + "/" + strconv.Itoa(i+1), ClassNum: i + 1,
				Title: l.Title, Subtitle: l.Subtitle, HasVideo: l.HasVideo, HasNarration: l.HasNarration,
				HasTranscript: l.HasTranscript, MediaCount: len(l.Media), EstimatedMinutes: l.StudyMinutes}
			if e != want {
				t.Errorf("%s row %d: got %+v, want %+v", sub.Ref(), i, e, want)
			}
		}
	}
	if got := h.calls("org"); got < int64(len(c.Subjects)) {
		t.Errorf("%d calls for at least %d pages", got, len(c.Subjects))
	}
}

// An ambiguous slug is 400 AMBIGUOUS_SUBJECT naming the tiers (billed);
// tier disambiguates; the entitlement refusal is free; an unknown subject
// is 404 UNKNOWN_SUBJECT (billed).
func TestClassListRefusals(t *testing.T) {
	h := newHarness(t)
	c := h.content.Load().Corpus
	shared, tiers := sharedSlug(t, c)
	tok := h.org("org", tiers[0])
	step := func(path string, wantCalls int64) resp {
		t.Helper()
		before := h.calls("org")
		r := h.get(path, tok)
		if got := h.calls("org") - before; got != wantCalls {
			t.Errorf("%s: %d: billed %d calls, want %d", path, r.status, got, wantCalls)
		}
		return r
	}
	e := step("/v1/subjects/"+shared+"/classes", 1).wantError(t, 400, "AMBIGUOUS_SUBJECT")
	if !slices.Equal(e.Tiers, tiers) {
		t.Errorf("tiers %v, want %v", e.Tiers, tiers)
	}
	if p := step("/v1/subjects/"+shared+"/classes?tier="+tiers[0], 1).page(t); p.Total != len(c.Subject(tiers[0], shared).Lessons) {
		t.Errorf("total %d", p.Total)
	}
	e = step("/v1/subjects/"+shared+"/classes?tier="+tiers[1], 0).wantError(t, 403, "TIER_NOT_LICENSED")
	if e.Grant != tiers[1] {
		t.Errorf("grant %q", e.Grant)
	}
	step("/v1/subjects/no-such-subject/classes", 1).wantError(t, 404, "UNKNOWN_SUBJECT")
	step("/v1/subjects/no-such-subject/classes?tier="+tiers[0], 1).wantError(t, 404, "UNKNOWN_SUBJECT")
	step("/v1/subjects/"+shared+"/classes?tier="+tiers[0]+"&cursor=bogus", 1).wantError(t, 400, "BAD_REQUEST")
	step("/v1/subjects/"+shared+"/classes?tier=nope", 0).wantError(t, 400, "BAD_REQUEST")

	r := step("/v1/subjects/"+shared+"/classes?tier="+tiers[0], 1)
	if again := step("/v1/subjects/"+shared+"/classes?tier="+tiers[0], 1); again.header.Get("ETag") != r.header.Get("ETag") || r.header.Get("ETag") == "" {
		t.Error("the ETag is not stable")
	}
	before := h.calls("org")
	if nm := h.get("/v1/subjects/"+shared+"/classes?tier="+tiers[0], tok, "If-None-Match", r.header.Get("ETag")); nm.status != 304 || len(nm.body) != 0 {
		t.Errorf("If-None-Match: %d", nm.status)
	}
	if got := h.calls("org") - before; got != 1 {
		t.Errorf("a 304 billed %d calls, want 1", got)
	}
}

// The walk over the deployed-scale corpus: every subject and every class
// of a large subject exactly once at limit 7.
func TestListWalkFullCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the deployed-scale corpus")
	}
	h := newHarnessWith(t, fullContent(t))
	c := h.content.Load().Corpus
	tok := h.org("org", "topics", "college", "high", "middle", "primary")
	rows := decodeRows[subjectRowT](t, h.walk("/v1/subjects", tok, 7))
	if got, want := refsOf(rows), grantedSubjects(c, []string{"topics", "college", "high", "middle", "primary"}, ""); !slices.Equal(got, want) || len(got) != 125 {
		t.Errorf("%d subjects, want 125 in listing order", len(got))
	}
	biggest := slices.MaxFunc(c.Subjects, func(a, b *corpus.Subject) int { return len(a.Lessons) - len(b.Lessons) })
	classes := decodeRows[classEntryT](t, h.walk("/v1/subjects/"+biggest.Slug+"/classes?tier="+biggest.Tier, tok, 7))
	for i, e := range classes {
		if e.ClassNum != i+1 || e.LessonID != biggest.Lessons[i].ID {
			t.Fatalf("row %d: %+v", i, e)
		}
	}
	if len(classes) != len(biggest.Lessons) {
		t.Errorf("%d classes, want %d", len(classes), len(biggest.Lessons))
	}
}

// BenchmarkSubjectList serves a page of 25 subjects of the deployed-scale
// corpus through the whole pipeline in process (token check, gate,
// billing, rendering), and the rendering alone.
func BenchmarkSubjectList(b *testing.B) {
	ct := fullContent(b)
	b.Run("render", func(b *testing.B) {
		grants := []string{"topics", "college", "high", "middle", "primary"}
		for b.Loop() {
			granted := 0
			items := make([]json.RawMessage, 0, 25)
			for i, sub := range ct.Subjects {
				if licence.Entitled(grants, sub.Tier, sub.Slug) == nil {
					if granted >= 50 && granted < 75 {
						items = append(items, ct.rows.subjects[i].full)
					}
					granted++
				}
			}
			if _, err := json.Marshal(list{Items: items, Total: granted}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		h := newHarnessWith(b, ct)
		tok := h.org("bench", "topics", "college", "high", "middle", "primary")
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			r := h.get("/v1/subjects?limit=25&detail=full&tier=high", tok)
			lat = append(lat, time.Since(t0))
			if r.status != 200 {
				b.Fatalf("%d %s", r.status, r.body)
			}
		}
		reportPercentiles(b, lat)
	})
}

// reportPercentiles reports the p50 and p99 of lat.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(math.Ceil(q*float64(len(lat))))-1)].Nanoseconds())
	}
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}
