package server

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/licence"
)

// The steps every lesson route runs before it renders (lessonread.go):
// refusals and what they bill, the 304, the enumeration alarm.

// spec: Errors (BAD_LESSON_ID, LESSON_NOT_FOUND, TIER_NOT_LICENSED,
// CONTENT_NOT_GRANTED) and Limits, "Effects of refusals".
func TestLessonRefusalsAndBilling(t *testing.T) {
	h := newHarness(t)
	c := h.corpus()
	sub := c.Subject("high", "algebra")
	other := c.Subject("high", "biology")
	if sub == nil || other == nil || c.Subject("college", "algebra") == nil {
		t.Fatal("the small corpus lacks high/algebra, high/biology or college/algebra")
	}
	tok := h.org("refusals", "high/algebra", "middle")
	n := len(sub.Lessons)
	for _, suffix := range []string{"", "/transcript", "/quiz", "/media"} {
		t.Run("route"+suffix, func(t *testing.T) {
			h.t = t
			u := h.usage("refusals")

			// A bad id bills the call only.
			e := h.fails("/v1/lessons/high/algebra/0"+suffix, tok, 400, "BAD_LESSON_ID")
			if e.Parameter != "classNum" {
				t.Errorf("classNum 0: parameter %q", e.Parameter)
			}
			e = h.fails("/v1/lessons/grad/algebra/1"+suffix, tok, 400, "BAD_LESSON_ID")
			if e.Parameter != "tier" || len(e.Allowed) != 5 {
				t.Errorf("tier grad: %+v", e)
			}
			h.fails("/v1/lessons/high/Algebra/1"+suffix, tok, 400, "BAD_LESSON_ID")
			u = h.billed("refusals", u, 3, 0)

			// Entitlement refusals bill nothing.
			e = h.fails("/v1/lessons/high/biology/1"+suffix, tok, 403, "CONTENT_NOT_GRANTED")
			if e.Grant != "high/biology" {
				t.Errorf("CONTENT_NOT_GRANTED grant %q", e.Grant)
			}
			e = h.fails("/v1/lessons/college/algebra/1"+suffix, tok, 403, "TIER_NOT_LICENSED")
			if e.Grant != "college" {
				t.Errorf("TIER_NOT_LICENSED grant %q", e.Grant)
			}
			h.fails("/v1/lessons/college/algebra/999"+suffix, tok, 403, "TIER_NOT_LICENSED")
			u = h.billed("refusals", u, 0, 0)

			// A 404 on a licensed lesson id bills a call and a lesson read,
			// and reports the real range.
			e = h.fails("/v1/lessons/high/algebra/"+strconv.Itoa(n+1)+suffix, tok, 404, "LESSON_NOT_FOUND")
			if e.Parameter != "classNum" || e.Min == nil || *e.Min != 1 || e.Max == nil || *e.Max != int64(n) || e.Received != json.Number(strconv.Itoa(n+1)) && e.Received != float64(n+1) {
				t.Errorf("class %d: %+v, want min 1 max %d", n+1, e, n)
			}
			h.fails("/v1/lessons/high/algebra/999999"+suffix, tok, 404, "LESSON_NOT_FOUND")
			e = h.fails("/v1/lessons/middle/no-such-subject/1"+suffix, tok, 404, "LESSON_NOT_FOUND")
			if e.Min != nil || e.Max != nil || !strings.Contains(e.Message, "no subject no-such-subject") {
				t.Errorf("unknown subject: %+v", e)
			}
			if after := h.billed("refusals", u, 3, 3); after.distinct != u.distinct {
				t.Errorf("a 404 counted as a distinct lesson read (%d, was %d)", after.distinct, u.distinct)
			}
			u = h.usage("refusals")

			// A good read: one call, one lesson read.
			h.ok("/v1/lessons/high/algebra/1"+suffix, tok)
			h.billed("refusals", u, 1, 1)
		})
	}
	h.t = t
}

// spec: Conditional requests; Meters (a 304 is one call, not a lesson
// read); Transport (headers).
func TestLessonConditional(t *testing.T) {
	h := newHarness(t)
	tok := h.org("etag", "topics", "college", "high", "middle", "primary")
	tok2 := h.org("etag-two", "topics", "college", "high", "middle", "primary")
	l := findLessonWhere(t, h.corpus(), "a transcript", func(l *corpus.Lesson) bool { return l.HasTranscript })
	version := h.corpus().ContentVersion
	for _, suffix := range []string{"", "?detail=full&include=media", "/transcript", "/transcript?include=markdown", "/quiz", "/media", "/media?type=image&limit=3"} {
		path := lessonPathOf(l) + suffix
		a := h.get(path, tok)
		b := h.get(path, tok)
		tag := a.header.Get("ETag")
		if a.status != 200 || tag == "" || tag != b.header.Get("ETag") || !strings.HasPrefix(tag, `W/"`) {
			t.Fatalf("%s: ETags %q %q (status %d)", suffix, tag, b.header.Get("ETag"), a.status)
		}
		for k, want := range map[string]string{"Cache-Control": "private", "Vary": "Authorization, Accept-Encoding",
			"X-Service-Content-Version": version, "Content-Type": "application/json"} {
			if got := a.header.Get(k); got != want {
				t.Errorf("%s: %s %q, want %q", suffix, k, got, want)
			}
		}
		if a.header.Get("X-Request-Id") == "" {
			t.Errorf("%s: no X-Request-Id", suffix)
		}
		if other := h.get(path, tok2); other.header.Get("ETag") == tag {
			t.Errorf("%s: two organisations share an ETag", suffix)
		}

		u := h.usage("etag")
		for _, inm := range []string{tag, "*", `W/"nope", ` + tag} {
			for _, ae := range []string{"", "gzip", "br"} {
				r := h.get(path, tok, "If-None-Match", inm, "Accept-Encoding", ae)
				if r.status != 304 || len(r.body) != 0 || r.header.Get("X-Service-Content-Version") != version ||
					r.header.Get("ETag") != tag || r.header.Get("Content-Encoding") != "" {
					t.Errorf("%s If-None-Match %s (%s): %d %q ETag %q version %q", suffix, inm, ae, r.status, r.body, r.header.Get("ETag"), r.header.Get("X-Service-Content-Version"))
				}
			}
		}
		u = h.billed("etag", u, 9, 0) // each 304 one call, no lesson read
		r := h.get(path, tok, "If-None-Match", `W/"stale"`)
		if r.status != 200 {
			t.Errorf("%s: a stale validator got %d", suffix, r.status)
		}
		h.billed("etag", u, 1, 1)
	}
	// detail is part of the validator; the ETag moves with the version.
	p := lessonPathOf(l)
	tags := map[string]bool{}
	for _, q := range []string{"?detail=brief", "", "?detail=full", "?include=quiz"} {
		tags[h.get(p+q, tok).header.Get("ETag")] = true
	}
	if h.get(p+"?detail=standard", tok).header.Get("ETag") != h.get(p, tok).header.Get("ETag") {
		t.Errorf("detail=standard and the default have different ETags")
	}
	if len(tags) != 4 {
		t.Errorf("brief, standard, full and include=quiz share ETags: %v", tags)
	}
	old := h.get(p, tok).header.Get("ETag")
	h.content.Store(smallContent(t, "2026-12-01"))
	if r := h.get(p, tok, "If-None-Match", old); r.status != 200 || r.header.Get("ETag") == old {
		t.Errorf("after a corpus rebuild: %d, ETag %q (was %q)", r.status, r.header.Get("ETag"), old)
	}
	// Existence is decided before the validator: If-None-Match: * on a
	// lesson that does not exist is a 404.
	if r := h.get("/v1/lessons/high/algebra/99", tok, "If-None-Match", "*"); r.status != 404 {
		t.Errorf("If-None-Match * on a missing lesson: %d", r.status)
	}
}

// spec: States and transitions, enumeration alarm; Authentication §8;
// Route rules §8.
func TestLessonEnumerationAlarm(t *testing.T) {
	h := newHarness(t)
	c := h.corpus()
	sub := c.Subject("topics", "photography")
	if sub == nil {
		t.Fatal("the small corpus has no topics/photography")
	}
	tok := h.org("alarm", sub.Ref())
	granted := len(sub.Lessons)
	// The read that takes distinct lessons past 40% of the granted ones.
	crossing := granted*2/5 + 1
	if billing.GrantedLessons(c, []string{sub.Ref()}) != granted || crossing >= granted {
		t.Fatalf("granted %d, crossing %d", granted, crossing)
	}
	path := func(n int) string { return "/v1/lessons/" + sub.Ref() + "/" + strconv.Itoa(n) }

	// Reads that do not count: a 304 (If-None-Match: * needs no earlier
	// read), a 404, and reading a lesson again through another route.
	for n := 1; n <= granted; n++ {
		if r := h.get(path(n), tok, "If-None-Match", "*"); r.status != 304 {
			t.Fatalf("lesson %d If-None-Match *: %d", n, r.status)
		}
	}
	h.fails(path(granted+1), tok, 404, "LESSON_NOT_FOUND")
	if d := h.usage("alarm").distinct; d != 0 {
		t.Fatalf("304s and a 404 counted %d distinct lessons", d)
	}
	h.ok(path(1), tok)
	h.ok(path(1)+"/transcript", tok)
	h.ok(path(1)+"/quiz", tok)
	h.ok(path(1)+"/media", tok)
	if d := h.usage("alarm").distinct; d != 1 {
		t.Fatalf("one lesson read four ways counted %d", d)
	}
	// Every lesson route feeds the alarm.
	routes := []string{"/quiz", "/media", "/transcript", ""}
	for n := 2; n < crossing; n++ {
		h.ok(path(n)+routes[n%len(routes)], tok)
	}
	if d := h.usage("alarm").distinct; d != crossing-1 {
		t.Fatalf("distinct lessons %d, want %d", d, crossing-1)
	}
	// The crossing read is served; the organisation is then suspended.
	// The meter holds the alarm: the stored status stays as it was, and
	// the effective one is suspended.
	h.ok(path(crossing)+"/media?type=image", tok)
	if d := h.usage("alarm").distinct; d != crossing {
		t.Errorf("distinct lessons %d, want %d", d, crossing)
	}
	o, err := h.store.GetOrg(context.Background(), "alarm")
	if err != nil || o.Status != licence.StatusActive {
		t.Fatalf("stored status after crossing: %v %v", o, err)
	}
	before := h.usage("alarm")
	h.fails(path(1), tok, 403, "ORG_SUSPENDED")
	h.fails(path(crossing+1)+"/quiz", tok, 403, "ORG_SUSPENDED")
	h.fails(path(granted+1), tok, 403, "ORG_SUSPENDED")
	h.fails("/v1/tiers", tok, 403, "ORG_SUSPENDED")
	if r := h.get(path(1), tok, "If-None-Match", "*"); r.status != 403 {
		t.Errorf("a conditional request of a suspended org: %d", r.status)
	}
	h.billed("alarm", before, 0, 0)
	if d := h.usage("alarm").distinct; d != crossing {
		t.Errorf("distinct lessons %d after refused reads, want %d", d, crossing)
	}
	lic := h.ok("/v1/license", tok)
	if lic["status"] != licence.StatusSuspended {
		t.Errorf("/v1/license status %v", lic["status"])
	}
	status, extras, err := h.srv.OrgExtras(context.Background(), o)
	if err != nil || status != licence.StatusSuspended {
		t.Errorf("admin status %q, %v; want suspended", status, err)
	}
	enum, _ := extras["enumeration"].(map[string]any)
	alarm, _ := enum["alarm"].(map[string]any)
	if enum["lessonsRead"] != crossing || enum["grantedLessons"] != granted ||
		alarm["lessonsRead"] != crossing || alarm["grantedLessons"] != granted || alarm["day"] != time.Now().UTC().Format(time.DateOnly) {
		t.Errorf("admin enumeration %v", enum)
	}

	// An operator reinstates it; access resumes on the next call.
	if err := h.srv.Reinstate(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	h.ok(path(1), tok)
	// Reading more lessons the same day does not suspend it again: the
	// alarm trips once a day.
	h.ok(path(crossing+1), tok)
	h.ok(path(crossing+2), tok)
	if lic := h.ok("/v1/license", tok); lic["status"] != licence.StatusActive {
		t.Errorf("/v1/license status %v after reinstatement and more reads", lic["status"])
	}
}
