package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/bundles"
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
// a validator (route.Inline, route.Route.DerivedETag): a zip_url result
// has no ETag, so its tag is "", which nothing matches, If-None-Match: *
// included, and the edge's gate answers 412 (not a 304) to it.
func newExportTarget(req *request, target export.Target, ref string) exportTarget {
	var tag string
	if req.route.DerivedETag(req.params.Get("format")) {
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
	s.counters.note(meter.Key(req.org), req.now, bill.After)
	if err != nil {
		return err
	}
	if len(bill.LedgerIDs) != 1 {
		return errors.New("export: the meters returned no ledger id for the link")
	}
	sub := t.target.Subject
	name := sub.Tier + "-" + sub.Slug
	if t.target.Class > 0 {
		name += "-class-" + strconv.Itoa(t.target.Class)
	}
	url := s.publicLink(link.Link{Kind: link.Export, Expires: expires.Unix(), Row: bill.LedgerIDs[0], Name: name + ".zip",
		Org: req.org.ID, Gen: req.org.Generation, Export: link.Bundle{Scopes: req.claims.Scope.String(), ContentVersion: req.corpus.ContentVersion,
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

// inlineStoreLimit bounds an inline bundle the store keeps, in bytes:
// far above the ceiling (so that a bundle over it is stored too, and its
// 413 is a file's size), below what would fill a disk.
const inlineStoreLimit = 1 << 30

// exportInline answers format=inline, reserving before any bundle work
// (issue #36, point 3). A refusal the counters the origin last saw show
// certain comes first (exportRefused). A bundle the store lacks must be
// built: the build is one of the organisation's downloads (their bounds,
// downloads.go) and one of its builds of the hour (bundles.Store.Admit),
// each refused 429 RATE_LIMITED, free. Then the export's units are
// reserved (billing.Biller.ReserveExport: the call, the export and its
// downloads, in one transaction): a refusal there builds nothing, however
// many exports arrive at once. Only then is the bundle read or built (once,
// storedBundle), its size measured against the ceiling (413
// PAYLOAD_TOO_LARGE gives back all but the call, as the spec bills it), its
// ledger row written, and the bundle sent, read from its file: the data
// goes straight into the body (base64 needs no JSON escaping), without
// Content-Encoding: it is compressed already (spec: Transport).
func (s *Server) exportInline(w http.ResponseWriter, r *http.Request, req *request, t exportTarget) error {
	classes := t.target.Classes()
	pre, err := s.exportRefused(r, req, classes)
	if err != nil {
		return err
	}
	env, err := json.Marshal(s.envelope(req))
	if err != nil {
		return err
	}
	head := `{"format":"inline","encoding":"gzip+base64","archive":"tar","data":"`
	tail := `","classes":` + strconv.Itoa(classes) + `,"contentVersion":` + strconv.Quote(req.corpus.ContentVersion) +
		`,"_license":` + string(env) + `}`
	ceiling := s.cfg.InlineCeiling
	if ceiling <= 0 {
		ceiling = DefaultInlineCeiling
	}
	limit := ceiling - int64(len(head)+len(tail))
	res := &reservation{s: s, r: r, req: req, classes: classes, bill: pre}
	if limit <= 0 {
		if pre != nil {
			res.refund()
			return tooLarge(ceiling) // the reservation billed the call
		}
		return s.billCallAnd(r, req, tooLarge(ceiling))
	}
	f, err := s.inlineBundle(r, req, t, res)
	if err != nil {
		res.refund()
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		res.refund()
		return err
	}
	if st.Size() > limit {
		res.refund()
		return tooLarge(ceiling) // the reservation billed the call
	}
	// Shipped and a Refund of this request exclude each other across
	// origins: if one that failed it refunded first, Shipped bills the
	// export again, and its refusal is the answer (the bundle is not sent).
	if err := s.biller.Shipped(r.Context(), req.org, req.now, classes, ledgerEntry(req, t, "inline")); err != nil {
		res.refund()
		return err
	}
	contentHeaders(w, req, t.tag, *res.bill)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.FormatInt(int64(len(head))+st.Size()+int64(len(tail)), 10))
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, head)
	if _, err := io.Copy(w, f); err != nil {
		if !clientGone(r) {
			s.cfg.Logger.Error("inline export: the stored bundle could not be sent", "requestId", req.id, "err", err)
		}
		return nil // the status is sent: the client sees a short body
	}
	io.WriteString(w, tail)
	return nil
}

// inlineBundle opens the inline bundle of t, reserving the export first
// (res.reserve) when exportRefused has not: a stored bundle is read; one
// the store lacks is built, once a download and a build of the hour are
// taken (free refusals, before the reservation). A bundle the export
// limit refuses is ErrTooLarge's 413.
func (s *Server) inlineBundle(r *http.Request, req *request, t exportTarget, res *reservation) (*os.File, error) {
	bundle := s.bundle(req.org, req.claims.Scope, t.target)
	key := s.bundleKey(req.corpus, "inline", req.org, bundle)
	kept, err := s.bundleStore()
	if err != nil {
		return nil, err
	}
	owner := meter.Key(req.org)
	if f, ok := kept.Stored(key, owner); ok {
		if err := res.reserve(); err != nil {
			f.Close()
			return nil, err
		}
		return f, nil
	}
	release, err := s.downloadSlot(owner)
	if err != nil {
		return nil, err
	}
	defer release()
	done, err := kept.Admit(owner, key)
	if err != nil {
		return nil, buildsLimited(err)
	}
	defer done()
	if err := res.reserve(); err != nil {
		return nil, err
	}
	f, err := kept.Get(r.Context(), key, owner, func(w io.Writer) error {
		_, err := s.exporter(req.corpus).WriteInline(w, bundle, inlineStoreLimit)
		return err
	})
	if errors.Is(err, export.ErrTooLarge) {
		ceiling := s.cfg.InlineCeiling
		if ceiling <= 0 {
			ceiling = DefaultInlineCeiling
		}
		return nil, tooLarge(ceiling)
	}
	if err != nil {
		return nil, s.bundleFailed(req.id, err)
	}
	return f, nil
}

// reservation is an inline export's units, billed before its bundle work
// (billing.Biller.ReserveExport); bill is nil until they are.
type reservation struct {
	s       *Server
	r       *http.Request
	req     *request
	classes int
	bill    *billing.Bill
}

// reserve bills the export's units, unless they are billed already; a
// refusal (429, or 403 ORG_SUSPENDED) is the error.
func (v *reservation) reserve() error {
	if v.bill != nil {
		return nil
	}
	bill, err := v.s.biller.ReserveExport(v.r.Context(), v.req.org, v.req.now, v.classes)
	v.s.counters.note(meter.Key(v.req.org), v.req.now, bill.After)
	if err != nil {
		return err
	}
	v.bill = &bill
	return nil
}

// refund gives back the export and downloads reserved for an export that
// does not ship; the call stays billed. A reservation that was another
// origin's (the edge sent the request to both: Bill.Duplicate) is that
// origin's to refund or ship; a refund once any origin shipped the
// request gives back nothing (Biller.Refund). The refund is applied even
// when the client has gone; its failure is logged, since the answer is
// the export's.
func (v *reservation) refund() {
	if v.bill == nil || v.bill.Duplicate {
		return
	}
	ctx := context.WithoutCancel(v.r.Context())
	if err := v.s.biller.Refund(ctx, v.req.org, v.req.now, v.classes); err != nil {
		v.s.cfg.Logger.Error("inline export: its reserved export and downloads could not be given back", "requestId", v.req.id, "err", err)
	}
	v.bill = nil
}

// exportRefused answers, before any bundle work or reservation, an export
// the meters are sure to refuse: when the organisation's counters (the
// last the origin saw in these periods, else read from the meters,
// nothing billed) show a quota or hourly cap the export bills spent
// (billing.ExportSpent), it reserves the export (Biller.ReserveExport),
// which then refuses it and bills exactly what the spec says (the call,
// or nothing); when the enumeration alarm is in force it answers
// ORG_SUSPENDED, billing nothing, as the meters would. Counters grow
// within their period but by a refund (a reserved export that did not
// ship), so the meters may pass an export read here as spent: that
// reservation is the export's, and is returned. Nil when nothing was
// billed: the export is reserved later, once its bundle work is allowed.
func (s *Server) exportRefused(r *http.Request, req *request, classes int) (*billing.Bill, error) {
	key := meter.Key(req.org)
	c, known := s.counters.get(key, req.now)
	if !known || !billing.ExportSpent(req.org, c, classes) {
		u, err := s.cfg.Meters.Usage(r.Context(), key, req.now)
		if err != nil {
			return nil, err
		}
		s.counters.note(key, req.now, u.Counters)
		if u.Alarm != nil {
			return nil, billing.Suspended()
		}
		if !billing.ExportSpent(req.org, u.Counters, classes) {
			return nil, nil
		}
	}
	bill, err := s.biller.ReserveExport(r.Context(), req.org, req.now, classes)
	s.counters.note(key, req.now, bill.After)
	if err != nil {
		return nil, err
	}
	return &bill, nil
}

// counters are the last meter counts the origin saw of each organisation
// (by meter key), with the periods they count in: lower bounds of the
// counts now while the periods are the same, so that an export refusal
// they show certain is answered without reading the meters again.
type counters struct {
	mu sync.Mutex
	m  map[string]seenCounters
}

type seenCounters struct {
	c           meter.Counters
	month, hour string
}

// maxCounters bounds the organisations counters keeps: past it, it
// starts afresh.
const maxCounters = 10000

func (k *counters) get(key string, now time.Time) (meter.Counters, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	seen, ok := k.m[key]
	if !ok || seen.month != meter.MonthCalls.Period(now) || seen.hour != meter.HourCalls.Period(now) {
		return meter.Counters{}, false
	}
	return seen.c, true
}

// note keeps c, the counts of key in now's periods, where they are higher.
func (k *counters) note(key string, now time.Time, c meter.Counters) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= maxCounters {
		k.m = map[string]seenCounters{}
	}
	seen := seenCounters{c: c, month: meter.MonthCalls.Period(now), hour: meter.HourCalls.Period(now)}
	if old, ok := k.m[key]; ok && old.month == seen.month && old.hour == seen.hour {
		for i := range seen.c {
			seen.c[i] = max(seen.c[i], old.c[i])
		}
	}
	k.m[key] = seen
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

// serveExportLink serves a valid export link (files.go): the zip, from
// the bundle store (built on the first download of its bundle, by one
// goroutine however many ask, then a file read), with its size, a strong
// ETag and byte ranges as http.ServeContent answers them (206, 416,
// If-Range, HEAD without a body), to every download of the link until it
// expires; unmetered. The bundle is made from what the link carries and
// the organisation as it is now (its name and licence agreement), so a
// link of another contentVersion than the one served or of a target the
// corpus no longer holds is 404 NOT_FOUND, and one whose organisation may
// no longer read the subject is refused as downloads.go says.
func (s *Server) serveExportLink(w http.ResponseWriter, r *http.Request, id string, l link.Link, ct *Content) {
	x := l.Export
	sub := ct.Subject(x.Tier, x.Slug)
	target := export.Target{Subject: sub, Class: x.Class}
	if x.ContentVersion != ct.ContentVersion || sub == nil || target.Classes() == 0 {
		s.writeError(w, r, id, link.Refusal(nil))
		return
	}
	org, release, err := s.startDownload(r.Context(), l, x.Tier, x.Slug)
	if err != nil {
		s.writeError(w, r, id, err)
		return
	}
	defer release()
	bundle := s.bundle(org, scope.Parse(x.Scopes), target)
	f, err := s.storedBundle(r.Context(), ct, "zip", org, bundle, func(w io.Writer) error {
		_, err := s.exporter(ct).WriteZip(w, bundle)
		return err
	})
	if err != nil {
		if !clientGone(r) {
			s.writeError(w, r, id, s.bundleFailed(id, err))
		}
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	// The file's name is its key, a hash of all that makes its bytes: a
	// strong validator, which If-Range needs (RFC 9110 §13.1.5).
	h.Set("ETag", `"`+filepath.Base(f.Name())+`"`)
	attachment(h, l.Name)
	http.ServeContent(w, r, l.Name, time.Time{}, f)
}

// storedBundle opens the stored bundle of format ("zip" or "inline") made
// from b for org under ct, built with build when the store lacks it and
// admits the build (one of org's builds of the hour: else 429
// RATE_LIMITED, buildsLimited). Its key is
// everything that makes its bytes: the format, the corpus version and the
// subject's content digest (a corpus edited under one version moves it),
// the organisation (id, generation, name), the envelope (licence id and tag,
// which encode the agreement and the scope set), the target, and the
// deployment's canary key and licence terms.
func (s *Server) storedBundle(ctx context.Context, ct *Content, format string, org *store.Org, b export.Request,
	build func(io.Writer) error) (*os.File, error) {
	st, err := s.bundleStore()
	if err != nil {
		return nil, err
	}
	key, owner := s.bundleKey(ct, format, org, b), meter.Key(org)
	done, err := st.Admit(owner, key)
	if err != nil {
		return nil, buildsLimited(err)
	}
	defer done()
	return st.Get(ctx, key, owner, build)
}

// bundleKey is the store's key of the bundle of format made from b for
// org under ct (storedBundle).
func (s *Server) bundleKey(ct *Content, format string, org *store.Org, b export.Request) string {
	return bundles.Key("lectern-bundle-v1", format, ct.ContentVersion, b.Target.Subject.ContentDigest, org.ID, org.Generation, b.Stamp.OrgName,
		b.License.Lic, b.License.Tag, b.Target.Subject.Tier, b.Target.Subject.Slug, strconv.Itoa(b.Target.Class),
		string(s.cfg.CanaryKey), s.cfg.LicenseURL)
}

// bundleStore is the store of built bundles: Config.Bundles, or one in a
// new temporary directory made on first use.
func (s *Server) bundleStore() (*bundles.Store, error) {
	s.tmpBundles.once.Do(func() {
		if s.cfg.Bundles != nil {
			s.tmpBundles.st = s.cfg.Bundles
			return
		}
		dir, err := os.MkdirTemp("", "lectern-bundles-")
		if err == nil {
			s.tmpBundles.st, err = bundles.Open(dir, 0, bundles.Clock(s.cfg.Now))
		}
		s.tmpBundles.err = err
	})
	return s.tmpBundles.st, s.tmpBundles.err
}
