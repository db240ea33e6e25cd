package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/bundles"
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

// stack is the whole origin opened in process by origin/wiring, as
// origin/cmd/origin opens it, on loopback listeners, with a new SQLite
// or PostgreSQL database (backend.go) and a bundle store in a temporary
// directory: the public API
// behind its access log, metrics and health, the identity provider (its
// tokens verified with the keys in the database), the meters, the edge's
// leases, the corpus followed. Only the admin API is off, and the access
// log lines are formatted as shipped but written nowhere.
type stack struct {
	OriginURL, IdPURL string
	Secret            string // LECTERN_SECRET shared with the edge
	// API is the public API as the origin serves it (wiring.Origin's
	// Handler: health, access log and metrics included), for the rows
	// that call it in process.
	API     http.Handler
	Content *server.Content
	// Bundles is the API's store of built export bundles, under the
	// bench's directory so that (k) can purge it before each run
	// (exports.go).
	Bundles *bundles.Store

	origin *wiring.Origin
	store  store.Store
	meters meter.Store
}

// startStack serves the corpus in cdir (the origin loads it, once) from a
// new stack on the database db (LECTERN_DB: a SQLite path or a
// postgres:// DSN, backend.go), its bundle store in dir; memLimit: the
// origin sets the memory limit itself, as origin/cmd/origin does without
// GOMEMLIMIT.
func startStack(ctx context.Context, dir, cdir, db string, log *slog.Logger, memLimit bool) (*stack, error) {
	st := &stack{Secret: "bench-" + rand.Text() + rand.Text()}
	// Leases on, at their defaults, as origin/cmd/origin wires them: an
	// edge asks for them only when its own leases are on (lease.go). The
	// leased edges' addresses are listed (LECTERN_EDGE_URLS).
	edges, err := edgeURLs()
	if err != nil {
		return nil, err
	}
	// The access log's lines as the origin writes them (JSON, info),
	// into nothing: the bench measures making them, not a terminal.
	access, err := telemetry.NewLogger(io.Discard, telemetry.DefaultFormat, telemetry.DefaultLevel)
	if err != nil {
		return nil, err
	}
	o, err := wiring.Open(ctx, wiring.Options{
		OriginAddr: "127.0.0.1:0", IdPAddr: "127.0.0.1:0", // no admin API
		DB: db, Corpus: cdir, Secret: st.Secret, Audience: audience,
		LicenseURL: "https://lectern.example/licence", Leases: wiring.LeaseSettings{Edges: edges},
		BundleDir: filepath.Join(dir, "bundles"), MemoryLimit: memLimit, Log: log, AccessLog: access,
	})
	if err != nil {
		return nil, err
	}
	st.origin, st.OriginURL, st.IdPURL = o, o.OriginURL, o.IdPURL
	st.API, st.Content, st.Bundles = o.Handler(), o.Content(), o.Bundles()
	st.store, st.meters = o.Store(), o.Meters()
	if err := st.createOrg(ctx, benchOrg, "Bench Organisation", nil); err != nil {
		st.Close()
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

// Close stops the origin: its servers, then its stores.
func (st *stack) Close() error { return st.origin.Close() }

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
