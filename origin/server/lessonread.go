package server

import (
	"net/http"
	"strconv"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/lessondoc"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/id"
)

// The steps every lesson route (spec: Route table 6–9) runs before it
// renders, the pipeline after the gate in DESIGN.md's order: resolve the
// target (400 BAD_LESSON_ID, bills the call) → entitlement (403, free) →
// the media page's cursor (400, bills the call) → existence (404
// LESSON_NOT_FOUND, bills a call and a lesson read) → ETag (s.revalidate:
// a 304 bills one call and no lesson read, so the enumeration alarm does
// not see it) → bill the read (429; the enumeration alarm) → render.

// lessonTarget resolves the route's lesson id and checks the caller's
// entitlement to it.
func (s *Server) lessonTarget(r *http.Request, req *request) (id.Lesson, error) {
	lid, err := id.LessonFromPath(req.vars.Get("tier"), req.vars.Get("subjectSlug"), req.vars.Get("classNum"))
	if err != nil {
		return lid, s.billCallAnd(r, req, err)
	}
	if err := licence.Entitled(req.org.Grants, lid.Tier, lid.Slug); err != nil {
		return lid, err
	}
	return lid, nil
}

// findLesson returns the lesson's renderings, or bills the 404's call and
// lesson read and answers LESSON_NOT_FOUND with the real range.
func (s *Server) findLesson(r *http.Request, req *request, lid id.Lesson) (*lessondoc.Doc, error) {
	sub := req.corpus.Subject(lid.Tier, lid.Slug)
	if sub != nil && lid.Class <= len(sub.Lessons) {
		return req.corpus.lessons.Doc(sub.Lessons[lid.Class-1]), nil
	}
	if _, err := s.billLessonRead(r, req, nil); err != nil {
		return nil, err
	}
	if sub == nil {
		return nil, &apierr.Error{Code: apierr.LessonNotFound, Parameter: "subjectSlug", Received: lid.Slug,
			Message: "No lesson " + lid.String() + ": the " + lid.Tier + " tier has no subject " + lid.Slug + " (slugs match exactly and are tier-specific)."}
	}
	n := len(sub.Lessons)
	return nil, &apierr.Error{Code: apierr.LessonNotFound, Parameter: "classNum",
		Received: strconv.Itoa(lid.Class), ReceivedNumber: true, Min: apierr.Int(1), Max: apierr.Int(int64(n)),
		Message: "No lesson " + lid.String() + ": " + sub.Ref() + " has classes 1 to " + strconv.Itoa(n) + "."}
}

// lessonRead is a lesson found, its validator and the bill of its read.
type lessonRead struct {
	doc  *lessondoc.Doc
	tag  string
	bill billing.Bill
}

// readLesson runs the steps every lesson route shares once its target is
// resolved: existence (404), the ETag (a 304 bills one call and no lesson
// read) and billing the read (429). ok is false when the request is
// answered, with a 304 or with err.
func (s *Server) readLesson(w http.ResponseWriter, r *http.Request, req *request, lid id.Lesson) (rd lessonRead, ok bool, err error) {
	d, err := s.findLesson(r, req, lid)
	if err != nil {
		return rd, false, err
	}
	// The target is the path's values, as the edge derives its candidate
	// (docs/edge.md); they name the lesson canonically.
	tag := derivedETag(req)
	if done, err := s.revalidate(w, r, req, tag); done || err != nil {
		return rd, false, err
	}
	bill, err := s.billLessonRead(r, req, d.Lesson())
	if err != nil {
		return rd, false, err
	}
	return lessonRead{doc: d, tag: tag, bill: bill}, true, nil
}
