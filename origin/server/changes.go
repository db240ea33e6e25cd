package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/changes"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
)

// changesPage is a page of GET /v1/changes: the list envelope, whose
// items are the lessons that changed, with the versions compared, the
// subjects that changed (on the first page; empty on the others) and the
// since of the next call.
type changesPage struct {
	list
	From     string          `json:"from"`
	To       string          `json:"to"`
	Subjects []subjectChange `json:"subjects"`
	Next     string          `json:"next"`
}

type subjectChange struct {
	Subject       string  `json:"subject"`
	Change        string  `json:"change"`
	ContentDigest *string `json:"contentDigest"` // null when removed
	ClassCount    int     `json:"classCount"`
	SubjectFields bool    `json:"subjectFieldsChanged"`
}

type lessonChange struct {
	LessonID      string  `json:"lessonId"`
	Subject       string  `json:"subject"`
	Change        string  `json:"change"`
	ContentDigest *string `json:"contentDigest"` // the subject's; null when it was removed
}

// changes answers GET /v1/changes, an extension (issue #37;
// docs/integrating.md, Change feed): the granted lessons added, changed
// or removed between since and the version served, a page at a time,
// with the subjects added, changed or removed. It bills nothing, as the
// licence status: a sync polls it, and a poll that finds nothing must
// cost nothing. A since the feed no longer holds is 410 CHANGES_EXPIRED.
func (s *Server) changes(w http.ResponseWriter, r *http.Request, req *request) error {
	o := req.org
	since, err := changes.ParseSince(s.cfg.ChangesKey, o.ID, req.params.Get("since"))
	if err != nil && s.cfg.ChangesAccepted != nil {
		since, err = changes.ParseSince(s.cfg.ChangesAccepted, o.ID, req.params.Get("since"))
	}
	if err != nil {
		return &apierr.Error{Code: apierr.BadRequest, Parameter: "since", Received: req.params.Get("since"),
			Message: "since must be a contentVersion or the next of an earlier answer of this feed to this organisation."}
	}
	p, _, aerr := s.cursorOf(req) // free, as the route
	if aerr != nil {
		return aerr
	}
	ct := req.corpus
	from, err := s.partsOf(r.Context(), ct, since.Version)
	if err != nil {
		return err
	}
	was := o.Grants
	if since.Known {
		was = since.Grants
	}
	subjects, lessons := changes.Diff(from, ct.Parts, was, o.Grants)
	lo, hi := p.bounds(len(lessons))
	items := make([]lessonChange, 0, hi-lo)
	for _, l := range lessons[lo:hi] {
		items = append(items, lessonChange{LessonID: l.LessonID, Subject: l.Subject, Change: string(l.Change), ContentDigest: nullable(l.ContentDigest)})
	}
	page := changesPage{list: p.list(s, items, len(items), len(lessons)), From: since.Version, To: ct.ContentVersion,
		Subjects: []subjectChange{}, Next: changes.Seal(s.cfg.ChangesKey, o.ID, ct.ContentVersion, o.Grants)}
	if lo == 0 {
		for _, sc := range subjects {
			page.Subjects = append(page.Subjects, subjectChange{Subject: sc.Subject, Change: string(sc.Change),
				ContentDigest: nullable(sc.ContentDigest), ClassCount: sc.Classes, SubjectFields: sc.OwnChanged})
		}
	}
	body, err := json.Marshal(page)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Service-Content-Version", ct.ContentVersion)
	writeBody(w, r, http.StatusOK, body)
	return nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// partsOf is the parts of version: the served corpus's, or the database's
// record of an earlier one (decoded, kept a while: partsCache). A version
// the database does not hold (never served, or past the feed's history)
// is 410 CHANGES_EXPIRED.
func (s *Server) partsOf(ctx context.Context, ct *Content, version string) (*changes.Version, error) {
	if version == ct.ContentVersion {
		return ct.Parts, nil
	}
	now := time.Now()
	if v := s.parts.get(version, now); v != nil {
		return v, nil
	}
	b, err := s.cfg.Store.CorpusVersionParts(ctx, version)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &apierr.Error{Code: apierr.ChangesExpired, Parameter: "since", Received: version,
			Message: "The change feed does not hold contentVersion " + version + " (it keeps the last 20 versions served, " +
				"and every version served in the last 90 days): run a full sync, then follow the feed from its next."}
	}
	if err != nil {
		return nil, err
	}
	v, err := changes.Decode(b)
	if err != nil {
		return nil, err
	}
	s.parts.put(version, v, now)
	return v, nil
}

// partsCache keeps a few decoded versions' parts for partsTTL: a sync
// fleet asks from the same few versions, and the database's record is
// re-read after the TTL, so that a version past the history is refused
// within a minute on every origin alike.
type partsCache struct {
	mu sync.Mutex
	m  map[string]cachedParts
}

type cachedParts struct {
	v  *changes.Version
	at time.Time
}

const (
	partsTTL     = time.Minute
	partsEntries = 8
)

func (c *partsCache) get(version string, now time.Time) *changes.Version {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[version]
	if !ok || now.Sub(e.at) > partsTTL {
		return nil
	}
	return e.v
}

func (c *partsCache) put(version string, v *changes.Version, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]cachedParts{}
	}
	if len(c.m) >= partsEntries {
		oldest := ""
		for k, e := range c.m {
			if oldest == "" || e.at.Before(c.m[oldest].at) {
				oldest = k
			}
		}
		delete(c.m, oldest)
	}
	c.m[version] = cachedParts{v, now}
}
