package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

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
// other than the token's included). Then, in DESIGN.md's order:
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

// progressList is GET /v1/progress's answer: the list envelope of the
// recorded classes, and the learner's id, XP and streak.
type progressList struct {
	list
	LearnerID string         `json:"learnerId"`
	XP        int64          `json:"xp"`
	Streak    progressStreak `json:"streak"`
}

// progressItem is one recorded class.
type progressItem struct {
	LessonID        string   `json:"lessonId"`
	Tier            string   `json:"tier"`
	SubjectSlug     string   `json:"subjectSlug"`
	ClassNum        int      `json:"classNum"`
	Score           *float64 `json:"score"`
	BestScore       *float64 `json:"bestScore"`
	FirstRecordedAt string   `json:"firstRecordedAt"`
	LastRecordedAt  string   `json:"lastRecordedAt"`
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
// call), the record, the ETag (304: one call), one call, the page.
func (s *Server) getProgress(w http.ResponseWriter, r *http.Request, req *request) error {
	p, perr := s.openPage(req)
	if perr != nil {
		return s.billCallAnd(r, req, perr)
	}
	rec, err := s.cfg.Progress.Progress(r.Context(), req.org.ID, req.claims.Learner)
	if err != nil {
		return err
	}
	st := rec.Streak(req.now)
	tag := progressTag(req, &rec, st)
	if notModified(r, tag) {
		return s.answerNotModified(w, r, req, tag, http.StatusNotModified)
	}
	bill, err := s.call(r, req)
	if err != nil {
		return err
	}
	return s.writeProgress(w, r, req, tag, bill, p, &rec, st)
}

// writeProgress answers 200 with the page p of rec's granted classes.
func (s *Server) writeProgress(w http.ResponseWriter, r *http.Request, req *request, tag string, bill billing.Bill,
	p page, rec *progress.Record, st progress.Streak) error {
	granted := make([]*progress.Class, 0, len(rec.Classes))
	for i := range rec.Classes {
		c := &rec.Classes[i]
		if licence.Entitled(req.org.Grants, c.Lesson.Tier, c.Lesson.Slug) == nil {
			granted = append(granted, c)
		}
	}
	from, to := p.bounds(len(granted))
	items := make([]progressItem, 0, to-from)
	for _, c := range granted[from:to] {
		items = append(items, progressItem{LessonID: c.Lesson.String(), Tier: c.Lesson.Tier, SubjectSlug: c.Lesson.Slug,
			ClassNum: c.Lesson.Class, Score: c.Score, BestScore: c.BestScore,
			FirstRecordedAt: licence.Timestamp(c.FirstRecordedAt), LastRecordedAt: licence.Timestamp(c.LastRecordedAt)})
	}
	body, err := json.Marshal(progressList{list: p.list(s, items, len(items), len(granted)),
		LearnerID: req.claims.Learner, XP: rec.XP(), Streak: streakOf(st)})
	if err != nil {
		return err
	}
	writeContent(w, r, req, tag, bill, body)
	return nil
}
