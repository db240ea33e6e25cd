package lessondoc

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/corpustest"
)

var (
	setOnce  sync.Once
	smallSet *Set
	setErr   error
)

// smallCorpus is the small corpus and its renderings, made once per test
// binary.
func smallCorpus(t testing.TB) (*corpus.Corpus, *Set) {
	t.Helper()
	c := corpustest.Small(t)
	setOnce.Do(func() { smallSet, setErr = Build(c) })
	if setErr != nil {
		t.Fatal(setErr)
	}
	return c, smallSet
}

func TestCapText(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
		cut      bool
	}{
		{"short", "one two", 10, "one two", false},
		{"exactly the cap", "abcde", 5, "abcde", false},
		{"word boundary", "alpha beta gamma delta", 14, "alpha beta…", true},
		{"cut at a space", "alpha beta gamma", 12, "alpha beta…", true},
		{"trailing space trimmed", "alpha  beta gamma", 9, "alpha…", true},
		{"marker never left open", "see **key term** here and more", 14, "see…", true},
		{"closed marker kept", "**ab** cd ef gh", 12, "**ab** cd…", true},
		{"one long word", "abcdefghijkl", 5, "abcd…", true},
		{"multibyte", "ééé ééé ééé", 9, "ééé ééé…", true},
	}
	for _, tt := range tests {
		got, cut := capText(tt.in, tt.n)
		if got != tt.want || cut != tt.cut {
			t.Errorf("%s: capText(%q, %d) = %q, %v; want %q, %v", tt.name, tt.in, tt.n, got, cut, tt.want, tt.cut)
		}
		if n := utf8.RuneCountInString(got); n > tt.n {
			t.Errorf("%s: %d characters, over the cap %d", tt.name, n, tt.n)
		}
	}
}

// A lesson whose texts are all within the caps is not truncated at
// standard detail (the small corpus has none: shorten one). The HTTP tests
// of origin/server check the levels of a lesson over the caps.
func TestStandardWithinCaps(t *testing.T) {
	c, _ := smallCorpus(t)
	i := slices.IndexFunc(c.Lessons, func(l *corpus.Lesson) bool {
		return slices.ContainsFunc(l.Cards, func(c *corpus.Card) bool { return utf8.RuneCountInString(c.Body) > CapBody+200 })
	})
	if i < 0 {
		t.Fatal("the small corpus has no lesson with a card body over the cap")
	}
	long := c.Lessons[i]
	short := *long
	short.Cards = nil
	for _, c := range long.Cards {
		cc := *c
		cc.Body, _ = capText(c.Body, CapBody)
		cc.Body = strings.TrimSuffix(cc.Body, "…")
		short.Cards = append(short.Cards, &cc)
	}
	var lb builder
	sd, err := lb.build(&short)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(sd.AppendLesson(nil, Standard, 0, []byte("}")), &m); err != nil {
		t.Fatal(err)
	}
	if m["truncated"] != false {
		t.Errorf("standard: truncated %v with nothing over a cap", m["truncated"])
	}
}

// The precompressed standard lesson is a valid gzip member whose content
// is the identity body, whatever the licence envelope appended to it.
func TestGzipStandard(t *testing.T) {
	_, ls := smallCorpus(t)
	for _, d := range ls.docs {
		for _, tail := range []string{"}", `,"_license":{"lic":"lic_x_ecla1","tag":"t1AAAAAAAAAAAAAAAA"}}`} {
			want := d.AppendLesson(nil, Standard, 0, append(ls.AppendVersion(nil), tail...))
			zr, err := gzip.NewReader(bytes.NewReader(d.AppendGzipStandard(nil, []byte(tail))))
			if err != nil {
				t.Fatalf("%s: %v", d.lesson.ID, err)
			}
			got, err := io.ReadAll(zr) // checks the CRC-32 and the size
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: %v; got %d bytes, want %d", d.lesson.ID, err, len(got), len(want))
			}
		}
	}
}

// BenchmarkBuild measures rendering every lesson of the corpus
// (LECTERN_BENCH_CORPUS, e.g. the full one from go run ./tools/corpusgen
// -out /tmp/corpus-full, else the small one) and reports the heap the
// renderings hold.
func BenchmarkBuild(b *testing.B) {
	var c *corpus.Corpus
	if dir := os.Getenv("LECTERN_BENCH_CORPUS"); dir != "" {
		var err error
		if c, err = corpus.Load(dir); err != nil {
			b.Fatal(err)
		}
	} else {
		c, _ = smallCorpus(b)
	}
	b.ReportAllocs()
	var heap uint64
	for b.Loop() {
		var m0, m1 runtime.MemStats
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&m0)
		b.StartTimer()
		ls, err := Build(c)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&m1)
		heap = m1.HeapAlloc - m0.HeapAlloc
		runtime.KeepAlive(ls)
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
}

// TestRendererMatchesBuild: a lesson rendered alone renders every
// document as the set's rendering of it does.
func TestRendererMatchesBuild(t *testing.T) {
	c, set := smallCorpus(t)
	var r Renderer
	for _, l := range c.Lessons {
		d, err := r.Render(l)
		if err != nil {
			t.Fatal(err)
		}
		want := set.Doc(l)
		for _, lv := range []Level{Brief, Standard, Full} {
			if got, w := d.AppendLesson(nil, lv, incAll, nil), want.AppendLesson(nil, lv, incAll, nil); !bytes.Equal(got, w) {
				t.Fatalf("%s at level %d: the renderer differs from Build", l.ID, lv)
			}
		}
		if got, w := d.AppendTranscript(nil, true, nil), want.AppendTranscript(nil, true, nil); !bytes.Equal(got, w) {
			t.Fatalf("%s transcript: the renderer differs from Build", l.ID)
		}
	}
}

// The spoken texts are escaped with their markers dropped in place, and
// assets are rendered from the corpus: the transcript, the narrationText
// section and the media listing say what the corpus says, a body's
// markers and line breaks included.
func TestSpokenTexts(t *testing.T) {
	c, set := smallCorpus(t)
	bodies := 0
	for _, l := range c.Lessons {
		d := set.Doc(l)
		for _, card := range l.Cards {
			if card.Narrated && card.NarrationScript == "" && strings.Contains(card.Body, "**") {
				bodies++
			}
		}
		var tr struct {
			Items []struct {
				CardID    string  `json:"cardId"`
				Narration *string `json:"narration"`
			} `json:"items"`
		}
		if err := json.Unmarshal(d.AppendTranscript(nil, false, []byte("}")), &tr); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			NarrationText []struct{ CardID, Text string } `json:"narrationText"`
			Media         []map[string]any                `json:"media"`
		}
		if err := json.Unmarshal(d.AppendLesson(nil, Brief, incNarrationText|incMedia, []byte("}")), &doc); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, card := range l.Cards {
			if card.InTranscript() {
				want = append(want, spokenText(card.Narration()))
			}
		}
		if len(tr.Items) != len(want) {
			t.Fatalf("%s: %d transcript rows, want %d", l.ID, len(tr.Items), len(want))
		}
		k := 0
		for i, it := range tr.Items {
			got := ""
			if it.Narration != nil {
				got = *it.Narration
			}
			if got != want[i] {
				t.Fatalf("%s card %s: narration %q, want %q", l.ID, it.CardID, got, want[i])
			}
			if got != "" {
				if doc.NarrationText[k].CardID != it.CardID || doc.NarrationText[k].Text != got {
					t.Fatalf("%s: narrationText[%d] %v, want %s %q", l.ID, k, doc.NarrationText[k], it.CardID, got)
				}
				k++
			}
		}
		if len(doc.Media) != len(l.Media) || d.CountAssets("") != len(l.Media) {
			t.Fatalf("%s: %d media listed, %d counted, the corpus has %d", l.ID, len(doc.Media), d.CountAssets(""), len(l.Media))
		}
		for i, m := range l.Media {
			g := doc.Media[i]
			if g["mediaId"] != m.ID || g["type"] != m.Type || g["cardId"] != m.CardID || g["mimeType"] != m.MIME ||
				g["bytes"] != float64(m.Bytes) || g["url"] != nil {
				t.Fatalf("%s: media[%d] %v, the corpus has %+v", l.ID, i, g, *m)
			}
		}
	}
	if bodies == 0 {
		t.Error("no card narrated by a body with markers: the test checks too little")
	}
}

// TestAppendMarkdown: the markdown as text is what the transcript's
// markdown member decodes to, for every lesson and for one whose
// voiceover runs over several lines (which the generated corpora lack).
func TestAppendMarkdown(t *testing.T) {
	c, set := smallCorpus(t)
	docs := []*Doc{}
	for _, l := range c.Lessons {
		docs = append(docs, set.Doc(l))
	}
	l := *c.Lessons[0]
	card := *l.Cards[0]
	card.VideoVoiceover = "A first **line**.\nA \"second\" one,\n\nafter a blank ***line***."
	l.Cards = append([]*corpus.Card{&card}, l.Cards[1:]...)
	var r Renderer
	d, err := r.Render(&l)
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, d)
	terms := 0
	for _, d := range docs {
		var v struct {
			Markdown string `json:"markdown"`
		}
		if err := json.Unmarshal(d.AppendTranscript(nil, true, []byte{'}'}), &v); err != nil {
			t.Fatal(err)
		}
		if got := string(d.AppendMarkdown(nil)); got != v.Markdown {
			t.Fatalf("%s: AppendMarkdown differs from the transcript's markdown:\n%q\nwant\n%q", d.Lesson().ID, got, v.Markdown)
		}
		for _, c := range d.Lesson().Cards {
			if strings.Contains(c.Narration(), "**") {
				terms++
			}
		}
	}
	if terms == 0 {
		t.Error("no narration with key-term markers: the test checks too little")
	}
}

// respaced is a copy of l whose card bodies, narration scripts and
// voiceovers have every ". " doubled, as an organisation's canaries
// change them.
func respaced(l *corpus.Lesson) *corpus.Lesson {
	m := *l
	m.Cards = make([]*corpus.Card, len(l.Cards))
	for i, c := range l.Cards {
		mc := *c
		mc.Body = strings.ReplaceAll(c.Body, ". ", ".  ")
		mc.NarrationScript = strings.ReplaceAll(c.NarrationScript, ". ", ".  ")
		mc.VideoVoiceover = strings.ReplaceAll(c.VideoVoiceover, ". ", ".  ")
		m.Cards[i] = &mc
	}
	return &m
}

// TestAppendFullAs: the set's rendering of a lesson, given a copy with
// other texts, appends what rendering the copy appends at full detail;
// given the lesson itself, its own full detail.
func TestAppendFullAs(t *testing.T) {
	c, set := smallCorpus(t)
	var r Renderer
	changed := 0
	for _, l := range c.Lessons {
		d := set.Doc(l)
		if got, want := d.AppendFullAs(nil, l, []byte("}")), d.AppendLesson(nil, Full, 0, []byte("}")); !bytes.Equal(got, want) {
			t.Fatalf("%s: AppendFullAs of the lesson itself differs from its full detail:\n%s\nwant\n%s", l.ID, got, want)
		}
		m := respaced(l)
		rd, err := r.Render(m)
		if err != nil {
			t.Fatal(err)
		}
		want := rd.AppendLesson(nil, Full, 0, nil)
		if got := d.AppendFullAs(nil, m, nil); !bytes.Equal(got, want) {
			t.Fatalf("%s: AppendFullAs of a respaced copy differs from rendering it:\n%s\nwant\n%s", l.ID, got, want)
		}
		if !bytes.Equal(want, d.AppendLesson(nil, Full, 0, nil)) {
			changed++
		}
	}
	if changed == 0 {
		t.Error("no lesson's texts changed: the test checks nothing")
	}
}
