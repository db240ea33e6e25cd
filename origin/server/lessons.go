package server

import (
	"net/http"
	"strconv"

	"github.com/lectern-api/lectern/origin/lessondoc"
	"github.com/lectern-api/lectern/shared/encoding"
	"github.com/lectern-api/lectern/shared/jsonenc"
)

// The handlers of the lesson routes (spec: Route table 6–9): the lesson,
// its transcript, its quiz document and the page of its media. Their
// documents are pre-rendered once per Content (origin/lessondoc); a request
// runs the step of lessonread.go, then concatenates fragments and closes
// the document with contentVersion and its licence envelope.

// lessonTail is the closing members of every lesson-route document:
// `,"contentVersion":…,"_license":{…}}`.
func (s *Server) lessonTail(dst []byte, req *request) []byte {
	return req.corpus.lessons.AppendTail(dst, s.envelope(req))
}

// lessonLicense appends `,"_license":{…}}`, the caller's part.
func (s *Server) lessonLicense(dst []byte, req *request) []byte {
	return s.envelope(req).AppendMember(dst)
}

// serveLessonDoc answers the lesson, transcript and quiz routes, which
// differ only in how they render, once f is found: it bills the lesson
// read, then renders. With gz, the answer is the precompressed standard
// lesson (lessondoc.Doc.AppendGzipStandard).
func (s *Server) serveLessonDoc(w http.ResponseWriter, r *http.Request, req *request, f lessonFound, gz bool, render func(dst []byte, d *lessondoc.Doc) []byte) error {
	bill, err := s.billLessonRead(r, req, f.doc.Lesson())
	if err != nil {
		return err
	}
	bp := lessondoc.GetBuf()
	var body []byte
	if gz {
		var tail [256]byte
		body = f.doc.AppendGzipStandard((*bp)[:0], s.lessonLicense(tail[:0], req))
		writeGzipped(w, req, f.tag, bill, body)
	} else {
		body = render((*bp)[:0], f.doc)
		writeContent(w, r, req, f.tag, bill, body)
	}
	lessondoc.PutBuf(bp, body)
	return nil
}

// lesson serves GET /v1/lessons/{tier}/{subjectSlug}/{classNum}.
func (s *Server) lesson(w http.ResponseWriter, r *http.Request, req *request, f lessonFound) error {
	level, include := lessondoc.ParseLevel(req.params.Get("detail")), lessondoc.ParseIncludes(req.params.Include())
	gz := level == lessondoc.Standard && include == 0 && encoding.Negotiate(r.Header.Get("Accept-Encoding")) == encoding.Gzip
	return s.serveLessonDoc(w, r, req, f, gz, func(dst []byte, d *lessondoc.Doc) []byte {
		return s.lessonTail(d.AppendLesson(dst, level, include, nil), req)
	})
}

// lessonTranscript serves GET …/transcript.
func (s *Server) lessonTranscript(w http.ResponseWriter, r *http.Request, req *request, f lessonFound) error {
	md := req.params.Includes("markdown")
	return s.serveLessonDoc(w, r, req, f, false, func(dst []byte, d *lessondoc.Doc) []byte {
		return s.lessonTail(d.AppendTranscript(dst, md, nil), req)
	})
}

// lessonQuiz serves GET …/quiz.
func (s *Server) lessonQuiz(w http.ResponseWriter, r *http.Request, req *request, f lessonFound) error {
	return s.serveLessonDoc(w, r, req, f, false, func(dst []byte, d *lessondoc.Doc) []byte {
		return s.lessonTail(d.AppendQuiz(dst, nil), req)
	})
}

// lessonMedia serves GET …/media: a page of the lesson's assets in
// l.Media order, filtered by type before pagination; url is always null
// and nothing is minted.
func (s *Server) lessonMedia(w http.ResponseWriter, r *http.Request, req *request, m mediaTarget) error {
	bill, err := s.billLessonRead(r, req, m.doc.Lesson())
	if err != nil {
		return err
	}
	d, p := m.doc, m.page
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
	body = req.corpus.lessons.AppendTail(body, l.License)
	writeContent(w, r, req, m.tag, bill, body)
	lessondoc.PutBuf(bp, body)
	return nil
}
