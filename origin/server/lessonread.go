package server

import (
	"net/http"
	"strconv"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/lessondoc"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/id"
)

// The steps every lesson route (spec: Route table 6–9) runs up to its
// 304 decision, the request pipeline after the gate (docs/edge.md): resolve
// the target (400 BAD_LESSON_ID, bills the call) → entitlement (403, free)
// → the media page's cursor (400, bills the call) → existence (404
// LESSON_NOT_FOUND, bills a call and a lesson read) → ETag. The handlers
// (lessons.go) go on: a 304 bills one call and no lesson read, so the
// enumeration alarm does not see it (validator.go); then they bill the
// read (429; the enumeration alarm) and render.

// lessonFound is the target of a lesson route: the lesson's renderings
// and the ETag.
type lessonFound struct {
	tagged
	doc *lessondoc.Doc
}

// mediaTarget is the target of the media route: the lesson and the page.
type mediaTarget struct {
	lessonFound
	page page
}

// lessonStep is the step of the lesson, transcript and quiz routes.
func (s *Server) lessonStep(r *http.Request, req *request) (lessonFound, error) {
	lid, err := s.lessonID(r, req)
	if err != nil {
		return lessonFound{}, err
	}
	return s.findLesson(r, req, lid)
}

// mediaStep is the step of the media route: the page's cursor is read
// between the entitlement and existence.
func (s *Server) mediaStep(r *http.Request, req *request) (mediaTarget, error) {
	lid, err := s.lessonID(r, req)
	if err != nil {
		return mediaTarget{}, err
	}
	p, err := s.openPage(r, req)
	if err != nil {
		return mediaTarget{}, err
	}
	f, err := s.findLesson(r, req, lid)
	if err != nil {
		return mediaTarget{}, err
	}
	return mediaTarget{f, p}, nil
}

// lessonID resolves the route's lesson id and checks the caller's
// entitlement to it.
func (s *Server) lessonID(r *http.Request, req *request) (id.Lesson, error) {
	lid, err := id.LessonFromPath(req.vars.Get("tier"), req.vars.Get("subjectSlug"), req.vars.Get("classNum"))
	if err != nil {
		return lid, s.billCallAnd(r, req, err)
	}
	if err := licence.Entitled(req.org.Grants, lid.Tier, lid.Slug); err != nil {
		return lid, err
	}
	return lid, nil
}

// findLesson returns the lesson's renderings and its ETag, or bills the
// 404's call and lesson read and answers LESSON_NOT_FOUND with the real
// range.
func (s *Server) findLesson(r *http.Request, req *request, lid id.Lesson) (lessonFound, error) {
	sub := req.corpus.Subject(lid.Tier, lid.Slug)
	if sub != nil && lid.Class <= len(sub.Lessons) {
		// The ETag's target is the path's values, as the edge derives its
		// candidate (docs/edge.md); they name the lesson canonically.
		return lessonFound{tagged{derivedETag(req)}, req.corpus.lessons.Doc(sub.Lessons[lid.Class-1])}, nil
	}
	if _, err := s.billLessonRead(r, req, nil); err != nil {
		return lessonFound{}, err
	}
	return lessonFound{}, lessonNotFound(lid, sub)
}

// lessonNotFound is the 404 LESSON_NOT_FOUND of lid, whose subject is sub
// (nil when the tier has none of its slug), with the real range.
func lessonNotFound(lid id.Lesson, sub *corpus.Subject) *apierr.Error {
	if sub == nil {
		return &apierr.Error{Code: apierr.LessonNotFound, Parameter: "subjectSlug", Received: lid.Slug,
			Message: "No lesson " + lid.String() + ": the " + lid.Tier + " tier has no subject " + lid.Slug + " (slugs match exactly and are tier-specific)."}
	}
	n := len(sub.Lessons)
	return &apierr.Error{Code: apierr.LessonNotFound, Parameter: "classNum",
		Received: strconv.Itoa(lid.Class), ReceivedNumber: true, Min: apierr.Int(1), Max: apierr.Int(int64(n)),
		Message: "No lesson " + lid.String() + ": " + sub.Ref() + " has classes 1 to " + strconv.Itoa(n) + "."}
}
