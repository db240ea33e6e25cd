package changes

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
)

// load generates the small corpus into a fresh directory, applies edit
// to the file (when given), and loads it.
func load(t *testing.T, file string, edit func(doc map[string]any)) *corpus.Corpus {
	t.Helper()
	dir := t.TempDir()
	if _, err := gen.Write(dir, gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		p := filepath.Join(dir, filepath.FromSlash(file))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		edit(doc)
		b, _ = json.Marshal(doc)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := corpus.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const algebra = "high/algebra"

func classes(doc map[string]any) []any { return doc["classes"].([]any) }

func TestEncodeDecode(t *testing.T) {
	v := Of(load(t, "", nil))
	got, err := Decode(v.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(v, got); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	b := v.Encode()
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(slices.Clone(b), 0), []byte("lectern-corpus-parts/2\x00")} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("Decode of %d bytes of something else: no error", len(bad))
		}
	}
}

func TestDiff(t *testing.T) {
	base := Of(load(t, "", nil))
	all := []string{"college", "high", "middle", "primary", "topics"}
	n := len(base.subject(algebra).Classes)
	digestOf := func(v *Version) string { return v.subject(algebra).Digest }
	tests := []struct {
		name     string
		file     string // "": the subject's lesson file
		edit     func(doc map[string]any)
		to       func() *Version // instead of file and edit
		was, now []string
		subjects []SubjectChange
		lessons  []string // "<change> <lessonId>"
	}{
		{name: "nothing", was: all, now: all},
		{name: "one class", was: all, now: all,
			edit: func(doc map[string]any) {
				c := classes(doc)[2].(map[string]any)
				c["title"] = c["title"].(string) + " (revised)"
			},
			subjects: []SubjectChange{{Subject: algebra, Change: Changed, Classes: n}},
			lessons:  []string{"changed high/algebra/3"}},
		{name: "subject fields", was: all, now: all, file: "subjects.json",
			edit: func(doc map[string]any) {
				for _, s := range doc["subjects"].([]any) {
					if s := s.(map[string]any); s["tier"].(string)+"/"+s["slug"].(string) == algebra {
						s["description"] = "Another description."
					}
				}
			},
			subjects: []SubjectChange{{Subject: algebra, Change: Changed, Classes: n, OwnChanged: true}}},
		{name: "last class removed", was: all, now: all,
			to: func() *Version {
				v := &Version{Subjects: slices.Clone(base.Subjects)}
				s := v.subject(algebra)
				s.Classes = s.Classes[:n-1]
				s.Digest = "sha256:another"
				return v
			},
			subjects: []SubjectChange{{Subject: algebra, Change: Changed, Classes: n - 1}},
			lessons:  []string{"removed high/algebra/" + itoa(n)}},
		{name: "tier granted", was: []string{"college"}, now: []string{"college", "high/algebra"},
			subjects: []SubjectChange{{Subject: algebra, Change: Added, Classes: n}}},
		{name: "tier ungranted", was: []string{"high/algebra"}, now: []string{},
			subjects: []SubjectChange{{Subject: algebra, Change: Removed}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			to := base
			switch {
			case tt.to != nil:
				to = tt.to()
			case tt.edit != nil:
				file := tt.file
				if file == "" {
					file = "lessons/" + algebra + ".json"
				}
				to = Of(load(t, file, tt.edit))
			}
			subjects, lessons := Diff(base, to, tt.was, tt.now)
			for i := range tt.subjects {
				if tt.subjects[i].Change != Removed {
					tt.subjects[i].ContentDigest = digestOf(to)
				}
			}
			if diff := cmp.Diff(tt.subjects, subjects); diff != "" {
				t.Errorf("subjects (-want +got):\n%s", diff)
			}
			var got []string
			for _, l := range lessons {
				got = append(got, string(l.Change)+" "+l.LessonID)
			}
			want := tt.lessons
			switch tt.name {
			case "tier granted", "tier ungranted":
				want = nil
				c := Added
				if tt.name == "tier ungranted" {
					c = Removed
				}
				for i := range n {
					want = append(want, string(c)+" high/algebra/"+itoa(i+1))
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("lessons (-want +got):\n%s", diff)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestSince(t *testing.T) {
	key := []byte("a key of thirty-two bytes or so.")
	tok := Seal(key, "org-a", "2026-11-01+abc", []string{"high", "middle/algebra"})
	got, err := ParseSince(key, "org-a", tok)
	if err != nil || !got.Known || got.Version != "2026-11-01+abc" || !slices.Equal(got.Grants, []string{"high", "middle/algebra"}) {
		t.Fatalf("ParseSince(Seal): %+v, %v", got, err)
	}
	if got, err := ParseSince(key, "org-a", Seal(key, "org-a", "2026-11-01+abc", nil)); err != nil || !got.Known || len(got.Grants) != 0 {
		t.Errorf("no grants: %+v, %v", got, err)
	}
	if got, err := ParseSince(key, "org-a", "2026-11-01+abc"); err != nil || got.Known || got.Version != "2026-11-01+abc" {
		t.Errorf("a bare version: %+v, %v", got, err)
	}
	for name, s := range map[string]string{
		"another org":    Seal(key, "org-b", "2026-11-01+abc", nil),
		"another key":    Seal([]byte("another key"), "org-a", "2026-11-01+abc", nil),
		"grants widened": Seal(key, "org-a", "2026-11-01+abc", []string{"high", "middle"})[:strings.LastIndex(Seal(key, "org-a", "2026-11-01+abc", []string{"high", "middle"}), ".")] + tok[strings.LastIndex(tok, "."):],
	} {
		if _, err := ParseSince(key, "org-a", s); !errors.Is(err, ErrSinceSeal) {
			t.Errorf("%s: %q: %v, want ErrSinceSeal", name, s, err)
		}
	}
	for name, s := range map[string]string{
		"not a version":   "2026-13-01+abc",
		"empty":           "",
		"prefix only":     "s1.",
		"no mac":          "s1.abc",
		"bad base64":      "s1.!!!.???",
		"version in body": Seal(key, "org-a", "not-a-version", nil),
	} {
		if _, err := ParseSince(key, "org-a", s); err == nil {
			t.Errorf("%s: %q accepted", name, s)
		}
	}
}
