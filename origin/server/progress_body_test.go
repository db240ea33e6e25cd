package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/origin/store"
	shid "github.com/lectern-api/lectern/shared/id"
)

// marshalList is GET /v1/progress's envelope as encoding/json wrote it
// before appendProgress (this struct, its items progressRow): the reference
// appendProgress must match byte for byte.
type marshalList struct {
	list
	LearnerID string         `json:"learnerId"`
	XP        int64          `json:"xp"`
	Streak    progressStreak `json:"streak"`
}

// marshalProgress is the body as encoding/json wrote it.
func marshalProgress(t *testing.T, l list, cs []*progress.Class, learner string, xp int64, st progressStreak) []byte {
	t.Helper()
	items := make([]progressRow, 0, len(cs))
	for _, c := range cs {
		items = append(items, progressRow{LessonID: c.Lesson.String(), Tier: c.Lesson.Tier, SubjectSlug: c.Lesson.Slug,
			ClassNum: c.Lesson.Class, Score: c.Score, BestScore: c.BestScore,
			FirstRecordedAt: licence.Timestamp(c.FirstRecordedAt), LastRecordedAt: licence.Timestamp(c.LastRecordedAt)})
	}
	l.Items = items
	b, err := json.Marshal(marshalList{list: l, LearnerID: learner, XP: xp, Streak: st})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appendProgress writes what encoding/json wrote, byte for byte: null
// and fractional scores (exponent forms included), strings encoding/json
// escapes (HTML characters, controls, U+2028, invalid UTF-8), instants
// in any zone and outside years 0-9999, empty and many items, a last and
// a middle page.
func TestProgressBodyEncoding(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 26, 53, 589793000, time.UTC)
	paris := time.FixedZone("CET", 3600)
	scores := []*float64{nil, ptr(0), ptr(math.Copysign(0, -1)), ptr(100), ptr(72.5), ptr(33.333333333333336),
		ptr(1e-7), ptr(0.000001), ptr(1e-320), ptr(5e21), ptr(12345678.9),
		ptr(1e15 - 1), ptr(1e15), ptr(-42), ptr(4503599627370497), ptr(1e20), ptr(1e21)}
	tiers := []string{"high", "college", "a<b>&c", "tab\there", "bs\\q\"", "ctl\b\f\x01", "u\u2028\u2029", "bad\xffutf8", "é"}
	var many []*progress.Class
	for i := range 150 {
		many = append(many, &progress.Class{
			Lesson:          shid.Lesson{Tier: tiers[i%len(tiers)], Slug: fmt.Sprintf("slug-%d%s", i%7, tiers[(i/3)%len(tiers)]), Class: 1 + i},
			Score:           scores[i%len(scores)],
			BestScore:       scores[(i+3)%len(scores)],
			FirstRecordedAt: t0.Add(time.Duration(i) * 37 * time.Hour).In(paris),
			LastRecordedAt:  t0.Add(time.Duration(i) * 41 * time.Hour),
		})
	}
	many[1].FirstRecordedAt = time.Date(-12, 1, 1, 0, 0, 0, 0, time.UTC)
	many[2].LastRecordedAt = time.Date(12026, 12, 31, 23, 59, 59, 999, time.UTC)
	many[3].FirstRecordedAt = time.Time{}
	// appendTimestamp's own digits: the years at its bounds and one
	// that pads, in a zone whose offset moves the day.
	many[4].FirstRecordedAt = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	many[4].LastRecordedAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	many[5].FirstRecordedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	many[5].LastRecordedAt = time.Date(987, 6, 5, 4, 3, 2, 1, time.FixedZone("far", -11*3600))
	cursor := "v1.abc_DEF-123"
	day := "2026-03-14"
	cases := []struct {
		name    string
		l       list
		items   []*progress.Class
		learner string
		st      progressStreak
	}{
		{"empty", list{Total: 0, PageNum: 1, TotalPages: 1, ContentVersion: "2026-11-01+266db8025369",
			License: forensic.Envelope{Lic: "lic-1", Tag: "t"}}, nil, "ana", progressStreak{}},
		{"last page", list{Total: 150, PageNum: 2, TotalPages: 2, ContentVersion: "cv",
			License: forensic.Envelope{Lic: "l", Tag: "x"}}, many[100:], "learner@example.org", progressStreak{Current: 3, Longest: 9, LastDay: &day}},
		{"middle page", list{Total: 150, PageNum: 2, TotalPages: 5, HasMore: true, NextCursor: &cursor, ContentVersion: "cv<&>",
			License: forensic.Envelope{Lic: "a&b", Tag: "<t>"}}, many[30:60], "a<b>\u2028\xfe\"", progressStreak{Current: 0, Longest: 1, LastDay: &day}},
		{"many", list{Total: 150, PageNum: 1, TotalPages: 1, ContentVersion: "", License: forensic.Envelope{}}, many, "", progressStreak{}},
	}
	for _, c := range cases {
		want := marshalProgress(t, c.l, c.items, c.learner, 1234, c.st)
		got := appendProgress(nil, c.l, c.items, c.learner, 1234, c.st)
		if !bytes.Equal(got, want) {
			i := 0
			for i < min(len(got), len(want)) && got[i] == want[i] {
				i++
			}
			t.Errorf("%s: differs at byte %d:\n got %.200q\nwant %.200q", c.name, i, got[i:], want[i:])
		}
	}
}

// Over the wire, the 200's body is what encoding/json wrote of the
// learner's granted classes, page by page, an ungranted subject's classes
// left out.
func TestProgressBodyWire(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	c := h.corpus()
	var subjects []string
	var lessons []string
	for _, l := range c.Lessons {
		if !slices.Contains(subjects, l.Subject.Ref()) {
			subjects = append(subjects, l.Subject.Ref())
		}
		if len(subjects) > 3 {
			break
		}
		lessons = append(lessons, l.ID)
	}
	if len(subjects) < 4 {
		t.Fatalf("corpus has %d subjects, want 4", len(subjects))
	}
	granted := subjects[:2]
	h.createOrg("w", slices.Clone(subjects[:3]), nil)
	tok := h.learnerToken("w", "ana", progressScopes...)
	for i, l := range lessons {
		body := `{}`
		if i%3 != 0 {
			body = fmt.Sprintf(`{"score":%g}`, float64(i%14)*7.25)
		}
		h.ack(tok, l, body)
	}
	if _, err := h.store.UpdateOrg(t.Context(), "w", func(o *store.Org) error { o.Grants = slices.Clone(granted); return nil }); err != nil {
		t.Fatal(err)
	}
	rec := h.record("w", "ana")
	var want []*progress.Class
	for i := range rec.Classes {
		if licence.Entitled(granted, rec.Classes[i].Lesson.Tier, rec.Classes[i].Lesson.Slug) == nil {
			want = append(want, &rec.Classes[i])
		}
	}
	if len(want) == len(rec.Classes) || len(want) < 3 {
		t.Fatalf("%d of %d classes granted: want some but not all, and at least 3", len(want), len(rec.Classes))
	}
	const limit = 2
	path := fmt.Sprintf("/v1/progress?limit=%d", limit)
	for from := 0; ; from += limit {
		p, r := h.progressOf(path, tok)
		l := list{Total: p.Total, PageNum: p.PageNum, TotalPages: p.TotalPages, HasMore: p.HasMore,
			NextCursor: p.NextCursor, ContentVersion: p.ContentVersion, License: *p.License}
		st := progressStreak{Current: p.Streak.Current, Longest: p.Streak.Longest, LastDay: p.Streak.LastDay}
		if exp := marshalProgress(t, l, want[from:min(from+limit, len(want))], "ana", rec.XP(), st); !bytes.Equal(r.body, exp) {
			t.Fatalf("page from %d:\n got %s\nwant %s", from, r.body, exp)
		}
		if !p.HasMore {
			break
		}
		path = fmt.Sprintf("/v1/progress?limit=%d&cursor=%s", limit, url.QueryEscape(*p.NextCursor))
	}
}

// GETs at once, of two learners whose bodies differ in length, each
// answer its own learner's whole body: the 200's scratch buffers
// (progressScratches) are never shared by two answers, nor keep what a
// longer answer left.
func TestProgressBodyConcurrent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.createOrg("k", slices.Clone(shid.Tiers), nil)
	ids := lessonsOf(h.corpus(), 12)
	toks := []string{h.learnerToken("k", "ana", progressScopes...), h.learnerToken("k", "bob", progressScopes...)}
	for i, l := range ids {
		h.ack(toks[0], l, fmt.Sprintf(`{"score":%d}`, i))
		if i%3 == 0 {
			h.ack(toks[1], l, `{}`)
		}
	}
	const path = "/v1/progress?limit=100"
	var want [2][]byte
	for i, tok := range toks {
		_, r := h.progressOf(path, tok)
		want[i] = r.body
	}
	if len(want[0]) <= len(want[1]) {
		t.Fatalf("ana's body %d bytes, bob's %d: want ana's longer", len(want[0]), len(want[1]))
	}
	const n = 64
	answers := make([]resp, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = h.get(path, toks[i%2])
		})
	}
	close(start)
	wg.Wait()
	for i, r := range answers {
		if r.status != 200 || !bytes.Equal(r.body, want[i%2]) {
			t.Fatalf("GET %d (learner %d): %d\n got %s\nwant %s", i, i%2, r.status, r.body, want[i%2])
		}
	}
}

// BenchmarkProgressGet is (m) of tools/bench serially over the harness's
// listener: GET /v1/progress?limit=100 of a learner with 100 recorded
// classes, as a 200 (20 KB) and as a 304.
func BenchmarkProgressGet(b *testing.B) {
	h := newHarness(b)
	h.createOrg("b", slices.Clone(shid.Tiers), nil)
	tok := h.learnerToken("b", "ana", progressScopes...)
	rec := progress.Record{OrgID: "b", Learner: "ana"}
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	for i := range 100 {
		rec.Apply(shid.Lesson{Tier: shid.Tiers[i%len(shid.Tiers)], Slug: fmt.Sprintf("subject-%02d", i%9), Class: 1 + i/9},
			ptr(float64(i%101)), t0.Add(time.Duration(i)*time.Minute))
	}
	if _, err := h.progress.SaveProgress(b.Context(), rec); err != nil {
		b.Fatal(err)
	}
	const path = "/v1/progress?limit=100"
	r := h.get(path, tok)
	wantStatus(b, r, 200)
	tag := r.header.Get("ETag")
	b.Run("200", func(b *testing.B) {
		b.SetBytes(int64(len(r.body)))
		for b.Loop() {
			if r := h.get(path, tok); r.status != 200 {
				b.Fatalf("status %d", r.status)
			}
		}
	})
	b.Run("304", func(b *testing.B) {
		for b.Loop() {
			if r := h.get(path, tok, "If-None-Match", tag); r.status != 304 {
				b.Fatalf("status %d", r.status)
			}
		}
	})
}
