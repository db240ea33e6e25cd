package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/internal/private"
	"github.com/lectern-api/lectern/origin/store/pgstore"
	"github.com/lectern-api/lectern/shared/logbuftest"
	"github.com/lectern-api/lectern/shared/subkey"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

// TestStartupRefusals (issue #14, point 5): with PostgreSQL an origin
// refuses to start without LECTERN_SECRET or LECTERN_ISSUER, which every
// origin on the database must share, naming the variable, and creates no
// var/secret of its own; without its own identity provider it needs
// LECTERN_ISSUER whatever the database. SQLite with no settings starts
// (make run).
func TestStartupRefusals(t *testing.T) {
	t.Chdir(t.TempDir())
	const pg = "postgres://lectern@127.0.0.1:1/none?sslmode=disable" // never reached
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string // the variables the error names
	}{
		{"postgres without a secret", map[string]string{"LECTERN_DB": pg, "LECTERN_ISSUER": "https://auth.example"},
			[]string{"LECTERN_SECRET"}},
		{"postgres without an issuer", map[string]string{"LECTERN_DB": pg, "LECTERN_SECRET": "a-test-secret-of-at-least-32-characters"},
			[]string{"LECTERN_ISSUER"}},
		{"postgres without either", map[string]string{"LECTERN_DB": "postgresql://x/y"},
			[]string{"LECTERN_SECRET", "LECTERN_ISSUER"}},
		{"no identity provider and no issuer", map[string]string{"LECTERN_IDP_ADDR": "off"},
			[]string{"LECTERN_ISSUER"}},
		{"no public API", map[string]string{"LECTERN_ORIGIN_ADDR": "off"}, []string{"LECTERN_ORIGIN_ADDR"}},
		{"malformed URL keys", map[string]string{"LECTERN_URL_KEYS": "k1=too-short"}, []string{"LECTERN_URL_KEYS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"LECTERN_ORIGIN_ADDR": "127.0.0.1:0", "LECTERN_IDP_ADDR": "127.0.0.1:0",
				"LECTERN_ADMIN_ADDR": "127.0.0.1:0"}
			for k, v := range tc.env {
				env[k] = v
			}
			err := run(context.Background(), nil, func(k string) string { return env[k] }, io.Discard)
			if err == nil {
				t.Fatal("started")
			}
			for _, v := range tc.want {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("the error does not name %s: %v", v, err)
				}
			}
			if _, err := os.Stat(private.StateDir); !os.IsNotExist(err) {
				t.Errorf("a refused start left %s/ (%v)", private.StateDir, err)
			}
		})
	}

	// Past the configuration too: the secret of a PostgreSQL deployment
	// is never made up in var/ (origin/internal/private's
	// TestSharedSecretNotMadeUp).

	// SQLite: every default, the issuer left to the bound provider.
	cfg, err := parseConfig(nil, func(string) string { return "" })
	if err != nil || cfg.Issuer != "" || cfg.JWKSURL != "" {
		t.Errorf("defaults: issuer %q, JWKS URL %q, %v; want both resolved at start", cfg.Issuer, cfg.JWKSURL, err)
	}
	// The dev provider writes its issuer without a trailing slash; the
	// verifier expects it so. Another issuer's is its own business.
	for _, tc := range []struct{ jwks, want string }{{"", "https://auth.example"}, {"https://auth.example/jwks", "https://auth.example/"}} {
		env := map[string]string{"LECTERN_ISSUER": "https://auth.example/", "LECTERN_JWKS_URL": tc.jwks}
		if cfg, err := parseConfig(nil, func(k string) string { return env[k] }); err != nil || cfg.Issuer != tc.want {
			t.Errorf("LECTERN_ISSUER with a slash, JWKS URL %q: issuer %q, %v; want %q", tc.jwks, cfg.Issuer, err, tc.want)
		}
	}
}

// TestOtherIssuer: with LECTERN_JWKS_URL the origin verifies another
// OAuth2 server's tokens with its JWKS, fetched over HTTP (README, "Using
// another OAuth2 server"), its issuer kept as it is, trailing slash and
// all.
func TestOtherIssuer(t *testing.T) {
	jwks := tokentest.JWKS("other-1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(jwks) }))
	defer srv.Close()
	const issuer = "https://other.example/"
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	s := bootStack(t, testEnv(dir, map[string]string{"LECTERN_ISSUER": issuer, "LECTERN_JWKS_URL": srv.URL}), nil)
	defer s.Close()
	s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	now := s.Clock().Now()
	raw := tokentest.Mint("other-1", tokentest.Claims{"iss": issuer, "aud": "lectern-api", "sub": "c1",
		"client_id": "c1", "org": "acme", "scope": "service-api/content.read", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()})
	if r := s.get("GET", "/v1/tiers", raw); r.status != 200 {
		t.Fatalf("the other issuer's token: %d %s", r.status, r.body)
	}
}

// TestListenersOff (issue #14, point 5): with LECTERN_IDP_ADDR and
// LECTERN_ADMIN_ADDR off an origin binds only its public API, and accepts
// the dev provider's tokens from the keys in its database: here tokens
// of the provider of an origin that ran on it before and is gone.
func TestListenersOff(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	a := bootStack(t, testEnv(dir, nil), nil)
	id, secret := a.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := a.token(id, secret, "content.read")
	issuer := a.IdPURL
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	b := bootStack(t, testEnv(dir, map[string]string{"LECTERN_IDP_ADDR": "off", "LECTERN_ADMIN_ADDR": "off",
		"LECTERN_ISSUER": issuer}), nil)
	defer b.Close()
	if b.IdPURL != "" || b.AdminURL != "" || b.Served() != 1 {
		t.Errorf("identity provider %q, admin API %q, %d servers: want only the public API", b.IdPURL, b.AdminURL, b.Served())
	}
	for _, line := range []string{"identity provider  off", "admin API          off"} {
		if !strings.Contains(b.out.String(), line) {
			t.Errorf("the banner lacks %q:\n%s", line, b.out)
		}
	}
	if r := b.get("GET", "/v1/tiers", tok); r.status != 200 {
		t.Fatalf("a token of the dev provider's key in the database: %d %s", r.status, r.body)
	}
	b.expect(b.get("GET", "/v1/tiers", ""), 401, "invalid_token")
	var meta struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	json.Unmarshal(b.get("GET", "/.well-known/oauth-protected-resource", "").body, &meta)
	if len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != issuer {
		t.Errorf("authorization servers %v, want [%s]", meta.AuthorizationServers, issuer)
	}
}

// within polls ok every 50 ms until it holds or 8 s have passed.
func within(ok func() bool) bool {
	for deadline := time.Now().Add(8 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ok() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// TestOriginsSharePostgres (issue #14, point 5): two origins started at
// once on one empty PostgreSQL database, with the settings they share and
// nothing copied from one to the other, agree on one signing key and
// accept each other's tokens; once one is stopped, the other still
// accepts its tokens (the keys are in the database, not behind the
// stopped origin's JWKS URL); a key created in the database after they
// started is accepted at its first token, and listed in the other's
// JWKS; and an origin without identity provider and admin API accepts
// them all.
func TestOriginsSharePostgres(t *testing.T) {
	dsn := pgDSN(t, "origins sharing PostgreSQL")
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	const issuer = "https://auth.lectern.test" // where clients would reach a provider; never fetched
	getenv := testEnv(dir, map[string]string{"LECTERN_DB": dsn, "LECTERN_ISSUER": issuer})

	var (
		stacks [2]*testStack
		errs   [2]error
		wg     sync.WaitGroup
		gate   = make(chan struct{})
	)
	for i := range stacks {
		wg.Go(func() {
			cfg, err := parseConfig(nil, getenv)
			if err != nil {
				errs[i] = err
				return
			}
			cfg.BundleDir = filepath.Join(dir, "bundles-"+strconv.Itoa(i)) // one bundle directory an origin
			out := new(logbuftest.Buffer)
			<-gate
			st, err := start(context.Background(), cfg, out)
			if err == nil {
				stacks[i] = &testStack{stack: st, t: t, out: out}
			}
			errs[i] = err
		})
	}
	close(gate)
	wg.Wait()
	for i, st := range stacks {
		if st != nil {
			t.Cleanup(func() { st.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("start %d: %v", i, errs[i])
		}
	}
	a, b := stacks[0], stacks[1]
	if keys, err := b.Store().SigningKeys(t.Context()); err != nil || len(keys) != 1 {
		t.Fatalf("two origins started at once stored %d signing keys (%v), want 1", len(keys), err)
	}

	id, secret := a.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	fromA, fromB := a.token(id, secret, "content.read"), b.token(id, secret, "content.read")
	if kid(t, fromA) != kid(t, fromB) {
		t.Errorf("the providers sign with %q and %q: want one key", kid(t, fromA), kid(t, fromB))
	}
	for _, c := range []struct {
		name string
		s    *testStack
		tok  string
	}{{"b's token at a", a, fromB}, {"a's token at b", b, fromA}} {
		if r := c.s.get("GET", "/v1/tiers", c.tok); r.status != 200 {
			t.Errorf("%s: %d %s", c.name, r.status, r.body)
		}
	}

	// a stops: a token its provider issued before, new to b, is accepted.
	unseen := a.token(id, secret, "content.read")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if r := b.get("GET", "/v1/tiers", unseen); r.status != 200 {
		t.Fatalf("a token of the stopped origin's provider: %d %s", r.status, r.body)
	}

	// A provider on the database that rotates every 2 s makes a key b has
	// not read; its first token is accepted, and b's JWKS lists it.
	ps, err := pgstore.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	fast, err := idp.New(t.Context(), idp.Config{Issuer: issuer, Audience: "lectern-api", Store: ps,
		SealKey: subkey.Derive([]byte(getenv("LECTERN_SECRET")), subkey.IDPKeys), RotateAfter: 2 * time.Second, PublishAhead: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fast.Handler())
	defer srv.Close()
	viaFast := &testStack{t: t, stack: &stack{IdPURL: srv.URL}}
	var newer string
	if !within(func() bool {
		newer = viaFast.token(id, secret, "content.read")
		return kid(t, newer) != kid(t, fromA)
	}) {
		t.Fatal("the fast provider signs with no new key")
	}
	var r response
	if !within(func() bool { r = b.get("GET", "/v1/tiers", newer); return r.status == 200 }) {
		t.Errorf("a token of a key made after b started: %d %s", r.status, r.body)
	}
	if !within(func() bool { return jwksHas(t, b.IdPURL, kid(t, newer)) }) {
		t.Errorf("b's JWKS does not list the key %q another provider made", kid(t, newer))
	}

	// An origin without identity provider and admin API.
	c := bootStack(t, testEnv(dir, map[string]string{"LECTERN_DB": dsn, "LECTERN_ISSUER": issuer,
		"LECTERN_IDP_ADDR": "off", "LECTERN_ADMIN_ADDR": "off"}), nil)
	defer c.Close()
	if c.IdPURL != "" || c.AdminURL != "" || c.Served() != 1 {
		t.Errorf("identity provider %q, admin API %q, %d servers: want only the public API", c.IdPURL, c.AdminURL, c.Served())
	}
	for name, tok := range map[string]string{"stopped a's": unseen, "b's": fromB, "the fast provider's": newer} {
		if r := c.get("GET", "/v1/tiers", tok); r.status != 200 {
			t.Errorf("%s token at an origin without a provider: %d %s", name, r.status, r.body)
		}
	}
}

// jwksHas reports whether the JWKS of the provider at base lists kid.
func jwksHas(t *testing.T, base, kid string) bool {
	t.Helper()
	resp, err := http.Get(base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set struct{ Keys []struct{ Kid string } }
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	for _, k := range set.Keys {
		if k.Kid == kid {
			return true
		}
	}
	return false
}
