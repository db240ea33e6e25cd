package idp

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/scope"
)

// maxBody bounds a token request body; real ones are under 1 KiB.
const maxBody = 16 << 10

// handleToken is the token endpoint (RFC 6749 §3.2).
func (p *IdP) handleToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, &oauthError{status: http.StatusMethodNotAllowed, code: errInvalidRequest, desc: "use POST"})
		p.onToken("other", errInvalidRequest)
		return
	}
	gt, body, err := p.token(r)
	var oe *oauthError
	switch {
	case errors.As(err, &oe):
		writeError(w, oe)
		p.onToken(gt, oe.code)
		return
	case err != nil:
		p.serverError(w, r, err)
		p.onToken(gt, errServerError)
		return
	}
	p.onToken(gt, "ok")
	// RFC 6749 §5.1: tokens are never cached.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	writeJSON(w, http.StatusOK, body)
}

// token answers a token request; gt is its grant type as OnToken names
// it, whatever the answer.
func (p *IdP) token(r *http.Request) (gt string, _ []byte, _ error) {
	gt = "other"
	form, err := readForm(r)
	if err != nil {
		return gt, nil, err
	}
	switch g := form.Get("grant_type"); g {
	case grantClientCredentials, grantAuthorizationCode:
		gt = g
	}
	client, err := p.authenticate(r, form)
	if err != nil {
		return gt, nil, err
	}
	switch form.Get("grant_type") {
	case "":
		return gt, nil, badRequest(errInvalidRequest, "grant_type is required")
	case grantClientCredentials, grantAuthorizationCode:
	default:
		return gt, nil, badRequest(errUnsupportedGrantType, "grant_type must be client_credentials or authorization_code")
	}
	if !slices.Contains(client.GrantTypes, gt) {
		return gt, nil, badRequest(errUnauthorizedClient, "the client may not use "+gt)
	}
	var g grant
	if gt == grantClientCredentials {
		g, err = p.clientCredentialsGrant(client, form)
	} else {
		g, err = p.authorizationCodeGrant(r, client, form)
	}
	if err != nil {
		return gt, nil, err
	}
	tok, err := p.sign(r.Context(), g)
	if err != nil {
		return gt, nil, err
	}
	body, err := json.Marshal(struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Scope       string `json:"scope"`
	}{tok, "Bearer", int64(p.ttl / time.Second), g.scope})
	return gt, body, err
}

// readForm reads the form-urlencoded body of a token request (RFC 6749
// §3.2). Parameters in the query string are refused rather than ignored,
// and so is a parameter given twice. An empty value counts as absent
// (RFC 6749 §3.1).
func readForm(r *http.Request) (url.Values, error) {
	if r.URL.RawQuery != "" {
		return nil, badRequest(errInvalidRequest, "parameters go in the request body, not the query string")
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, badRequest(errInvalidRequest, "the body must be application/x-www-form-urlencoded")
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, badRequest(errInvalidRequest, "unreadable body")
	}
	if len(b) > maxBody {
		return nil, &oauthError{status: http.StatusRequestEntityTooLarge, code: errInvalidRequest, desc: "body too large"}
	}
	form, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, badRequest(errInvalidRequest, "malformed form body")
	}
	for k, v := range form {
		if len(v) > 1 {
			return nil, badRequest(errInvalidRequest, "parameter "+k+" given more than once")
		}
	}
	return form, nil
}

func (p *IdP) clientCredentialsGrant(c *store.Client, form url.Values) (grant, error) {
	s, err := grantScope(c, form.Get("scope"))
	if err != nil {
		return grant{}, err
	}
	return grant{client: c, scope: s}, nil
}

// grantScope checks a requested scope (full names, space-separated, RFC
// 6749 §3.3) against the client's and returns the granted claim in the
// spec's order. An absent scope grants all the client's scopes.
func grantScope(c *store.Client, requested string) (string, *oauthError) {
	var allowed scope.Set
	for _, s := range c.Scopes {
		if suffix, ok := scope.Suffix(s); ok {
			allowed |= scope.Of(suffix)
		}
	}
	if requested == "" {
		if allowed == 0 {
			return "", badRequest(errInvalidScope, "the client has no scopes")
		}
		return allowed.String(), nil
	}
	var set scope.Set
	for _, f := range strings.Fields(requested) {
		suffix, ok := strings.CutPrefix(f, scope.Prefix)
		if !ok || !allowed.Has(suffix) {
			return "", badRequest(errInvalidScope, "scope "+f+" is not allowed for this client")
		}
		set |= scope.Of(suffix)
	}
	if set == 0 {
		return "", badRequest(errInvalidScope, "empty scope")
	}
	return set.String(), nil
}

func (p *IdP) authorizationCodeGrant(r *http.Request, c *store.Client, form url.Values) (grant, error) {
	code, redirectURI, verifier := form.Get("code"), form.Get("redirect_uri"), form.Get("code_verifier")
	switch {
	case code == "":
		return grant{}, badRequest(errInvalidRequest, "code is required")
	case redirectURI == "":
		return grant{}, badRequest(errInvalidRequest, "redirect_uri is required")
	case verifier == "":
		return grant{}, badRequest(errInvalidRequest, "code_verifier is required")
	case !validVerifier(verifier):
		return grant{}, badRequest(errInvalidRequest, "code_verifier must be 43 to 128 characters of [A-Za-z0-9-._~]")
	}
	// Taking the code spends it, whatever follows: a code that fails
	// once cannot be tried again.
	ac, err := p.store.TakeAuthCode(r.Context(), hashCode(code), p.now())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return grant{}, badRequest(errInvalidGrant, "unknown, expired or already used code")
	case err != nil:
		return grant{}, err
	}
	switch {
	case !p.now().Before(ac.ExpiresAt):
		return grant{}, badRequest(errInvalidGrant, "unknown, expired or already used code")
	case ac.ClientID != c.ID:
		return grant{}, badRequest(errInvalidGrant, "the code was issued to another client")
	case ac.RedirectURI != redirectURI:
		return grant{}, badRequest(errInvalidGrant, "redirect_uri differs from the authorization request")
	case subtle.ConstantTimeCompare([]byte(s256(verifier)), []byte(ac.Challenge)) != 1:
		return grant{}, badRequest(errInvalidGrant, "code_verifier does not match the code_challenge")
	}
	return grant{client: c, scope: ac.Scope, learner: ac.Learner}, nil
}

// validVerifier checks the code_verifier syntax of RFC 7636 §4.1.
func validVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

// s256 is the S256 code challenge of verifier (RFC 7636 §4.2).
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// hashCode is how an authorization code is stored: its SHA-256, base64url.
func hashCode(code string) string { return s256(code) }
