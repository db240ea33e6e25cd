package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/param"
)

// POST /v1/media/urls (spec: Route rules §4, Media URL mint): signed links
// to media assets, all or nothing. The body is checked before the
// organisation gate (withBody: free 400s, BATCH_TOO_LARGE). Then, over the
// whole batch in request order, the pipeline after the gate in the request
// pipeline's order (docs/edge.md): every id parsed (400 BAD_LESSON_ID, bills the call), every id's
// subject entitled (403, free), every asset found (404 UNKNOWN_MEDIA,
// bills the call), and only then the units (billing.Biller.Mint: the
// hourly mints, the monthly downloads and one ledger row per URL, in one
// transaction). A mint is never a lesson read: the enumeration alarm does
// not see it.

// withBody is the endpoint of a route that takes a JSON body: parse
// checks it before the organisation gate (a refusal is a free 400), and
// serve answers with what it parsed. The body is read up to one byte past
// param.MaxBody, so that parse refuses an oversized one without reading
// it all. A body cut off by the server's read limit (httpsrv.Limits.Read)
// is bodyTimeout's 408.
func withBody[T any](parse func([]byte) (T, *apierr.Error),
	serve func(http.ResponseWriter, *http.Request, *request, T) error) endpoint {
	return endpoint{body: func(r *http.Request, _ *request) (handler, error) {
		b, err := io.ReadAll(io.LimitReader(r.Body, param.MaxBody+1))
		if err != nil {
			if timedOut(err) {
				return nil, bodyTimeout()
			}
			return nil, err
		}
		v, perr := parse(b)
		if perr != nil {
			return nil, perr
		}
		return func(w http.ResponseWriter, r *http.Request, req *request) error {
			return serve(w, r, req, v)
		}, nil
	}}
}

// timedOut reports whether err is a read that hit the connection's read
// deadline: net/http cancels the request's context on it, so it would
// otherwise read as the client gone (clientGone), and nothing be written.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bodyTimeout is the answer to a body that did not arrive within the
// server's read limit: 408 (RFC 9110 §15.5.9), with the closest code of
// the spec's, BAD_REQUEST naming body (docs/decisions.md), free, and the
// connection closed (writeError).
func bodyTimeout() error {
	return &statusError{status: http.StatusRequestTimeout, e: &apierr.Error{Code: apierr.BadRequest, Parameter: "body",
		Message: "The request body did not arrive in time (the server's read limit); nothing was done. Send the request again, its body at once."}}
}

// mintResult is the answer of a mint: the links in request order, the
// lifetime as applied, the content version and the licence envelope.
type mintResult struct {
	Items          []mintedURL       `json:"items"`
	ExpiresIn      int64             `json:"expiresIn"`
	ContentVersion string            `json:"contentVersion"`
	License        forensic.Envelope `json:"_license"`
}

// mintedURL is one minted link.
type mintedURL struct {
	MediaID   string `json:"mediaId"`
	URL       string `json:"url"`
	ExpiresAt string `json:"expiresAt"` // RFC 3339, UTC, to the second
}

// mintFormat is the ledger's format of a minted media URL.
const mintFormat = "url"

// mint serves POST /v1/media/urls with its checked body m.
func (s *Server) mint(w http.ResponseWriter, r *http.Request, req *request, m param.Mint) error {
	assets, err := s.mintTargets(r, req, m.MediaIDs)
	if err != nil {
		return err
	}
	if s.cfg.URLKeys.IsZero() { // a wiring fault: no link could be signed
		return errors.New("mint: no URL keys configured")
	}
	expiresIn := mintLifetime(m.ExpiresIn, req.org.LongURLs)
	// Links carry whole seconds; the expiry is the request's instant plus
	// the lifetime, on the stack's clock (cfg.Now), which files.go checks.
	expires := time.Unix(req.now.Unix()+expiresIn, 0).UTC()
	scopes := strings.Fields(req.claims.Scope.String())
	entries := make([]meter.Entry, len(assets))
	for i, a := range assets {
		entries[i] = meter.Entry{Kind: meter.KindMedia, Target: a.ID, Format: mintFormat,
			Client: req.claims.ClientID, Scopes: scopes, ContentVersion: req.corpus.ContentVersion,
			RequestID: req.id, Expires: expires, KeyID: s.cfg.URLKeys.SigningID()}
	}
	bill, err := s.biller.Mint(r.Context(), req.org, req.now, entries)
	if err != nil {
		return err
	}
	if len(bill.LedgerIDs) != len(assets) {
		return errors.New("mint: the meters returned no ledger id for some URL")
	}
	res := mintResult{Items: make([]mintedURL, len(assets)), ExpiresIn: expiresIn,
		ContentVersion: req.corpus.ContentVersion, License: s.envelope(req)}
	at := licence.Timestamp(expires)
	for i, a := range assets {
		u := s.publicLink(link.Link{Kind: link.Media, Expires: expires.Unix(), Row: bill.LedgerIDs[i],
			Name: mediaFileName(a), Media: a.ID, Org: req.org.ID, Gen: req.org.Generation})
		res.Items[i] = mintedURL{MediaID: a.ID, URL: u, ExpiresAt: at}
	}
	// The links are written as they are, '&' unescaped (json.Marshal
	// would write \u0026): a client that reads the body as text, or
	// greps it, sees the URL it will fetch.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(res); err != nil {
		return err
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	// Never cacheable and no ETag (spec: Route rules §4; Conditional
	// requests §4; Transport).
	w.Header().Set("Cache-Control", "no-store")
	writeContent(w, r, req, "", bill, body)
	return nil
}

// mintTargets resolves a batch's ids in request order, each step over the
// whole batch before the next: every id parsed (400 BAD_LESSON_ID, bills
// the call), every subject entitled (403 TIER_NOT_LICENSED or
// CONTENT_NOT_GRANTED, free), every asset found (404 UNKNOWN_MEDIA naming
// the id, bills the call). Duplicates stay: each is minted and metered.
func (s *Server) mintTargets(r *http.Request, req *request, ids []string) ([]*corpus.Media, error) {
	parsed := make([]id.Media, len(ids))
	for i, raw := range ids {
		mid, err := id.ParseMedia(raw)
		if err != nil {
			return nil, s.billCallAnd(r, req, err)
		}
		parsed[i] = mid
	}
	for _, mid := range parsed {
		if err := licence.Entitled(req.org.Grants, mid.Lesson.Tier, mid.Lesson.Slug); err != nil {
			return nil, err
		}
	}
	assets := make([]*corpus.Media, len(ids))
	for i, mid := range parsed {
		if assets[i] = req.corpus.Media(mid.String()); assets[i] == nil {
			return nil, s.billCallAnd(r, req, unknownMedia(ids[i]))
		}
	}
	return assets, nil
}

// unknownMedia is the 404 of an id that parses but names no asset: it
// fails the whole batch and names the id (spec: Errors).
func unknownMedia(raw string) *apierr.Error {
	return &apierr.Error{Code: apierr.UnknownMedia, Parameter: "mediaIds", Received: raw,
		Message: "No media asset has the id " + apierr.Clip(raw) + "; nothing was minted. Take media ids from the media route or an export's media manifest."}
}

// mintLifetime is the requested lifetime clamped to the caller's cap: 900
// s, or 3600 s with the long-URL override (spec: Route rules §4). The
// request's lower bound (60) was checked with the body.
func mintLifetime(requested int64, longURLs bool) int64 {
	limit := int64(param.MaxExpiresIn)
	if longURLs {
		limit = param.MaxLongExpiresIn
	}
	return min(requested, limit)
}

// mediaFileName is the file name a minted link of m downloads as (its
// path's last segment and its Content-Disposition): the lesson's id and
// the file's own name, "<tier>-<slug>-<classNum>-<file>", so that the
// assets of every lesson save under distinct names; link.CleanName makes
// it safe (no slash, quote or control character).
func mediaFileName(m *corpus.Media) string {
	base := path.Base(m.Location)
	if base == "." || base == "/" {
		base = m.CardID + "-" + m.Type
	}
	sub := m.Lesson.Subject
	return sub.Tier + "-" + sub.Slug + "-" + strconv.Itoa(m.Lesson.Number) + "-" + base
}
