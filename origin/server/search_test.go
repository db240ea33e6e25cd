package server

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/licence"
)

// searchHitT is a search hit as these tests read it.
type searchHitT struct {
	LessonID     string  `json:"lessonId"`
	Tier         string  `json:"tier"`
	Subject      string  `json:"subject"`
	ClassNum     int     `json:"classNum"`
	Title        string  `json:"title"`
	MatchedField string  `json:"matchedField"`
	CardID       *string `json:"cardId"`
	Snippet      string  `json:"snippet"`
}

// refField is one searched field of a lesson, in hit priority order.
type refField struct {
	kind, text string
	card       *string
}

// refFields lists a lesson's searched fields in the order the spec's
// Route rule 1 names them: never the card bodies.
func refFields(l *corpus.Lesson) []refField {
	fs := []refField{{"title", l.Title, nil}, {"subtitle", l.Subtitle, nil}}
	for _, c := range l.Cards {
		fs = append(fs, refField{"cardLabel", c.Label, &c.ID})
	}
	for _, c := range l.Cards {
		for _, kp := range c.KeyPoints {
			fs = append(fs, refField{"keyPoint", kp, &c.ID})
		}
	}
	for _, q := range l.Quiz {
		fs = append(fs, refField{"quizQuestion", q.Question, nil})
	}
	return fs
}

// refSearch is the reference search: every lesson of an allowed subject,
// in corpus order, with its first field holding q ignoring case.
func refSearch(c *corpus.Corpus, q string, allowed func(*corpus.Subject) bool) []searchHitT {
	lq := strings.ToLower(q)
	var out []searchHitT
	for _, l := range c.Lessons {
		if !allowed(l.Subject) {
			continue
		}
		for _, f := range refLower(l) {
			if strings.Contains(f.text, lq) {
				out = append(out, searchHitT{LessonID: l.ID, Tier: l.Subject.Tier, Subject: l.Subject.Slug, ClassNum: l.Number,
					Title: l.Title, MatchedField: f.kind, CardID: f.card, Snippet: f.orig})
				break
			}
		}
	}
	return out
}

type refLowerField struct {
	refField
	orig string
}

var refLowerCache sync.Map // *corpus.Lesson -> []refLowerField

// refLower is refFields with each text lower-cased, remembered.
func refLower(l *corpus.Lesson) []refLowerField {
	if v, ok := refLowerCache.Load(l); ok {
		return v.([]refLowerField)
	}
	fs := refFields(l)
	out := make([]refLowerField, len(fs))
	for i, f := range fs {
		out[i] = refLowerField{refField{f.kind, strings.ToLower(f.text), f.card}, f.text}
	}
	refLowerCache.Store(l, out)
	return out
}

func grantedBy(grants ...string) func(*corpus.Subject) bool {
	return func(s *corpus.Subject) bool { return licence.Entitled(grants, s.Tier, s.Slug) == nil }
}

var allTierGrants = []string{"topics", "college", "high", "middle", "primary"}

// sameHit compares a hit with the reference's; the snippet is the whole
// field when the field is short, else a part holding the query.
func sameHit(got, want searchHitT, q string) bool {
	snip := got.Snippet == want.Snippet ||
		len(want.Snippet) > snippetMax && strings.Contains(strings.ToLower(got.Snippet), strings.ToLower(q))
	g, w := got, want
	g.Snippet, w.Snippet = "", ""
	g.CardID, w.CardID = nil, nil
	cardOK := (got.CardID == nil) == (want.CardID == nil) && (got.CardID == nil || *got.CardID == *want.CardID)
	return snip && cardOK && g == w
}

// indexQueries are the queries checked against the reference: fixed ones
// and random pieces of random fields in random case.
func indexQueries(c *corpus.Corpus, n int, seed uint64) []string {
	qs := []string{"e", "E", "th", "the", "The", "and", "tion", "which term", "check every step", "in real work",
		"xylophone", "zzzq", " ", "a", "q", ":", "e the", strings.Repeat("ab", 100), strings.Repeat("x", 200)}
	r := rand.New(rand.NewPCG(seed, 1))
	for range n {
		l := c.Lessons[r.IntN(len(c.Lessons))]
		fs := refFields(l)
		text := fs[r.IntN(len(fs))].text
		i := r.IntN(len(text))
		j := min(len(text), i+1+r.IntN(30))
		b := []byte(text[i:j])
		for k := range b {
			if r.IntN(2) == 0 {
				b[k] = byte(unicode.ToUpper(rune(b[k])))
			}
		}
		qs = append(qs, string(b))
	}
	return qs
}

// checkIndex holds the index to the reference: totals, and every hit of
// two pages (the first and one further on).
func checkIndex(t *testing.T, ct *Content, qs []string, grantSets [][]string) {
	t.Helper()
	ix := ct.search
	for _, grants := range grantSets {
		for _, q := range qs {
			want := refSearch(ct.Corpus, q, grantedBy(grants...))
			for _, from := range []int{0, 7} {
				total, hits := ix.search(q, ix.allowed(ct.Subjects, grants), from, from+25)
				if total != len(want) {
					t.Fatalf("%q grants %v: total %d, want %d", q, grants, total, len(want))
				}
				wantPage := want[min(from, len(want)):min(from+25, len(want))]
				if len(hits) != len(wantPage) {
					t.Fatalf("%q from %d: %d hits, want %d", q, from, len(hits), len(wantPage))
				}
				fq := fold(q)
				for i, h := range hits {
					var got searchHitT
					b, _ := json.Marshal(ix.render(h, fq))
					json.Unmarshal(b, &got)
					if !sameHit(got, wantPage[i], q) {
						t.Fatalf("%q hit %d: got %+v, want %+v", q, from+i, got, wantPage[i])
					}
				}
			}
		}
	}
}

// The index answers what the naive scan answers, on the small corpus and,
// unless -short, on the deployed-scale one.
func TestSearchIndexMatchesReference(t *testing.T) {
	ct := buildContent(t, filepath.Join(t.TempDir(), "corpus"), gen.Options{Seed: 1, Small: true})
	checkIndex(t, ct, indexQueries(ct.Corpus, 300, 1), [][]string{allTierGrants, {"high", "primary/phonics"}, {}})
	if testing.Short() {
		return
	}
	full := fullContent(t)
	checkIndex(t, full, indexQueries(full.Corpus, 40, 2), [][]string{allTierGrants, {"college"}})
}

func TestFold(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Cellular Respiration", "cellular respiration"},
		{"already lower", "already lower"},
		{"ÉCOLE Ζ Ж", "école ζ ж"},
		{"\u212a", "\u212a"}, // KELVIN SIGN lowers to a 1-byte k: kept, so offsets hold
		{"İ", "İ"},           // lowers to 3 bytes: kept
		{"a\xffB", "a\xffb"}, // invalid UTF-8 is kept byte for byte
	} {
		if got := fold(tc.in); got != tc.want || len(got) != len(tc.in) {
			t.Errorf("fold(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// searchPage decodes a search page strictly: the hit shape is fixed.
func searchPage(t testing.TB, r resp) (listPage, []searchHitT) {
	t.Helper()
	p := r.page(t)
	hits := make([]searchHitT, len(p.Items))
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

func (h *harness) searchWalk(query url.Values, tok string, limit int) []searchHitT {
	h.t.Helper()
	return decodeRows[searchHitT](h.t, h.walk("/v1/search?"+query.Encode(), tok, limit))
}

func equalHits(t *testing.T, what, q string, got, want []searchHitT) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, want %d", what, len(got), len(want))
	}
	for i := range got {
		if !sameHit(got[i], want[i], q) {
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
		fs := refFields(l)
		for i, f := range fs {
			if found[f.kind] {
				continue
			}
			lower := strings.ToLower(f.text)
			earlier := slices.ContainsFunc(fs[:i], func(e refField) bool { return strings.Contains(strings.ToLower(e.text), lower) })
			if earlier || len(f.text) > 200 {
				continue
			}
			found[f.kind] = true
			q := strings.ToUpper(f.text)
			hits := h.searchWalk(url.Values{"q": {q}, "tier": {l.Subject.Tier}, "subject": {l.Subject.Slug}}, tok, 100)
			i := slices.IndexFunc(hits, func(hh searchHitT) bool { return hh.LessonID == l.ID })
			if i < 0 {
				t.Fatalf("%s %q: %s not among %d hits", f.kind, q, l.ID, len(hits))
			}
			got := hits[i]
			if got.MatchedField != f.kind || got.Snippet != f.text || got.Title != l.Title || got.ClassNum != l.Number ||
				got.Tier != l.Subject.Tier || got.Subject != l.Subject.Slug || (got.CardID == nil) != (f.card == nil) ||
				f.card != nil && *got.CardID != *f.card {
				t.Errorf("%s: got %+v", f.kind, got)
			}
		}
	}
	if len(found) != 5 {
		t.Fatalf("found fields %v, want all five kinds", found)
	}

	// A phrase that only card bodies hold.
	searched := strings.Builder{}
	for _, l := range c.Lessons {
		for _, f := range refFields(l) {
			searched.WriteString(strings.ToLower(f.text) + "\x00")
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
		wantWide := refSearch(c, q, grantedBy(allTierGrants...))
		wantNarrow := refSearch(c, q, grantedBy(narrowGrants...))
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
		want := refSearch(c, q, tc.keep)
		got := h.searchWalk(tc.query, tok, 7)
		equalHits(t, tc.query.Encode(), q, got, want)
	}
	if got := h.searchWalk(url.Values{"q": {q}, "subject": {shared}}, tok, 100); len(slices.CompactFunc(got, func(a, b searchHitT) bool { return a.Tier == b.Tier })) != len(tiers) {
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
	runs := h.content.Load().search.runs.Load()
	before := h.calls("org")
	nm := h.get("/v1/search?q=the&limit=5", tok, "If-None-Match", tag)
	if nm.status != 304 || len(nm.body) != 0 || nm.header.Get("ETag") != tag || nm.header.Get("X-Service-Content-Version") == "" {
		t.Fatalf("304: %d %v", nm.status, nm.header)
	}
	if got := h.calls("org") - before; got != 1 {
		t.Errorf("a 304 billed %d calls, want 1", got)
	}
	if got := h.content.Load().search.runs.Load(); got != runs {
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

// benchQueries are realistic queries over the deployed-scale corpus:
// common words, rare terms, no match, 1 character and 200 characters.
func benchQueries(c *corpus.Corpus) map[string][]string {
	long := c.Lessons[len(c.Lessons)/2].Cards[0].KeyPoints[0]
	for len(long) < 200 {
		long += " " + long
	}
	return map[string][]string{
		"common":  {"the", "and", "which", "which term", "tion", "practise", "check every step", "in real work", "e the", "of"},
		"rare":    {"photosynthesis", "queen's gambit", "cellular respiration", "Preterite Tense", "histogram", "matrix equation"},
		"nomatch": {"xylophone", "zzzq", "quantum chromodynamics", "the the the"},
		"1char":   {"e", "q", "z", " ", "?"},
		"200char": {long[:200], strings.Repeat("ab", 100), strings.Repeat("x", 200)},
	}
}

// BenchmarkSearch measures each search over the deployed-scale corpus
// (3,680 lessons) for an organisation granted everything, one query per
// iteration round-robin within each kind, and reports p50 and p99.
func BenchmarkSearch(b *testing.B) {
	ct := fullContent(b)
	ix := ct.search
	kinds := benchQueries(ct.Corpus)
	var everything []string
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range kinds {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		everything = append(everything, kinds[name]...)
	}
	run := func(b *testing.B, qs []string) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			q := qs[i%len(qs)]
			i++
			allowed := ix.allowed(ct.Subjects, allTierGrants)
			t0 := time.Now()
			ix.search(q, allowed, 0, 25)
			lat = append(lat, time.Since(t0))
		}
		reportPercentiles(b, lat)
	}
	for _, name := range names {
		b.Run(name, func(b *testing.B) { run(b, kinds[name]) })
	}
	b.Run("all", func(b *testing.B) { run(b, everything) })
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			buildSearch(ct.Corpus)
		}
	})
}

var (
	fullOnce sync.Once
	full     *Content
)

// fullContent is the deployed-scale corpus of seed 1, generated once per
// test binary (it lives in memory; its directory may go).
func fullContent(t testing.TB) *Content {
	t.Helper()
	fullOnce.Do(func() { full = buildContent(t, filepath.Join(t.TempDir(), "full"), gen.Options{Seed: 1}) })
	if full == nil {
		t.Fatal("the full corpus failed to build")
	}
	return full
}
