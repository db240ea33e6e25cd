package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/cursor"
	"github.com/lectern-api/lectern/shared/etag"
)

// Test prep (spec: Resources, Test prep; routes 14 and 15; Route rules
// §6). The catalog and every item's JSON are rendered once per Content;
// a request only slices and wraps them.

// prepIndex is the precomputed test-prep part of a Content.
type prepIndex struct {
	catalog []prepTest
	tests   map[string]*prepItems
}

// prepItems are one test's rendered items: all of them in catalog order
// (section by section), and each section's range within them.
type prepItems struct {
	all      []json.RawMessage
	sections map[string][2]int // section id -> [from, to) in all
}

// prepTest is a row of the catalog (GET /v1/testprep).
type prepTest struct {
	ID        string        `json:"id"`
	Name      string        `json:"name"`
	ItemCount int           `json:"itemCount"`
	ItemsURL  string        `json:"itemsUrl"`
	Sections  []prepSection `json:"sections"`
}

// prepSection is a section of a catalog row, in the spec's order.
type prepSection struct {
	ID        string `json:"id"`
	Label     string `json:"label"`
	ItemCount int    `json:"itemCount"`
	ItemsURL  string `json:"itemsUrl"`
}

// prepItem is one practice item as GET /v1/testprep/{test}/items answers
// it. passage is present on reading items only, optionRationales only on
// items that carry them (one per option).
type prepItem struct {
	ID               string   `json:"id"`
	Section          string   `json:"section"`
	Domain           string   `json:"domain"`
	Difficulty       string   `json:"difficulty"`
	Passage          string   `json:"passage,omitempty"`
	Prompt           string   `json:"prompt"`
	Options          []string `json:"options"`
	AnswerIndex      int      `json:"answerIndex"`
	Rationale        string   `json:"rationale"`
	OptionRationales []string `json:"optionRationales,omitempty"`
}

// buildPrep renders the catalog and the items of c.
func buildPrep(c *corpus.Corpus) prepIndex {
	x := prepIndex{catalog: []prepTest{}, tests: map[string]*prepItems{}}
	for _, t := range c.Tests {
		row := prepTest{ID: t.ID, Name: t.Name, ItemsURL: "/v1/testprep/" + t.ID + "/items", Sections: []prepSection{}}
		its := &prepItems{sections: map[string][2]int{}}
		for _, sec := range t.Sections {
			from := len(its.all)
			for _, it := range sec.Items {
				// Marshalling strings, ints and string slices cannot fail.
				b, _ := json.Marshal(prepItem{
					ID: it.ID, Section: sec.ID, Domain: it.Domain, Difficulty: it.Difficulty,
					Passage: it.Passage, Prompt: it.Prompt, Options: nonNil(it.Options),
					AnswerIndex: it.AnswerIndex, Rationale: it.Rationale, OptionRationales: it.OptionRationales,
				})
				its.all = append(its.all, b)
			}
			its.sections[sec.ID] = [2]int{from, len(its.all)}
			row.Sections = append(row.Sections, prepSection{ID: sec.ID, Label: sec.Label, ItemCount: len(sec.Items),
				ItemsURL: row.ItemsURL + "?section=" + sec.ID})
			row.ItemCount += len(sec.Items)
		}
		x.catalog = append(x.catalog, row)
		x.tests[t.ID] = its
	}
	return x
}

// testprep serves GET /v1/testprep: the catalog in one list envelope, one
// call, with a derived ETag decided before any work.
func (s *Server) testprep(w http.ResponseWriter, r *http.Request, req *request, t tagged) error {
	bill, err := s.call(r, req)
	if err != nil {
		return err
	}
	rows := req.corpus.prep.catalog
	return s.writeWhole(w, r, req, t.tag, bill, rows, len(rows))
}

// itemsPage is a page of GET /v1/testprep/{test}/items, sized: the
// rows of the test (or section), the page, the want items it would hold
// from the row from, the size it holds within the allowance, and its ETag.
type itemsPage struct {
	rows             []json.RawMessage
	page             page
	from, want, size int
	tag              string
}

// etag is the validator the 304 is decided on: when nothing is left, no
// page is current, not even for If-None-Match: *, and TestprepPage answers
// QUOTA_EXCEEDED.
func (pp itemsPage) etag() string {
	if pp.size == 0 && pp.want > 0 {
		return ""
	}
	return pp.tag
}

// testprepItemsStep resolves the test and section (404, billing a call)
// and the page, and sizes it before anything is billed: it holds what the
// cursor and limit select, shortened to what is left of the monthly item
// allowance. Its ETag is derived with that effective size, so a full and
// a shortened page of one query never share a validator (spec: Route
// rules §6).
func (s *Server) testprepItemsStep(r *http.Request, req *request) (itemsPage, error) {
	ct := req.corpus
	testID := req.vars.Get("test")
	t := ct.Test(testID)
	if t == nil {
		return itemsPage{}, s.billCallAnd(r, req, unknownTest(ct.Corpus, testID))
	}
	its := ct.prep.tests[t.ID]
	rows := its.all
	if sec := req.params.Get("section"); sec != "" {
		rng, ok := its.sections[sec]
		if !ok {
			return itemsPage{}, s.billCallAnd(r, req, unknownSection(t, sec))
		}
		rows = rows[rng[0]:rng[1]]
	}
	// A bad cursor is a free 400 here; only a stale contentVersion bills
	// the call (openPage bills both but the grants' change).
	p, why, perr := s.cursorOf(req)
	if perr != nil {
		if why == cursor.OtherVersion {
			return itemsPage{}, s.billCallAnd(r, req, perr)
		}
		return itemsPage{}, perr
	}
	from, to := p.bounds(len(rows))
	want := to - from

	// The remaining allowance, read before anything is billed, sizes the
	// page the ETag describes.
	size := want
	if lim := req.org.Quota.TestprepItems; lim != nil && want > 0 {
		u, err := s.cfg.Meters.Usage(r.Context(), meter.Key(req.org), req.now)
		if err != nil {
			return itemsPage{}, err
		}
		size = int(min(int64(want), max(0, *lim-u.Get(meter.MonthTestprepItems))))
	}
	return itemsPage{rows: rows, page: p, from: from, want: want, size: size, tag: prepETag(req, want, size)}, nil
}

// testprepItems serves GET /v1/testprep/{test}/items (spec: Route rules
// §6). A 304 bills one call, no items and no lesson read. A page that
// ships bills one call, one lesson read (not seen by the enumeration
// alarm) and its items, before they are written; when a concurrent
// request spent part of the allowance meanwhile, the page is shortened
// further and its ETag re-derived.
func (s *Server) testprepItems(w http.ResponseWriter, r *http.Request, req *request, pp itemsPage) error {
	bill, err := s.biller.TestprepPage(r.Context(), req.org, req.now, pp.want)
	if err != nil {
		return err
	}
	n := 0
	if pp.want > 0 {
		n = int(bill.Granted)
	}
	tag := pp.tag
	if n != pp.size {
		tag = prepETag(req, pp.want, n)
	}
	body, err := json.Marshal(pp.page.list(s, pp.rows[pp.from:pp.from+n], n, len(pp.rows)))
	if err != nil {
		return err
	}
	writeContent(w, r, req, tag, bill, body)
	return nil
}

// prepETag is the derived validator of an items page that would hold
// want items and holds size: the route's own validator when the page is
// whole, which the edge can derive too, and one that also names the size
// when the allowance shortened it (spec: Route rules §6, "the ETag
// accounts for the shortened size").
func prepETag(req *request, want, size int) string {
	if size == want {
		return derivedETag(req)
	}
	return etag.Derive(etag.Input{
		Version: req.corpus.ContentVersion,
		Route:   int(req.route.ID),
		Target:  req.vars.String() + "#" + strconv.Itoa(size),
		Params:  req.params.Canonical(),
		Org:     req.org.ID,
		Grants:  etag.GrantsDigest(req.org.Grants),
	})
}

func unknownTest(c *corpus.Corpus, test string) *apierr.Error {
	ids := make([]string, len(c.Tests))
	for i, t := range c.Tests {
		ids[i] = t.ID
	}
	test = apierr.Clip(test) // decisions: received echoes at most 200 bytes
	return &apierr.Error{Code: apierr.UnknownTest, Parameter: "test", Received: test, Allowed: ids,
		Message: "No test has the id " + strconv.Quote(test) + "; see GET /v1/testprep for the tests."}
}

// unknownSection lists the test's own sections in allowed (spec: Common
// parameters, section: "whose body lists that test's sections").
func unknownSection(t *corpus.Test, section string) *apierr.Error {
	return &apierr.Error{Code: apierr.UnknownSection, Parameter: "section", Received: section, Allowed: t.SectionIDs(),
		Message: "The test " + t.ID + " has no section " + strconv.Quote(section) + "."}
}
