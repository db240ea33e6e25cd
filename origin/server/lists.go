package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/licence"
)

// The subject list (route 3) and a subject's class list (route 5). Rows do
// not depend on the caller, so Build renders them once per corpus and a
// page only picks the caller's rows and wraps them in the list envelope.

// listRows are the precomputed rows of routes 3 and 5.
type listRows struct {
	// subjects[i] is corpus.Subjects[i] as a list row: full with tags,
	// prerequisites and related subjects, and brief (also standard)
	// with those fields null.
	subjects []subjectRows
	// classes[i] is the class entry of corpus.Lessons[i].
	classes []json.RawMessage
}

type subjectRows struct {
	full, brief json.RawMessage
}

// classEntry is a row of GET /v1/subjects/{slug}/classes (spec: Class
// entry): a ready-made lessonId and the availability flags; the lesson
// itself is never inlined.
type classEntry struct {
	LessonID         string `json:"lessonId"`
	ClassNum         int    `json:"classNum"`
	Title            string `json:"title"`
	Subtitle         string `json:"subtitle"`
	HasVideo         bool   `json:"hasVideo"`
	HasNarration     bool   `json:"hasNarration"`
	HasTranscript    bool   `json:"hasTranscript"`
	MediaCount       int    `json:"mediaCount"`
	EstimatedMinutes int    `json:"estimatedMinutes"`
}

func buildListRows(c *corpus.Corpus) listRows {
	rows := listRows{subjects: make([]subjectRows, len(c.Subjects)), classes: make([]json.RawMessage, len(c.Lessons))}
	for i, sub := range c.Subjects {
		row := newSubjectRow(sub)
		rows.subjects[i].full = mustMarshal(row)
		row.Tags, row.Prerequisites, row.Related = nil, nil, nil
		rows.subjects[i].brief = mustMarshal(row)
	}
	for i, l := range c.Lessons {
		rows.classes[i] = mustMarshal(classEntry{
			LessonID: l.ID, ClassNum: l.Number, Title: l.Title, Subtitle: l.Subtitle,
			HasVideo: l.HasVideo, HasNarration: l.HasNarration, HasTranscript: l.HasTranscript,
			MediaCount: len(l.Media), EstimatedMinutes: l.StudyMinutes,
		})
	}
	return rows
}

// mustMarshal marshals rows made of strings, numbers and booleans, which
// cannot fail.
func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("server: marshal a precomputed row: " + err.Error())
	}
	return b
}

// pageTarget is the page a list route with nothing else to resolve asks
// for.
type pageTarget struct {
	tagged
	page page
}

// subjectsStep opens the page: a bad cursor bills the call (openPage).
func (s *Server) subjectsStep(r *http.Request, req *request) (pageTarget, error) {
	p, err := s.openPage(r, req)
	if err != nil {
		return pageTarget{}, err
	}
	return pageTarget{tagged{derivedETag(req)}, p}, nil
}

// subjects serves GET /v1/subjects: a page of the caller's granted
// subjects in listing order (tier, then name), the tier filter applied
// before pagination, so total counts the granted, filtered set (spec:
// route 3, Common parameters). One call per page, 304s included.
func (s *Server) subjects(w http.ResponseWriter, r *http.Request, req *request, t pageTarget) error {
	bill, err := s.call(r, req)
	if err != nil {
		return err
	}
	p := t.page
	tier := req.params.Get("tier")
	granted := make([]int, 0, len(req.corpus.Subjects))
	for i, sub := range req.corpus.Subjects {
		if (tier == "" || sub.Tier == tier) && licence.Entitled(req.org.Grants, sub.Tier, sub.Slug) == nil {
			granted = append(granted, i)
		}
	}
	full := req.params.Get("detail") == "full"
	from, to := p.bounds(len(granted))
	items := make([]json.RawMessage, 0, to-from)
	for _, i := range granted[from:to] {
		if full {
			items = append(items, req.corpus.rows.subjects[i].full)
		} else {
			items = append(items, req.corpus.rows.subjects[i].brief)
		}
	}
	return s.writeList(w, r, req, t.tag, bill, p.list(s, items, len(items), len(granted)))
}

// classesTarget is the subject of GET /v1/subjects/{slug}/classes,
// resolved, and the page asked for.
type classesTarget struct {
	tagged
	sub  *corpus.Subject
	page page
}

// classesStep runs the refusals in the request pipeline's order (docs/edge.md): an ambiguous slug
// or a bad cursor (each billing the call), then the entitlement (free),
// then an unknown subject (billing the call).
func (s *Server) classesStep(r *http.Request, req *request) (classesTarget, error) {
	sub, tier, rerr := resolveSubject(req)
	if rerr != nil {
		return classesTarget{}, s.billCallAnd(r, req, rerr)
	}
	p, err := s.openPage(r, req)
	if err != nil {
		return classesTarget{}, err
	}
	slug := req.vars.Get("subjectSlug")
	if tier != "" {
		if err := licence.Entitled(req.org.Grants, tier, slug); err != nil {
			return classesTarget{}, err
		}
	}
	if sub == nil {
		return classesTarget{}, s.billCallAnd(r, req, unknownSubject(slug))
	}
	return classesTarget{tagged{derivedETag(req)}, sub, p}, nil
}

// classes serves GET /v1/subjects/{slug}/classes: the subject's class
// entries in class order. A page is one call, not a lesson read.
func (s *Server) classes(w http.ResponseWriter, r *http.Request, req *request, t classesTarget) error {
	bill, err := s.call(r, req)
	if err != nil {
		return err
	}
	from, to := t.page.bounds(len(t.sub.Lessons))
	items := make([]json.RawMessage, 0, to-from)
	for _, l := range t.sub.Lessons[from:to] {
		items = append(items, req.corpus.rows.classes[l.Ordinal])
	}
	return s.writeList(w, r, req, t.tag, bill, t.page.list(s, items, len(items), len(t.sub.Lessons)))
}

// writeList answers 200 with a page in the list envelope. The body is
// encoded into a pooled buffer, not a new one per page: a list route's
// answer is most of what its request allocates, and what requests
// allocate is what sets how often the collector marks the corpus.
func (s *Server) writeList(w http.ResponseWriter, r *http.Request, req *request, tag string, bill billing.Bill, l list) error {
	buf := listBufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer putListBuf(buf)
	if err := json.NewEncoder(buf).Encode(l); err != nil {
		return err
	}
	// Encode ends the value with a newline that json.Marshal does not write.
	writeContent(w, r, req, tag, bill, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return nil
}

// listBufs recycles list bodies; one that grew past 1 MiB is dropped.
var listBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putListBuf(buf *bytes.Buffer) {
	if buf.Cap() <= 1<<20 {
		listBufs.Put(buf)
	}
}
