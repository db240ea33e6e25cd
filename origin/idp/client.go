package idp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/scope"
	"golang.org/x/crypto/bcrypt"
)

// secretCost is the bcrypt cost of client secrets, and of the dummy hash
// that unknown client ids are checked against. It is a variable only so
// that tests can lower it: under the race detector one comparison at the
// default cost takes about a second.
var secretCost = bcrypt.DefaultCost

// The grant types a client may hold.
const (
	grantClientCredentials = "client_credentials"
	grantAuthorizationCode = "authorization_code"
)

// ErrBadClient is wrapped by CreateClient's errors about its arguments;
// the admin API answers them with 400.
var ErrBadClient = errors.New("invalid client registration")

// CreateClient registers a client of organisation orgID and returns its id
// and secret. The secret is shown only this once: the store keeps a bcrypt
// hash. scopes are suffixes ("content.read") or full names; grantTypes
// defaults to client_credentials; authorization_code needs at least one
// redirect URI, each absolute and without a fragment (RFC 6749 §3.1.2).
// Errors wrap ErrBadClient for bad arguments and store.ErrNotFound when
// the organisation does not exist.
func CreateClient(ctx context.Context, s store.Store, now time.Time, orgID string, scopes, grantTypes, redirectURIs []string) (clientID, secret string, err error) {
	if len(scopes) == 0 {
		return "", "", fmt.Errorf("%w: scopes are required", ErrBadClient)
	}
	var set scope.Set
	for _, sc := range scopes {
		suffix, ok := scope.Suffix(sc)
		if !ok {
			return "", "", fmt.Errorf("%w: unknown scope %q", ErrBadClient, sc)
		}
		set |= scope.Of(suffix)
	}
	var suffixes []string
	for _, a := range scope.All {
		if set.Has(a) {
			suffixes = append(suffixes, a)
		}
	}
	if len(grantTypes) == 0 {
		grantTypes = []string{grantClientCredentials}
	}
	var grants []string
	for _, g := range grantTypes {
		if g != grantClientCredentials && g != grantAuthorizationCode {
			return "", "", fmt.Errorf("%w: unsupported grant type %q", ErrBadClient, g)
		}
		if !slices.Contains(grants, g) {
			grants = append(grants, g)
		}
	}
	if slices.Contains(grants, grantAuthorizationCode) != (len(redirectURIs) > 0) {
		return "", "", fmt.Errorf("%w: redirect URIs go with, and only with, the authorization_code grant", ErrBadClient)
	}
	for _, ru := range redirectURIs {
		u, err := url.Parse(ru)
		if err != nil || !u.IsAbs() || strings.Contains(ru, "#") ||
			(u.Scheme == "http" || u.Scheme == "https") && u.Host == "" {
			return "", "", fmt.Errorf("%w: redirect URI %q must be absolute and without a fragment", ErrBadClient, ru)
		}
	}
	clientID = "lc_" + randomString(16)
	secret = randomString(32)
	hash, err := bcrypt.GenerateFromPassword([]byte(secret), secretCost)
	if err != nil {
		return "", "", fmt.Errorf("hash client secret: %w", err)
	}
	c := &store.Client{
		ID:           clientID,
		OrgID:        orgID,
		SecretHash:   hash,
		Scopes:       suffixes,
		GrantTypes:   grants,
		RedirectURIs: slices.Clone(redirectURIs),
		CreatedAt:    now,
	}
	if err := s.CreateClient(ctx, c); err != nil {
		return "", "", fmt.Errorf("create client: %w", err)
	}
	return clientID, secret, nil
}

// randomString is n random bytes as unpadded base64url.
func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// maxSecretLen bounds a presented secret: bcrypt reads 72 bytes at most.
const maxSecretLen = 72

// authenticate identifies the client of a token request (RFC 6749 §2.3.1):
// HTTP Basic with form-urlencoded id and secret, or client_id and
// client_secret form fields, never both.
func (p *IdP) authenticate(r *http.Request, form url.Values) (*store.Client, error) {
	id, secret, err := clientCredentials(r, form)
	if err != nil {
		return nil, err
	}
	c, err := p.store.GetClient(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		// Spend the same bcrypt work as for a known client, so that
		// timing does not reveal which ids exist.
		bcrypt.CompareHashAndPassword(p.dummyHash, []byte(secret))
		return nil, &oauthError{status: http.StatusUnauthorized, code: errInvalidClient, desc: "client authentication failed"}
	case err != nil:
		return nil, fmt.Errorf("get client: %w", err)
	}
	if len(secret) > maxSecretLen {
		bcrypt.CompareHashAndPassword(p.dummyHash, []byte(secret[:maxSecretLen]))
		return nil, &oauthError{status: http.StatusUnauthorized, code: errInvalidClient, desc: "client authentication failed"}
	}
	if bcrypt.CompareHashAndPassword(c.SecretHash, []byte(secret)) != nil {
		return nil, &oauthError{status: http.StatusUnauthorized, code: errInvalidClient, desc: "client authentication failed"}
	}
	return c, nil
}

func clientCredentials(r *http.Request, form url.Values) (id, secret string, err error) {
	unauthorized := func(desc string) (string, string, error) {
		return "", "", &oauthError{status: http.StatusUnauthorized, code: errInvalidClient, desc: desc}
	}
	formID, formSecret := form.Get("client_id"), form.Get("client_secret")
	if _, present := r.Header["Authorization"]; present {
		user, pass, ok := r.BasicAuth()
		if !ok {
			return unauthorized("unsupported client authentication; use HTTP Basic or client_secret_post")
		}
		if formSecret != "" {
			return "", "", badRequest(errInvalidRequest, "client authenticated both with HTTP Basic and client_secret")
		}
		// RFC 6749 §2.3.1: both are form-urlencoded before Basic encoding.
		id, err1 := url.QueryUnescape(user)
		secret, err2 := url.QueryUnescape(pass)
		if err1 != nil || err2 != nil || id == "" {
			return unauthorized("malformed HTTP Basic credentials")
		}
		if formID != "" && formID != id {
			return "", "", badRequest(errInvalidRequest, "client_id differs from the authenticated client")
		}
		return id, secret, nil
	}
	if formID == "" {
		return unauthorized("client authentication required")
	}
	if formSecret == "" {
		return unauthorized("client_secret required")
	}
	return formID, formSecret, nil
}
