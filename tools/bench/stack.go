package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/auth"
	"github.com/lectern-api/lectern/origin/bundles"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/idp/idptest"
	"github.com/lectern-api/lectern/origin/licence"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/wiring"
	"github.com/lectern-api/lectern/shared/id"
	"github.com/lectern-api/lectern/shared/scope"
)

// audience is the token audience of the bench stack, as the origin's default.
const audience = "lectern-api"

// benchOrg is the organisation every request is made for: granted every
// tier, no caps, no quotas (licence.NewOrg's plan defaults).
const benchOrg = "bench"

// stack is the origin wired in process by origin/wiring, as
// origin/cmd/origin wires it, on loopback listeners, with a SQLite
// database and a bundle store in a temporary directory: the public API,
// the identity provider, meters.
type stack struct {
	OriginURL, IdPURL string
	Secret            string // LECTERN_SECRET shared with the edge
	API               *server.Server
	Content           *server.Content
	// Bundles is the API's store of built export bundles, the bench's
	// own so that (k) can purge it before each run (exports.go).
	Bundles *bundles.Store

	store   store.Store
	meters  meter.Store
	closers []func() error
	servers wiring.Servers
}

// startStack serves c from a new stack whose database lives in dir.
func startStack(ctx context.Context, dir string, c *corpus.Corpus, log *slog.Logger) (_ *stack, err error) {
	st := &stack{Secret: "bench-" + rand.Text() + rand.Text()}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	originLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen origin: %w", err)
	}
	st.closers = append(st.closers, func() error { originLn.Close(); return nil })
	idpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen identity provider: %w", err)
	}
	st.closers = append(st.closers, func() error { idpLn.Close(); return nil })
	st.OriginURL = "http://" + originLn.Addr().String()
	st.IdPURL = "http://" + idpLn.Addr().String()

	if st.Content, err = server.Build(c); err != nil {
		return nil, fmt.Errorf("build content: %w", err)
	}
	s, m, err := wiring.OpenStores(ctx, filepath.Join(dir, "lectern.db"), nil)
	if err != nil {
		return nil, fmt.Errorf("open stores: %w", err)
	}
	st.closers = append(st.closers, s.Close, m.Close)
	st.store, st.meters = s, m
	// The bench's own bundle store, under dir (removed with it): the
	// server's default would be a temporary directory left behind.
	if st.Bundles, err = bundles.Open(filepath.Join(dir, "bundles"), 0); err != nil {
		return nil, err
	}

	d := wiring.Deployment{Secret: []byte(st.Secret), PublicURL: st.OriginURL, Issuer: st.IdPURL, Audience: audience,
		LicenseURL: "https://lectern.example/licence"}
	provider, err := idp.New(ctx, d.IdP(s, time.Now, log))
	if err != nil {
		return nil, err
	}
	progress, err := wiring.ProgressOf(s)
	if err != nil {
		return nil, err
	}
	content := st.Content
	// Leases on, at their defaults, as origin/cmd/origin wires them: an
	// edge asks for them only when its own leases are on (lease.go). The
	// leased edges' addresses are listed (LECTERN_EDGE_URLS).
	edges, err := edgeURLs()
	if err != nil {
		return nil, err
	}
	leases := d.Leases(m, wiring.LeaseSettings{Edges: edges}, time.Now, log)
	st.API = d.API(wiring.Parts{Store: s, Meters: m, Progress: progress,
		Auth:    auth.New(auth.Config{Issuer: st.IdPURL, Audience: audience, JWKSURL: st.IdPURL + "/.well-known/jwks.json", Now: time.Now}),
		Content: func() *server.Content { return content }, Now: time.Now, Logger: log, Leases: leases,
		Bundles: st.Bundles})
	st.servers = wiring.Servers{Logger: log}
	st.servers.Serve(originLn, st.API)
	st.servers.Serve(idpLn, provider.Handler())

	if err := st.createOrg(ctx, benchOrg, "Bench Organisation", nil); err != nil {
		return nil, err
	}
	return st, nil
}

// createOrg creates the organisation orgID, granted every tier, on
// licence.NewOrg's plan changed by plan when not nil.
func (st *stack) createOrg(ctx context.Context, orgID, name string, plan func(*store.Org)) error {
	o := licence.NewOrg(time.Now())
	o.ID, o.Name, o.Grants = orgID, name, append([]string(nil), id.Tiers...)
	if plan != nil {
		plan(o)
	}
	if err := st.store.CreateOrg(ctx, o); err != nil {
		return fmt.Errorf("create org %s: %w", orgID, err)
	}
	return nil
}

// Close stops the servers, then the stores.
func (st *stack) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := []error{st.servers.Shutdown(ctx)}
	for i := len(st.closers) - 1; i >= 0; i-- {
		errs = append(errs, st.closers[i]())
	}
	return errors.Join(errs...)
}

// tokens registers a client of the bench org and returns n access tokens
// the identity provider issued to it (client_credentials, with scopes;
// content.read when none).
// Each is a distinct token, so requests bearing them spread over the edge
// host's instances as distinct clients' would.
func (st *stack) tokens(ctx context.Context, n int, scopes ...string) ([]string, error) {
	return st.tokensOf(ctx, benchOrg, n, scopes...)
}

// tokensOf is tokens of a client of the organisation org.
func (st *stack) tokensOf(ctx context.Context, org string, n int, scopes ...string) ([]string, error) {
	if len(scopes) == 0 {
		scopes = []string{scope.ContentRead}
	}
	full := make([]string, len(scopes))
	for i, s := range scopes {
		full[i] = scope.Full(s)
	}
	// Registered as the admin API registers clients.
	clientID, secret, err := idp.CreateClient(ctx, st.store, time.Now(), org, scopes,
		[]string{"client_credentials"}, nil)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, n)
	for range n {
		form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(full, " ")}}
		req, err := http.NewRequestWithContext(ctx, "POST", st.IdPURL+"/oauth2/token", strings.NewReader(form.Encode()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(clientID, secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("token: %w", err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("token: %w", err)
		}
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" {
			return nil, fmt.Errorf("token: status %d: %.300s", resp.StatusCode, body)
		}
		out = append(out, tok.AccessToken)
	}
	return out, nil
}

// learnerRedirect is the redirect URI of the bench's learner app.
const learnerRedirect = "https://bench.lectern.test/callback"

// learnerTokens registers a learner app of the bench org (an
// authorization_code client with scopes) and returns n access tokens
// the identity provider issued it for learner: each the authorization
// request with PKCE S256 and login_hint (the dev provider approves at
// once, naming the learner in the token), then the code's exchange
// (idptest.LearnerToken).
func (st *stack) learnerTokens(ctx context.Context, learner string, n int, scopes ...string) ([]string, error) {
	clientID, secret, err := idp.CreateClient(ctx, st.store, time.Now(), benchOrg, scopes,
		[]string{"authorization_code"}, []string{learnerRedirect})
	if err != nil {
		return nil, err
	}
	app := idptest.LearnerApp(st.IdPURL, clientID, secret, learnerRedirect, scopes...)
	out := make([]string, 0, n)
	for range n {
		tok, err := idptest.LearnerToken(ctx, app, learner)
		if err != nil {
			return nil, err
		}
		out = append(out, tok.AccessToken)
	}
	return out, nil
}
