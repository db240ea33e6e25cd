package admin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/origin/forensic"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/link"
	"github.com/lectern-api/lectern/shared/param"
	"github.com/lectern-api/lectern/shared/route"
)

// Forensics is what POST /admin/v1/forensics needs beside the ledger
// (Config.Meters): the deployment's forensic keys, its link keys, and
// the lesson of a transcript found without its manifest.
type Forensics struct {
	Keys forensic.Keys
	// Accepted are the forensic keys of the secret accepted beside the
	// deployment's while it is rotated (LECTERN_SECRET_ACCEPT): a leak
	// that names no organisation under Keys is read with them. Zero:
	// none.
	Accepted forensic.Keys
	Links    link.Keys
	// TranscriptLesson is forensic.Detector's (nil: a transcript alone
	// is not read).
	TranscriptLesson func(markdown []byte) (lessonID string, ok bool)
}

// MaxLeak bounds the body of POST /admin/v1/forensics: a leaked bundle
// whole, far above the export cap, far below what would strain the
// origin (the detector bounds what it decompresses).
const MaxLeak = 32 << 20

// maxLinkLen bounds a body read as a link: the public URL's prefix and a
// link's path and query (link.MaxQuery).
const maxLinkLen = 4096

// forensicsQuery is the route's query: orgs, the candidate organisations
// whose tag and canaries are tried, comma-separated; without it, every
// organisation in the store.
var forensicsQuery = &route.Route{Params: []route.Param{
	{Name: "orgs", In: route.Query, Kind: route.Text, MaxLen: 4096},
}}

// forensicAnswer is what the route names: the organisation, the scope
// set (space-separated, "" when no tag or ledger row says it) and the
// evidence, a forensic.Match per tag read and per organisation whose
// canaries passed, or one linkMatch.
type forensicAnswer struct {
	OrgID   string `json:"orgId"`
	Scopes  string `json:"scopes"`
	Matched []any  `json:"matched"`
}

// linkMatch is the evidence of a link: its ledger row, and whether the
// link has expired (an expired link is as authentic as a live one).
type linkMatch struct {
	By      string    `json:"by"` // "ledger"
	OrgID   string    `json:"orgId"`
	Expired bool      `json:"expired"`
	Row     ledgerRow `json:"row"`
}

// forensics is POST /admin/v1/forensics[?orgs=a,b]: the body is a leak as
// found (a lesson document, a bundle's file, a bundle whole, an inline
// export result) or a download link (its URL, or its path and query), at
// most MaxLeak bytes (413 over). A link is checked with the deployment's
// link keys and named from its ledger row; anything else is read by
// forensic.Detector with orgs as the candidates. A leak that names no
// organisation (a form Lectern does not write, no tag or canary of a
// candidate, a link whose signature is not the deployment's) is 404
// NOT_FOUND saying which.
func (a *api) forensics(w http.ResponseWriter, r *http.Request) error {
	q, e := param.Parse(forensicsQuery, r.URL.RawQuery)
	if e != nil {
		return e
	}
	var orgs []string
	for o := range strings.SplitSeq(q.Get("orgs"), ",") {
		if o = strings.TrimSpace(o); o != "" {
			orgs = append(orgs, o)
		}
	}
	leak, err := io.ReadAll(r.Body) // at most MaxLeak (handleBody)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return tooLarge(tooBig.Limit)
	case err != nil:
		return badRequest("body", "The request body could not be read.")
	case len(bytes.TrimSpace(leak)) == 0:
		return badRequest("body", "The request body is empty: post the leaked file, bundle or link.")
	}
	if path, rawQuery, ok := asLink(leak); ok {
		return a.forensicLink(w, r, path, rawQuery)
	}
	if !q.Given("orgs") {
		if orgs, err = a.cfg.Store.OrgIDs(r.Context()); err != nil {
			return err
		}
	}
	d := &forensic.Detector{Keys: a.cfg.Forensics.Keys, Orgs: orgs, TranscriptLesson: a.cfg.Forensics.TranscriptLesson}
	f, err := d.Detect(leak)
	if err == nil && f.OrgID == "" && a.cfg.Forensics.Accepted.Tag != nil {
		d.Keys = a.cfg.Forensics.Accepted
		f, err = d.Detect(leak)
	}
	if errors.Is(err, forensic.ErrUnrecognised) {
		return apierr.New(apierr.NotFound, "Not recognised: the body is not a lesson document, bundle file, bundle or download link Lectern writes.")
	}
	if err != nil { // an archive over the detector's bounds
		return apierr.New(apierr.PayloadTooLarge, "The archive holds more than the detector reads: "+err.Error()+".")
	}
	if f.OrgID == "" {
		return apierr.New(apierr.NotFound, fmt.Sprintf("No organisation matched: neither a tag nor the canaries name one of the %d candidate organisations (query orgs, else every organisation).", len(orgs)))
	}
	ans := forensicAnswer{OrgID: f.OrgID, Scopes: f.Scopes, Matched: make([]any, len(f.Matched))}
	for i, m := range f.Matched {
		ans.Matched[i] = m
	}
	return writeJSON(w, http.StatusOK, ans)
}

// asLink reports whether leak is a download link, one line of a URL or
// of a path and query with link.Prefix in its path, and returns its
// path from link.Prefix on (the public URL may have a base path) and its
// raw query.
func asLink(leak []byte) (path, rawQuery string, ok bool) {
	s := string(bytes.TrimSpace(leak))
	if len(s) > maxLinkLen || strings.ContainsAny(s, " \t\r\n{") || !strings.Contains(s, link.Prefix) {
		return "", "", false
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", "", false
	}
	p := u.EscapedPath()
	i := strings.Index(p, link.Prefix)
	if i < 0 {
		return "", "", false
	}
	return p[i:], u.RawQuery, true
}

// forensicLink names the organisation of a link from its ledger row,
// once its signature is the deployment's: an altered link, or one signed
// by a key the deployment does not hold, is not authentic and names no
// one (its row id could be anyone's).
func (a *api) forensicLink(w http.ResponseWriter, r *http.Request, path, rawQuery string) error {
	l, err := link.Parse(path, rawQuery)
	if err != nil {
		return apierr.New(apierr.NotFound, "Not recognised: the body has a download link's path but is not a link Lectern signs.")
	}
	expired := false
	switch err := a.cfg.Forensics.Links.Verify(l, a.clk.Now()); {
	case errors.Is(err, link.ErrExpired):
		expired = true
	case errors.Is(err, link.ErrUnknownKey):
		return apierr.New(apierr.NotFound, "Not authentic: the link's key id "+strconv.Quote(apierr.Clip(l.KeyID))+" is not one of this deployment's link keys.")
	case err != nil:
		return apierr.New(apierr.NotFound, "Not authentic: the link's signature does not match its fields (it was altered).")
	}
	row, found, err := a.cfg.Meters.LedgerRow(r.Context(), l.Row)
	if err != nil {
		return fmt.Errorf("read ledger row %d: %w", l.Row, err)
	}
	if !found {
		return apierr.New(apierr.NotFound, fmt.Sprintf("The link is authentic but its ledger row %d does not exist.", l.Row))
	}
	org, _, _ := strings.Cut(row.Org, "/") // meter.Key: the id, then the generation
	ans := forensicAnswer{OrgID: org, Scopes: strings.Join(row.Scopes, " "),
		Matched: []any{linkMatch{By: "ledger", OrgID: org, Expired: expired, Row: toLedgerRow(row)}}}
	return writeJSON(w, http.StatusOK, ans)
}
