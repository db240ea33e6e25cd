package corpus_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
)

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// generated writes the small corpus of seed 1 dated date into a fresh
// directory.
func generated(t *testing.T, date string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := gen.Write(dir, gen.Options{Seed: 1, Small: true, Date: date}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// digests loads dir and maps each subject's ref to its content digest.
func digests(t *testing.T, dir string) (map[string]string, *corpus.Corpus) {
	t.Helper()
	c, err := corpus.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range c.Subjects {
		if !digestRE.MatchString(s.ContentDigest) {
			t.Fatalf("%s: content digest %q, want sha256:<64 hex>", s.Ref(), s.ContentDigest)
		}
		out[s.Ref()] = s.ContentDigest
	}
	return out, c
}

// TestContentDigest: two generated corpora of different dates (so
// different contentVersions), the second with one class of high/algebra
// changed, give high/algebra different digests and every other subject
// the same one. A rewrite that changes only the file's layout changes
// nothing.
func TestContentDigest(t *testing.T) {
	base, c0 := digests(t, generated(t, "2026-11-01"))
	if len(base) < 2 {
		t.Fatalf("%d subjects: the test needs several", len(base))
	}
	if len(slices.Compact(slices.Sorted(maps.Values(base)))) != len(base) {
		t.Errorf("two subjects share a digest: %v", base)
	}
	const changed = "high/algebra"
	class2 := func(v map[string]any) map[string]any { return obj(v, "classes", 1) }
	tests := []struct {
		name string
		file string
		edit func(v map[string]any) // nil: rewritten with its layout changed only
		same bool                   // every subject keeps its digest
	}{
		{name: "layout only", file: algebra, same: true},
		{name: "card body", file: algebra, edit: func(v map[string]any) {
			card := obj(class2(v), "cards", 0)
			card["body"] = card["body"].(string) + " One more sentence."
		}},
		{name: "class title", file: algebra, edit: func(v map[string]any) { class2(v)["title"] = "Another title" }},
		{name: "quiz answer", file: algebra, edit: func(v map[string]any) {
			q := obj(class2(v), "quiz", 0)
			q["answerIndex"] = float64((int(q["answerIndex"].(float64)) + 1) % len(q["options"].([]any)))
		}},
		{name: "media bytes", file: algebra, edit: func(v map[string]any) {
			m := obj(class2(v), "cards", 0, "media", 0)
			m["bytes"] = m["bytes"].(float64) + 1
		}},
		{name: "media location", file: algebra, edit: func(v map[string]any) {
			m := obj(class2(v), "cards", 0, "media", 0)
			m["location"] = "media/elsewhere/" + filepath.Base(m["location"].(string))
		}},
		{name: "media sha256 declared", file: algebra, edit: func(v map[string]any) {
			obj(class2(v), "cards", 0, "media", 0)["sha256"] = strings.Repeat("0f", 32)
		}},
		{name: "media mime", file: algebra, edit: func(v map[string]any) {
			m := obj(class2(v), "cards", 0, "media", 0)
			m["mime"] = m["type"].(string) + "/x-other"
		}},
		{name: "subject description", file: "subjects.json", edit: func(v map[string]any) {
			for _, s := range at(v, "subjects").([]any) {
				if s := s.(map[string]any); s["tier"].(string)+"/"+s["slug"].(string) == changed {
					s["description"] = s["description"].(string) + " Revised."
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := generated(t, "2027-02-03")
			if tt.edit != nil {
				edit(t, dir, tt.file, tt.edit)
			} else {
				indent(t, dir, tt.file)
			}
			got, c1 := digests(t, dir)
			if c1.ContentVersion == c0.ContentVersion {
				t.Fatalf("both corpora are %s: the dates should differ", c0.ContentVersion)
			}
			for ref, want := range base {
				switch {
				case ref == changed && !tt.same:
					if got[ref] == want {
						t.Errorf("%s: digest %s did not move", ref, want)
					}
				case got[ref] != want:
					t.Errorf("%s: got %s, want %s (unchanged)", ref, got[ref], want)
				}
			}
		})
	}
}

// indent rewrites one JSON file of dir with its keys sorted and
// indented: the same content in another layout.
func indent(t *testing.T, dir, file string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(file))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if b, err = json.MarshalIndent(v, "", "\t"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkLoad loads the corpus of LECTERN_BENCH_CORPUS (e.g. the full
// one from go run ./tools/corpusgen -out /tmp/full), else the small one;
// BenchmarkLoad/digest is the part of it spent on content digests.
func BenchmarkLoad(b *testing.B) {
	dir := os.Getenv("LECTERN_BENCH_CORPUS")
	if dir == "" {
		dir = small(b)
	}
	c, err := corpus.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("load", func(b *testing.B) {
		for b.Loop() {
			if _, err := corpus.Load(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("digest", func(b *testing.B) {
		for b.Loop() {
			for _, s := range c.Subjects {
				corpus.ContentDigest(s)
			}
		}
	})
}

// The corpus's ContentDigest covers every file but corpus.json: the same
// files under another declared version digest the same, and one changed
// byte anywhere moves it (issue #35, point 8: a reload is refused when the
// version stays and the digest moves).
func TestCorpusContentDigest(t *testing.T) {
	a, err := corpus.Load(generated(t, "2026-11-01"))
	if err != nil {
		t.Fatal(err)
	}
	dirB := generated(t, "2026-12-01")
	b, err := corpus.Load(dirB)
	if err != nil {
		t.Fatal(err)
	}
	if !digestRE.MatchString(a.ContentDigest) || a.ContentDigest != b.ContentDigest || a.ContentVersion == b.ContentVersion {
		t.Fatalf("same files under %s and %s: digests %q and %q, want one sha256:<64 hex>", a.ContentVersion, b.ContentVersion, a.ContentDigest, b.ContentDigest)
	}
	for _, f := range []string{"tiers.json", "subjects.json", "lessons/" + b.Subjects[0].Ref() + ".json"} {
		p := filepath.Join(dirB, filepath.FromSlash(f))
		old, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(old, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := corpus.Load(dirB)
		if err != nil {
			t.Fatalf("%s with a trailing line break: %v", f, err)
		}
		if c.ContentDigest == b.ContentDigest || c.ContentVersion != b.ContentVersion {
			t.Errorf("%s changed: digest %s, version %s; want another digest, the same version", f, c.ContentDigest, c.ContentVersion)
		}
		b = c
	}
}
