package admin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/internal/jsonbody"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/scope"
)

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
// {scopes, grantTypes?, redirectUris?}. The registration is checked by the
// identity provider's validator (idp.ValidateClient), the one set of rules,
// whose error body is written as it is.
func (a *api) createClient(w http.ResponseWriter, r *http.Request) error {
	orgID := r.PathValue("orgId")
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var req struct{ scopes, grants, redirects []string }
	// An omitted member leaves its list nil: grantTypes then defaults,
	// while [] is refused by the validator and null by the decoder (arrays
	// may not be null in admin bodies).
	if _, err := decodeObject(body, map[string]jsonbody.Field{
		"scopes": jsonbody.Strings(&req.scopes), "grantTypes": jsonbody.Strings(&req.grants),
		"redirectUris": jsonbody.Strings(&req.redirects)}); err != nil {
		return err
	}
	reg, err := idp.ValidateClient(req.scopes, req.grants, req.redirects)
	if err != nil {
		return err // a *idp.RegistrationError unwraps to the API's 400
	}

	// Validation first, then existence (the spec's pipeline order).
	if _, err := a.cfg.Store.GetOrg(r.Context(), orgID); err != nil {
		return storeErr(err, orgID, "get")
	}
	clientID, secret, err := a.cfg.CreateClient(r.Context(), orgID, reg.Scopes, reg.GrantTypes, reg.RedirectURIs)
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
	full := make([]string, len(reg.Scopes))
	for i, s := range reg.Scopes {
		full[i] = scope.Full(s)
	}
	return writeJSON(w, http.StatusCreated, clientJSON{
		ClientID: clientID, ClientSecret: secret, OrgID: orgID,
		Scopes: full, GrantTypes: reg.GrantTypes, RedirectURIs: reg.RedirectURIs,
	})
}
