package server

import (
	"encoding/json"
	"net/http"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/scope"
)

// envelope is the caller's licence envelope (spec: What the service does
// §4).
func (s *Server) envelope(req *request) forensic.Envelope {
	return s.envelopeOf(req.org, req.claims.Scope)
}

// envelopeOf is the licence envelope of org under the scope set scopes.
func (s *Server) envelopeOf(org *store.Org, scopes scope.Set) forensic.Envelope {
	return forensic.Envelope{
		Lic: forensic.Licence(org.ID, org.EclaVersion),
		Tag: forensic.Tag(s.cfg.TagKey, org.ID, scopes),
	}
}

// list is the list envelope (spec: Resources, List envelope) with the
// content version and licence envelope.
type list struct {
	Items          any               `json:"items"`
	Total          int               `json:"total"`
	PageNum        int               `json:"pageNum"`
	TotalPages     int               `json:"totalPages"`
	HasMore        bool              `json:"hasMore"`
	NextCursor     *string           `json:"nextCursor"`
	ContentVersion string            `json:"contentVersion"`
	License        forensic.Envelope `json:"_license"`
}

// tierRow is a row of GET /v1/tiers.
type tierRow struct {
	Tier  string `json:"tier"`
	Label string `json:"label"`
	Count int    `json:"count"`
}

// tiers serves GET /v1/tiers: the tiers the organisation holds a grant in,
// in canonical order, each with its count of granted subjects; a tier
// that is absent is not licensed.
func (s *Server) tiers(w http.ResponseWriter, r *http.Request, req *request, t tagged) error {
	bill, err := s.call(r, req)
	if err != nil {
		return err
	}
	rows := []tierRow{}
	for _, t := range req.corpus.Tiers {
		if !licence.TierGranted(req.org.Grants, t.Name) {
			continue
		}
		n := 0
		for _, sub := range t.Subjects {
			if licence.Entitled(req.org.Grants, sub.Tier, sub.Slug) == nil {
				n++
			}
		}
		rows = append(rows, tierRow{Tier: t.Name, Label: t.Label, Count: n})
	}
	return s.writeWhole(w, r, req, t.tag, bill, rows, len(rows))
}

// writeWhole answers a list that is whole on one page (the tiers, the
// test-prep catalog): its n rows in the list envelope.
func (s *Server) writeWhole(w http.ResponseWriter, r *http.Request, req *request, tag string, bill billing.Bill, rows any, n int) error {
	body, err := json.Marshal(list{Items: rows, Total: n, PageNum: 1, TotalPages: 1,
		ContentVersion: req.corpus.ContentVersion, License: s.envelope(req)})
	if err != nil {
		return err
	}
	writeContent(w, r, req, tag, bill, body)
	return nil
}

// subjectRow is a subject as the subject list (route 3) and the single
// subject (route 4) render it: one definition, so that a row and a detail
// never disagree. Tags, Prerequisites and Related are nil (JSON null) in a
// list row below detail=full: the fields always exist, the level only
// decides whether they are filled (docs/decisions.md).
type subjectRow struct {
	Slug          string   `json:"slug"`
	Tier          string   `json:"tier"`
	Name          string   `json:"name"`
	Description   string   `json:"description"`
	ClassCount    int      `json:"classCount"`
	MediaCoverage coverage `json:"mediaCoverage"`
	Difficulty    string   `json:"difficulty"`
	Tags          []string `json:"tags"`
	Prerequisites []string `json:"prerequisites"`
	Related       []string `json:"related"`
	ClassesURL    string   `json:"classesUrl"`
	// ContentDigest is the same at every detail level: a sync client
	// compares it after contentVersion moves to tell which subjects to
	// export again (docs/decisions.md).
	ContentDigest string `json:"contentDigest"`
}

// newSubjectRow renders sub in full; the class list is never inlined,
// only linked (spec: Resources, Subject).
func newSubjectRow(sub *corpus.Subject) subjectRow {
	return subjectRow{
		Slug: sub.Slug, Tier: sub.Tier, Name: sub.Name, Description: sub.Description,
		ClassCount: sub.ClassCount(),
		MediaCoverage: coverage{Video: sub.Coverage.Video, Narration: sub.Coverage.Narration,
			Transcript: sub.Coverage.Transcript, Media: sub.Coverage.Media},
		Difficulty: sub.Difficulty, Tags: nonNil(sub.Tags),
		Prerequisites: refs(sub.Prerequisites), Related: refs(sub.Related),
		ClassesURL: classesURL(sub), ContentDigest: sub.ContentDigest,
	}
}

// classesURL links a subject's class list; the tier is always named, so
// the link never answers AMBIGUOUS_SUBJECT.
func classesURL(sub *corpus.Subject) string {
	return "/v1/subjects/" + sub.Slug + "/classes?tier=" + sub.Tier
}

// subjectDetail is a subject as GET /v1/subjects/{slug} answers it.
type subjectDetail struct {
	subjectRow
	ContentVersion string            `json:"contentVersion"`
	License        forensic.Envelope `json:"_license"`
}

// coverage counts the subject's classes with each kind of media.
type coverage struct {
	Video      int `json:"video"`
	Narration  int `json:"narration"`
	Transcript int `json:"transcript"`
	Media      int `json:"media"`
}

func refs(rs []corpus.SubjectRef) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// resolveSubject finds the subject of the route's slug and tier query
// (spec: Common parameters, tier): a slug in several tiers needs tier, or
// answers 400 AMBIGUOUS_SUBJECT naming them. It returns a nil subject and
// no error for a slug that does not exist, so the caller can check the
// entitlement of an explicit tier before answering UNKNOWN_SUBJECT.
func resolveSubject(req *request) (sub *corpus.Subject, tier string, err *apierr.Error) {
	slug := req.vars.Get("subjectSlug")
	tier = req.params.Get("tier")
	if tier != "" {
		return req.corpus.Subject(tier, slug), tier, nil
	}
	tiers := req.corpus.SlugTiers(slug)
	switch len(tiers) {
	case 0:
		return nil, "", nil
	case 1:
		return req.corpus.Subject(tiers[0], slug), tiers[0], nil
	}
	return nil, "", &apierr.Error{Code: apierr.AmbiguousSubject, Parameter: "tier", Tiers: tiers,
		Message: "The subject slug " + slug + " exists in several tiers; retry with tier set to one of them."}
}

func unknownSubject(slug string) *apierr.Error {
	slug = apierr.Clip(slug) // an unvalidated path segment: echoed cut (decisions: Hardening)
	return &apierr.Error{Code: apierr.UnknownSubject, Received: slug,
		Message: "No subject has the slug " + slug + " (slugs match exactly and are tier-specific)."}
}

// subjectTarget is the subject of GET /v1/subjects/{slug}, resolved.
type subjectTarget struct {
	tagged
	sub *corpus.Subject
}

// subjectStep resolves the subject (400 AMBIGUOUS_SUBJECT, billed), checks
// the entitlement of its tier (403, free) and its existence (404
// UNKNOWN_SUBJECT, billed).
func (s *Server) subjectStep(r *http.Request, req *request) (subjectTarget, error) {
	sub, tier, rerr := resolveSubject(req)
	if rerr != nil {
		return subjectTarget{}, s.billCallAnd(r, req, rerr)
	}
	if tier != "" {
		if err := licence.Entitled(req.org.Grants, tier, req.vars.Get("subjectSlug")); err != nil {
			return subjectTarget{}, err
		}
	}
	if sub == nil {
		return subjectTarget{}, s.billCallAnd(r, req, unknownSubject(req.vars.Get("subjectSlug")))
	}
	return subjectTarget{tagged{derivedETag(req)}, sub}, nil
}

// subject serves GET /v1/subjects/{slug}. detail is validated but does not
// change the answer: every level is byte-identical with one ETag.
func (s *Server) subject(w http.ResponseWriter, r *http.Request, req *request, t subjectTarget) error {
	bill, err := s.call(r, req)
	if err != nil {
		return err
	}
	body, err := json.Marshal(subjectDetail{subjectRow: newSubjectRow(t.sub),
		ContentVersion: req.corpus.ContentVersion, License: s.envelope(req)})
	if err != nil {
		return err
	}
	writeContent(w, r, req, t.tag, bill, body)
	return nil
}

// billCallAnd bills the call that a refusal after the gate costs (spec:
// Effects of refusals: a bad id bills the call only) and answers with e,
// or with the 429 when the call itself is refused.
func (s *Server) billCallAnd(r *http.Request, req *request, e *apierr.Error) error {
	if _, err := s.call(r, req); err != nil {
		return err
	}
	return e
}

// call bills one call; a refusal (a 429, or the 403 of an enumeration
// alarm in force) is the error.
func (s *Server) call(r *http.Request, req *request) (billing.Bill, error) {
	return s.biller.Call(r.Context(), req.org, req.now)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
