package gen_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/shared/id"
)

// tree reads every file under dir, keyed by slash path.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func write(t *testing.T, opt gen.Options) (string, gen.Summary) {
	t.Helper()
	dir := t.TempDir()
	sum, err := gen.Write(dir, opt)
	if err != nil {
		t.Fatalf("Write(%+v): %v", opt, err)
	}
	return dir, sum
}

func TestDeterministic(t *testing.T) {
	a, sa := write(t, gen.Options{Seed: 1, Small: true})
	b, sb := write(t, gen.Options{Seed: 1, Small: true})
	if sa != sb {
		t.Fatalf("summaries differ: %+v vs %+v", sa, sb)
	}
	ta, tb := tree(t, a), tree(t, b)
	if len(ta) != len(tb) {
		t.Fatalf("got %d and %d files", len(ta), len(tb))
	}
	for p, x := range ta {
		if !bytes.Equal(x, tb[p]) {
			t.Errorf("%s differs between two runs with the same options", p)
		}
	}

	_, sc := write(t, gen.Options{Seed: 2, Small: true})
	if sc.ContentVersion == sa.ContentVersion {
		t.Errorf("seed 2 gave the same contentVersion %s as seed 1", sa.ContentVersion)
	}
	_, sd := write(t, gen.Options{Seed: 1, Small: true, Date: "2027-01-15"})
	if want := "2027-01-15+" + strings.TrimPrefix(sa.ContentVersion, gen.DefaultDate+"+"); sd.ContentVersion != want {
		t.Errorf("date 2027-01-15: got %s, want %s", sd.ContentVersion, want)
	}
	if !strings.HasPrefix(sa.ContentVersion, gen.DefaultDate+"+") || len(sa.ContentVersion) != len(gen.DefaultDate)+1+12 {
		t.Errorf("contentVersion %q is not <date>+<12 hex>", sa.ContentVersion)
	}
}

func TestRewriteCleansOldCorpus(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "lessons", "high", "stale.json")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(stale, []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(dir, "README"), []byte("keep"), 0o644)
	if _, err := gen.Write(dir, gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("stale lesson file survived a rewrite")
	}
	if _, err := os.Stat(filepath.Join(dir, "README")); err != nil {
		t.Error("a file that is not part of the corpus was removed")
	}
}

func TestBadDate(t *testing.T) {
	for _, d := range []string{"2026-13-01", "26-11-01", "today"} {
		if _, err := gen.Write(t.TempDir(), gen.Options{Date: d, Small: true}); err == nil {
			t.Errorf("date %q accepted", d)
		}
	}
}

func TestSmall(t *testing.T) {
	start := time.Now()
	dir, sum := write(t, gen.Options{Seed: 1, Small: true})
	c, err := corpus.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("small corpus: generated and loaded in %v: %+v", time.Since(start), sum)
	if sum.Tiers != 5 || sum.Subjects < 10 || sum.Subjects > 15 || sum.Classes < 60 || sum.Classes > 100 {
		t.Errorf("small corpus shape %+v; want 5 tiers, about 12 subjects, 60-100 classes", sum)
	}
	checkCorpus(t, c, sum, 2)
	for _, tst := range c.Tests {
		for _, s := range tst.Sections {
			if len(s.Items) != 20 {
				t.Errorf("%s/%s: %d items, want 20", tst.ID, s.ID, len(s.Items))
			}
		}
	}
}

// TestFull generates the deployed-scale corpus and checks its exact counts.
func TestFull(t *testing.T) {
	if testing.Short() {
		t.Skip("full corpus: skipped with -short")
	}
	dir := t.TempDir()
	start := time.Now()
	sum, err := gen.Write(dir, gen.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	genTime := time.Since(start)
	start = time.Now()
	c, err := corpus.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("full corpus: generated in %v, loaded in %v: %+v", genTime, time.Since(start), sum)
	if sum.Tiers != 5 || sum.Subjects != 125 || sum.Classes != 3680 || sum.Media != 113844 {
		t.Errorf("got %+v; want 5 tiers, 125 subjects, 3680 classes, 113844 media", sum)
	}
	checkCorpus(t, c, sum, 10)

	var per []int
	for _, s := range c.Subjects {
		if n := len(s.Lessons); n < 10 || n > 60 {
			t.Errorf("%s has %d classes, want 10 to 60", s.Ref(), n)
		}
		for _, l := range s.Lessons {
			per = append(per, len(l.Media))
		}
	}
	sort.Ints(per)
	median := float64(per[len(per)/2-1]+per[len(per)/2]) / 2
	if median < 30 || median > 32 {
		t.Errorf("median media per class %.1f, want about 31", median)
	}
	for _, tst := range c.Tests {
		for _, s := range tst.Sections {
			if n := len(s.Items); n < 300 || n > 500 {
				t.Errorf("%s/%s: %d items, want several hundred", tst.ID, s.ID, n)
			}
		}
	}

	// Search selectivity (spec: route rules 1): a subject's terms appear in
	// the searchable text of only a few subjects.
	for _, term := range []string{"photosynthesis", "quadratic formula", "subjunctive", "Silk Road", "binary search", "aperture", "circle of fifths", "Maillard"} {
		var hits []string
		for _, s := range c.Subjects {
			if searchable(s, term) {
				hits = append(hits, s.Ref())
			}
		}
		if len(hits) == 0 || len(hits) > 4 {
			t.Errorf("%q matches %d subjects %v; want 1 to 4", term, len(hits), hits)
		}
	}
}

func searchable(s *corpus.Subject, term string) bool {
	term = strings.ToLower(term)
	has := func(x string) bool { return strings.Contains(strings.ToLower(x), term) }
	for _, l := range s.Lessons {
		if has(l.Title) || has(l.Subtitle) {
			return true
		}
		for _, cd := range l.Cards {
			if has(cd.Label) || slices.ContainsFunc(cd.KeyPoints, has) {
				return true
			}
		}
		for _, q := range l.Quiz {
			if has(q.Question) {
				return true
			}
		}
	}
	return false
}

// checkCorpus checks what both corpus sizes must have: every feature of the
// issue, and the summary matching the loaded corpus.
func checkCorpus(t *testing.T, c *corpus.Corpus, sum gen.Summary, minShared int) {
	t.Helper()
	if got := (gen.Summary{Tiers: c.Counts.Tiers, Subjects: c.Counts.Subjects, Classes: c.Counts.Classes,
		Media: c.Counts.Media, TestprepItems: c.Counts.TestprepItems, ContentVersion: c.ContentVersion}); got != sum {
		t.Errorf("loaded %+v, summary says %+v", got, sum)
	}
	if len(c.Tiers) != 5 {
		t.Errorf("%d tiers, want 5", len(c.Tiers))
	}
	shared := map[string]bool{}
	for _, s := range c.Subjects {
		if len(c.SlugTiers(s.Slug)) > 1 {
			shared[s.Slug] = true
		}
	}
	if len(shared) < minShared {
		t.Errorf("%d slugs in several tiers, want at least %d", len(shared), minShared)
	}
	var noVideo, noNarration, noTranscript, videoNoNarration, long, short, checks, interactives, worked, scripts, voiceovers int
	for _, s := range c.Subjects {
		for _, l := range s.Lessons {
			if !l.HasVideo {
				noVideo++
			}
			if !l.HasNarration {
				noNarration++
				if l.HasVideo && l.HasTranscript {
					videoNoNarration++
				}
			}
			if !l.HasTranscript {
				noTranscript++
			}
			if len(l.Quiz) == 0 {
				t.Errorf("%s has no quiz", l.ID)
			}
			if len(l.KeyTerms) == 0 || l.KeyTerms[0].Definition == "" {
				t.Errorf("%s has no derived key terms", l.ID)
			}
			if l.StudyMinutes < 1 {
				t.Errorf("%s: study time %d", l.ID, l.StudyMinutes)
			}
			for _, cd := range l.Cards {
				switch n := len(cd.Body); {
				case n > 700:
					long++
				case n < 600:
					short++
				}
				if cd.NarrationScript != "" {
					scripts++
				}
				if cd.VideoVoiceover != "" {
					voiceovers++
				}
			}
			for _, ch := range l.InlineChecks {
				if len(ch.Hints) < 2 || len(ch.Hints) > 3 || ch.Rationale == "" {
					t.Errorf("%s: inline check with %d hints", l.ID, len(ch.Hints))
				}
				checks++
			}
			interactives += len(l.Interactives)
			if l.WorkedExample != nil {
				worked++
			}
		}
	}
	for name, n := range map[string]int{
		"classes without video": noVideo, "classes without narration": noNarration,
		"classes without transcript": noTranscript, "voiced video classes without narration": videoNoNarration,
		"long card bodies": long, "short card bodies": short, "inline checks": checks,
		"interactives": interactives, "worked examples": worked, "narration scripts": scripts,
		"video voiceovers": voiceovers,
	} {
		if n == 0 {
			t.Errorf("no %s", name)
		}
	}

	want := [][]string{{"digital-sat", "rw", "math"}, {"act", "english", "math", "reading", "science"}, {"psat-nmsqt", "rw", "math"}, {"caaspp", "ela", "math", "science"}}
	if len(c.Tests) != len(want) {
		t.Fatalf("%d tests, want 4", len(c.Tests))
	}
	var passages, perOption, items int
	for i, tst := range c.Tests {
		if got := append([]string{tst.ID}, tst.SectionIDs()...); !slices.Equal(got, want[i]) {
			t.Errorf("test %d: got %v, want %v", i, got, want[i])
		}
		for _, s := range tst.Sections {
			for _, it := range s.Items {
				items++
				if it.Passage != "" {
					passages++
				}
				if it.OptionRationales != nil {
					perOption++
				}
				if (s.ID == "reading" || s.ID == "rw") && it.Passage == "" {
					t.Errorf("%s: reading item without a passage", it.ID)
				}
			}
		}
	}
	if passages == 0 || perOption < items/3 {
		t.Errorf("%d items: %d with passages, %d with per-option rationales", items, passages, perOption)
	}
}

// TestScaleOneIsTheDeployedCorpus: seed 1 at scale 1 (and 0, the zero
// Options) writes the deployed corpus byte for byte: its contentVersion
// hashes every file but the manifest, whose own hash is pinned too.
func TestScaleOneIsTheDeployedCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("writes the full corpus")
	}
	const version = "2026-11-01+266db8025369"
	const manifest = "57b3eeaf48fe0cd18d9d913ce6d220b46ca449acbee8718d8b99e1d71cf60f57"
	for _, scale := range []int{0, 1} {
		dir, sum := write(t, gen.Options{Seed: 1, Scale: scale})
		if sum.ContentVersion != version || sum.Classes != gen.FullClasses || sum.Media != gen.FullMedia {
			t.Errorf("scale %d: %+v, want contentVersion %s", scale, sum, version)
		}
		b, err := os.ReadFile(filepath.Join(dir, "corpus.json"))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != manifest {
			t.Errorf("scale %d: corpus.json changed: sha256 %x", scale, h)
		}
	}
}

// TestScale: scale 2 writes twice the subjects of every tier, classes
// and media, under valid and distinct slugs, and loads.
func TestScale(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and loads twice the full corpus")
	}
	dir, sum := write(t, gen.Options{Seed: 1, Scale: 2})
	if sum.Subjects != 2*gen.FullSubjects || sum.Classes != 2*gen.FullClasses || sum.Media != 2*gen.FullMedia {
		t.Fatalf("scale 2: %+v", sum)
	}
	_, again := write(t, gen.Options{Seed: 1, Scale: 2})
	if again != sum {
		t.Errorf("scale 2 is not deterministic: %+v, then %+v", sum, again)
	}
	c, err := corpus.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	perTier := map[string]int{}
	for _, s := range c.Subjects {
		ref := s.Tier + "/" + s.Slug
		if !id.ValidSlug(s.Slug) || seen[ref] {
			t.Errorf("subject %s: invalid or repeated slug", ref)
		}
		seen[ref] = true
		perTier[s.Tier]++
	}
	full, _ := write(t, gen.Options{Seed: 1})
	f, err := corpus.Load(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.Subjects {
		perTier[s.Tier] -= 2
	}
	for tier, n := range perTier {
		if n != 0 {
			t.Errorf("tier %s: %+d subjects against twice the full corpus's", tier, n)
		}
	}
	if _, err := gen.Write(t.TempDir(), gen.Options{Small: true, Scale: 2}); err == nil {
		t.Error("Small with Scale 2: want an error")
	}
}
