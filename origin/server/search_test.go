package server

import (
	"bytes"
	"encoding/json"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/search/searchtest"
)

var allTierGrants = []string{"topics", "college", "high", "middle", "primary"}

// searchPage decodes a search page strictly: the hit shape is fixed.
func searchPage(t testing.TB, r resp) (listPage, []searchtest.Hit) {
	t.Helper()
	p := r.page(t)
	hits := make([]searchtest.Hit, len(p.Items))
	for i, raw := range p.Items {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&hits[i]); err != nil {
			t.Fatalf("hit %s: %v", raw, err)
		}
		if !bytes.Contains(raw, []byte(`"cardId":`)) {
			t.Fatalf("hit without a cardId member: %s", raw)
		}
	}
	return p, hits
}

func (h *harness) searchWalk(query url.Values, tok string, limit int) []searchtest.Hit {
	h.t.Helper()
	return decodeRows[searchtest.Hit](h.t, h.walk("/v1/search?"+query.Encode(), tok, limit))
}

func equalHits(t *testing.T, what, q string, got, want []searchtest.Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !searchtest.SameHit(got[i], want[i], q) {
			t.Fatalf("%s hit %d: got %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// Titles, subtitles, card labels, key points and quiz questions are
// searched, ignoring case, and the hit names the field, its card and the
// text; card bodies are not searched (spec: Route rules §1).
func TestSearchFields(t *testing.T) {
	h := newHarness(t)
	c := h.content.Load().Corpus
	tok := h.org("org", allTierGrants...)
	found := map[string]bool{}
	for _, l := range c.Lessons {
		fs := searchtest.Fields(l)
		for i, f := range fs {
			if found[f.Kind] {
				continue
			}
			lower := strings.ToLower(f.Text)
			earlier := slices.ContainsFunc(fs[:i], func(e searchtest.Field) bool { return strings.Contains(strings.ToLower(e.Text), lower) })
			if earlier || len(f.Text) > 200 {
				continue
			}
			found[f.Kind] = true
			q := strings.ToUpper(f.Text)
			hits := h.searchWalk(url.Values{"q": {q}, "tier": {l.Subject.Tier}, "subject": {l.Subject.Slug}}, tok, 100)
			i := slices.IndexFunc(hits, func(hh searchtest.Hit) bool { return hh.LessonID == l.ID })
			if i < 0 {
				t.Fatalf("%s %q: %s not among %d hits", f.Kind, q, l.ID, len(hits))
			}
			got := hits[i]
			if got.MatchedField != f.Kind || got.Snippet != f.Text || got.Title != l.Title || got.ClassNum != l.Number ||
				got.Tier != l.Subject.Tier || got.Subject != l.Subject.Slug || (got.CardID == nil) != (f.Card == nil) ||
				f.Card != nil && *got.CardID != *f.Card {
				t.Errorf("%s: got %+v", f.Kind, got)
			}
		}
	}
	if len(found) != 5 {
		t.Fatalf("found fields %v, want all five kinds", found)
	}

	// A phrase that only card bodies hold.
	searched := strings.Builder{}
	for _, l := range c.Lessons {
		for _, f := range searchtest.Fields(l) {
			searched.WriteString(strings.ToLower(f.Text) + "\x00")
		}
	}
	var phrase string
	for _, l := range c.Lessons {
		for _, card := range l.Cards {
			words := strings.Fields(card.Body)
			for i := 0; i+3 <= len(words) && phrase == ""; i++ {
				p := strings.Join(words[i:i+3], " ")
				if !strings.Contains(searched.String(), strings.ToLower(p)) && len(p) <= 200 {
					phrase = p
				}
			}
		}
	}
	if phrase == "" {
		t.Fatal("no body-only phrase in the corpus")
	}
	p, hits := searchPage(t, h.get("/v1/search?"+url.Values{"q": {phrase}}.Encode(), tok))
	if p.Total != 0 || len(hits) != 0 {
		t.Errorf("body-only %q: %d hits", phrase, p.Total)
	}
}

// Hits are filtered to the caller's grants before pagination: total counts
// granted hits only, and a walk of 7 a page is the reference exactly,
// stable across pages.
func TestSearchGrantsBeforePagination(t *testing.T) {
	h := newHarness(t)
	c := h.content.Load().Corpus
	wide := h.org("wide", allTierGrants...)
	narrowGrants := []string{"high/" + c.Tier("high").Subjects[0].Slug, "primary"}
	narrow := h.org("narrow", narrowGrants...)
	for _, q := range []string{"the", "E", "which term", "check every"} {
		wantWide := searchtest.Reference(c, q, searchtest.GrantedBy(allTierGrants...))
		wantNarrow := searchtest.Reference(c, q, searchtest.GrantedBy(narrowGrants...))
		if len(wantNarrow) == 0 || len(wantNarrow) >= len(wantWide) {
			t.Fatalf("%q: reference totals %d and %d do not tell grants apart", q, len(wantNarrow), len(wantWide))
		}
		equalHits(t, "wide "+q, q, h.searchWalk(url.Values{"q": {q}}, wide, 7), wantWide)
		equalHits(t, "narrow "+q, q, h.searchWalk(url.Values{"q": {q}}, narrow, 7), wantNarrow)
		p, _ := searchPage(t, h.get("/v1/search?limit=1&q="+url.QueryEscape(q), narrow))
		if p.Total != len(wantNarrow) || p.TotalPages != len(wantNarrow) {
			t.Errorf("%q narrow: total %d totalPages %d, want %d", q, p.Total, p.TotalPages, len(wantNarrow))
		}
		// One page of 100 holds what the walk of 7 visited.
		if len(wantWide) <= 100 {
			_, all := searchPage(t, h.get("/v1/search?limit=100&q="+url.QueryEscape(q), wide))
			equalHits(t, "one page "+q, q, all, wantWide)
		}
	}
}

// tier and subject filter before pagination; subject is a slug matched
// exactly: with tier one subject, without it the slug in every tier. An
// unknown subject is 404 UNKNOWN_SUBJECT (billed); an ungranted one is
// filtered out like the rest.
func TestSearchFilters(t *testing.T) {
	h := newHarness(t)
	c := h.content.Load().Corpus
	tok := h.org("org", allTierGrants...)
	var shared string
	for _, s := range c.Subjects {
		if len(c.SlugTiers(s.Slug)) > 1 {
			shared = s.Slug
			break
		}
	}
	tiers := c.SlugTiers(shared)
	q := "e"
	cases := []struct {
		query url.Values
		keep  func(*corpus.Subject) bool
	}{
		{url.Values{"q": {q}, "tier": {"high"}}, func(s *corpus.Subject) bool { return s.Tier == "high" }},
		{url.Values{"q": {q}, "subject": {shared}}, func(s *corpus.Subject) bool { return s.Slug == shared }},
		{url.Values{"q": {q}, "subject": {shared}, "tier": {tiers[1]}}, func(s *corpus.Subject) bool { return s.Slug == shared && s.Tier == tiers[1] }},
		{url.Values{"q": {q}, "subject": {shared}, "tier": {tiers[0]}}, func(s *corpus.Subject) bool { return s.Slug == shared && s.Tier == tiers[0] }},
	}
	for _, tc := range cases {
		want := searchtest.Reference(c, q, tc.keep)
		got := h.searchWalk(tc.query, tok, 7)
		equalHits(t, tc.query.Encode(), q, got, want)
	}
	if got := h.searchWalk(url.Values{"q": {q}, "subject": {shared}}, tok, 100); len(slices.CompactFunc(got, func(a, b searchtest.Hit) bool { return a.Tier == b.Tier })) != len(tiers) {
		t.Errorf("subject=%s without tier: hits from %d tiers, want %d", shared, len(got), len(tiers))
	}

	before := h.calls("org")
	h.get("/v1/search?q=e&subject=no-such-subject", tok).wantError(t, 404, "UNKNOWN_SUBJECT")
	h.get("/v1/search?q=e&subject="+shared+"&tier=topics", tok).wantError(t, 404, "UNKNOWN_SUBJECT")
	if got := h.calls("org") - before; got != 2 {
		t.Errorf("UNKNOWN_SUBJECT billed %d calls, want 2", got)
	}
	narrow := h.org("narrow", tiers[0])
	p, _ := searchPage(t, h.get("/v1/search?q=e&subject="+shared+"&tier="+tiers[1], narrow))
	if p.Total != 0 {
		t.Errorf("ungranted subject: total %d", p.Total)
	}
	h.get("/v1/search?q=e&subject=Not_A_Slug", tok).wantError(t, 400, "BAD_REQUEST")
	h.get("/v1/search?q=e&tier=kindergarten", tok).wantError(t, 400, "BAD_REQUEST")
}

// q is required, at most 200 characters (Unicode code points), and
// refused unbilled beyond that.
func TestSearchQueryLength(t *testing.T) {
	h := newHarness(t)
	tok := h.org("org", allTierGrants...)
	for _, q := range []string{strings.Repeat("a", 200), strings.Repeat("é", 200)} {
		if p, _ := searchPage(t, h.get("/v1/search?q="+url.QueryEscape(q), tok)); p.Total != 0 {
			t.Errorf("%d characters: total %d", len(q), p.Total)
		}
	}
	before := h.calls("org")
	for _, q := range []string{strings.Repeat("a", 201), strings.Repeat("é", 201)} {
		e := h.get("/v1/search?q="+url.QueryEscape(q), tok).wantError(t, 400, "BAD_REQUEST")
		if e.Parameter != "q" || e.Max == nil || *e.Max != 200 {
			t.Errorf("201 characters: %+v", e)
		}
	}
	for _, path := range []string{"/v1/search", "/v1/search?q=", "/v1/search?q=+++"} {
		if e := h.get(path, tok).wantError(t, 400, "BAD_REQUEST"); e.Parameter != "q" {
			t.Errorf("%s: parameter %q", path, e.Parameter)
		}
	}
	if got := h.calls("org") - before; got != 0 {
		t.Errorf("refused queries billed %d calls", got)
	}
}

// A 304 is decided before any search runs and bills one call; the
// validator moves with the query, the organisation and the content
// version.
func TestSearchNotModified(t *testing.T) {
	h := newHarness(t)
	tok := h.org("org", allTierGrants...)
	other := h.org("other", "high")
	r := h.get("/v1/search?q=the&limit=5", tok)
	r.page(t)
	tag := r.header.Get("ETag")
	runs := h.content.Load().search.Runs()
	before := h.calls("org")
	nm := h.get("/v1/search?q=the&limit=5", tok, "If-None-Match", tag)
	if nm.status != 304 || len(nm.body) != 0 || nm.header.Get("ETag") != tag || nm.header.Get("X-Service-Content-Version") == "" {
		t.Fatalf("304: %d %v", nm.status, nm.header)
	}
	if got := h.calls("org") - before; got != 1 {
		t.Errorf("a 304 billed %d calls, want 1", got)
	}
	if got := h.content.Load().search.Runs(); got != runs {
		t.Errorf("a 304 ran %d searches", got-runs)
	}
	for _, tc := range []struct{ path, tok string }{
		{"/v1/search?q=then&limit=5", tok},
		{"/v1/search?q=the&limit=6", tok},
		{"/v1/search?q=the&limit=5", other},
	} {
		if got := h.get(tc.path, tc.tok, "If-None-Match", tag); got.status != 200 {
			t.Errorf("%s: %d with another request's ETag", tc.path, got.status)
		}
	}
	h.content.Store(buildContent(t, filepath.Join(t.TempDir(), "corpus"), gen.Options{Seed: 2, Small: true}))
	if got := h.get("/v1/search?q=the&limit=5", tok, "If-None-Match", tag); got.status != 200 || got.header.Get("ETag") == tag {
		t.Errorf("after a reload: %d, ETag %s", got.status, got.header.Get("ETag"))
	}
}

// BenchmarkSearchRoute serves (d)'s search, a page of the default size for
// "photosynthesis" over every tier, through the whole pipeline in process:
// its allocations per request are what the collector's cycles scale with.
func BenchmarkSearchRoute(b *testing.B) {
	h := newHarnessWith(b, fullContent(b))
	tok := h.org("bench", "topics", "college", "high", "middle", "primary")
	b.ReportAllocs()
	for b.Loop() {
		if r := h.get("/v1/search?q=photosynthesis", tok); r.status != 200 {
			b.Fatalf("%d %s", r.status, r.body)
		}
	}
}
