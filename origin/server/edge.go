package server

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/etag"
	"github.com/lectern-api/lectern/shared/param"
)

// The origin's side of the edge protocol (docs/edge.md): requests the edge
// forwards are signed, and their answers tell the edge the organisation
// and grants digest its ETag candidates need; the gate endpoint decides
// whether a conditional request is a 304 without rendering anything.

// fromEdge reports whether r carries a valid forward signature, not seen
// before. The signature covers the body's hash: a body is read first (at
// most param.MaxBody+1 bytes, all the edge forwards) and r.Body replaced
// by what was read; a longer one cannot be the edge's, and is left to be
// read on as it came.
func (s *Server) fromEdge(r *http.Request, id string) (billing.Once, bool) {
	v := r.Header.Get(edgesig.Header)
	if v == "" {
		return billing.Once{}, false
	}
	body := ""
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		b, err := io.ReadAll(io.LimitReader(r.Body, param.MaxBody+2))
		if err != nil || len(b) > param.MaxBody+1 {
			r.Body = readAgain{io.MultiReader(bytes.NewReader(b), errReader{err}, r.Body), r.Body}
			return billing.Once{}, false
		}
		r.Body = readAgain{bytes.NewReader(b), r.Body}
		body = edgesig.BodyHash(b)
	}
	return s.acceptEdge(r, edgesig.Forward, body, id)
}

// acceptEdge checks r's signature for purpose (body: the body's hash),
// and logs a refusal: a replay, or a call signed for another host, is
// worth an operator's look. It returns the key the call's bills are
// applied under (billing.Once).
func (s *Server) acceptEdge(r *http.Request, purpose, body, id string) (billing.Once, bool) {
	v := r.Header.Get(edgesig.Header)
	if v == "" {
		return billing.Once{}, false
	}
	m := httpsig.Message(purpose, r, body)
	err := edgesig.ErrInvalid // the id the origin keeps must be the one signed (one line, well formed)
	if m.RequestID == id {
		err = s.edge.Accept(v, &m, s.cfg.Now().UnixMilli())
	}
	if err != nil {
		s.cfg.Logger.Warn("edge: signature refused", "requestId", id, "purpose", purpose, "host", r.Host, "err", err)
		telemetry.FromContext(r.Context()).SignatureRefused(purpose, edgesig.Reason(err))
		return billing.Once{}, false
	}
	sig, _ := edgesig.Parse(v) // Accept parsed it
	return billing.OnceOf(&m, sig.Time, r.Header.Get("If-None-Match")), true
}

// readAgain is a body read into memory, or partly, closed as the
// original.
type readAgain struct {
	io.Reader
	orig io.Closer
}

func (b readAgain) Close() error { return b.orig.Close() }

// errReader returns err, or nothing (io.EOF) when err is nil.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// edgeHeaders adds, for the edge only, what its ETag candidates need.
func edgeHeaders(w http.ResponseWriter, req *request) {
	if req.edge && req.org != nil {
		w.Header().Set(edgesig.OrgHeader, req.org.ID)
		w.Header().Set(edgesig.GrantsHeader, etag.GrantsDigest(req.org.Grants))
	}
}

// serveGate answers POST /internal/gate: the conditional GET named by
// X-Lectern-Target runs through the pipeline up to its 304 decision (the
// token re-verified, entitlements re-read, then the route's step: see
// validator.go): 204 with the 304's headers when it is a 304 (one call
// billed), 412 when it is not or its route has no derived validator
// (nothing billed), or the error the request would get.
func (s *Server) serveGate(w http.ResponseWriter, r *http.Request, id string) {
	target := r.Header.Get(edgesig.TargetHeader)
	_, once, ok := s.signedInternal(r, id, edgesig.Gate)
	if !ok {
		s.writeError(w, r, id, apierr.New(apierr.NotFound, "No route matches this path. Every route begins with /v1; see /v1/openapi.json."))
		return
	}
	telemetry.FromContext(r.Context()).SetEdge("gate")
	s.applyUsage(r, id)
	u, err := url.ParseRequestURI(target)
	if err != nil || !strings.HasPrefix(u.Path, "/v1/") {
		s.writeError(w, r, id, apierr.New(apierr.BadRequest, edgesig.TargetHeader+" is not a /v1 request target."))
		return
	}
	// A shallow copy with the signed header fields alone
	// (edgesig.Signed(edgesig.Gate): Authorization, If-None-Match, ...,
	// which the edge copied from the client's request): nothing the
	// signature does not cover reaches the 304 decision.
	g := new(http.Request)
	*g = *r
	g.Method, g.URL, g.RequestURI, g.Body = http.MethodGet, u, target, http.NoBody
	g.Header = signedFields(r.Header, edgesig.Gate)
	g = g.WithContext(billing.WithOnce(r.Context(), once))
	req := &request{id: id, now: s.cfg.Now(), edge: true}
	if err := s.gate(w, g, req); err != nil {
		s.writeError(w, g, id, err)
	}
}

// signedFields is h's fields that the rule signs for purpose.
func signedFields(h http.Header, purpose string) http.Header {
	out := make(http.Header, len(edgesig.Signed(purpose)))
	for _, name := range edgesig.Signed(purpose) {
		if vs := h.Values(name); len(vs) > 0 {
			out[http.CanonicalHeaderKey(name)] = vs
		}
	}
	return out
}

// gate runs the gate call's request r up to its 304 decision and answers
// the edge: 204 (one call billed) or 412 (nothing billed). A refusal on
// the way is the error.
func (s *Server) gate(w http.ResponseWriter, r *http.Request, req *request) error {
	e, err := s.runFront(r, req)
	if err != nil {
		return err
	}
	if e.validate == nil { // the route has no validator decided before work
		w.WriteHeader(http.StatusPreconditionFailed)
		return nil
	}
	if err := s.admit(r, req); err != nil {
		return err
	}
	tag, err := e.validate(r, req)
	if err != nil {
		return err
	}
	if !notModified(r, tag) {
		w.WriteHeader(http.StatusPreconditionFailed)
		return nil
	}
	return s.answerNotModified(w, r, req, tag, http.StatusNoContent)
}
