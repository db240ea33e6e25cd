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
	raw := req.params.Get("since")
	since, err := changes.ParseSince(s.cfg.ChangesKey, o.ID, raw)
	if errors.Is(err, changes.ErrSinceSeal) && s.cfg.ChangesAccepted != nil {
		since, err = changes.ParseSince(s.cfg.ChangesAccepted, o.ID, raw)
	}
	switch {
	case errors.Is(err, changes.ErrSinceSeal):
		// Sealed under a secret no longer held (a rotation), or for
		// another organisation: either way, start again.
		return &apierr.Error{Code: apierr.ChangesExpired, Parameter: "since",
			Message: "since is a token of this feed that this deployment can no longer read (its secret was rotated) " +
				"or another organisation's: run a full sync, then follow the feed from its next."}
	case err != nil:
		return &apierr.Error{Code: apierr.BadRequest, Parameter: "since", Received: raw,
			Message: "since must be a contentVersion or the next of an earlier answer of this feed."}
	}
	p, _, aerr := s.cursorOf(req) // free, as the route
	if aerr != nil {
		return aerr
	}
	ct := req.corpus
	if s.lagging(r.Context(), ct) {
		// This origin has not followed the deployment's corpus yet: what
		// it serves is behind, and a difference from since (which may be
		// the newer version, from an origin that did follow) would run
		// backwards. Nothing changed, as far as this answer can tell; the
		// caller keeps its since.
		return s.writeChanges(w, r, changesPage{list: p.list(s, []lessonChange{}, 0, 0), From: since.Version, To: since.Version,
			Subjects: []subjectChange{}, Next: raw})
	}
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
	return s.writeChanges(w, r, page)
}

// writeChanges answers page.
func (s *Server) writeChanges(w http.ResponseWriter, r *http.Request, page changesPage) error {
	body, err := json.Marshal(page)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Service-Content-Version", page.ContentVersion)
	writeBody(w, r, http.StatusOK, body)
	return nil
}

// recordTTL is how long the deployment's corpus record, read for the
// feed, is taken as current: origins follow it within seconds.
const recordTTL = time.Second

// lagging reports whether the deployment's corpus record names another
// version than ct, the one served here: this origin is about to follow
// it (or cannot load it). The record is read at most once a recordTTL;
// an unreadable or missing record is no lag.
func (s *Server) lagging(ctx context.Context, ct *Content) bool {
	now := time.Now()
	s.record.mu.Lock()
	defer s.record.mu.Unlock()
	if now.Sub(s.record.at) > recordTTL {
		s.record.version = ""
		if rec, err := s.cfg.Store.Corpus(ctx); err == nil {
			s.record.version = rec.ContentVersion
		}
		s.record.at = now
	}
	return s.record.version != "" && s.record.version != ct.ContentVersion
}

// recordCache is the deployment's corpus version as last read (lagging).
type recordCache struct {
	mu      sync.Mutex
	version string
	at      time.Time
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
