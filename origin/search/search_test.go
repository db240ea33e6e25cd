package search_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/search"
	"github.com/lectern-api/lectern/origin/search/searchtest"
)

var allTierGrants = []string{"topics", "college", "high", "middle", "primary"}

// indexQueries are the queries checked against the reference: fixed ones
// and random pieces of random fields in random case.
func indexQueries(c *corpus.Corpus, n int, seed uint64) []string {
	qs := []string{"e", "E", "th", "the", "The", "and", "tion", "which term", "check every step", "in real work",
		"xylophone", "zzzq", " ", "a", "q", ":", "e the", strings.Repeat("ab", 100), strings.Repeat("x", 200)}
	r := rand.New(rand.NewPCG(seed, 1))
	for range n {
		l := c.Lessons[r.IntN(len(c.Lessons))]
		fs := searchtest.Fields(l)
		text := fs[r.IntN(len(fs))].Text
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
func checkIndex(t *testing.T, c *corpus.Corpus, qs []string, grantSets [][]string) {
	t.Helper()
	ix := search.Build(c)
	for _, grants := range grantSets {
		for _, q := range qs {
			want := searchtest.Reference(c, q, searchtest.GrantedBy(grants...))
			for _, from := range []int{0, 7} {
				total, hits := ix.Search(q, ix.Allowed(c.Subjects, grants), from, from+25)
				if total != len(want) {
					t.Fatalf("%q grants %v: total %d, want %d", q, grants, total, len(want))
				}
				wantPage := want[min(from, len(want)):min(from+25, len(want))]
				if len(hits) != len(wantPage) {
					t.Fatalf("%q from %d: %d hits, want %d", q, from, len(hits), len(wantPage))
				}
				fq := search.Fold(q)
				for i, h := range hits {
					var got searchtest.Hit
					b, _ := json.Marshal(ix.Render(h, fq))
					json.Unmarshal(b, &got)
					if !searchtest.SameHit(got, wantPage[i], q) {
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
	c := loadCorpus(t, filepath.Join(t.TempDir(), "corpus"), gen.Options{Seed: 1, Small: true})
	checkIndex(t, c, indexQueries(c, 300, 1), [][]string{allTierGrants, {"high", "primary/phonics"}, {}})
	if testing.Short() {
		return
	}
	full := fullCorpus(t)
	checkIndex(t, full, indexQueries(full, 40, 2), [][]string{allTierGrants, {"college"}})
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
		if got := search.Fold(tc.in); got != tc.want || len(got) != len(tc.in) {
			t.Errorf("search.Fold(%q) = %q, want %q", tc.in, got, tc.want)
		}
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
	c := fullCorpus(b)
	ix := search.Build(c)
	kinds := benchQueries(c)
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
			allowed := ix.Allowed(c.Subjects, allTierGrants)
			t0 := time.Now()
			ix.Search(q, allowed, 0, 25)
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
			search.Build(c)
		}
	})
}

var (
	fullOnce sync.Once
	full     *corpus.Corpus
)

// fullCorpus is the deployed-scale corpus of seed 1, generated once per
// test binary (it lives in memory; its directory may go).
func fullCorpus(t testing.TB) *corpus.Corpus {
	t.Helper()
	fullOnce.Do(func() { full = loadCorpus(t, filepath.Join(t.TempDir(), "full"), gen.Options{Seed: 1}) })
	if full == nil {
		t.Fatal("the full corpus failed to build")
	}
	return full
}

// loadCorpus generates the corpus of o in dir and loads it.
func loadCorpus(t testing.TB, dir string, o gen.Options) *corpus.Corpus {
	t.Helper()
	if _, err := gen.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	c, err := corpus.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
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
