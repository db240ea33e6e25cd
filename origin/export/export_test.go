package export

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/corpustest"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/lessondoc"
	"github.com/lectern-api/lectern/shared/scope"
)

var (
	setOnce  sync.Once
	smallSet *lessondoc.Set
	setErr   error
)

// smallCorpus is the small corpus and its renderings, made once per test
// binary.
func smallCorpus(t testing.TB) (*corpus.Corpus, *lessondoc.Set) {
	t.Helper()
	c := corpustest.Small(t)
	setOnce.Do(func() { smallSet, setErr = lessondoc.Build(c) })
	if setErr != nil {
		t.Fatal(setErr)
	}
	return c, smallSet
}

var (
	testCanaryKey = []byte("the test canary key of 32 bytes!")
	testTagKey    = []byte("the test tag key of thirty-two b")
)

func newBuilder(t testing.TB) *Builder {
	c, set := smallCorpus(t)
	return New(c, set, Config{CanaryKey: testCanaryKey, LicenseURL: "https://lectern.example/licence"})
}

// request is org's export of target, fetched with the content.export
// scope.
func request(org string, target Target) Request {
	s := scope.Of(scope.ContentRead, scope.ContentExport)
	return Request{Stamp: Stamp{OrgID: org, OrgName: "Org " + org},
		License: forensic.Envelope{Lic: forensic.Licence(org, 1), Tag: forensic.Tag(testTagKey, org, s)},
		Target:  target}
}

// biggest is the small corpus's subject with the most classes.
func biggest(c *corpus.Corpus) *corpus.Subject {
	var best *corpus.Subject
	for _, s := range c.Subjects {
		if best == nil || len(s.Lessons) > len(best.Lessons) {
			best = s
		}
	}
	return best
}

type namedFile struct {
	name string
	data []byte
}

// files are the bundle's files in order, as walk makes them.
func files(t testing.TB, b *Builder, req Request) []namedFile {
	t.Helper()
	var out []namedFile
	if err := b.walk(req, func(name string, data []byte) error {
		out = append(out, namedFile{name, bytes.Clone(data)})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func byName(fs []namedFile) map[string][]byte {
	m := map[string][]byte{}
	for _, f := range fs {
		m[f.name] = f.data
	}
	return m
}

func TestDeterministic(t *testing.T) {
	c, _ := smallCorpus(t)
	req := request("acme", Target{Subject: biggest(c)})
	first := files(t, newBuilder(t), req)
	for name, again := range map[string][]namedFile{
		"the same builder": files(t, newBuilder(t), req),
		"another builder":  files(t, newBuilder(t), req),
		"a class then this": func() []namedFile {
			b := newBuilder(t)
			files(t, b, request("acme", Target{Subject: c.Subjects[0], Class: 1}))
			return files(t, b, req)
		}(),
	} {
		if !reflect.DeepEqual(first, again) {
			t.Errorf("%s: the bundle's files differ", name)
		}
	}
}

func TestManifest(t *testing.T) {
	c, _ := smallCorpus(t)
	sub := biggest(c)
	req := request("acme", Target{Subject: sub})
	fs := files(t, newBuilder(t), req)
	if last := fs[len(fs)-1].name; last != "manifest.json" {
		t.Fatalf("last file %s, want manifest.json", last)
	}
	var m struct {
		Format         string            `json:"format"`
		ContentVersion string            `json:"contentVersion"`
		Stamp          Stamp             `json:"stamp"`
		License        forensic.Envelope `json:"_license"`
		Subject        string            `json:"subject"`
		ClassNum       *int              `json:"classNum"`
		Classes        []struct {
			LessonID string   `json:"lessonId"`
			ClassNum int      `json:"classNum"`
			Title    string   `json:"title"`
			Files    []string `json:"files"`
		} `json:"classes"`
		Files []struct {
			Name   string `json:"name"`
			Bytes  int    `json:"bytes"`
			SHA256 string `json:"sha256"`
		} `json:"files"`
	}
	dec := json.NewDecoder(bytes.NewReader(fs[len(fs)-1].data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m.Format != Format || m.ContentVersion != c.ContentVersion || m.Stamp != req.Stamp || m.License != req.License ||
		m.Subject != sub.Ref() || m.ClassNum != nil {
		t.Errorf("manifest head %+v", m)
	}
	if len(m.Files) != len(fs)-1 {
		t.Fatalf("manifest lists %d files, the bundle has %d besides it", len(m.Files), len(fs)-1)
	}
	for i, f := range m.Files {
		sum := sha256.Sum256(fs[i].data)
		if f.Name != fs[i].name || f.Bytes != len(fs[i].data) || f.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("manifest file %d = %+v; shipped %s, %d bytes, sha256 %x", i, f, fs[i].name, len(fs[i].data), sum)
		}
	}
	if len(m.Classes) != len(sub.Lessons) {
		t.Fatalf("%d classes, want %d", len(m.Classes), len(sub.Lessons))
	}
	shipped := byName(fs)
	for i, mc := range m.Classes {
		l := sub.Lessons[i]
		want := []string{fmt.Sprintf("class-%d.json", l.Number)}
		if l.HasTranscript {
			want = append(want, fmt.Sprintf("class-%d.transcript.md", l.Number))
		}
		if mc.LessonID != l.ID || mc.ClassNum != l.Number || mc.Title != l.Title || !reflect.DeepEqual(mc.Files, want) {
			t.Errorf("class %d = %+v, want %s %q files %v", i, mc, l.ID, l.Title, want)
		}
		for _, f := range mc.Files {
			if shipped[f] == nil {
				t.Errorf("class %s names %s, not shipped", l.ID, f)
			}
		}
	}
	one := files(t, newBuilder(t), request("acme", Target{Subject: sub, Class: 2}))
	if n := len(one); n != 4 && n != 5 {
		t.Errorf("a class export has %d files", n)
	}
	if !bytes.Contains(one[len(one)-1].data, []byte(`"classNum": 2,`)) {
		t.Error("a class export's manifest does not name its class")
	}
}

// route6 is the lesson as route 6 answers detail=full: the set's
// rendering closed by the shared tail, as origin/server's lesson handler
// composes them.
func route6(set *lessondoc.Set, l *corpus.Lesson, env forensic.Envelope) []byte {
	return set.AppendTail(set.Doc(l).AppendLesson(nil, lessondoc.Full, 0, nil), env)
}

// route7Markdown is the transcript route's markdown of l, unmarked.
func route7Markdown(t *testing.T, set *lessondoc.Set, l *corpus.Lesson) string {
	var v struct {
		Markdown string `json:"markdown"`
	}
	if err := json.Unmarshal(set.Doc(l).AppendTranscript(nil, true, []byte{'}'}), &v); err != nil {
		t.Fatal(err)
	}
	return v.Markdown
}

func noSpaces(b []byte) string { return strings.ReplaceAll(string(b), " ", "") }

// TestClassFilesAreTheRoutes: class-N.json is route 6's detail=full body
// and class-N.transcript.md route 7's markdown, but for spaces, and the
// transcript is shipped exactly when the class has one.
func TestClassFilesAreTheRoutes(t *testing.T) {
	c, set := smallCorpus(t)
	b := newBuilder(t)
	marked := 0
	for _, l := range c.Lessons {
		req := request("acme", Target{Subject: l.Subject, Class: l.Number})
		got := byName(files(t, b, req))
		class := got[fmt.Sprintf("class-%d.json", l.Number)]
		want := route6(set, l, req.License)
		if !json.Valid(class) {
			t.Fatalf("%s: class file is not JSON", l.ID)
		}
		if noSpaces(class) != noSpaces(want) {
			t.Fatalf("%s: the class file differs from route 6's detail=full in more than spaces", l.ID)
		}
		if !bytes.Equal(class, want) {
			marked++
		}
		md, ok := got[fmt.Sprintf("class-%d.transcript.md", l.Number)]
		if ok != l.HasTranscript {
			t.Fatalf("%s: transcript shipped %v, hasTranscript %v", l.ID, ok, l.HasTranscript)
		}
		if ok && noSpaces(md) != noSpaces([]byte(route7Markdown(t, set, l))) {
			t.Fatalf("%s: the transcript differs from route 7's markdown in more than spaces", l.ID)
		}
	}
	if marked != len(c.Lessons) {
		t.Errorf("%d of %d class files carry canaries", marked, len(c.Lessons))
	}
}

// TestCanaryBits: every class file carries at least 64 independent
// canary bits (each sentence once), all of them its organisation's.
func TestCanaryBits(t *testing.T) {
	c, _ := smallCorpus(t)
	b := newBuilder(t)
	least := 1 << 30
	for _, l := range c.Lessons {
		req := request("acme", Target{Subject: l.Subject, Class: l.Number})
		texts, err := forensic.LessonTexts(byName(files(t, b, req))[fmt.Sprintf("class-%d.json", l.Number)])
		if err != nil {
			t.Fatal(err)
		}
		bits, matched := forensic.NewCanary(testCanaryKey, "acme", l.ID).MatchTexts(texts)
		if bits < 64 || matched != bits {
			t.Errorf("%s: %d canary bits, %d of them acme's; want at least 64, all", l.ID, bits, matched)
		}
		least = min(least, bits)
	}
	t.Logf("the fewest canary bits in a class file: %d", least)
}

// TestOrganisationsDifferInWhitespace: two organisations' class files and
// transcripts differ, and only in spaces; past the envelope they are the
// same words.
func TestOrganisationsDifferInWhitespace(t *testing.T) {
	c, _ := smallCorpus(t)
	sub := biggest(c)
	b := newBuilder(t)
	env := request("acme", Target{}).License
	reqA, reqB := request("acme", Target{Subject: sub}), request("globex", Target{Subject: sub})
	reqB.License = env // the same envelope: only the canaries' organisation differs
	a, g := files(t, b, reqA), files(t, b, reqB)
	for i := range a {
		if a[i].name != g[i].name {
			t.Fatalf("file %d: %s and %s", i, a[i].name, g[i].name)
		}
		if !strings.HasPrefix(a[i].name, "class-") {
			continue
		}
		if bytes.Equal(a[i].data, g[i].data) {
			t.Errorf("%s: the same for both organisations", a[i].name)
		}
		if noSpaces(a[i].data) != noSpaces(g[i].data) {
			t.Errorf("%s: the organisations' copies differ in more than spaces", a[i].name)
		}
	}
}

func TestTarget(t *testing.T) {
	c, _ := smallCorpus(t)
	sub := biggest(c)
	for _, tt := range []struct {
		target Target
		want   int
	}{
		{Target{Subject: sub}, len(sub.Lessons)},
		{Target{Subject: sub, Class: 1}, 1},
		{Target{Subject: sub, Class: len(sub.Lessons)}, 1},
		{Target{Subject: sub, Class: len(sub.Lessons) + 1}, 0},
		{Target{Subject: sub, Class: -1}, 0},
		{Target{}, 0},
	} {
		if got := tt.target.Classes(); got != tt.want {
			t.Errorf("Classes(class %d) = %d, want %d", tt.target.Class, got, tt.want)
		}
	}
	if err := newBuilder(t).walk(request("acme", Target{Subject: sub, Class: 99}), nil); err != ErrNoClass {
		t.Errorf("walk of no class = %v, want ErrNoClass", err)
	}
}
