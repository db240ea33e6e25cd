package export

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/forensic"
)

var tenOrgs = func() []string {
	var out []string
	for i := range 10 {
		out = append(out, fmt.Sprintf("org-%d", i))
	}
	return out
}()

func detector(b *Builder) *forensic.Detector {
	return &forensic.Detector{Keys: forensic.Keys{Tag: testTagKey, Canary: testCanaryKey}, Orgs: tenOrgs,
		TranscriptLesson: b.TranscriptLesson}
}

// stripTag re-serialises a JSON document without its _license, indented
// and with its members reordered, as a leaker hiding the tag would.
func stripTag(t *testing.T, doc []byte) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	delete(v, "_license")
	out, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// lessonWithTranscript is a lesson of the small corpus with a transcript.
func lessonWithTranscript(t *testing.T, c *corpus.Corpus) *corpus.Lesson {
	for _, l := range c.Lessons {
		if l.HasTranscript {
			return l
		}
	}
	t.Fatal("no lesson has a transcript")
	return nil
}

func classFile(t *testing.T, b *Builder, org string, l *corpus.Lesson) (classJSON, md []byte) {
	fs := byName(files(t, b, request(org, Target{Subject: l.Subject, Class: l.Number})))
	return fs[fmt.Sprintf("class-%d.json", l.Number)], fs[fmt.Sprintf("class-%d.transcript.md", l.Number)]
}

// TestDetectClassFile: for each of ten organisations, the canaries of one
// class file, its tag stripped and the JSON re-serialised, name it and no
// other; with the tag, the tag names it and the scope set.
func TestDetectClassFile(t *testing.T) {
	c, _ := smallCorpus(t)
	b := newBuilder(t)
	d := detector(b)
	l := lessonWithTranscript(t, c)
	for _, org := range tenOrgs {
		class, _ := classFile(t, b, org, l)
		f, err := d.Detect(stripTag(t, class))
		if err != nil {
			t.Fatal(err)
		}
		if f.OrgID != org || f.Scopes != "" || len(f.Matched) != 1 {
			t.Fatalf("%s's class file, tag stripped: named %q (scopes %q), evidence %+v", org, f.OrgID, f.Scopes, f.Matched)
		}
		m := f.Matched[0]
		if m.By != "canary" || m.Bits < 64 || m.Agreeing != m.Bits || m.Chance > 1e-6 || m.LessonIDs[0] != l.ID {
			t.Errorf("%s: canary evidence %+v", org, m)
		}
		f, err = d.Detect(class)
		if err != nil {
			t.Fatal(err)
		}
		if f.OrgID != org || f.Scopes != "service-api/content.read service-api/content.export" || f.Matched[0].By != "tag" {
			t.Errorf("%s's class file: named %q (scopes %q), evidence %+v", org, f.OrgID, f.Scopes, f.Matched)
		}
	}
}

// TestDetectOtherLesson: a class file passed off as another lesson's
// matches no organisation's canaries for that lesson.
func TestDetectOtherLesson(t *testing.T) {
	c, _ := smallCorpus(t)
	b := newBuilder(t)
	l, other := c.Lessons[0], c.Lessons[1]
	class, _ := classFile(t, b, "org-3", l)
	relabelled := bytes.Replace(stripTag(t, class), []byte(`"`+l.ID+`"`), []byte(`"`+other.ID+`"`), 1)
	f, err := detector(b).Detect(relabelled)
	if err != nil {
		t.Fatal(err)
	}
	if f.OrgID != "" {
		t.Errorf("another lesson's canaries named %q: %+v", f.OrgID, f.Matched)
	}
	texts, err := forensic.LessonTexts(class)
	if err != nil {
		t.Fatal(err)
	}
	bits, agreeing := forensic.NewCanary(testCanaryKey, "org-3", other.ID).MatchTexts(texts)
	if agreeing > bits*3/4 {
		t.Errorf("org-3's canary of %s agrees at %d of %d bits of its %s file", other.ID, agreeing, bits, l.ID)
	}
}

// TestDetectForms: a bundle whole (zip, inline data, the inline result),
// a transcript alone and a manifest each name the organisation; an
// unmarked lesson without its tag names none; other bytes are not a leak.
func TestDetectForms(t *testing.T) {
	c, set := smallCorpus(t)
	b := newBuilder(t)
	d := detector(b)
	l := lessonWithTranscript(t, c)
	req := request("org-7", Target{Subject: l.Subject})
	zipped := zipBytes(t, b, req)
	inline, err := inlineBytes(t, b, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	result, _ := json.Marshal(map[string]any{"format": "inline", "encoding": "gzip+base64", "archive": "tar", "data": string(inline)})
	_, md := classFile(t, b, "org-7", l)
	fs := byName(files(t, b, req))
	for name, leak := range map[string][]byte{
		"zip":                  zipped,
		"inline data":          inline,
		"inline result":        result,
		"manifest":             fs["manifest.json"],
		"transcript alone":     md,
		"class file, stripped": stripTag(t, fs[fmt.Sprintf("class-%d.json", l.Number)]),
	} {
		f, err := d.Detect(leak)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if f.OrgID != "org-7" {
			t.Errorf("%s: named %q, want org-7; evidence %+v", name, f.OrgID, f.Matched)
		}
	}
	if f, _ := d.Detect(md); len(f.Matched) != 1 || f.Matched[0].By != "canary" || f.Matched[0].LessonIDs[0] != l.ID {
		t.Errorf("transcript alone: evidence %+v, want org-7's canaries in %s", f.Matched, l.ID)
	}
	if f, _ := d.Detect(zipped); f.Scopes == "" || !hasBoth(f.Matched) {
		t.Errorf("zip: scopes %q, evidence %+v; want the tag and the canaries", f.Scopes, f.Matched)
	}

	unmarked := stripTag(t, route6(set, l, request("org-7", Target{}).License))
	if f, err := d.Detect(unmarked); err != nil || f.OrgID != "" {
		t.Errorf("an unmarked lesson without its tag: named %q (err %v)", f.OrgID, err)
	}
	for _, junk := range []string{"", "hello", "PK\x03\x04 broken", "{not json", "H4sI!!!"} {
		if _, err := d.Detect([]byte(junk)); !errors.Is(err, forensic.ErrUnrecognised) {
			t.Errorf("Detect(%q) = %v, want ErrUnrecognised", junk, err)
		}
	}
}

func hasBoth(ms []forensic.Match) bool {
	var tag, canary bool
	for _, m := range ms {
		tag = tag || m.By == "tag"
		canary = canary || (m.By == "canary" && strings.HasPrefix(m.OrgID, "org-"))
	}
	return tag && canary
}
