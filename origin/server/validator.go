package server

import (
	"net/http"

	"github.com/lectern-api/lectern/shared/etag"
)

// Routes with a derived validator (route.Derived, and the exports'
// route.Inline, whose steps give format=inline a tag and zip_url none):
// each has a step that resolves its target, checks the entitlement and
// derives the ETag, and stops there. Its handler runs the step, decides the 304 before any work
// (spec: Conditional requests §5), then does the work; the edge's gate
// call runs the step and the 304 decision only (edge.go). One step serves
// both, so the gate's answer is the one the request would get.

// derivedETag is the request's validator: version, route, the path's
// values, canonical parameters, organisation and grants, never the bytes
// (spec: Conditional requests §1). It uses only what the request says, not
// what the origin resolves from it, so the edge derives the same candidate
// (docs/edge.md).
func derivedETag(req *request) string {
	return etag.Derive(etag.Input{
		Version: req.corpus.ContentVersion,
		Route:   int(req.route.ID),
		Target:  req.vars.String(),
		Params:  req.params.Canonical(),
		Org:     req.org.ID,
		Grants:  etag.GrantsDigest(req.org.Grants),
	})
}

// resolved is what a route's step resolves, with the ETag the 304 is
// decided on; "" when no representation is current, so that nothing
// matches, not even If-None-Match: *.
type resolved interface{ etag() string }

// tagged is a resolved target that is only its ETag; the routes' own
// targets embed it.
type tagged struct{ tag string }

func (t tagged) etag() string { return t.tag }

// requestTag is the step of a route with nothing to resolve beyond the
// organisation: the tiers and the test-prep catalog.
func requestTag(_ *http.Request, req *request) (tagged, error) {
	return tagged{derivedETag(req)}, nil
}

// derived is the endpoint of a route with a derived validator: step up to
// the 304 decision, then serve with what it resolved. A 304 bills one call
// and nothing else (spec: Limits, meters).
func derived[T resolved](s *Server, step func(*http.Request, *request) (T, error),
	serve func(http.ResponseWriter, *http.Request, *request, T) error) endpoint {
	return endpoint{
		validate: func(r *http.Request, req *request) (string, error) {
			t, err := step(r, req)
			if err != nil {
				return "", err
			}
			return t.etag(), nil
		},
		serve: func(w http.ResponseWriter, r *http.Request, req *request) error {
			t, err := step(r, req)
			if err != nil {
				return err
			}
			if tag := t.etag(); notModified(r, tag) {
				return s.answerNotModified(w, r, req, tag, http.StatusNotModified)
			}
			return serve(w, r, req, t)
		},
	}
}

// answerNotModified bills the one call a 304 costs and answers it with
// status: 304, or 204 to the edge's gate call, which answers the 304
// itself. A refusal of the call (429) is the error.
func (s *Server) answerNotModified(w http.ResponseWriter, r *http.Request, req *request, tag string, status int) error {
	bill, err := s.call(r, req)
	if err != nil {
		return err
	}
	writeNotModified(w, req, tag, bill, status)
	return nil
}
