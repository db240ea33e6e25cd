package server

import (
	"net/http"
	"strings"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/openapi"
)

// openapiConf is the part of the description (origin/openapi) that comes
// from the server's configuration.
func (s *Server) openapiConf() openapi.Conf {
	c := openapi.Conf{LicenseURL: s.cfg.LicenseURL}
	if len(s.cfg.AuthorizationServers) > 0 {
		c.Issuer = strings.TrimSuffix(s.cfg.AuthorizationServers[0], "/")
	}
	return c
}

// openAPI serves GET /v1/openapi.json: unauthenticated and unmetered (the
// route has no scope, so the pipeline skips authentication and the gate
// and req.org is nil), identical for every caller, the only response a
// shared cache may keep. Its ETag is hashed from its own bytes (spec:
// Conditional requests §1).
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request, req *request) error {
	d, err := req.corpus.openapi.Render(s.openapiConf())
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("Vary", "Accept-Encoding") // the same for every Authorization
	if notModified(r, d.Tag) {
		writeNotModified(w, req, d.Tag, billing.Bill{}, http.StatusNotModified)
		return nil
	}
	writeContent(w, r, req, d.Tag, billing.Bill{}, d.Body)
	return nil
}
