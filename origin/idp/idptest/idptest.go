// Package idptest signs a learner in at the dev identity provider as a
// learner app does, for tests and tools (tools/soak): the authorization
// request with PKCE S256 and login_hint naming the learner, which the dev
// provider approves at once with a 302 to the redirect URI, then the
// code's exchange at the token endpoint.
package idptest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/lectern-api/lectern/shared/scope"
	"golang.org/x/oauth2"
)

// LearnerApp is the OAuth configuration of a learner app (an
// authorization_code client) of the provider at issuer, its scopes given
// as suffixes (progress.read).
func LearnerApp(issuer, clientID, secret, redirectURI string, scopes ...string) *oauth2.Config {
	full := make([]string, len(scopes))
	for i, s := range scopes {
		full[i] = scope.Full(s)
	}
	return &oauth2.Config{ClientID: clientID, ClientSecret: secret, RedirectURL: redirectURI, Scopes: full,
		Endpoint: oauth2.Endpoint{AuthURL: issuer + "/oauth2/authorize", TokenURL: issuer + "/oauth2/token", AuthStyle: oauth2.AuthStyleInHeader}}
}

// noRedirect leaves the provider's 302 unfollowed: its Location holds the
// code.
var noRedirect = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// LearnerToken signs learner in with app and returns the token issued.
func LearnerToken(ctx context.Context, app *oauth2.Config, learner string) (*oauth2.Token, error) {
	verifier := oauth2.GenerateVerifier()
	req, err := http.NewRequestWithContext(ctx, "GET", app.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("login_hint", learner)), nil)
	if err != nil {
		return nil, err
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil || res.StatusCode != http.StatusFound || loc.Query().Get("code") == "" {
		return nil, fmt.Errorf("authorize: %d, Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	tok, err := app.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		return nil, fmt.Errorf("learner token: %w", err)
	}
	return tok, nil
}
