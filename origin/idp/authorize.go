package idp

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/lectern-api/lectern/origin/store"
)

// maxLearnerLen bounds login_hint, the learner id a token will carry.
const maxLearnerLen = 128

// handleAuthorize is the authorization endpoint (RFC 6749 §4.1.1, RFC
// 7636 §4.3). The dev provider has no login page: it approves at once,
// for the learner named by login_hint.
func (p *IdP) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, &oauthError{status: http.StatusMethodNotAllowed, code: errInvalidRequest, desc: "use GET"})
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, badRequest(errInvalidRequest, "malformed query"))
		return
	}
	// Until client_id and redirect_uri are known good, errors are shown
	// here and never redirected (RFC 6749 §4.1.2.1): an open redirector
	// would otherwise be one request away.
	if len(q["client_id"]) > 1 || len(q["redirect_uri"]) > 1 {
		writeError(w, badRequest(errInvalidRequest, "client_id and redirect_uri may be given once only"))
		return
	}
	clientID, redirectURI := q.Get("client_id"), q.Get("redirect_uri")
	if clientID == "" {
		writeError(w, badRequest(errInvalidRequest, "client_id is required"))
		return
	}
	c, err := p.store.GetClient(r.Context(), clientID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, badRequest(errInvalidRequest, "unknown client_id"))
		return
	case err != nil:
		p.serverError(w, r, err)
		return
	}
	// Exact string match, no normalisation (RFC 6749 §3.1.2.3; OAuth 2.1).
	if redirectURI == "" || !slices.Contains(c.RedirectURIs, redirectURI) {
		writeError(w, badRequest(errInvalidRequest, "redirect_uri is not registered for this client"))
		return
	}
	state := q.Get("state")
	ac, oe := pendingCode(q, c, redirectURI)
	if oe != nil {
		redirect(w, redirectURI, url.Values{"error": {oe.code}, "error_description": {oe.desc}}, state)
		return
	}
	// Expired codes go, and of this client's pending codes the oldest
	// beyond Limits.PendingCodes: the endpoint needs no credentials, and
	// each call writes a row.
	now := p.now()
	if err := p.store.PruneAuthCodes(r.Context(), c.ID, now, p.limits.PendingCodes-1); err != nil {
		p.serverError(w, r, err)
		return
	}
	code := randomString(32)
	ac.CodeHash, ac.ExpiresAt = hashCode(code), now.Add(codeTTL)
	if err := p.store.SaveAuthCode(r.Context(), ac); err != nil {
		p.serverError(w, r, err)
		return
	}
	redirect(w, redirectURI, url.Values{"code": {code}}, state)
}

// pendingCode checks the parameters whose refusal is redirected to
// redirectURI (RFC 6749 §4.1.2.1), c and redirectURI being known good,
// and returns the code they ask for, without its hash and expiry.
func pendingCode(q url.Values, c *store.Client, redirectURI string) (store.AuthCode, *oauthError) {
	for k, v := range q {
		if len(v) > 1 {
			return store.AuthCode{}, badRequest(errInvalidRequest, "parameter "+k+" given more than once")
		}
	}
	switch rt := q.Get("response_type"); {
	case rt == "":
		return store.AuthCode{}, badRequest(errInvalidRequest, "response_type is required")
	case rt != "code":
		return store.AuthCode{}, badRequest(errUnsupportedResponseType, "response_type must be code")
	}
	if !slices.Contains(c.GrantTypes, grantAuthorizationCode) {
		return store.AuthCode{}, badRequest(errUnauthorizedClient, "the client may not use authorization_code")
	}
	sc, oe := grantScope(c, q.Get("scope"))
	if oe != nil {
		return store.AuthCode{}, oe
	}
	challenge, learner := q.Get("code_challenge"), q.Get("login_hint")
	var desc string
	switch {
	case challenge == "":
		desc = "code_challenge is required (PKCE)"
	case q.Get("code_challenge_method") != "S256":
		// An absent method means plain (RFC 7636 §4.3), which is refused.
		desc = "code_challenge_method must be S256"
	case !validChallenge(challenge):
		desc = "code_challenge must be 43 characters of base64url"
	case learner == "":
		desc = "login_hint (the learner id) is required"
	case !validLearner(learner):
		desc = "login_hint must be 1 to 128 visible ASCII characters"
	}
	if desc != "" {
		return store.AuthCode{}, badRequest(errInvalidRequest, desc)
	}
	return store.AuthCode{ClientID: c.ID, RedirectURI: redirectURI, Scope: sc,
		Challenge: challenge, Learner: learner}, nil
}

// redirect answers 302 to redirectURI with params and state added to its
// query, which is otherwise kept as registered (RFC 6749 §3.1.2).
func redirect(w http.ResponseWriter, redirectURI string, params url.Values, state string) {
	if state != "" {
		params.Set("state", state)
	}
	u, _ := url.Parse(redirectURI) // registered URIs parse (CreateClient)
	if u.RawQuery != "" {
		u.RawQuery += "&" + params.Encode()
	} else {
		u.RawQuery = params.Encode()
	}
	w.Header().Set("Location", u.String())
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusFound)
}

// validChallenge checks an S256 challenge: base64url of 32 bytes.
func validChallenge(c string) bool {
	if len(c) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.Strict().DecodeString(c)
	return err == nil && !strings.ContainsAny(c, "\r\n")
}

// validLearner accepts 1 to maxLearnerLen visible ASCII characters.
func validLearner(s string) bool {
	if len(s) == 0 || len(s) > maxLearnerLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
