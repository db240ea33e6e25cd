package idp

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/shared/apierr"
)

const (
	testOrg      = "org-1"
	testAudience = "lectern-api"
	testRedirect = "https://app.test/callback?app=1"
)

func TestMain(m *testing.M) {
	secretCost = bcrypt.MinCost // hashes record their cost; comparisons follow it
	os.Exit(m.Run())
}

type credentials struct{ id, secret string }

// env is one identity provider over a real listener and a SQLite store.
type env struct {
	t       *testing.T
	clock   *clock.Clock
	store   store.Store
	idp     *IdP
	cfg     Config // idp's
	srv     *httptest.Server
	machine credentials // client_credentials; content.read, content.export
	app     credentials // both grants, testRedirect; content.read, progress.*
}

func newStore(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlitestore.New(t.Context(), filepath.Join(t.TempDir(), "lectern.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	now := time.Now().UTC()
	if err := s.CreateOrg(t.Context(), &store.Org{ID: testOrg, Name: "Org One", Tier: "standard",
		Status: "active", CreatedAt: now, UpdatedAt: now, RenewsAt: now.AddDate(1, 0, 0)}); err != nil {
		t.Fatal(err)
	}
	return s
}

func newEnv(t *testing.T, edit ...func(*Config)) *env {
	t.Helper()
	e := &env{t: t, clock: clock.New(nil), store: newStore(t)}
	e.serve(t, edit...)
	ctx := t.Context()
	var err error
	// Registered as the admin API registers them (keyed hashes).
	e.machine.id, e.machine.secret, err = e.cfg.CreateClient(ctx, testOrg,
		[]string{"content.read", "service-api/content.export"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.app.id, e.app.secret, err = e.cfg.CreateClient(ctx, testOrg,
		[]string{"content.read", "progress.read", "progress.write"},
		[]string{"client_credentials", "authorization_code"}, []string{testRedirect, "https://app.test/other"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// serve starts a new IdP on e.store behind a new listener; edit adjusts
// its config.
func (e *env) serve(t *testing.T, edit ...func(*Config)) {
	t.Helper()
	var h http.Handler
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	cfg := Config{Issuer: e.srv.URL, Audience: testAudience, Store: e.store, Now: e.clock.Now, SealKey: testSealKey}
	for _, f := range edit {
		f(&cfg)
	}
	p, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.idp, e.cfg, h = p, cfg, p.Handler()
}

func (e *env) tokenURL() string { return e.srv.URL + "/oauth2/token" }

// jwks fetches and parses the published key set.
func (e *env) jwks() map[string]ed25519.PublicKey {
	e.t.Helper()
	resp, err := http.Get(e.srv.URL + "/.well-known/jwks.json")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		e.t.Fatal(err)
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		if k["kty"] != "OKP" || k["crv"] != "Ed25519" || k["alg"] != "EdDSA" || k["use"] != "sig" {
			e.t.Fatalf("jwk %v: want kty OKP, crv Ed25519, alg EdDSA, use sig", k)
		}
		x, err := base64.RawURLEncoding.DecodeString(k["x"])
		if err != nil || len(x) != ed25519.PublicKeySize {
			e.t.Fatalf("jwk x %q: %v", k["x"], err)
		}
		if got := keyID(x); got != k["kid"] {
			e.t.Errorf("kid %q: got %q from the key, want equal", k["kid"], got)
		}
		keys[k["kid"]] = x
	}
	return keys
}

// verify checks raw with golang-jwt against the JWKS and returns its
// claims and kid.
func (e *env) verify(raw string) (jwt.MapClaims, string) {
	e.t.Helper()
	keys := e.jwks()
	var kid string
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		kid, _ = t.Header["kid"].(string)
		if k, ok := keys[kid]; ok {
			return k, nil
		}
		return nil, errors.New("unknown kid")
	}, jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer(e.srv.URL), jwt.WithAudience(testAudience),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt(), jwt.WithTimeFunc(e.clock.Now))
	if err != nil {
		e.t.Fatalf("verify token: %v", err)
	}
	if got := tok.Header["typ"]; got != "JWT" {
		e.t.Errorf("typ: got %v, want JWT", got)
	}
	return claims, kid
}

// checkClaims compares the token's claims with want, and checks the rest.
func (e *env) checkClaims(claims jwt.MapClaims, want map[string]string) {
	e.t.Helper()
	names := []string{"iss", "aud", "sub", "client_id", "scope", "org", "org_gen", "iat", "nbf", "exp", "jti"}
	if _, ok := want["learner"]; ok {
		names = append(names, "learner")
	}
	var got []string
	for k := range claims {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(names)
	if !slices.Equal(got, names) {
		e.t.Errorf("claim names: got %v, want %v", got, names)
	}
	want["iss"] = e.srv.URL
	want["aud"] = testAudience // a string, not an array
	o, err := e.store.GetOrg(e.t.Context(), want["org"])
	if err != nil {
		e.t.Fatalf("GetOrg(%s): %v", want["org"], err)
	}
	want["org_gen"] = o.Generation // the licence gate compares it
	for k, v := range want {
		if got, _ := claims[k].(string); got != v {
			e.t.Errorf("claim %s: got %v, want %q", k, claims[k], v)
		}
	}
	iat, _ := claims["iat"].(float64)
	nbf, _ := claims["nbf"].(float64)
	exp, _ := claims["exp"].(float64)
	if exp-iat != 900 || nbf != iat {
		e.t.Errorf("iat %v nbf %v exp %v: want exp-iat 900, nbf = iat", iat, nbf, exp)
	}
	if now := float64(e.clock.Now().Unix()); iat < now-5 || iat > now {
		e.t.Errorf("iat: got %v, want about %v", iat, now)
	}
	if jti, _ := claims["jti"].(string); len(jti) != 22 {
		e.t.Errorf("jti: got %q, want 16 bytes base64url", jti)
	}
}

func TestClientCredentialsWithOAuth2(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name      string
		style     oauth2.AuthStyle
		scopes    []string
		wantScope string
	}{
		{"auto-detect, all scopes", oauth2.AuthStyleAutoDetect, nil,
			"service-api/content.read service-api/content.export"},
		{"basic, one scope", oauth2.AuthStyleInHeader, []string{"service-api/content.export"},
			"service-api/content.export"},
		{"params, two scopes", oauth2.AuthStyleInParams, []string{"service-api/content.export", "service-api/content.read"},
			"service-api/content.read service-api/content.export"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := clientcredentials.Config{ClientID: e.machine.id, ClientSecret: e.machine.secret,
				TokenURL: e.tokenURL(), Scopes: tt.scopes, AuthStyle: tt.style}
			tok, err := cfg.Token(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if tok.TokenType != "Bearer" {
				t.Errorf("token_type: got %q, want Bearer", tok.TokenType)
			}
			if got := tok.Extra("scope"); got != tt.wantScope {
				t.Errorf("scope: got %v, want %q", got, tt.wantScope)
			}
			if got := tok.Extra("expires_in"); got != float64(900) {
				t.Errorf("expires_in: got %v, want 900", got)
			}
			claims, _ := e.verify(tok.AccessToken)
			e.checkClaims(claims, map[string]string{"sub": e.machine.id, "client_id": e.machine.id,
				"scope": tt.wantScope, "org": testOrg})
		})
	}
}

func TestTokenResponseHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp := e.post(url.Values{"grant_type": {"client_credentials"}}.Encode(), &e.machine)
	body := readAll(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("status: got %d, want 200 (%s)", resp.StatusCode, body)
	}
	for h, want := range map[string]string{"Cache-Control": "no-store", "Pragma": "no-cache", "Content-Type": "application/json"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: got %q, want %q", h, got, want)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	if m["token_type"] != "Bearer" || m["expires_in"] != float64(900) || m["access_token"] == "" {
		t.Errorf("body: got %s, want access_token, token_type Bearer, expires_in 900", body)
	}
}

// post sends a form to the token endpoint, with Basic credentials when c
// is not nil.
func (e *env) post(body string, c *credentials) *http.Response {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.tokenURL(), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c != nil {
		req.SetBasicAuth(url.QueryEscape(c.id), url.QueryEscape(c.secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// oauthErr decodes an RFC 6749 §5.2 body.
func oauthErr(t *testing.T, body []byte) (code, desc string) {
	t.Helper()
	var b struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return b.Error, b.Description
}

func TestTokenErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// authOnly holds only authorization_code.
	var authOnly credentials
	var err error
	authOnly.id, authOnly.secret, err = CreateClient(t.Context(), e.store, e.clock.Now(), testOrg,
		[]string{"progress.read"}, []string{"authorization_code"}, []string{testRedirect})
	if err != nil {
		t.Fatal(err)
	}
	cc := "grant_type=client_credentials"
	form := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	verifier := strings.Repeat("v", 43)
	tests := []struct {
		name        string
		method      string // POST when empty
		contentType string // form when empty
		query       string
		body        string
		basic       *credentials
		auth        string // a raw Authorization header
		wantStatus  int
		wantError   string
	}{
		{name: "GET", method: "GET", basic: &e.machine, wantStatus: 405, wantError: "invalid_request"},
		{name: "PUT", method: "PUT", body: cc, basic: &e.machine, wantStatus: 405, wantError: "invalid_request"},
		{name: "JSON body", contentType: "application/json", body: `{"grant_type":"client_credentials"}`,
			basic: &e.machine, wantStatus: 400, wantError: "invalid_request"},
		{name: "no content type", contentType: "-", body: cc, basic: &e.machine, wantStatus: 400, wantError: "invalid_request"},
		{name: "parameters in query", query: cc, basic: &e.machine, wantStatus: 400, wantError: "invalid_request"},
		{name: "query beside body", query: "scope=x", body: cc, basic: &e.machine, wantStatus: 400, wantError: "invalid_request"},
		{name: "repeated grant_type", body: cc + "&" + cc, basic: &e.machine, wantStatus: 400, wantError: "invalid_request"},
		{name: "repeated scope", body: cc + "&scope=service-api/content.read&scope=service-api/content.read",
			basic: &e.machine, wantStatus: 400, wantError: "invalid_request"},
		{name: "malformed form", body: cc + "&scope=%zz", basic: &e.machine, wantStatus: 400, wantError: "invalid_request"},
		{name: "body too large", body: cc + "&pad=" + strings.Repeat("a", 16<<10), basic: &e.machine,
			wantStatus: 413, wantError: "invalid_request"},
		{name: "no client authentication", body: cc, wantStatus: 401, wantError: "invalid_client"},
		{name: "unknown client", body: cc, basic: &credentials{"lc_nobody", e.machine.secret}, wantStatus: 401, wantError: "invalid_client"},
		{name: "wrong secret", body: cc, basic: &credentials{e.machine.id, e.app.secret}, wantStatus: 401, wantError: "invalid_client"},
		{name: "empty secret", body: cc, basic: &credentials{e.machine.id, ""}, wantStatus: 401, wantError: "invalid_client"},
		{name: "overlong secret", body: cc, basic: &credentials{e.machine.id, e.machine.secret + strings.Repeat("x", 40)},
			wantStatus: 401, wantError: "invalid_client"},
		{name: "wrong secret in form", body: form("grant_type", "client_credentials", "client_id", e.machine.id, "client_secret", "nope"),
			wantStatus: 401, wantError: "invalid_client"},
		{name: "client_id without secret", body: form("grant_type", "client_credentials", "client_id", e.machine.id),
			wantStatus: 401, wantError: "invalid_client"},
		{name: "bearer instead of basic", body: cc, auth: "Bearer abc", wantStatus: 401, wantError: "invalid_client"},
		{name: "malformed basic", body: cc, auth: "Basic !!!", wantStatus: 401, wantError: "invalid_client"},
		{name: "basic and client_secret", body: form("grant_type", "client_credentials", "client_id", e.machine.id, "client_secret", e.machine.secret),
			basic: &e.machine, wantStatus: 400, wantError: "invalid_request"},
		{name: "basic and another client_id", body: form("grant_type", "client_credentials", "client_id", e.app.id),
			basic: &e.machine, wantStatus: 400, wantError: "invalid_request"},
		{name: "missing grant_type", body: "scope=service-api/content.read", basic: &e.machine, wantStatus: 400, wantError: "invalid_request"},
		{name: "password grant", body: form("grant_type", "password", "username", "u", "password", "p"),
			basic: &e.machine, wantStatus: 400, wantError: "unsupported_grant_type"},
		{name: "refresh_token grant", body: form("grant_type", "refresh_token", "refresh_token", "r"),
			basic: &e.machine, wantStatus: 400, wantError: "unsupported_grant_type"},
		{name: "client_credentials not allowed", body: cc, basic: &authOnly, wantStatus: 400, wantError: "unauthorized_client"},
		{name: "authorization_code not allowed", body: form("grant_type", "authorization_code", "code", "c",
			"redirect_uri", testRedirect, "code_verifier", verifier), basic: &e.machine, wantStatus: 400, wantError: "unauthorized_client"},
		{name: "scope the client lacks", body: cc + "&scope=service-api/media.download", basic: &e.machine, wantStatus: 400, wantError: "invalid_scope"},
		{name: "one scope of two lacking", body: form("grant_type", "client_credentials", "scope", "service-api/content.read service-api/progress.read"),
			basic: &e.machine, wantStatus: 400, wantError: "invalid_scope"},
		{name: "bare suffix", body: cc + "&scope=content.read", basic: &e.machine, wantStatus: 400, wantError: "invalid_scope"},
		{name: "unknown scope", body: cc + "&scope=service-api/admin", basic: &e.machine, wantStatus: 400, wantError: "invalid_scope"},
		{name: "code missing", body: form("grant_type", "authorization_code", "redirect_uri", testRedirect, "code_verifier", verifier),
			basic: &e.app, wantStatus: 400, wantError: "invalid_request"},
		{name: "redirect_uri missing", body: form("grant_type", "authorization_code", "code", "c", "code_verifier", verifier),
			basic: &e.app, wantStatus: 400, wantError: "invalid_request"},
		{name: "code_verifier missing", body: form("grant_type", "authorization_code", "code", "c", "redirect_uri", testRedirect),
			basic: &e.app, wantStatus: 400, wantError: "invalid_request"},
		{name: "code_verifier too short", body: form("grant_type", "authorization_code", "code", "c", "redirect_uri", testRedirect,
			"code_verifier", verifier[1:]), basic: &e.app, wantStatus: 400, wantError: "invalid_request"},
		{name: "code_verifier bad character", body: form("grant_type", "authorization_code", "code", "c", "redirect_uri", testRedirect,
			"code_verifier", verifier+"+"), basic: &e.app, wantStatus: 400, wantError: "invalid_request"},
		{name: "unknown code", body: form("grant_type", "authorization_code", "code", "c", "redirect_uri", testRedirect,
			"code_verifier", verifier), basic: &e.app, wantStatus: 400, wantError: "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := cmpOr(tt.method, "POST")
			u := e.tokenURL()
			if tt.query != "" {
				u += "?" + tt.query
			}
			req, _ := http.NewRequest(method, u, strings.NewReader(tt.body))
			switch tt.contentType {
			case "":
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			case "-":
			default:
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.basic != nil {
				req.SetBasicAuth(url.QueryEscape(tt.basic.id), url.QueryEscape(tt.basic.secret))
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status: got %d, want %d (%s)", resp.StatusCode, tt.wantStatus, body)
			}
			if code, desc := oauthErr(t, body); code != tt.wantError || desc == "" {
				t.Errorf("error: got %q (%q), want %q with a description", code, desc, tt.wantError)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type: got %q, want application/json", got)
			}
			wantChallenge := ""
			if tt.wantError == "invalid_client" {
				wantChallenge = `Basic realm="lectern"`
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != wantChallenge {
				t.Errorf("WWW-Authenticate: got %q, want %q", got, wantChallenge)
			}
			if tt.wantStatus == 405 {
				if got := resp.Header.Get("Allow"); got != "POST" {
					t.Errorf("Allow: got %q, want POST", got)
				}
			}
		})
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// noRedirect is a client that returns redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func (e *env) appConfig(redirectURI string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     e.app.id,
		ClientSecret: e.app.secret,
		Endpoint:     oauth2.Endpoint{AuthURL: e.srv.URL + "/oauth2/authorize", TokenURL: e.tokenURL(), AuthStyle: oauth2.AuthStyleInHeader},
		RedirectURL:  redirectURI,
		Scopes:       []string{"service-api/progress.read", "service-api/progress.write"},
	}
}

// authorize runs the authorization request and returns the code.
func (e *env) authorize(verifier, learner string) string {
	e.t.Helper()
	u := e.appConfig(testRedirect).AuthCodeURL("st-1", oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("login_hint", learner))
	resp, err := noRedirect.Get(u)
	if err != nil {
		e.t.Fatal(err)
	}
	body := readAll(e.t, resp)
	if resp.StatusCode != http.StatusFound {
		e.t.Fatalf("authorize: got %d, want 302 (%s)", resp.StatusCode, body)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		e.t.Fatal(err)
	}
	q := loc.Query()
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != "https://app.test/callback" {
		e.t.Errorf("redirected to %q, want https://app.test/callback", got)
	}
	if q.Get("app") != "1" || q.Get("state") != "st-1" || q.Get("code") == "" {
		e.t.Errorf("redirect query: got %v, want app=1, state=st-1 and a code", q)
	}
	return q.Get("code")
}

func TestAuthorizationCodeFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	verifier := oauth2.GenerateVerifier()
	code := e.authorize(verifier, "learner-42")

	tok, err := e.appConfig(testRedirect).Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	const wantScope = "service-api/progress.read service-api/progress.write"
	if got := tok.Extra("scope"); got != wantScope {
		t.Errorf("scope: got %v, want %q", got, wantScope)
	}
	claims, _ := e.verify(tok.AccessToken)
	e.checkClaims(claims, map[string]string{"sub": "learner-42", "learner": "learner-42",
		"client_id": e.app.id, "scope": wantScope, "org": testOrg})

	// The code was spent.
	_, err = e.appConfig(testRedirect).Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
	wantGrantError(t, err)
}

func wantGrantError(t *testing.T, err error) {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want a RetrieveError", err)
	}
	if re.ErrorCode != "invalid_grant" || re.Response.StatusCode != 400 {
		t.Errorf("got %d %q, want 400 invalid_grant", re.Response.StatusCode, re.ErrorCode)
	}
}

func TestAuthorizationCodeRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	verifier := oauth2.GenerateVerifier()
	tests := []struct {
		name     string
		redirect string
		verifier string
		client   *credentials
		before   func() // between authorization and exchange
	}{
		{name: "wrong verifier", verifier: oauth2.GenerateVerifier()},
		{name: "expired code", before: func() { e.clock.Advance(61 * time.Second) }},
		{name: "other registered redirect_uri", redirect: "https://app.test/other"},
		{name: "redirect_uri without its query", redirect: "https://app.test/callback"},
		{name: "another client", client: &credentials{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code := e.authorize(verifier, "learner-1")
			if tt.before != nil {
				tt.before()
			}
			cfg := e.appConfig(cmpOr(tt.redirect, testRedirect))
			if tt.client != nil {
				other, secret, err := CreateClient(t.Context(), e.store, e.clock.Now(), testOrg,
					[]string{"progress.read"}, []string{"authorization_code"}, []string{testRedirect})
				if err != nil {
					t.Fatal(err)
				}
				cfg.ClientID, cfg.ClientSecret = other, secret
			}
			_, err := cfg.Exchange(t.Context(), code, oauth2.VerifierOption(cmpOr(tt.verifier, verifier)))
			wantGrantError(t, err)
			// A failed exchange spends the code too.
			_, err = e.appConfig(testRedirect).Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
			wantGrantError(t, err)
		})
	}
}

func TestAuthorizeErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A client with a redirect URI but without authorization_code, which
	// CreateClient refuses to register.
	if err := e.store.CreateClient(t.Context(), &store.Client{ID: "lc_ccOnly", OrgID: testOrg, SecretHash: []byte("x"),
		Scopes: []string{"content.read"}, GrantTypes: []string{"client_credentials"}, RedirectURIs: []string{testRedirect},
		CreatedAt: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	valid := func() url.Values {
		return url.Values{
			"response_type":         {"code"},
			"client_id":             {e.app.id},
			"redirect_uri":          {testRedirect},
			"scope":                 {"service-api/progress.read"},
			"state":                 {"s 1"},
			"code_challenge":        {oauth2.S256ChallengeFromVerifier(oauth2.GenerateVerifier())},
			"code_challenge_method": {"S256"},
			"login_hint":            {"learner-1"},
		}
	}
	tests := []struct {
		name      string
		edit      func(url.Values)
		method    string
		wantError string
		wantShown bool // 400 here, no redirect
	}{
		{name: "no client_id", edit: func(q url.Values) { q.Del("client_id") }, wantError: "invalid_request", wantShown: true},
		{name: "unknown client", edit: func(q url.Values) { q.Set("client_id", "lc_nobody") }, wantError: "invalid_request", wantShown: true},
		{name: "no redirect_uri", edit: func(q url.Values) { q.Del("redirect_uri") }, wantError: "invalid_request", wantShown: true},
		{name: "unregistered redirect_uri", edit: func(q url.Values) { q.Set("redirect_uri", "http://evil.test/callback") },
			wantError: "invalid_request", wantShown: true},
		{name: "redirect_uri not exact", edit: func(q url.Values) { q.Set("redirect_uri", testRedirect+"&x=2") },
			wantError: "invalid_request", wantShown: true},
		{name: "repeated redirect_uri", edit: func(q url.Values) { q.Add("redirect_uri", testRedirect) },
			wantError: "invalid_request", wantShown: true},
		{name: "POST", method: "POST", wantError: "invalid_request", wantShown: true},
		{name: "response_type token", edit: func(q url.Values) { q.Set("response_type", "token") }, wantError: "unsupported_response_type"},
		{name: "no response_type", edit: func(q url.Values) { q.Del("response_type") }, wantError: "invalid_request"},
		{name: "client lacks authorization_code", edit: func(q url.Values) { q.Set("client_id", "lc_ccOnly") }, wantError: "unauthorized_client"},
		{name: "scope the client lacks", edit: func(q url.Values) { q.Set("scope", "service-api/media.download") }, wantError: "invalid_scope"},
		{name: "no code_challenge", edit: func(q url.Values) { q.Del("code_challenge") }, wantError: "invalid_request"},
		{name: "plain method", edit: func(q url.Values) { q.Set("code_challenge_method", "plain") }, wantError: "invalid_request"},
		{name: "no method", edit: func(q url.Values) { q.Del("code_challenge_method") }, wantError: "invalid_request"},
		{name: "malformed challenge", edit: func(q url.Values) { q.Set("code_challenge", "short") }, wantError: "invalid_request"},
		{name: "no login_hint", edit: func(q url.Values) { q.Del("login_hint") }, wantError: "invalid_request"},
		{name: "login_hint with a space", edit: func(q url.Values) { q.Set("login_hint", "a b") }, wantError: "invalid_request"},
		{name: "repeated scope", edit: func(q url.Values) { q.Add("scope", "service-api/progress.read") }, wantError: "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := valid()
			if tt.edit != nil {
				tt.edit(q)
			}
			req, _ := http.NewRequest(cmpOr(tt.method, "GET"), e.srv.URL+"/oauth2/authorize?"+q.Encode(), nil)
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if tt.wantShown {
				wantStatus := 400
				if tt.method == "POST" {
					wantStatus = 405
				}
				if resp.StatusCode != wantStatus || resp.Header.Get("Location") != "" {
					t.Fatalf("got %d, Location %q, want %d without a redirect", resp.StatusCode, resp.Header.Get("Location"), wantStatus)
				}
				if code, _ := oauthErr(t, body); code != tt.wantError {
					t.Errorf("error: got %q, want %q", code, tt.wantError)
				}
				return
			}
			if resp.StatusCode != http.StatusFound {
				t.Fatalf("status: got %d, want 302 (%s)", resp.StatusCode, body)
			}
			loc, err := url.Parse(resp.Header.Get("Location"))
			if err != nil {
				t.Fatal(err)
			}
			got := loc.Query()
			if got.Get("error") != tt.wantError || got.Get("error_description") == "" {
				t.Errorf("error: got %q (%q), want %q with a description", got.Get("error"), got.Get("error_description"), tt.wantError)
			}
			if got.Get("state") != "s 1" || got.Get("app") != "1" || got.Has("code") {
				t.Errorf("redirect query: got %v, want state and app kept, no code", got)
			}
		})
	}
}

func TestMetadata(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp, err := http.Get(e.srv.URL + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("got %d %q, want 200 application/json", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"issuer":                                e.srv.URL,
		"authorization_endpoint":                e.srv.URL + "/oauth2/authorize",
		"token_endpoint":                        e.srv.URL + "/oauth2/token",
		"jwks_uri":                              e.srv.URL + "/.well-known/jwks.json",
		"response_types_supported":              []any{"code"},
		"grant_types_supported":                 []any{"client_credentials", "authorization_code"},
		"token_endpoint_auth_methods_supported": []any{"client_secret_basic", "client_secret_post"},
		"code_challenge_methods_supported":      []any{"S256"},
		"scopes_supported": []any{"service-api/content.read", "service-api/content.export", "service-api/media.download",
			"service-api/testprep.read", "service-api/progress.read", "service-api/progress.write"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("metadata:\ngot  %v\nwant %v", got, want)
	}
}

func TestJWKSDocument(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp, err := http.Get(e.srv.URL + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if got := resp.Header.Get("Cache-Control"); got != "public, max-age=300" {
		t.Errorf("Cache-Control: got %q, want public, max-age=300", got)
	}
	inProcess, err := e.idp.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != string(inProcess) {
		t.Errorf("served JWKS %s, want JWKS() %s", body, inProcess)
	}
	if keys := e.jwks(); len(keys) != 1 {
		t.Errorf("got %d keys, want 1", len(keys))
	}
	// The members are exactly those of an RFC 8037 public key.
	var set struct{ Keys []map[string]any }
	json.Unmarshal(body, &set)
	var names []string
	for k := range set.Keys[0] {
		names = append(names, k)
	}
	slices.Sort(names)
	if want := []string{"alg", "crv", "kid", "kty", "use", "x"}; !slices.Equal(names, want) {
		t.Errorf("jwk members: got %v, want %v", names, want)
	}
}

// tokenKID obtains a client_credentials token and returns its verified kid.
func (e *env) tokenKID() string {
	e.t.Helper()
	cfg := clientcredentials.Config{ClientID: e.machine.id, ClientSecret: e.machine.secret, TokenURL: e.tokenURL()}
	tok, err := cfg.Token(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	_, kid := e.verify(tok.AccessToken)
	return kid
}

// TestKeysPersist: the signing key survives a restart on the same store;
// rotation is in keys_test.go.
func TestKeysPersist(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.tokenKID()
	e.serve(t) // a restart on the same database
	if got := e.tokenKID(); got != first {
		t.Errorf("after restart: got kid %q, want %q", got, first)
	}
}

func TestConcurrentTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := clientcredentials.Config{ClientID: e.machine.id, ClientSecret: e.machine.secret, TokenURL: e.tokenURL()}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := cfg.Token(context.Background())
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestCreateClient(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	now := time.Now()
	tests := []struct {
		name      string
		org       string
		scopes    []string
		grants    []string
		redirects []string
		wantErr   error
	}{
		{"machine", testOrg, []string{"content.read"}, nil, nil, nil},
		{"learner app", testOrg, []string{"service-api/progress.read"}, []string{"authorization_code"}, []string{"https://a.test/cb"}, nil},
		{"loopback http", testOrg, []string{"progress.read"}, []string{"authorization_code"}, []string{"http://127.0.0.1:8000/cb"}, nil},
		{"custom scheme", testOrg, []string{"progress.read"}, []string{"authorization_code"}, []string{"com.example.app:/cb"}, ErrBadClient},
		{"http off loopback", testOrg, []string{"progress.read"}, []string{"authorization_code"}, []string{"http://a.test/cb"}, ErrBadClient},
		{"empty grant types", testOrg, []string{"content.read"}, []string{}, nil, ErrBadClient},
		{"no scopes", testOrg, nil, nil, nil, ErrBadClient},
		{"unknown scope", testOrg, []string{"admin"}, nil, nil, ErrBadClient},
		{"unknown grant", testOrg, []string{"content.read"}, []string{"password"}, nil, ErrBadClient},
		{"code without redirect", testOrg, []string{"content.read"}, []string{"authorization_code"}, nil, ErrBadClient},
		{"redirect without code", testOrg, []string{"content.read"}, nil, []string{"https://a.test/cb"}, ErrBadClient},
		{"relative redirect", testOrg, []string{"content.read"}, []string{"authorization_code"}, []string{"/cb"}, ErrBadClient},
		{"redirect with fragment", testOrg, []string{"content.read"}, []string{"authorization_code"}, []string{"https://a.test/cb#x"}, ErrBadClient},
		{"unknown org", "org-none", []string{"content.read"}, nil, nil, store.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, secret, err := CreateClient(t.Context(), s, now, tt.org, tt.scopes, tt.grants, tt.redirects)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err: got %v, want %v", err, tt.wantErr)
			}
			if errors.Is(err, ErrBadClient) {
				// The admin API writes this body as it is.
				var ae *apierr.Error
				if !errors.As(err, &ae) || ae.Status() != 400 || ae.Parameter == "" {
					t.Errorf("err %v: want a 400 API error naming the parameter", err)
				}
			}
			if err != nil {
				return
			}
			c, err := s.GetClient(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if string(c.SecretHash) == secret || !strings.HasPrefix(string(c.SecretHash), "$2") {
				t.Errorf("stored secret hash %q, want a bcrypt hash", c.SecretHash)
			}
			for _, sc := range c.Scopes {
				if strings.HasPrefix(sc, "service-api/") {
					t.Errorf("stored scope %q, want the suffix", sc)
				}
			}
		})
	}
}
