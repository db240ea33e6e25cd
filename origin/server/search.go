package server

import (
	"net/http"
	"sync"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/search"
	"github.com/lectern-api/lectern/shared/apierr"
)

// GET /v1/search (route 11): the filters and the page are read here; the
// engine, its index and its hit rows are origin/search.

// searchScope returns the subjects the tier and subject filters select,
// before grants. A subject slug that names no subject (in the tier, when
// one is given) is 404 UNKNOWN_SUBJECT; an existing one the caller is not
// granted is filtered out like any other.
func searchScope(req *request) ([]*corpus.Subject, *apierr.Error) {
	tier, slug := req.params.Get("tier"), req.params.Get("subject")
	c := req.corpus
	switch {
	case slug != "" && tier != "":
		if sub := c.Subject(tier, slug); sub != nil {
			return []*corpus.Subject{sub}, nil
		}
		return nil, unknownSubject(slug)
	case slug != "":
		tiers := c.SlugTiers(slug)
		if len(tiers) == 0 {
			return nil, unknownSubject(slug)
		}
		subs := make([]*corpus.Subject, len(tiers))
		for i, t := range tiers {
			subs[i] = c.Subject(t, slug)
		}
		return subs, nil
	case tier != "":
		if t := c.Tier(tier); t != nil {
			return t.Subjects, nil
		}
		return nil, nil
	}
	return c.Subjects, nil
}

// searchTarget is the page and the subjects a search runs over.
type searchTarget struct {
	tagged
	page page
	subs []*corpus.Subject
}

// searchStep reads the page and the filters: a bad cursor or an unknown
// subject filter bills the call only. The validator is derived from the
// request alone, so a 304 is decided, and billed one call, before any
// search runs (spec: Conditional requests §5).
func (s *Server) searchStep(r *http.Request, req *request) (searchTarget, error) {
	p, err := s.openPage(r, req)
	if err != nil {
		return searchTarget{}, err
	}
	subs, serr := searchScope(req)
	if serr != nil {
		return searchTarget{}, s.billCallAnd(r, req, serr)
	}
	return searchTarget{tagged{derivedETag(req)}, p, subs}, nil
}

// search serves GET /v1/search.
func (s *Server) search(w http.ResponseWriter, r *http.Request, req *request, t searchTarget) error {
	bill, err := s.call(r, req)
	if err != nil {
		return err
	}
	p := t.page
	ix := req.corpus.search
	q := req.params.Get("q")
	total, hits := ix.Search(q, ix.Allowed(t.subs, req.org.Grants), p.offset, p.offset+p.limit)
	fq := search.Fold(q)
	rp := searchRows.Get().(*[]search.Row)
	defer func() { clear(*rp); searchRows.Put(rp) }()
	if *rp == nil {
		*rp = make([]search.Row, 0, p.limit) // never nil: no hits is "items":[]
	}
	items := (*rp)[:0]
	for _, h := range hits {
		items = append(items, ix.Render(h, fq))
	}
	*rp = items
	return s.writeList(w, r, req, t.tag, bill, p.list(s, items, len(items), total))
}

// searchRows recycles a page's rows (limit caps their number), which
// live only until the page is encoded.
var searchRows = sync.Pool{New: func() any { return new([]search.Row) }}
