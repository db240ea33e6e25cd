package server

import (
	"net/http"
	"strconv"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/lessondoc"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/encoding"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/jsonenc"
)

// The lesson routes (spec: Route table 6–9): the lesson, its transcript,
// its quiz document and the page of its media. Their documents are
// pre-rendered once per Content (origin/lessondoc); a request only checks,
// bills and concatenates fragments, then closes the document with
// contentVersion and its licence envelope.

// lessonTail is the closing members of every lesson-route document:
// `,"contentVersion":…,"_license":{…}}`.
func (s *Server) lessonTail(dst []byte, req *request) []byte {
	return s.lessonLicense(req.corpus.lessons.AppendVersion(dst), req)
}

// lessonLicense appends `,"_license":{…}}`, the caller's part.
func (s *Server) lessonLicense(dst []byte, req *request) []byte {
	env := s.envelope(req)
	dst = append(dst, `,"_license":{"lic":`...)
	dst = jsonenc.String(dst, env.Lic)
	dst = append(dst, `,"tag":`...)
	dst = jsonenc.String(dst, env.Tag)
	return append(dst, "}}"...)
}

// The handlers. Each runs the pipeline after the gate in DESIGN.md's
// order: resolve the target (400 BAD_LESSON_ID, bills the call) →
// entitlement (403, free) → the media page's cursor (400, bills the call)
// → existence (404 LESSON_NOT_FOUND, bills a call and a lesson read) →
// ETag (s.revalidate: a 304 bills one call and no lesson read, so the
// enumeration alarm does not see it) → bill the read (429; the
// enumeration alarm) → render.

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

// serveLessonDoc runs the lesson, transcript and quiz routes, which
// differ only in how they render.
// With gz, the answer is the precompressed standard lesson
// (lessondoc.Doc.AppendGzipStandard).
func (s *Server) serveLessonDoc(w http.ResponseWriter, r *http.Request, req *request, gz bool, render func(dst []byte, d *lessondoc.Doc) []byte) error {
	lid, err := s.lessonTarget(r, req)
	if err != nil {
		return err
	}
	rd, ok, err := s.readLesson(w, r, req, lid)
	if !ok {
		return err
	}
	bp := lessondoc.GetBuf()
	var body []byte
	if gz {
		var tail [256]byte
		body = rd.doc.AppendGzipStandard((*bp)[:0], s.lessonLicense(tail[:0], req))
		writeGzipped(w, req, rd.tag, rd.bill, body)
	} else {
		body = render((*bp)[:0], rd.doc)
		writeContent(w, r, req, rd.tag, rd.bill, body)
	}
	lessondoc.PutBuf(bp, body)
	return nil
}

// lesson serves GET /v1/lessons/{tier}/{subjectSlug}/{classNum}.
func (s *Server) lesson(w http.ResponseWriter, r *http.Request, req *request) error {
	level, include := lessondoc.ParseLevel(req.params.Get("detail")), lessondoc.ParseIncludes(req.params.Include())
	gz := level == lessondoc.Standard && include == 0 && encoding.Negotiate(r.Header.Get("Accept-Encoding")) == encoding.Gzip
	return s.serveLessonDoc(w, r, req, gz, func(dst []byte, d *lessondoc.Doc) []byte {
		return s.lessonTail(d.AppendLesson(dst, level, include, nil), req)
	})
}

// lessonTranscript serves GET …/transcript.
func (s *Server) lessonTranscript(w http.ResponseWriter, r *http.Request, req *request) error {
	md := req.params.Includes("markdown")
	return s.serveLessonDoc(w, r, req, false, func(dst []byte, d *lessondoc.Doc) []byte {
		return s.lessonTail(d.AppendTranscript(dst, md, nil), req)
	})
}

// lessonQuiz serves GET …/quiz.
func (s *Server) lessonQuiz(w http.ResponseWriter, r *http.Request, req *request) error {
	return s.serveLessonDoc(w, r, req, false, func(dst []byte, d *lessondoc.Doc) []byte {
		return s.lessonTail(d.AppendQuiz(dst, nil), req)
	})
}

// writeGzipped answers 200 with a body already gzip-compressed: what
// writeContent and writeBody do for a gzip answer (respond.go), without
// the compression. Every precompressed body is far over 384 bytes.
func writeGzipped(w http.ResponseWriter, req *request, tag string, bill billing.Bill, gz []byte) {
	h := w.Header()
	h.Set("ETag", tag)
	h.Set("X-Service-Content-Version", req.corpus.ContentVersion)
	setAll(h, bill)
	edgeHeaders(w, req)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Encoding", encoding.Gzip.String())
	h.Set("Content-Length", strconv.Itoa(len(gz)))
	w.WriteHeader(http.StatusOK)
	w.Write(gz)
}

// lessonMedia serves GET …/media: a page of the lesson's assets in
// l.Media order, filtered by type before pagination; url is always null
// and nothing is minted.
func (s *Server) lessonMedia(w http.ResponseWriter, r *http.Request, req *request) error {
	lid, err := s.lessonTarget(r, req)
	if err != nil {
		return err
	}
	p, perr := s.openPage(req)
	if perr != nil {
		return s.billCallAnd(r, req, perr)
	}
	rd, ok, err := s.readLesson(w, r, req, lid)
	if !ok {
		return err
	}
	d := rd.doc
	typ := req.params.Get("type")
	total := d.CountAssets(typ)
	from, to := p.bounds(total)
	l := p.list(s, nil, to-from, total)
	bp := lessondoc.GetBuf()
	body := append((*bp)[:0], `{"items":[`...)
	body = d.AppendAssets(body, typ, from, to)
	body = append(body, `],"total":`...)
	body = strconv.AppendInt(body, int64(l.Total), 10)
	body = append(body, `,"pageNum":`...)
	body = strconv.AppendInt(body, int64(l.PageNum), 10)
	body = append(body, `,"totalPages":`...)
	body = strconv.AppendInt(body, int64(l.TotalPages), 10)
	body = append(body, `,"hasMore":`...)
	body = strconv.AppendBool(body, l.HasMore)
	body = append(body, `,"nextCursor":`...)
	if l.NextCursor != nil {
		body = jsonenc.String(body, *l.NextCursor)
	} else {
		body = append(body, "null"...)
	}
	body = req.corpus.lessons.AppendVersion(body)
	body = append(body, `,"_license":{"lic":`...)
	body = jsonenc.String(body, l.License.Lic)
	body = append(body, `,"tag":`...)
	body = jsonenc.String(body, l.License.Tag)
	body = append(body, "}}"...)
	writeContent(w, r, req, rd.tag, rd.bill, body)
	lessondoc.PutBuf(bp, body)
	return nil
}
