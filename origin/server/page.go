package server

import (
	"net/http"

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
	q := req.vars.String() + "?" + req.params.Binding()
	if req.route.Learner {
		q += "@" + req.claims.Learner
	}
	return cursor.Binding{Route: int(req.route.ID), Query: q, Org: req.org.ID, Grants: etag.GrantsDigest(req.org.Grants)}
}

// cursorOf reads the request's cursor and limit. An altered or foreign
// cursor is 400 BAD_REQUEST naming cursor; one minted under an older
// contentVersion (spec: States and transitions), or before the
// organisation's grants changed, is 400 CURSOR_EXPIRED; why says which
// (cursor.Open).
func (s *Server) cursorOf(req *request) (page, cursor.Refusal, *apierr.Error) {
	p := page{limit: req.params.Limit(), req: req, key: s.cfg.CursorKey}
	if c := req.params.Get("cursor"); c != "" {
		off, why, err := cursor.Open(s.cfg.CursorKey, c, req.corpus.ContentVersion, binding(req))
		if why == cursor.Invalid && s.cfg.CursorAccepted != nil {
			// Sealed under the secret accepted beside the deployment's?
			if o, w, e := cursor.Open(s.cfg.CursorAccepted, c, req.corpus.ContentVersion, binding(req)); w != cursor.Invalid {
				off, why, err = o, w, e
			}
		}
		if err != nil {
			return p, why, err
		}
		p.offset = off
	}
	return p, 0, nil
}

// openPage is cursorOf with its refusal billed: the call, but nothing when
// the organisation's grants changed under the cursor (a change of
// entitlement, which bills nothing as the entitlement's 403s do; the
// client did nothing wrong, docs/decisions.md).
func (s *Server) openPage(r *http.Request, req *request) (page, error) {
	p, why, err := s.cursorOf(req)
	switch {
	case err == nil:
		return p, nil
	case why == cursor.OtherGrants:
		return p, err
	default:
		return p, s.billCallAnd(r, req, err)
	}
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
