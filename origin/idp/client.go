package idp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/scope"
	"golang.org/x/crypto/bcrypt"
)

// secretCost is the bcrypt cost of the client secrets stored in bcrypt
// (CreateClient, Config.BcryptSecrets). It is a variable only so that
// tests can lower it: under the race detector one comparison at the
// default cost takes about a second.
var secretCost = bcrypt.DefaultCost

// The grant types a client may hold.
const (
	grantClientCredentials = "client_credentials"
	grantAuthorizationCode = "authorization_code"
)

// ErrBadClient is matched (errors.Is) by CreateClient's and
// ValidateClient's errors about their arguments. Those errors are
// *RegistrationError, which unwraps to the API's error body.
var ErrBadClient = errors.New("invalid client registration")

// Registration is a client registration, normalised by ValidateClient.
type Registration struct {
	Scopes       []string // suffixes, without repeats, in scope.All's order
	GrantTypes   []string // without repeats, in GrantTypes' order
	RedirectURIs []string // without repeats, in the given order; never nil
}

// GrantTypes are the grant types a client may hold, in the order a
// registration lists them.
var GrantTypes = []string{grantClientCredentials, grantAuthorizationCode}

// Bounds of a registration's redirect URIs.
const (
	maxRedirectURIs   = 20
	maxRedirectURILen = 2000
	maxReceivedLen    = 200 // how much of an offending value an error echoes
)

// RegistrationError is a refused registration: API is the API's 400
// BAD_REQUEST body naming the parameter (scopes, grantTypes,
// redirectUris). It matches ErrBadClient and unwraps to API.
type RegistrationError struct{ API *apierr.Error }

func (e *RegistrationError) Error() string        { return "invalid client registration: " + e.API.Message }
func (e *RegistrationError) Unwrap() error        { return e.API }
func (e *RegistrationError) Is(target error) bool { return target == ErrBadClient }

func refuse(param string, allowed []string, received, msg string) *RegistrationError {
	if len(received) > maxReceivedLen {
		received = received[:maxReceivedLen]
	}
	return &RegistrationError{&apierr.Error{Code: apierr.BadRequest, Parameter: param, Allowed: allowed,
		Received: received, Message: msg}}
}

// ValidateClient is the one validator of client registrations, used by
// CreateClient and, before anything else, by the admin API. The rules
// (docs/decisions/identity-provider.md, "Client registrations"):
//   - scopes: at least one, each a suffix ("content.read") or a full name
//     ("service-api/content.read");
//   - grantTypes: nil means ["client_credentials"]; otherwise at least one
//     of client_credentials and authorization_code;
//   - redirectUris: required with authorization_code and refused without
//     it (a client_credentials client never redirects); each an absolute
//     https URL with a host, or http on a loopback host (127.0.0.1, [::1],
//     localhost, RFC 8252 §7.3), without a fragment or userinfo (RFC 6749
//     §3.1.2), at most 2000 bytes, at most 20 of them.
//
// Repeats are dropped. Errors are *RegistrationError.
func ValidateClient(scopes, grantTypes, redirectURIs []string) (Registration, error) {
	var reg Registration
	if len(scopes) == 0 {
		return reg, refuse("scopes", scope.All, "",
			"scopes must list at least one scope, as a suffix (content.read) or a full name (service-api/content.read).")
	}
	var set scope.Set
	for _, sc := range scopes {
		suffix, ok := scope.Suffix(sc)
		if !ok {
			return reg, refuse("scopes", scope.All, sc, "Unknown scope "+clip(sc)+".")
		}
		set |= scope.Of(suffix)
	}
	for _, a := range scope.All {
		if set.Has(a) {
			reg.Scopes = append(reg.Scopes, a)
		}
	}

	if grantTypes == nil {
		grantTypes = []string{grantClientCredentials}
	}
	if len(grantTypes) == 0 {
		return reg, refuse("grantTypes", GrantTypes, "",
			"grantTypes must list at least one grant type, or be omitted (client_credentials).")
	}
	for _, g := range grantTypes {
		if !slices.Contains(GrantTypes, g) {
			return reg, refuse("grantTypes", GrantTypes, g, "Unknown grant type "+clip(g)+".")
		}
	}
	for _, g := range GrantTypes {
		if slices.Contains(grantTypes, g) {
			reg.GrantTypes = append(reg.GrantTypes, g)
		}
	}

	code := slices.Contains(reg.GrantTypes, grantAuthorizationCode)
	switch {
	case code && len(redirectURIs) == 0:
		return reg, refuse("redirectUris", nil, "",
			"The authorization_code grant needs at least one redirect URI.")
	case !code && len(redirectURIs) > 0:
		return reg, refuse("redirectUris", nil, redirectURIs[0],
			"Redirect URIs are used only by the authorization_code grant: add it to grantTypes, or omit redirectUris.")
	case len(redirectURIs) > maxRedirectURIs:
		return reg, refuse("redirectUris", nil, "",
			fmt.Sprintf("At most %d redirect URIs may be registered.", maxRedirectURIs))
	}
	reg.RedirectURIs = []string{}
	for _, ru := range redirectURIs {
		if !validRedirectURI(ru) {
			return reg, refuse("redirectUris", nil, ru,
				"Each redirect URI must be an absolute https URL with a host, or http on a loopback host "+
					"(127.0.0.1, [::1], localhost), without a fragment or user info, of at most 2000 bytes.")
		}
		if !slices.Contains(reg.RedirectURIs, ru) {
			reg.RedirectURIs = append(reg.RedirectURIs, ru)
		}
	}
	return reg, nil
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	if len(s) > maxReceivedLen {
		return s[:maxReceivedLen] + "…"
	}
	return s
}

// validRedirectURI applies the redirect URI rules of ValidateClient.
func validRedirectURI(ru string) bool {
	if len(ru) > maxRedirectURILen || strings.ContainsAny(ru, "#\x00\r\n\t ") {
		return false
	}
	u, err := url.Parse(ru)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" || u.User != nil {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := u.Hostname()
		if h == "localhost" {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return false
}

// CreateClient registers a client of organisation orgID on cfg.Store and
// returns its id and secret: the admin API's registration. The secret is
// shown only this once: the store keeps its keyed hash under
// cfg.SealKey's client-secret key (secrets.go), or a bcrypt hash with
// cfg.BcryptSecrets. The arguments are checked by ValidateClient, whose
// errors it returns as they are; an unknown organisation is an error
// wrapping store.ErrNotFound.
func (cfg Config) CreateClient(ctx context.Context, orgID string, scopes, grantTypes, redirectURIs []string) (clientID, secret string, err error) {
	if cfg.Store == nil || len(cfg.SealKey) != 32 {
		return "", "", errors.New("idp: CreateClient needs Store and a SealKey of 32 bytes")
	}
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	if cfg.BcryptSecrets {
		return CreateClient(ctx, cfg.Store, now(), orgID, scopes, grantTypes, redirectURIs)
	}
	k := newSecretKey(cfg.SealKey)
	return createClient(ctx, cfg.Store, now(), orgID, scopes, grantTypes, redirectURIs,
		func(id, secret string) ([]byte, error) { return k.hash(id, secret), nil })
}

// CreateClient is Config.CreateClient for a caller without the
// deployment's keys: the store keeps a bcrypt hash of the secret, the
// form every release checks (0.4.0's too), which a provider replaces by
// the keyed form at the client's first successful check (unless
// Config.BcryptSecrets). That first check costs a bcrypt comparison.
func CreateClient(ctx context.Context, s store.Store, now time.Time, orgID string, scopes, grantTypes, redirectURIs []string) (clientID, secret string, err error) {
	return createClient(ctx, s, now, orgID, scopes, grantTypes, redirectURIs, func(_, secret string) ([]byte, error) {
		return bcrypt.GenerateFromPassword([]byte(secret), secretCost)
	})
}

func createClient(ctx context.Context, s store.Store, now time.Time, orgID string, scopes, grantTypes, redirectURIs []string,
	hashOf func(id, secret string) ([]byte, error)) (clientID, secret string, err error) {
	reg, err := ValidateClient(scopes, grantTypes, redirectURIs)
	if err != nil {
		return "", "", err
	}
	clientID = "lc_" + randomString(16)
	secret = randomString(32)
	hash, err := hashOf(clientID, secret)
	if err != nil {
		return "", "", fmt.Errorf("hash client secret: %w", err)
	}
	c := &store.Client{
		ID:           clientID,
		OrgID:        orgID,
		SecretHash:   hash,
		Scopes:       reg.Scopes,
		GrantTypes:   reg.GrantTypes,
		RedirectURIs: reg.RedirectURIs,
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

// maxSecretLen bounds a presented secret: issued secrets are 43 bytes,
// and bcrypt reads 72 bytes at most.
const maxSecretLen = 72

// secretHashReplacer is the store method that upgrades a client's stored
// hash (pgstore and sqlitestore have it): declared here, by its one
// consumer, so that a store without it still serves (it upgrades
// nothing).
type secretHashReplacer interface {
	// ReplaceClientSecretHash stores newHash for client id while its hash
	// is still oldHash; store.ErrNotFound otherwise (gone, or upgraded by
	// another origin first).
	ReplaceClientSecretHash(ctx context.Context, id string, oldHash, newHash []byte) error
}

// authenticate identifies the client of a token request (RFC 6749 §2.3.1):
// HTTP Basic with form-urlencoded id and secret, or client_id and
// client_secret form fields, never both.
//
// The store is always read first, so a deleted client never passes.
// Failures count against the remote address and against the pair of
// client id and address, never against a client id alone; MaxFailures
// of them block that address (or that pair) to the window's end. What a
// block refuses depends on what a check costs (issue #36, and its
// review: behind an L7 balancer every client shares one address, which
// anyone can block with ten requests):
//
//   - A keyed hash costs one HMAC, so the secret is checked first: the
//     right one always passes, blocked or not, and a wrong one answers
//     429 instead of 401 once its address (or pair) is blocked. An
//     unknown client id is checked the same way against dummyHash, so
//     that neither timing nor the answer tells which ids exist.
//   - A bcrypt hash (0.4.0's, or any hash under Config.BcryptSecrets)
//     costs a bcrypt comparison, so a block refuses it (429) before the
//     check, right secret or not, and the check needs a slot of the gate
//     (503 when none frees in time). Under Config.BcryptSecrets an
//     unknown client id goes this way too, against dummyBcrypt, as it
//     costs what a known id does.
//
// A right bcrypt hash is then replaced by the keyed form (unless
// Config.BcryptSecrets), as is a keyed hash under the accepted secret's
// key. A success clears no failure.
func (p *IdP) authenticate(r *http.Request, form url.Values) (*store.Client, error) {
	id, secret, err := clientCredentials(r, form)
	if err != nil {
		return nil, err
	}
	c, err := p.store.GetClient(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		c = nil
	case err != nil:
		return nil, fmt.Errorf("get client: %w", err)
	}
	now := p.now()
	addr := addrKey(r.RemoteAddr)
	pair := pairKey(id, addr)
	if len(secret) > maxSecretLen {
		// No issued secret is longer, known client or not: no check is
		// needed to say so.
		return nil, p.refuse(now, addr, pair)
	}
	var result secretCheck
	switch {
	case c != nil && isBcrypt(c.SecretHash), c == nil && p.dummyBcrypt != nil:
		if wait := p.failures.blocked(now, addr, pair); wait > 0 {
			return nil, tooManyFailures(wait)
		}
		if !p.gate.acquire(r.Context()) {
			return nil, &oauthError{status: http.StatusServiceUnavailable, code: errTemporarilyUnavailable, retryAfter: 1,
				desc: "too many client authentications in progress; retry shortly"}
		}
		hash := p.dummyBcrypt
		if c != nil {
			hash = c.SecretHash
		}
		err := p.compare(hash, []byte(secret))
		p.gate.release()
		if err == nil {
			result = secretUpgrade
			if p.bcryptSecrets {
				result = secretRight
			}
		}
	default:
		// A keyed hash, an unknown id (the dummy), or a hash of no known
		// form: one HMAC each.
		hash := p.dummyHash
		if c != nil {
			hash = c.SecretHash
		}
		var unknownKid bool
		result, unknownKid = p.checkKeyed(id, hash, secret)
		if unknownKid {
			p.log.WarnContext(r.Context(), "idp: a client's secret hash was made under a secret this origin does not hold "+
				"(LECTERN_SECRET rotated without LECTERN_SECRET_ACCEPT?): give the client a new secret", "client", id)
		}
	}
	if result == secretWrong || c == nil {
		return nil, p.refuse(p.now(), addr, pair)
	}
	if result == secretUpgrade {
		p.upgradeHash(r.Context(), c, secret)
	}
	return c, nil
}

// refuse answers a wrong secret: it counts a failure against addr and
// pair, 401 invalid_client, unless either is already blocked: then it
// counts nothing (so that a blocked address adds no keys to the table,
// whatever ids it sends) and answers 429 with Retry-After.
func (p *IdP) refuse(now time.Time, addr, pair string) error {
	if wait := p.failures.fail(now, addr, pair); wait > 0 {
		return tooManyFailures(wait)
	}
	return &oauthError{status: http.StatusUnauthorized, code: errInvalidClient, desc: "client authentication failed"}
}

// tooManyFailures is the 429 of a blocked address (or pair), to be
// retried after wait.
func tooManyFailures(wait time.Duration) error {
	secs := int((wait + time.Second - 1) / time.Second)
	return &oauthError{status: http.StatusTooManyRequests, code: errTemporarilyUnavailable, retryAfter: secs,
		desc: fmt.Sprintf("too many failed client authentications from this address; retry after %d s", secs)}
}

// upgradeHash stores the keyed hash of c's secret, now known right, in
// place of the hash c was read with. A failure is logged: the client is
// authenticated either way, and the next check tries again.
func (p *IdP) upgradeHash(ctx context.Context, c *store.Client, secret string) {
	rs, ok := p.store.(secretHashReplacer)
	if !ok {
		return
	}
	err := rs.ReplaceClientSecretHash(ctx, c.ID, c.SecretHash, p.secretKey.hash(c.ID, secret))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		p.log.WarnContext(ctx, "idp: upgrade a client's secret hash", "client", c.ID, "err", err)
	}
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
