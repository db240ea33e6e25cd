package corpus_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/shared/id"
)

var (
	smallOnce sync.Once
	smallDir  string
	smallErr  error
)

// small generates the Small corpus once per test binary and returns a fresh
// copy of it that the caller may damage.
func small(t testing.TB) string {
	t.Helper()
	smallOnce.Do(func() {
		smallDir, smallErr = os.MkdirTemp("", "corpus-small-")
		if smallErr == nil {
			_, smallErr = gen.Write(smallDir, gen.Options{Seed: 1, Small: true})
		}
	})
	if smallErr != nil {
		t.Fatal(smallErr)
	}
	dst := t.TempDir()
	err := filepath.WalkDir(smallDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(smallDir, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestMain(m *testing.M) {
	code := m.Run()
	if smallDir != "" {
		os.RemoveAll(smallDir)
	}
	os.Exit(code)
}

func TestLoadSmall(t *testing.T) {
	c, err := corpus.Load(small(t))
	if err != nil {
		t.Fatal(err)
	}
	var tiers []string
	for _, tr := range c.Tiers {
		tiers = append(tiers, tr.Name)
		if !slices.IsSortedFunc(tr.Subjects, func(a, b *corpus.Subject) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("tier %s: subjects not ordered by name", tr.Name)
		}
		if c.Tier(tr.Name) != tr {
			t.Errorf("Tier(%q) does not return the listed tier", tr.Name)
		}
	}
	if !slices.Equal(tiers, id.Tiers) {
		t.Errorf("tiers %v, want %v", tiers, id.Tiers)
	}
	if got, want := c.SlugTiers("algebra"), []string{"college", "high", "middle"}; !slices.Equal(got, want) {
		t.Errorf("SlugTiers(algebra) = %v, want %v", got, want)
	}
	if got := c.SlugTiers("nope"); got != nil {
		t.Errorf("SlugTiers(nope) = %v, want nil", got)
	}
	s := c.Subject("high", "algebra")
	if s == nil || s.Ref() != "high/algebra" || s.ClassCount() == 0 {
		t.Fatalf("Subject(high, algebra) = %+v", s)
	}
	if c.Subject("primary", "algebra") != nil {
		t.Error("Subject(primary, algebra) found a subject that does not exist")
	}
	cov := corpus.Coverage{}
	for n, l := range s.Lessons {
		if l.Number != n+1 || l.ID != "high/algebra/"+itoa(n+1) || c.Lesson(l.ID) != l || c.LessonAt("high", "algebra", n+1) != l || l.Subject != s {
			t.Errorf("lesson %d: indexes disagree (%s)", n+1, l.ID)
		}
		var want []string
		for _, cd := range l.Cards {
			for _, m := range cd.Media {
				want = append(want, m.ID)
			}
		}
		var got []string
		for i, m := range l.Media {
			got = append(got, m.ID)
			if c.Media(m.ID) != m || m.Lesson != l {
				t.Errorf("Media(%q) does not return the lesson's asset", m.ID)
			}
			if wantID := l.ID + "#" + m.CardID + "#" + m.Type; m.ID != wantID {
				t.Errorf("media id %q, want %q", m.ID, wantID)
			}
			if i > 0 && l.Media[i-1].CardID == m.CardID && corpus.MediaRank(l.Media[i-1].Type) >= corpus.MediaRank(m.Type) {
				t.Errorf("%s: media not in video, audio, image order", l.ID)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: lesson media not in card order", l.ID)
		}
		// Media finds an asset from its lesson and card: an id that is
		// not one of them names nothing.
		if len(l.Media) > 0 {
			m := l.Media[0]
			for _, id := range []string{"", l.ID, l.ID + "#" + m.CardID, m.ID + "#" + m.Type, l.ID + "#no-such-card#" + m.Type,
				l.ID + "#" + m.CardID + "#film", "high/algebra/999#" + m.CardID + "#" + m.Type, "#" + m.ID} {
				if got := c.Media(id); got != nil {
					t.Errorf("Media(%q) = %s, want nil", id, got.ID)
				}
			}
		}
		if l.HasVideo {
			cov.Video++
		}
		if l.HasNarration {
			cov.Narration++
		}
		if l.HasTranscript {
			cov.Transcript++
		}
		cov.Media += len(l.Media)
	}
	if cov != s.Coverage {
		t.Errorf("coverage %+v, want %+v", s.Coverage, cov)
	}
	if c.LessonAt("high", "algebra", 0) != nil || c.LessonAt("high", "algebra", len(s.Lessons)+1) != nil || c.Lesson("high/algebra/x") != nil {
		t.Error("out-of-range lessons found")
	}
	var ids []string
	for _, tst := range c.Tests {
		ids = append(ids, tst.ID)
		if c.Test(tst.ID) != tst {
			t.Errorf("Test(%q) does not return the listed test", tst.ID)
		}
		for _, sec := range tst.Sections {
			if tst.Section(sec.ID) != sec || sec.Test != tst {
				t.Errorf("%s: Section(%q) disagrees", tst.ID, sec.ID)
			}
			for _, it := range sec.Items {
				if it.Test != tst.ID || it.Section != sec.ID {
					t.Errorf("%s: item says %s/%s", it.ID, it.Test, it.Section)
				}
			}
		}
	}
	if !slices.Equal(ids, []string{"digital-sat", "act", "psat-nmsqt", "caaspp"}) {
		t.Errorf("tests %v", ids)
	}
	if c.Test("act").Section("rw") != nil || c.Test("gre") != nil {
		t.Error("unknown test or section found")
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestNarrationAndTranscript(t *testing.T) {
	c := &corpus.Card{Body: "body", Narrated: true}
	if c.Narration() != "body" || !c.InTranscript() {
		t.Error("a narrated card without a script narrates its body")
	}
	c.NarrationScript = "script"
	if c.Narration() != "script" {
		t.Error("a narration script wins over the body")
	}
	c = &corpus.Card{Body: "body", VideoVoiceover: "vo"}
	if c.Narration() != "" || !c.InTranscript() {
		t.Error("a voiced card without narration is in the transcript but has no narration")
	}
	c = &corpus.Card{Body: "body"}
	if c.InTranscript() {
		t.Error("a card with neither narration nor voiceover is omitted from the transcript")
	}
}

func TestKeyTermsAndStudyTime(t *testing.T) {
	cards := []*corpus.Card{
		{ID: "c1", Body: "Intro line.\n\nThe **Slope** is the steepness of a line. It has a **sign**! Then **slope** again."},
		{ID: "c2", Body: "Here **rise over run** measures it? Yes. Broken **marker and ** ** nothing."},
	}
	got := corpus.KeyTerms(cards)
	want := []corpus.KeyTerm{
		{Term: "Slope", Definition: "The Slope is the steepness of a line.", CardID: "c1"},
		{Term: "sign", Definition: "It has a sign!", CardID: "c1"},
		{Term: "rise over run", Definition: "Here rise over run measures it?", CardID: "c2"},
		{Term: "marker and", Definition: "Broken marker and   nothing.", CardID: "c2"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("keyTerms:\n got %+v\nwant %+v", got, want)
	}

	l := &corpus.Lesson{
		Cards: []*corpus.Card{{Body: strings.Repeat("word ", 450), Media: []*corpus.Media{{Type: "video", DurationSec: 90}, {Type: "audio", DurationSec: 200}}}},
		Quiz:  make([]corpus.QuizItem, 3), InlineChecks: make([]corpus.InlineCheck, 1),
	}
	// 450 words = 135 s, + 90 s video, + 4 × 30 s = 345 s -> 6 minutes.
	if got := corpus.StudyMinutes(l); got != 6 {
		t.Errorf("studyMinutes = %d, want 6", got)
	}
	if got := corpus.StudyMinutes(&corpus.Lesson{Cards: []*corpus.Card{{Body: "x"}}}); got != 1 {
		t.Errorf("studyMinutes of a tiny lesson = %d, want 1", got)
	}
}

// edit rewrites one JSON file of dir through f.
func edit(t *testing.T, dir, file string, f func(v map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(file))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	f(v)
	if b, err = json.Marshal(v); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// at walks a path of keys and indexes.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

func obj(v any, path ...any) map[string]any { return at(v, path...).(map[string]any) }

const algebra = "lessons/high/algebra.json"

func TestLoadFaults(t *testing.T) {
	lesson := func(f func(v map[string]any)) func(*testing.T, string) {
		return func(t *testing.T, dir string) { edit(t, dir, algebra, f) }
	}
	subjects := func(f func(v map[string]any)) func(*testing.T, string) {
		return func(t *testing.T, dir string) { edit(t, dir, "subjects.json", f) }
	}
	write := func(file, data string) func(*testing.T, string) {
		return func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, filepath.FromSlash(file)), []byte(data), 0o644)
		}
	}
	tests := []struct {
		name   string
		damage func(*testing.T, string)
		want   string
	}{
		{"missing manifest", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "corpus.json")) }, "corpus.json: file not found"},
		{"missing subjects", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "subjects.json")) }, "subjects.json: file not found"},
		{"missing lesson file", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "lessons/high/algebra.json")) }, "lessons/high/algebra.json: file not found"},
		{"bad JSON", write(algebra, `{"tier": "high", "slug": oops}`), "lessons/high/algebra.json: invalid JSON at line 1, column 26 (byte offset 25)"},
		{"truncated JSON", write(algebra, `{"tier": "high", "slug": "algebra", "cla`), "lessons/high/algebra.json: invalid JSON: unexpected end of input"},
		{"empty file", write("tiers.json", ``), "tiers.json: invalid JSON"},
		{"trailing data", write("tiers.json", `{"tiers":[{"tier":"high","label":"High"}]} {}`), "tiers.json: invalid JSON at line 1"},
		{"wrong type", lesson(func(v map[string]any) { obj(v, "classes", 0)["number"] = "1" }), `lessons/high/algebra.json: classes.number: wrong type: JSON string where an integer is expected`},
		// The expected kind comes from the Go type's kind, never its name:
		// an interactive (whose type name spells "int") and a tier row
		// (whose fields are strings) are objects.
		{"interactive not an object", lesson(func(v map[string]any) { obj(v, "classes", 0)["interactives"] = []any{"x"} }), `classes.interactives: wrong type: JSON string where an object is expected`},
		{"tier row not an object", write("tiers.json", `{"tiers":[1]}`), `tiers.json: tiers: wrong type: JSON number where an object is expected`},
		{"unknown field", lesson(func(v map[string]any) { obj(v, "classes", 0)["answerindex"] = 1 }), `lessons/high/algebra.json: invalid JSON: unknown field "answerindex"`},
		{"bad card id", lesson(func(v map[string]any) { obj(v, "classes", 3, "cards", 2)["id"] = "C 2" }), `lessons/high/algebra.json: classes[3].cards[2].id: "C 2" is not a valid card id`},
		{"duplicate card id", lesson(func(v map[string]any) { obj(v, "classes", 1, "cards", 4)["id"] = "c1" }), `classes[1].cards[4].id: duplicate card id "c1" (also cards[0])`},
		{"duplicate class number", lesson(func(v map[string]any) { obj(v, "classes", 1)["number"] = 1 }), `lessons/high/algebra.json: classes[1].number: duplicate class number 1 (also classes[0])`},
		{"class number gap", lesson(func(v map[string]any) { obj(v, "classes", 1)["number"] = 3 }), `classes[1].number: got 3, want 2`},
		{"missing class number", lesson(func(v map[string]any) { delete(obj(v, "classes", 2), "number") }), `classes[2].number: missing`},
		{"answer out of range", lesson(func(v map[string]any) { obj(v, "classes", 0, "quiz", 0)["answerIndex"] = 7 }), `classes[0].quiz[0].answerIndex: 7 is out of range`},
		{"negative answer", lesson(func(v map[string]any) { obj(v, "classes", 0, "inlineChecks", 0)["answerIndex"] = -1 }), `classes[0].inlineChecks[0].answerIndex: -1 is out of range`},
		{"missing answer", lesson(func(v map[string]any) { delete(obj(v, "classes", 0, "quiz", 1), "answerIndex") }), `classes[0].quiz[1].answerIndex: missing`},
		{"one hint", lesson(func(v map[string]any) { obj(v, "classes", 0, "inlineChecks", 0)["hints"] = []any{"only"} }), `classes[0].inlineChecks[0].hints: want 2 to 5 graduated hints, got 1`},
		{"check after unknown card", lesson(func(v map[string]any) { obj(v, "classes", 0, "inlineChecks", 0)["afterCard"] = "c99" }), `classes[0].inlineChecks[0].afterCard: "c99" is not a card of this class`},
		{"flag disagrees", lesson(func(v map[string]any) {
			obj(v, "classes", 0)["hasTranscript"] = !obj(v, "classes", 0)["hasTranscript"].(bool)
		}), `classes[0].hasTranscript: is`},
		{"narrated without audio", lesson(func(v map[string]any) {
			cd := obj(v, "classes", 0, "cards", 0)
			cd["narrated"] = true
			var keep []any
			for _, m := range cd["media"].([]any) {
				if m.(map[string]any)["type"] != "audio" {
					keep = append(keep, m)
				}
			}
			cd["media"] = keep
		}), `classes[0].cards[0].media: card is narrated but has no audio asset`},
		{"bad media type", lesson(func(v map[string]any) { obj(v, "classes", 0, "cards", 0, "media", 0)["type"] = "gif" }), `classes[0].cards[0].media[0].type: "gif" is not a media type`},
		{"duplicate media type", lesson(func(v map[string]any) {
			cd := obj(v, "classes", 0, "cards", 0)
			m := cd["media"].([]any)
			cd["media"] = append(m, m[len(m)-1])
		}), `a second image asset on card "c1"`},
		{"media escapes root", lesson(func(v map[string]any) { obj(v, "classes", 0, "cards", 0, "media", 0)["location"] = "../etc/passwd" }), `media[0].location: "../etc/passwd" is not a clean relative path`},
		{"media sha256 upper case", lesson(func(v map[string]any) {
			obj(v, "classes", 0, "cards", 0, "media", 0)["sha256"] = strings.Repeat("AB", 32)
		}), `media[0].sha256: "ABAB`},
		{"media sha256 short", lesson(func(v map[string]any) { obj(v, "classes", 0, "cards", 0, "media", 0)["sha256"] = "abc" }), `media[0].sha256: "abc" is not 64 lowercase hex digits`},
		{"tier mismatch", lesson(func(v map[string]any) { v["tier"] = "college" }), `lessons/high/algebra.json: tier: "college" does not match`},
		{"interactive config not an object", lesson(func(v map[string]any) {
			cl := obj(v, "classes", 2)
			cl["interactives"] = []any{map[string]any{"id": "i1", "card": "c1", "kind": "slider", "prompt": "p", "config": []any{1}}}
		}), `classes[2].interactives[0].config: want a JSON object`},
		{"unknown tier", subjects(func(v map[string]any) { obj(v, "subjects", 0)["tier"] = "elementary" }), `subjects.json: subjects[0].tier: "elementary" is not a tier`},
		{"invalid slug", subjects(func(v map[string]any) { obj(v, "subjects", 0)["slug"] = "Bad Slug" }), `subjects.json: subjects[0].slug: "Bad Slug" is not a valid slug`},
		{"duplicate slug in tier", subjects(func(v map[string]any) {
			s := at(v, "subjects").([]any)
			v["subjects"] = append(s, s[0])
		}), `duplicate slug "photography" in tier "topics" (also subjects[0])`},
		{"dangling prerequisite", subjects(func(v map[string]any) { obj(v, "subjects", 2)["prerequisites"] = []any{"high/nope"} }), `subjects.json: subjects[2].prerequisites[0]: "high/nope" does not name a subject`},
		{"dangling related", subjects(func(v map[string]any) { obj(v, "subjects", 2)["related"] = []any{"algebra"} }), `subjects[2].related[0]: "algebra" does not name a subject`},
		{"bad difficulty", subjects(func(v map[string]any) { obj(v, "subjects", 1)["difficulty"] = "hard" }), `subjects[1].difficulty: "hard" is not one of`},
		{"unknown tier in tiers.json", write("tiers.json", `{"tiers":[{"tier":"kindergarten","label":"K"}]}`), `tiers.json: tiers[0].tier: "kindergarten" is not a tier`},
		{"subject tier not listed", write("tiers.json", `{"tiers":[{"tier":"high","label":"High"}]}`), `subjects.json: subjects[0].tier: tier "topics" is not in tiers.json`},
		{"unknown test", func(t *testing.T, d string) {
			os.Rename(filepath.Join(d, "testprep/act.json"), filepath.Join(d, "testprep/gre.json"))
			edit(t, d, "corpus.json", func(v map[string]any) {
				for i, f := range v["files"].([]any) {
					if f == "testprep/act.json" {
						v["files"].([]any)[i] = "testprep/gre.json"
					}
				}
			})
		}, `testprep/gre.json: unknown test "gre"`},
		{"unknown section", func(t *testing.T, d string) {
			edit(t, d, "testprep/act.json", func(v map[string]any) { obj(v, "sections", 1)["id"] = "rw" })
		}, `testprep/act.json: sections[1].id: unknown section "rw" for test act (want one of english, math, reading, science)`},
		{"item answer out of range", func(t *testing.T, d string) {
			edit(t, d, "testprep/caaspp.json", func(v map[string]any) { obj(v, "sections", 2, "items", 5)["answerIndex"] = 4 })
		}, `testprep/caaspp.json: sections[2].items[5].answerIndex: 4 is out of range for 4 options`},
		{"option rationales mismatch", func(t *testing.T, d string) {
			edit(t, d, "testprep/act.json", func(v map[string]any) { obj(v, "sections", 0, "items", 0)["optionRationales"] = []any{"x"} })
		}, `testprep/act.json: sections[0].items[0].optionRationales: 1 rationales for 4 options`},
		{"count mismatch", func(t *testing.T, d string) {
			edit(t, d, "corpus.json", func(v map[string]any) { obj(v, "counts")["media"] = 113844 })
		}, `corpus.json: counts.media: says 113844 but the corpus has`},
		{"missing count", func(t *testing.T, d string) {
			edit(t, d, "corpus.json", func(v map[string]any) { delete(obj(v, "counts"), "classes") })
		}, `corpus.json: counts.classes: missing`},
		{"bad version", func(t *testing.T, d string) {
			edit(t, d, "corpus.json", func(v map[string]any) { v["contentVersion"] = "yesterday" })
		}, `corpus.json: contentVersion: "yesterday" is not <YYYY-MM-DD>+<hash>`},
		{"bad format", func(t *testing.T, d string) {
			edit(t, d, "corpus.json", func(v map[string]any) { v["format"] = "lectern-corpus/9" })
		}, `corpus.json: format: "lectern-corpus/9" is not a supported format`},
		{"unlisted lesson file", func(t *testing.T, d string) {
			edit(t, d, "corpus.json", func(v map[string]any) {
				v["files"] = slices.DeleteFunc(v["files"].([]any), func(f any) bool { return f == algebra })
			})
		}, `corpus.json: files: lessons/high/algebra.json (classes of subjects[`},
		{"stray lesson file", func(t *testing.T, d string) {
			edit(t, d, "corpus.json", func(v map[string]any) { v["files"] = append(v["files"].([]any), "lessons/high/geometry.json") })
		}, `"lessons/high/geometry.json" is not the lesson file of any subject`},
		{"path escape in manifest", func(t *testing.T, d string) {
			edit(t, d, "corpus.json", func(v map[string]any) { v["files"] = append(v["files"].([]any), "../secret.json") })
		}, `is not a clean relative path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := small(t)
			tt.damage(t, dir)
			c, err := corpus.Load(dir)
			if err == nil {
				t.Fatalf("loaded a damaged corpus (%d classes); want error containing %q", c.Counts.Classes, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error\n  %v\nwant it to contain\n  %s", err, tt.want)
			}
			var ce *corpus.Error
			if !errors.As(err, &ce) || ce.File == "" {
				t.Errorf("error %v is not a *corpus.Error naming a file", err)
			}
		})
	}
}

// TestNoPanicOnCorruptFiles truncates and flips bytes in every file and
// loads each result with the recover-free load: it must only ever fail.
func TestNoPanicOnCorruptFiles(t *testing.T) {
	base := small(t)
	var files []string
	filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		// Every file but the lesson files, which all share one parser: two
		// of those stand for the rest (FuzzLessonFile covers that parser).
		rel, _ := filepath.Rel(base, p)
		rel = filepath.ToSlash(rel)
		if err == nil && !d.IsDir() && (!strings.HasPrefix(rel, "lessons/") || rel == algebra || rel == "lessons/primary/phonics.json") {
			files = append(files, p)
		}
		return err
	})
	for _, f := range files {
		orig, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(base, f)
		for _, k := range []int{1, len(orig) / 3, len(orig) - 2} {
			damaged := [][]byte{orig[:k], flip(orig, k)}
			for _, b := range damaged {
				os.WriteFile(f, b, 0o644)
				c, err := corpus.LoadUnguarded(base)
				if err == nil && len(b) != len(orig) {
					t.Errorf("%s truncated at %d: loaded without error (%d classes)", rel, k, c.Counts.Classes)
				}
			}
		}
		os.WriteFile(f, orig, 0o644)
	}
	if _, err := corpus.LoadUnguarded(base); err != nil {
		t.Fatalf("restored corpus fails: %v", err)
	}
}

func flip(b []byte, k int) []byte {
	out := slices.Clone(b)
	if k < len(out) {
		out[k] ^= 0x5a
	}
	return out
}

// FuzzLessonFile feeds arbitrary bytes to the lesson-file parser: it may
// reject them, never panic.
func FuzzLessonFile(f *testing.F) {
	dir := small(f)
	b, err := os.ReadFile(filepath.Join(dir, algebra))
	if err != nil {
		f.Fatal(err)
	}
	var v map[string]any
	json.Unmarshal(b, &v)
	v["classes"] = v["classes"].([]any)[:1]
	one, _ := json.Marshal(v)
	f.Add(one)
	f.Add([]byte(`{"tier":"high","slug":"algebra","classes":[{"number":1}]}`))
	f.Add([]byte(`{"tier":"high","slug":"algebra","classes":[null]}`))
	f.Add([]byte(`{"tier":"high","slug":"algebra","classes":[{"number":1,"title":"t","cards":[{"id":"c1","label":"l","body":"**x**","media":[null]}]}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &corpus.Subject{Tier: "high", Slug: "algebra"}
		ls, err := corpus.ParseLessons(algebra, data, s)
		if err == nil {
			for _, l := range ls {
				if l.Subject != s || len(l.Cards) == 0 {
					t.Fatalf("accepted lesson %+v", l)
				}
			}
		}
	})
}
