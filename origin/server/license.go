package server

import (
	"encoding/json"
	"net/http"

	"github.com/lectern-api/lectern/origin/lease"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/scope"
)

// licenseStatus is GET /v1/license (spec: Resources, Licence status).
type licenseStatus struct {
	OrgID               string                 `json:"orgId"`
	OrgName             string                 `json:"orgName"`
	Tier                string                 `json:"tier"`
	Status              string                 `json:"status"`
	ContentGrants       []string               `json:"contentGrants"`
	Quota               map[string]quotaValue  `json:"quota"`
	RateLimits          licence.RateLimitsJSON `json:"rateLimits"`
	ResetsAt            string                 `json:"resetsAt"`
	EclaVersion         int                    `json:"eclaVersion"`
	RequiredEclaVersion int                    `json:"requiredEclaVersion"`
	RenewsAt            string                 `json:"renewsAt"`
	ContentVersion      string                 `json:"contentVersion"`
	LicenseURL          string                 `json:"licenseUrl"`
}

type quotaValue struct {
	Used  int64  `json:"used"`
	Limit *int64 `json:"limit"`
}

// license answers the licence status. It is unmetered, has no ETag, is
// never cached, and answers whatever the plan's state (spec: Route rules
// §8); the pipeline lets it past the gate for that reason.
func (s *Server) license(w http.ResponseWriter, r *http.Request, req *request) error {
	o := req.org
	s.settle(r.Context(), o, lease.SettleTimeout)
	u, err := s.cfg.Meters.Usage(r.Context(), meter.Key(o), req.now)
	if err != nil {
		return err
	}
	grants := o.Grants
	if grants == nil {
		grants = []string{}
	}
	body, err := json.Marshal(licenseStatus{
		OrgID: o.ID, OrgName: o.Name, Tier: o.Tier, Status: licence.Status(o, u), ContentGrants: grants,
		Quota: map[string]quotaValue{
			"calls":         {u.Get(meter.MonthCalls), o.Quota.Calls},
			"downloads":     {u.Get(meter.MonthDownloads), o.Quota.Downloads},
			"exports":       {u.Get(meter.MonthExports), o.Quota.Exports},
			"testprepitems": {u.Get(meter.MonthTestprepItems), o.Quota.TestprepItems},
		},
		RateLimits: licence.RateLimitsJSON{
			CallsPerHour: o.RateLimits.CallsPerHour, LessonReadsPerHour: o.RateLimits.LessonReadsPerHour,
			URLMintsPerHour: o.RateLimits.URLMintsPerHour,
		},
		ResetsAt:            licence.Timestamp(meter.NextMonth(req.now)),
		EclaVersion:         o.EclaVersion,
		RequiredEclaVersion: o.RequiredEclaVersion,
		RenewsAt:            licence.Timestamp(o.RenewsAt),
		ContentVersion:      req.corpus.ContentVersion,
		LicenseURL:          s.cfg.LicenseURL,
	})
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Service-Content-Version", req.corpus.ContentVersion)
	writeBody(w, r, http.StatusOK, body)
	return nil
}

// protectedResource serves the RFC 9728 metadata that every 401
// challenge points at. It is public and the same for every caller.
func (s *Server) protectedResource(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet {
		s.writeError(w, r, id, &apierr.Error{Code: apierr.MethodNotAllowed, Allow: []string{"GET"},
			Message: r.Method + " is not served on this path; use GET."})
		return
	}
	body, _ := json.Marshal(map[string]any{
		"resource":                 s.cfg.Resource,
		"authorization_servers":    s.cfg.AuthorizationServers,
		"scopes_supported":         fullScopes(),
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Lectern Curriculum Content API",
	})
	h := w.Header()
	h.Set("Cache-Control", "public, max-age=3600")
	h.Del("Vary")
	writeBody(w, r, http.StatusOK, body)
}

func fullScopes() []string {
	out := make([]string, len(scope.All))
	for i, s := range scope.All {
		out[i] = scope.Full(s)
	}
	return out
}
