package server

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/progress"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/etag"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/param"
)

// The learner's progress (spec: Route table 17 and 18, Route rules §7):
// one record per organisation and learner (the token's learner claim;
// shared/front has refused a token without one, 403 LEARNER_REQUIRED),
// kept by cfg.Progress under origin/progress's rules. Neither route is a
// lesson read: the enumeration alarm never sees them.
//
// PUT /v1/progress/{tier}/{subjectSlug}/{classNum}: the body is checked
// before the organisation gate (progressBody: free 400s, a learnerId
// other than the token's included). Then, in the request pipeline's order:
// BAD_LESSON_ID (bills the call), the entitlement (403, free),
// LESSON_NOT_FOUND (bills the call), the call (429s), and a compare and
// swap on the record's version: read, progress.Record.Apply, SaveProgress.
// The writer that lost a race answers 409 WRITE_CONFLICT, nothing saved
// and the call billed; the server never retries. A write that changes
// nothing (Apply: the same score on the same UTC day) saves nothing, so a
// retried PUT leaves the version, and the GET's ETag, as they were.
//
// GET /v1/progress: the record's classes of subjects granted now, in
// listing order (progress.Less), paged; the ETag is derived after the
// record is read (route.Record), so a 304 saves the body only.

// progressBody is the endpoint of the PUT: withBody with
// param.ParseProgress, and a learnerId naming another learner than the
// token's refused as well, before the gate.
func (s *Server) progressBody() endpoint {
	return endpoint{body: func(r *http.Request, req *request) (handler, error) {
		parse := func(b []byte) (param.Progress, *apierr.Error) {
			p, err := param.ParseProgress(b)
			if err == nil && p.LearnerID != "" && p.LearnerID != req.claims.Learner {
				err = &apierr.Error{Code: apierr.BadRequest, Parameter: "learnerId",
					Message: "learnerId must be the signed-in learner's id (the token's learner), or be left out; no token writes another learner's progress."}
			}
			return p, err
		}
		return withBody(parse, s.putProgress).body(r, req)
	}}
}

// progressAck is the answer of a saved (or unchanged) PUT: the class as
// recorded, and the learner's XP and streak. It stays far under 384
// bytes, so it is never compressed (spec: Transport).
type progressAck struct {
	LessonID  string         `json:"lessonId"`
	Score     *float64       `json:"score"`
	BestScore *float64       `json:"bestScore"`
	XP        int64          `json:"xp"`
	Streak    progressStreak `json:"streak"`
}

// progressStreak is the streak as both routes write it: lastDay is the
// UTC day of the last saved write (YYYY-MM-DD), null when none.
type progressStreak struct {
	Current int64   `json:"current"`
	Longest int64   `json:"longest"`
	LastDay *string `json:"lastDay"`
}

func streakOf(s progress.Streak) progressStreak {
	p := progressStreak{Current: s.Current, Longest: s.Longest}
	if !s.LastDay.IsZero() {
		d := s.LastDay.UTC().Format(dayLayout)
		p.LastDay = &d
	}
	return p
}

// dayLayout is a UTC day as lastDay writes it (RFC 3339 full-date).
const dayLayout = "2006-01-02"

// writeConflict is the 409 of a lost race (spec: Errors).
func writeConflict() *apierr.Error {
	return &apierr.Error{Code: apierr.WriteConflict, RetryAfter: apierr.Int(1),
		Message: "Another writer updated this learner's progress first; nothing was saved. Retry after about a second."}
}

// putProgress serves the PUT with its checked body b.
func (s *Server) putProgress(w http.ResponseWriter, r *http.Request, req *request, b param.Progress) error {
	lid, lerr := id.LessonFromPath(req.vars.Get("tier"), req.vars.Get("subjectSlug"), req.vars.Get("classNum"))
	if lerr != nil {
		return s.billCallAnd(r, req, lerr)
	}
	if err := licence.Entitled(req.org.Grants, lid.Tier, lid.Slug); err != nil {
		return err
	}
	if sub := req.corpus.Subject(lid.Tier, lid.Slug); sub == nil || lid.Class > len(sub.Lessons) {
		return s.billCallAnd(r, req, lessonNotFound(lid, sub)) // a call, never a lesson read
	}
	bill, err := s.call(r, req)
	if err != nil {
		return err
	}
	rec, err := s.cfg.Progress.Progress(r.Context(), req.org.ID, req.claims.Learner)
	if err != nil {
		return err
	}
	var score *float64
	if b.HasScore {
		score = &b.Score
	}
	if rec.Apply(lid, score, req.now) {
		switch _, err := s.cfg.Progress.SaveProgress(r.Context(), rec); {
		case errors.Is(err, progress.ErrConflict):
			return writeConflict()
		case errors.Is(err, store.ErrNotFound):
			// The organisation was deleted since the gate read it: the
			// gate's answer for a token bound to none (nothing saved).
			return licence.Check(nil, req.now)
		case err != nil:
			return err
		}
	}
	c, _ := rec.Class(lid)
	body, err := json.Marshal(progressAck{LessonID: lid.String(), Score: c.Score, BestScore: c.BestScore,
		XP: rec.XP(), Streak: streakOf(rec.Streak(req.now))})
	if err != nil {
		return err
	}
	writeContent(w, r, req, "", bill, body) // no ETag (route.NoETag)
	return nil
}

// progressTag is the GET's validator, derived after the record is read:
// the request's inputs as derivedETag takes them, with the record's
// version and the current streak (the one member that moves with the
// clock alone, at midnight UTC) as the target, and the learner. It moves
// with every saved write, with contentVersion and with the grants.
func progressTag(req *request, rec *progress.Record, st progress.Streak) string {
	return etag.Derive(etag.Input{
		Version: req.corpus.ContentVersion,
		Route:   int(req.route.ID),
		Target:  strconv.FormatInt(rec.Version, 10) + "/" + strconv.FormatInt(st.Current, 10) + "/" + req.claims.Learner,
		Params:  req.params.Canonical(),
		Org:     req.org.ID,
		Grants:  etag.GrantsDigest(req.org.Grants),
	})
}

// getProgress serves GET /v1/progress: the cursor (400, bills the
// call: openPage), the record, the ETag (304: one call), one call, the
// page.
func (s *Server) getProgress(w http.ResponseWriter, r *http.Request, req *request) error {
	p, err := s.openPage(r, req)
	if err != nil {
		return err
	}
	rec, err := s.cfg.Progress.ReadProgress(r.Context(), req.org.ID, req.claims.Learner) // shared: read only
	if err != nil {
		return err
	}
	st := rec.Streak(req.now)
	tag := progressTag(req, rec, st)
	if notModified(r, tag) {
		return s.answerNotModified(w, r, req, tag, http.StatusNotModified)
	}
	bill, err := s.call(r, req)
	if err != nil {
		return err
	}
	return s.writeProgress(w, r, req, tag, bill, p, rec, st)
}

// writeProgress answers 200 with the page p of rec's granted classes.
func (s *Server) writeProgress(w http.ResponseWriter, r *http.Request, req *request, tag string, bill billing.Bill,
	p page, rec *progress.Record, st progress.Streak) error {
	sc := progressScratches.Get().(*progressScratch)
	defer sc.put()
	for i := range rec.Classes {
		c := &rec.Classes[i]
		if licence.Entitled(req.org.Grants, c.Lesson.Tier, c.Lesson.Slug) == nil {
			sc.granted = append(sc.granted, c)
		}
	}
	from, to := p.bounds(len(sc.granted))
	items := sc.granted[from:to]
	sc.body = slices.Grow(sc.body, 512+progressItemSize*len(items))
	sc.body = appendProgress(sc.body, p.list(s, nil, len(items), len(sc.granted)), items, req.claims.Learner, rec.XP(), streakOf(st))
	writeContent(w, r, req, tag, bill, sc.body) // written or copied when it returns: net/http keeps no body
	return nil
}

// progressItemSize is about the size of one item of the GET's body
// (about 200 bytes), the body's first allocation per item.
const progressItemSize = 224

// progressScratch is what a GET's 200 builds its answer in: the granted
// classes and the body, about 23 KB for 100 classes. They are kept
// between requests (progressScratches) because the collector's work
// grows with the bytes allocated, each cycle marking the whole corpus:
// allocated afresh they were half of the 200's bytes (bench-perf.md).
type progressScratch struct {
	granted []*progress.Class
	body    []byte
}

// progressScratches holds scratches between requests.
var progressScratches = sync.Pool{New: func() any { return new(progressScratch) }}

// maxScratchBody bounds the body a scratch keeps: a page of 100 classes
// is about 23 KB, so only a body of unusual names is let go.
const maxScratchBody = 64 << 10

// put empties sc, dropping its pointers into a record (records are
// shared and replaced on every save: a kept pointer would keep one
// alive), and returns it to progressScratches.
func (sc *progressScratch) put() {
	clear(sc.granted)
	sc.granted = sc.granted[:0]
	sc.body = sc.body[:0]
	if cap(sc.body) > maxScratchBody {
		sc.body = nil
	}
	progressScratches.Put(sc)
}

// appendProgress appends GET /v1/progress's body: the list envelope l
// (its Items ignored) with items as its items, then learnerId, xp and
// streak. It writes without reflection what encoding/json wrote of
//
//	struct{ list; LearnerID string `json:"learnerId"`; XP int64 `json:"xp"`; Streak progressStreak `json:"streak"` }
//
// with items of {lessonId, tier, subjectSlug, classNum, score, bestScore,
// firstRecordedAt, lastRecordedAt} (instants as licence.Timestamp writes
// them), byte for byte (TestProgressBodyEncoding): json.Marshal took a
// quarter of the 200's time (bench-progfast.md).
func appendProgress(b []byte, l list, items []*progress.Class, learner string, xp int64, st progressStreak) []byte {
	b = append(b, `{"items":[`...)
	for i, c := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendProgressItem(b, c)
	}
	b = append(b, `],"total":`...)
	b = strconv.AppendInt(b, int64(l.Total), 10)
	b = append(b, `,"pageNum":`...)
	b = strconv.AppendInt(b, int64(l.PageNum), 10)
	b = append(b, `,"totalPages":`...)
	b = strconv.AppendInt(b, int64(l.TotalPages), 10)
	b = append(b, `,"hasMore":`...)
	b = strconv.AppendBool(b, l.HasMore)
	b = append(b, `,"nextCursor":`...)
	b = appendNullableString(b, l.NextCursor)
	b = append(b, `,"contentVersion":`...)
	b = appendJSONString(b, l.ContentVersion)
	b = append(b, `,"_license":{"lic":`...)
	b = appendJSONString(b, l.License.Lic)
	b = append(b, `,"tag":`...)
	b = appendJSONString(b, l.License.Tag)
	b = append(b, `},"learnerId":`...)
	b = appendJSONString(b, learner)
	b = append(b, `,"xp":`...)
	b = strconv.AppendInt(b, xp, 10)
	b = append(b, `,"streak":{"current":`...)
	b = strconv.AppendInt(b, st.Current, 10)
	b = append(b, `,"longest":`...)
	b = strconv.AppendInt(b, st.Longest, 10)
	b = append(b, `,"lastDay":`...)
	b = appendNullableString(b, st.LastDay)
	return append(b, "}}"...)
}

// appendProgressItem appends one item of the GET's list.
func appendProgressItem(b []byte, c *progress.Class) []byte {
	l := c.Lesson
	tier, slug := plainJSON(l.Tier), plainJSON(l.Slug)
	b = append(b, `{"lessonId":`...)
	if tier && slug {
		b = append(b, '"')
		b = l.AppendTo(b)
		b = append(b, '"')
	} else {
		b = appendJSONString(b, l.String())
	}
	b = append(b, `,"tier":`...)
	b = appendQuoted(b, l.Tier, tier)
	b = append(b, `,"subjectSlug":`...)
	b = appendQuoted(b, l.Slug, slug)
	b = append(b, `,"classNum":`...)
	b = strconv.AppendInt(b, int64(l.Class), 10)
	b = append(b, `,"score":`...)
	b = appendJSONFloat(b, c.Score)
	b = append(b, `,"bestScore":`...)
	b = appendJSONFloat(b, c.BestScore)
	b = append(b, `,"firstRecordedAt":"`...)
	b = appendTimestamp(b, c.FirstRecordedAt) // licence.Timestamp: digits, '-', ':', 'T', 'Z'
	b = append(b, `","lastRecordedAt":"`...)
	b = appendTimestamp(b, c.LastRecordedAt)
	return append(b, `"}`...)
}

// appendTimestamp appends t as licence.Timestamp writes it (RFC 3339, UTC,
// to the second): for years 0 to 9999, the digits straight from the date
// and clock, in a third of time.AppendFormat's time (which takes the
// other years).
func appendTimestamp(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		return t.AppendFormat(b, time.RFC3339)
	}
	h, mi, s := t.Clock()
	return append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+mo/10), byte('0'+mo%10), '-', byte('0'+d/10), byte('0'+d%10), 'T',
		byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':', byte('0'+s/10), byte('0'+s%10), 'Z')
}

// jsonPlain holds the bytes encoding/json writes as they are in a
// string: printable ASCII but '"', '\\' and the HTML characters it
// escapes ('<', '>', '&').
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// plainJSON reports whether encoding/json writes s as it is between
// quotes (jsonPlain).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if !jsonPlain[s[i]] {
			return false
		}
	}
	return true
}

// appendJSONString appends s as encoding/json writes it.
func appendJSONString(b []byte, s string) []byte { return appendQuoted(b, s, plainJSON(s)) }

// appendQuoted appends s as encoding/json writes it, knowing whether it
// is plainJSON: as it is between quotes, else through encoding/json
// itself (its escapes differ from jsonenc.String's: \b, \f and the HTML
// characters).
func appendQuoted(b []byte, s string, plain bool) []byte {
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

func appendNullableString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *s)
}

// appendJSONFloat appends p as encoding/json writes a float64 (the
// shortest form that reads back the same, in exponent form below 1e-6 or
// from 1e21, its exponent without a leading zero), or null. Scores are
// finite (progress.Encode refuses others).
func appendJSONFloat(b []byte, p *float64) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	f := *p
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && (f != 0 || !math.Signbit(f)) {
		// A whole score, as most are: its digits, as 'f' writes them,
		// without the shortest-form search (half an item's time).
		return strconv.AppendInt(b, int64(f), 10)
	}
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07 becomes e-7, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
