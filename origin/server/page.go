package server

import (
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/cursor"
	"github.com/lectern-api/lectern/shared/etag"
)

// page is one page of a list route (spec: Resources, List envelope).
type page struct {
	offset, limit int
	req           *request
	key           []byte
}

// binding is what the request's cursors are bound to: the route, the
// query without cursor and limit, and the organisation with its grants, so
// that a walk never continues over a different set; on a learner's route
// (progress), the learner too.
func binding(req *request) cursor.Binding {
	q := req.vars.String() + "?" + req.params.Binding() + "#" + etag.GrantsDigest(req.org.Grants)
	if req.route.Learner {
		q += "@" + req.claims.Learner
	}
	return cursor.Binding{Route: int(req.route.ID), Query: q, Org: req.org.ID}
}

// openPage reads the request's cursor and limit. An altered or foreign
// cursor is 400 BAD_REQUEST naming cursor; one minted under an older
// contentVersion is 400 CURSOR_EXPIRED (spec: States and transitions).
func (s *Server) openPage(req *request) (page, *apierr.Error) {
	p := page{limit: req.params.Limit(), req: req, key: s.cfg.CursorKey}
	if c := req.params.Get("cursor"); c != "" {
		off, err := cursor.Open(s.cfg.CursorKey, c, req.corpus.ContentVersion, binding(req))
		if err != nil {
			return p, err
		}
		p.offset = off
	}
	return p, nil
}

// bounds are the slice bounds of the page within a set of total rows.
func (p page) bounds(total int) (from, to int) {
	from = min(p.offset, total)
	return from, min(from+p.limit, total)
}

// list wraps the page's rows, n of them out of total, in the envelope.
func (p page) list(s *Server, items any, n, total int) list {
	l := list{Items: items, Total: total, PageNum: p.offset/p.limit + 1,
		TotalPages:     max(1, (total+p.limit-1)/p.limit),
		ContentVersion: p.req.corpus.ContentVersion, License: s.envelope(p.req)}
	if next := p.offset + n; next < total {
		l.HasMore = true
		c := cursor.Seal(p.key, p.req.corpus.ContentVersion, next, binding(p.req))
		l.NextCursor = &c
	}
	return l
}
