package admin

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/scope"
)

// The OAuth grant types a client may use (RFC 6749 §4.1, §4.4).
const (
	grantClientCredentials = "client_credentials"
	grantAuthorizationCode = "authorization_code"
)

var grantTypes = []string{grantClientCredentials, grantAuthorizationCode}

// clientJSON is the answer to a client creation: the only place the
// secret ever appears.
type clientJSON struct {
	ClientID     string   `json:"clientId"`
	ClientSecret string   `json:"clientSecret"`
	OrgID        string   `json:"orgId"`
	Scopes       []string `json:"scopes"` // full names
	GrantTypes   []string `json:"grantTypes"`
	RedirectURIs []string `json:"redirectUris"`
}

// createClient is POST /admin/v1/orgs/{orgId}/clients with
// {scopes, grantTypes?, redirectUris?}.
func (a *api) createClient(w http.ResponseWriter, r *http.Request) error {
	orgID := r.PathValue("orgId")
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var req struct{ scopes, grants, redirects []string }
	present, err := decodeObject(body, map[string]any{
		"scopes": &req.scopes, "grantTypes": &req.grants, "redirectUris": &req.redirects})
	if err != nil {
		return err
	}
	scopes, err := normaliseScopes(req.scopes)
	if err != nil {
		return err
	}
	grants := []string{grantClientCredentials}
	if present["grantTypes"] {
		if grants, err = normaliseGrants(req.grants); err != nil {
			return err
		}
	}
	redirects, err := checkRedirects(req.redirects)
	if err != nil {
		return err
	}
	if slices.Contains(grants, grantAuthorizationCode) && len(redirects) == 0 {
		return badRequest("redirectUris", "The authorization_code grant needs at least one redirect URI.")
	}

	// Validation first, then existence (the spec's pipeline order).
	if _, err := a.cfg.Store.GetOrg(r.Context(), orgID); err != nil {
		return storeErr(err, orgID, "get")
	}
	clientID, secret, err := a.cfg.CreateClient(r.Context(), orgID, scopes, grants, redirects)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return orgNotFound(orgID) // deleted meanwhile
		}
		var ae *apierr.Error
		if errors.As(err, &ae) {
			return ae
		}
		return fmt.Errorf("create client of org %s: %w", orgID, err)
	}
	full := make([]string, len(scopes))
	for i, s := range scopes {
		full[i] = scope.Full(s)
	}
	return writeJSON(w, http.StatusCreated, clientJSON{
		ClientID: clientID, ClientSecret: secret, OrgID: orgID,
		Scopes: full, GrantTypes: grants, RedirectURIs: redirects,
	})
}

// normaliseScopes turns suffixes or full names into suffixes, without
// repeats, in the spec's order.
func normaliseScopes(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: "scopes", Allowed: scope.All,
			Message: "scopes must list at least one scope, as a suffix (content.read) or a full name (service-api/content.read)."}
	}
	var set scope.Set
	for _, s := range in {
		suf, ok := scope.Suffix(s)
		if !ok {
			return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: "scopes", Allowed: scope.All, Received: s,
				Message: "Unknown scope " + s + "."}
		}
		set |= scope.Of(suf)
	}
	var out []string
	for _, s := range scope.All {
		if set.Has(s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// normaliseGrants checks grant types and drops repeats, in the order of
// grantTypes.
func normaliseGrants(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: "grantTypes", Allowed: grantTypes,
			Message: "grantTypes must list at least one grant type, or be omitted (client_credentials)."}
	}
	for _, g := range in {
		if !slices.Contains(grantTypes, g) {
			return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: "grantTypes", Allowed: grantTypes, Received: g,
				Message: "Unknown grant type " + g + "."}
		}
	}
	var out []string
	for _, g := range grantTypes {
		if slices.Contains(in, g) {
			out = append(out, g)
		}
	}
	return out, nil
}

// checkRedirects checks that each redirect URI is an absolute http or https
// URL with a host and no fragment (RFC 6749 §3.1.2), dropping repeats;
// nil becomes empty.
func checkRedirects(in []string) ([]string, error) {
	out := []string{}
	for _, s := range in {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			strings.Contains(s, "#") || len(s) > 2000 {
			return nil, &apierr.Error{Code: apierr.BadRequest, Parameter: "redirectUris", Received: s,
				Message: "Each redirect URI must be an absolute http or https URL with a host and no fragment."}
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}
