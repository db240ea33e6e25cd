package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/export"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/scope"
)

// The export routes (spec: Route table 12–13, Route rules §5) and the
// download of their zip links. The target is resolved as the lesson
// routes resolve theirs — 400 AMBIGUOUS_SUBJECT or BAD_LESSON_ID (bills
// the call) → entitlement (403, free) → existence (404 UNKNOWN_SUBJECT or
// LESSON_NOT_FOUND, bills the call only: an export is never a lesson
// read, nor seen by the enumeration alarm): the routes' steps, with a
// derived ETag for format=inline only, so an inline export's 304 is
// decided before any work, by the handler or by the edge's gate call
// (validator.go, edge.go), for one call. Then format=zip_url bills the
// export and answers a signed link (no-store, no ETag, never 304), and
// format=inline builds the bundle into the body, measuring it against the
// ceiling (413 bills the call only), and only then bills the export.

// exportLinkTTL is how long an export's link stays valid (spec: Limits,
// Export URL lifetime).
const exportLinkTTL = 15 * time.Minute

// DefaultInlineCeiling is the largest inline export body (the gateway's
// response ceiling): 6 MiB.
const DefaultInlineCeiling = 6 << 20

// exportResult is the export result (spec: Export result): Data and its
// encoding for format=inline, URL and ExpiresAt for zip_url. The inline
// body is written by hand around the streamed data (writeInline); this
// type is the zip_url body.
type exportResult struct {
	Format         string            `json:"format"`
	URL            string            `json:"url"`
	ExpiresAt      string            `json:"expiresAt"`
	Classes        int               `json:"classes"`
	ContentVersion string            `json:"contentVersion"`
	License        forensic.Envelope `json:"_license"`
}

// exportTarget is an export route's target, resolved: the bundle's
// target, its reference ("tier/slug" or "tier/slug/N", the ledger's
// target) and the ETag an inline export is validated with.
type exportTarget struct {
	tagged
	target export.Target
	ref    string
}

// exportSubjectStep is the step of GET /v1/exports/subjects/{subjectSlug}
// (validator.go): the subject is resolved by the subject route's step.
func (s *Server) exportSubjectStep(r *http.Request, req *request) (exportTarget, error) {
	t, err := s.subjectStep(r, req)
	if err != nil {
		return exportTarget{}, err
	}
	return newExportTarget(req, export.Target{Subject: t.sub}, t.sub.Ref()), nil
}

// exportClassStep is the step of
// GET /v1/exports/classes/{tier}/{subjectSlug}/{classNum}.
func (s *Server) exportClassStep(r *http.Request, req *request) (exportTarget, error) {
	lid, err := s.lessonID(r, req)
	if err != nil {
		return exportTarget{}, err
	}
	sub := req.corpus.Subject(lid.Tier, lid.Slug)
	if sub == nil || lid.Class > len(sub.Lessons) {
		return exportTarget{}, s.billCallAnd(r, req, lessonNotFound(lid, sub))
	}
	return newExportTarget(req, export.Target{Subject: sub, Class: lid.Class}, lid.String()), nil
}

// newExportTarget is a resolved export of target. Only format=inline has
// a validator (route.Inline): a zip_url result has no ETag, so its tag is
// "", which nothing matches, If-None-Match: * included, and the edge's
// gate answers 412 (not a 304) to it.
func newExportTarget(req *request, target export.Target, ref string) exportTarget {
	var tag string
	if req.params.Get("format") == "inline" {
		tag = derivedETag(req)
	}
	return exportTarget{tagged{tag}, target, ref}
}

// export answers a resolved export in the requested format, after the
// 304 decision (derived).
func (s *Server) export(w http.ResponseWriter, r *http.Request, req *request, t exportTarget) error {
	if req.params.Get("format") == "inline" {
		return s.exportInline(w, r, req, t)
	}
	return s.exportLink(w, r, req, t)
}

// ledgerEntry is the export ledger's row of an export of t.
func ledgerEntry(req *request, t exportTarget, format string) meter.Entry {
	return meter.Entry{Kind: meter.KindExport, Target: t.ref, Format: format, Client: req.claims.ClientID,
		Scopes: strings.Fields(req.claims.Scope.String()), ContentVersion: req.corpus.ContentVersion, RequestID: req.id}
}

// exportLink answers format=zip_url: the export billed and its ledger row
// written (the link carries the row's id), then the signed link, valid
// exportLinkTTL. The answer is no-store and has no ETag, so no
// If-None-Match (* included) ever makes it a 304.
func (s *Server) exportLink(w http.ResponseWriter, r *http.Request, req *request, t exportTarget) error {
	expires := time.Unix(req.now.Add(exportLinkTTL).Unix(), 0).UTC() // links carry whole seconds
	entry := ledgerEntry(req, t, "zip_url")
	entry.Expires, entry.KeyID = expires, s.cfg.URLKeys.SigningID()
	bill, err := s.biller.Export(r.Context(), req.org, req.now, t.target.Classes(), entry)
	if err != nil {
		return err
	}
	sub := t.target.Subject
	name := sub.Tier + "-" + sub.Slug
	if t.target.Class > 0 {
		name += "-class-" + strconv.Itoa(t.target.Class)
	}
	url := s.publicLink(link.Link{Kind: link.Export, Expires: expires.Unix(), Row: bill.LedgerIDs[0], Name: name + ".zip",
		Export: link.Bundle{Org: req.org.ID, Scopes: req.claims.Scope.String(), ContentVersion: req.corpus.ContentVersion,
			Tier: sub.Tier, Slug: sub.Slug, Class: t.target.Class}})
	body, err := json.Marshal(exportResult{Format: "zip_url", URL: url, ExpiresAt: expires.Format(time.RFC3339),
		Classes: t.target.Classes(), ContentVersion: req.corpus.ContentVersion, License: s.envelope(req)})
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeContent(w, r, req, "", bill, body)
	return nil
}

// exportInline answers format=inline. The body is built before the
// export is billed: a body over the ceiling is 413 PAYLOAD_TOO_LARGE
// billing the call only, and that is known only once built. The data
// goes straight into the body (base64 needs no JSON escaping), written
// into a buffer bounded by the ceiling, and is sent as it is, without
// Content-Encoding: it is compressed already (spec: Transport).
func (s *Server) exportInline(w http.ResponseWriter, r *http.Request, req *request, t exportTarget) error {
	env, err := json.Marshal(s.envelope(req))
	if err != nil {
		return err
	}
	head := `{"format":"inline","encoding":"gzip+base64","archive":"tar","data":"`
	tail := `","classes":` + strconv.Itoa(t.target.Classes()) + `,"contentVersion":` + strconv.Quote(req.corpus.ContentVersion) +
		`,"_license":` + string(env) + `}`
	ceiling := s.cfg.InlineCeiling
	if ceiling <= 0 {
		ceiling = DefaultInlineCeiling
	}
	limit := ceiling - int64(len(head)+len(tail))
	if limit <= 0 {
		return s.billCallAnd(r, req, tooLarge(ceiling))
	}
	var buf bytes.Buffer
	buf.WriteString(head)
	_, err = s.exporter(req.corpus).WriteInline(&buf, s.bundle(req.org, req.claims.Scope, t.target), limit)
	if errors.Is(err, export.ErrTooLarge) {
		return s.billCallAnd(r, req, tooLarge(ceiling))
	}
	if err != nil {
		return err
	}
	buf.WriteString(tail)
	bill, err := s.biller.Export(r.Context(), req.org, req.now, t.target.Classes(), ledgerEntry(req, t, "inline"))
	if err != nil {
		return err
	}
	writeInline(w, req, t.tag, bill, buf.Bytes())
	return nil
}

// writeInline answers 200 with an inline export's body, uncompressed
// whatever Accept-Encoding says.
func writeInline(w http.ResponseWriter, req *request, tag string, bill billing.Bill, body []byte) {
	contentHeaders(w, req, tag, bill)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

func tooLarge(ceiling int64) *apierr.Error {
	return apierr.New(apierr.PayloadTooLarge, "The inline export would be larger than "+strconv.FormatInt(ceiling, 10)+
		" bytes, the response ceiling; export with format=zip_url (the default) instead.")
}

// bundle is the bundle request of an export of target for org under the
// scope set scopes: the stamp and envelope as the export result carries
// them.
func (s *Server) bundle(org *store.Org, scopes scope.Set, target export.Target) export.Request {
	return export.Request{Stamp: export.Stamp{OrgID: org.ID, OrgName: org.Name}, License: s.envelopeOf(org, scopes), Target: target}
}

// exporters holds the bundle builder of the Content being served: one
// per corpus, made on its first export (export.New precomputes nothing;
// the builder pools its scratch across bundles), replaced when a reload
// swaps the Content.
type exporters struct {
	mu sync.Mutex
	ct *Content
	b  *export.Builder
}

// exporter is ct's bundle builder, keyed with the canary key and naming
// the licence terms.
func (s *Server) exporter(ct *Content) *export.Builder {
	s.exports.mu.Lock()
	defer s.exports.mu.Unlock()
	if s.exports.ct != ct {
		s.exports.ct = ct
		s.exports.b = export.New(ct.Corpus, ct.lessons, export.Config{CanaryKey: s.cfg.CanaryKey, LicenseURL: s.cfg.LicenseURL})
	}
	return s.exports.b
}

// serveExportLink serves a valid export link (files.go): the zip, built
// as it is sent (export.WriteZip streams it one file at a time, so a GET
// has no Content-Length), with every download of the link until it
// expires; unmetered. A HEAD builds the zip too, into a counter, to send
// the Content-Length a GET's bytes add up to. The bundle is
// rebuilt from what the link carries and the organisation as it is now
// (its name and licence agreement), so a link of another contentVersion
// than the one served, of a target the corpus no longer holds, or of an
// organisation that no longer exists (linkOrg) is 404 NOT_FOUND.
func (s *Server) serveExportLink(w http.ResponseWriter, r *http.Request, id string, l link.Link, ct *Content) {
	x := l.Export
	sub := ct.Subject(x.Tier, x.Slug)
	target := export.Target{Subject: sub, Class: x.Class}
	if x.ContentVersion != ct.ContentVersion || sub == nil || target.Classes() == 0 {
		s.writeError(w, r, id, link.Refusal(nil))
		return
	}
	org, err := s.linkOrg(r.Context(), l)
	if err != nil {
		s.writeError(w, r, id, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("Content-Disposition", `attachment; filename="`+l.Name+`"`) // a link's name is a safe file name (link.CleanName)
	bundle := s.bundle(org, scope.Parse(x.Scopes), target)
	if r.Method == http.MethodHead {
		// The zip's exact size, which a GET of the link sends: the bundle
		// is deterministic, so it is built and counted, not held.
		n, err := s.exporter(ct).WriteZip(io.Discard, bundle)
		if err != nil {
			h.Del("Content-Type")
			h.Del("Content-Disposition")
			s.writeError(w, r, id, err)
			return
		}
		h.Set("Content-Length", strconv.FormatInt(n.Bytes, 10))
		w.WriteHeader(http.StatusOK)
		return
	}
	if _, err := s.exporter(ct).WriteZip(w, bundle); err != nil && !clientGone(r) {
		// The status is sent: the client sees a truncated zip.
		s.cfg.Logger.Error("export download failed", "requestId", id, "err", err)
	}
}

// linkOrg is the organisation an export link was made for, as it is now:
// 404 (link.Refusal) when it no longer exists, or when the one of its id
// is not the one whose ledger row the link carries (deleted and created
// again: another generation, another meter key).
func (s *Server) linkOrg(ctx context.Context, l link.Link) (*store.Org, error) {
	org, err := s.cfg.Store.GetOrg(ctx, l.Export.Org)
	if errors.Is(err, store.ErrNotFound) {
		return nil, link.Refusal(nil)
	}
	if err != nil {
		return nil, err
	}
	row, ok, err := s.cfg.Meters.LedgerRow(ctx, l.Row)
	if err != nil {
		return nil, err
	}
	if !ok || row.Org != meter.Key(org) {
		return nil, link.Refusal(nil)
	}
	return org, nil
}
