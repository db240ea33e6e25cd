package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/lectern-api/lectern/origin/idp"
	"github.com/lectern-api/lectern/origin/idp/idptest"
	"github.com/lectern-api/lectern/worker/wasmbuild"
	"github.com/lectern-api/lectern/worker/wazero"
)

// Issue #28, point 6: every origin on one PostgreSQL database runs an
// identity provider, behind the one URL that is LECTERN_ISSUER (here a
// round-robin proxy, as a load balancer would be). Tokens fetched through
// it come from both providers, name the issuer, and verify at both
// origins and at an edge configured with LECTERN_ISSUER alone; both
// providers serve the same JWKS and discovery document, whose URLs name
// the issuer; a key one origin creates at a rotation is served and
// accepted by the other; and with one origin down the other issues.
func TestIdPOnEveryOrigin(t *testing.T) {
	dsn := pgDSN(t, "the identity provider on several origins (issue #28)")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String() // the balancer's URL, known before any origin starts

	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	boot := func(name, iss string) *testStack {
		return bootStack(t, testEnv(dir, map[string]string{
			"LECTERN_DB": dsn, "LECTERN_ISSUER": iss, "LECTERN_TEST_CLOCK": "1", "LECTERN_DEMO": "",
			"LECTERN_BUNDLE_DIR": filepath.Join(dir, "bundles-"+name),
		}), nil)
	}
	// One origin is given the URL with a trailing slash: the same issuer.
	a, b := boot("a", issuer+"/"), boot("b", issuer)
	var bClosed atomic.Bool
	t.Cleanup(func() {
		a.Close()
		if !bClosed.Load() {
			b.Close()
		}
	})
	if a.IdPURL == issuer || b.IdPURL == issuer || a.IdPURL == b.IdPURL {
		t.Fatalf("providers %s and %s, issuer %s", a.IdPURL, b.IdPURL, issuer)
	}
	proxy := &issuerProxy{backends: []string{a.IdPURL, b.IdPURL}, hits: map[string]map[string]int{}}
	srv := &http.Server{Handler: proxy}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	// The discovery document, the same from each provider and through
	// the issuer's URL, names the issuer alone.
	meta := getJSON[map[string]any](t, issuer+"/.well-known/oauth-authorization-server")
	for _, p := range []*testStack{a, b} {
		if got := getJSON[map[string]any](t, p.IdPURL+"/.well-known/oauth-authorization-server"); !equalJSON(got, meta) {
			t.Errorf("discovery of %s:\n%v\nthrough the issuer:\n%v", p.IdPURL, got, meta)
		}
	}
	for field, want := range map[string]string{"issuer": issuer, "token_endpoint": issuer + "/oauth2/token",
		"authorization_endpoint": issuer + "/oauth2/authorize", "jwks_uri": issuer + "/.well-known/jwks.json"} {
		if meta[field] != want {
			t.Errorf("discovery %s = %v, want %s", field, meta[field], want)
		}
	}
	assertSameJWKS(t, issuer, a, b)

	// The edge, configured as worker/cmd/edge is by LECTERN_ISSUER alone: its
	// JWKS URL is <issuer>/.well-known/jwks.json (worker/cmd/edge
	// TestEdgeFindsKeysFromIssuer checks that default).
	edge := startIssuerEdge(t, issuer, a, b)

	// A client of an organisation created through one origin's admin API.
	id, secret := a.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: meta["token_endpoint"].(string),
		Scopes: []string{"service-api/content.read"}}
	tokens := func(n int) []string {
		t.Helper()
		out := make([]string, n)
		for i := range out {
			tok, err := cc.Token(context.Background())
			if err != nil {
				t.Fatalf("token %d through the issuer: %v", i, err)
			}
			out[i] = tok.AccessToken
		}
		return out
	}
	verifyEverywhere := func(what string, tok string, at ...*testStack) {
		t.Helper()
		if iss := claim(t, tok, "iss"); iss != issuer {
			t.Errorf("%s: iss %q, want %q", what, iss, issuer)
		}
		for _, p := range at {
			if r := p.get("GET", "/v1/tiers", tok); r.status != 200 {
				t.Errorf("%s at the origin %s: %d %s", what, p.OriginURL, r.status, r.body)
			}
		}
		if edge != "" {
			if code, ecode, err := call(edge, "/v1/tiers", tok); err != nil || code != 200 {
				t.Errorf("%s at the edge: %d %s %v", what, code, ecode, err)
			}
		}
	}
	proxy.reset()
	for i, tok := range tokens(4) {
		verifyEverywhere(fmt.Sprintf("token %d", i), tok, a, b)
	}
	for _, p := range []*testStack{a, b} {
		if n := proxy.count(p.IdPURL, "/oauth2/token"); n == 0 {
			t.Errorf("no token request reached the provider of %s: %v", p.IdPURL, proxy.snapshot())
		}
	}

	// A learner app: the authorization request and the code's exchange
	// go to different providers (round robin); the code is in the
	// database, so either redeems it.
	learnerApp := func() string {
		const redirect = "https://app.test/callback"
		body, _ := json.Marshal(map[string]any{"scopes": []string{"content.read"}, "grantTypes": []string{"authorization_code"},
			"redirectUris": []string{redirect}})
		code, m := b.admin("POST", "/admin/v1/orgs/acme/clients", string(body))
		if code != 201 {
			t.Fatalf("create learner app: %d %v", code, m)
		}
		proxy.reset()
		tok, err := idptest.LearnerToken(context.Background(),
			idptest.LearnerApp(issuer, m["clientId"].(string), m["clientSecret"].(string), redirect, "content.read"), "learner-1")
		if err != nil {
			t.Fatalf("learner token through the issuer: %v", err)
		}
		return tok.AccessToken
	}
	verifyEverywhere("learner token", learnerApp(), a, b)
	if proxy.count(a.IdPURL, "/oauth2/authorize")+proxy.count(a.IdPURL, "/oauth2/token") != 1 {
		t.Errorf("the authorization and its exchange did not go one to each provider: %v", proxy.snapshot())
	}

	// Rotation. Past RotateAfter-PublishAhead on the test clock (stored:
	// both origins follow it), a token request at origin a's provider
	// creates the next key; origin b's provider, asked nothing until
	// then, serves it in its JWKS.
	keysBefore := jwksKids(t, a.IdPURL)
	if len(keysBefore) != 1 {
		t.Fatalf("keys before the rotation: %v", keysBefore)
	}
	advance(t, a, b, idp.DefaultRotateAfter-idp.DefaultPublishAhead+time.Minute)
	direct := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: a.IdPURL + "/oauth2/token",
		Scopes: []string{"service-api/content.read"}}
	tok, err := direct.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	verifyEverywhere("a token at the rotation", tok.AccessToken, a, b)
	keysA := jwksKids(t, a.IdPURL)
	if len(keysA) != 2 || !slices.Contains(keysA, keysBefore[0]) {
		t.Fatalf("origin a's JWKS after its rotation: %v (before: %v)", keysA, keysBefore)
	}
	newKid := keysA[slices.IndexFunc(keysA, func(k string) bool { return k != keysBefore[0] })]
	if !logged(a, "idp: new signing key", newKid) || logged(b, "idp: new signing key", "") {
		t.Errorf("the new key %s was not created by origin a's provider alone:\na:\n%s\nb:\n%s", newKid, a.out, b.out)
	}
	// jwksReloadEvery (1 s) bounds how late b's JWKS is; give it 5.
	deadline := time.Now().Add(5 * time.Second)
	for keysB := jwksKids(t, b.IdPURL); !slices.Equal(keysB, keysA); keysB = jwksKids(t, b.IdPURL) {
		if time.Now().After(deadline) {
			t.Fatalf("origin b's JWKS %v, origin a's %v", keysB, keysA)
		}
		time.Sleep(100 * time.Millisecond)
	}
	assertSameJWKS(t, issuer, a, b)

	// Once the new key signs (PublishAhead later, moved through b this
	// time), tokens of either provider carry it and verify everywhere.
	advance(t, b, a, idp.DefaultPublishAhead+time.Minute)
	proxy.reset()
	for i, tok := range tokens(4) {
		if got := kid(t, tok); got == keysBefore[0] {
			t.Errorf("token %d after PublishAhead is signed by the old key %s", i, got)
		}
		verifyEverywhere(fmt.Sprintf("token %d of the new key", i), tok, a, b)
	}
	if proxy.count(a.IdPURL, "/oauth2/token") == 0 || proxy.count(b.IdPURL, "/oauth2/token") == 0 {
		t.Errorf("not both providers issued: %v", proxy.snapshot())
	}

	// One origin down: the issuer's URL still issues (the balancer sends
	// the requests to the provider that answers), and the tokens verify
	// at the origin that is left and at the edge.
	bClosed.Store(true)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	proxy.reset()
	for i, tok := range tokens(3) {
		verifyEverywhere(fmt.Sprintf("token %d with origin b down", i), tok, a)
	}
	if got := getJSON[map[string]any](t, issuer+"/.well-known/oauth-authorization-server"); !equalJSON(got, meta) {
		t.Errorf("discovery with origin b down: %v", got)
	}
	if n := proxy.count(b.IdPURL, "/oauth2/token"); n != 0 {
		t.Errorf("%d token requests answered by a closed provider", n)
	}
}

// advance moves the test clock by d through from's admin API, and has to
// adopt it at once (it would within clockSync).
func advance(t *testing.T, from, to *testStack, d time.Duration) {
	t.Helper()
	if code, m := from.admin("POST", "/admin/v1/clock", fmt.Sprintf(`{"advanceSeconds":%d}`, int64(d/time.Second))); code != 200 {
		t.Fatalf("advance the clock: %d %v", code, m)
	}
	if err := to.Clock().Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := from.Clock().Now().Sub(to.Clock().Now()); diff > time.Second || diff < -time.Second {
		t.Fatalf("the origins' clocks differ by %v", diff)
	}
}

// logged reports whether a line of s's log holds both what and also.
func logged(s *testStack, what, also string) bool {
	for line := range strings.Lines(s.out.String()) {
		if strings.Contains(line, what) && strings.Contains(line, also) {
			return true
		}
	}
	return false
}

// assertSameJWKS checks that each provider and the issuer's URL serve the
// same key set.
func assertSameJWKS(t *testing.T, issuer string, ps ...*testStack) {
	t.Helper()
	want := getJSON[map[string]any](t, issuer+"/.well-known/jwks.json")
	for _, p := range ps {
		if got := getJSON[map[string]any](t, p.IdPURL+"/.well-known/jwks.json"); !equalJSON(got, want) {
			t.Errorf("JWKS of %s:\n%v\nthrough the issuer:\n%v", p.IdPURL, got, want)
		}
	}
}

// jwksKids lists the kids of the JWKS served at base, in its order.
func jwksKids(t *testing.T, base string) []string {
	t.Helper()
	set := getJSON[struct{ Keys []struct{ Kid string } }](t, base+"/.well-known/jwks.json")
	kids := make([]string, len(set.Keys))
	for i, k := range set.Keys {
		kids[i] = k.Kid
	}
	return kids
}

func getJSON[T any](t *testing.T, url string) T {
	t.Helper()
	var v T
	resp, err := peerClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return v
}

func equalJSON(x, y any) bool {
	bx, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return bytes.Equal(bx, by)
}

// claim is a string claim of a JWT's payload, unverified.
func claim(t *testing.T, jwt, name string) string {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", jwt)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	s, _ := m[name].(string)
	return s
}

// issuerProxy is the URL in front of the identity providers: a tiny
// reverse proxy sending each request to the next provider, round robin,
// and to the one after when a provider gives no connection (as a load
// balancer's health check would take a dead one out). It follows no
// redirect: the authorization endpoint's 302 goes back to the client.
type issuerProxy struct {
	backends []string
	next     atomic.Uint64

	mu   sync.Mutex
	hits map[string]map[string]int // backend, path: requests answered
}

func (p *issuerProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	start := p.next.Add(1) - 1
	for i := range p.backends {
		backend := p.backends[(int(start)+i)%len(p.backends)]
		req, err := http.NewRequestWithContext(r.Context(), r.Method, backend+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			continue // no answer from this one: the next
		}
		p.mu.Lock()
		if p.hits[backend] == nil {
			p.hits[backend] = map[string]int{}
		}
		p.hits[backend][r.URL.Path]++
		p.mu.Unlock()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(w, "no identity provider answers", http.StatusBadGateway)
}

func (p *issuerProxy) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.hits)
}

func (p *issuerProxy) count(backend, path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[backend][path]
}

func (p *issuerProxy) snapshot() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprint(p.hits)
}

// startIssuerEdge serves the edge module (a standard Go build, run by
// the wazero host as worker/cmd/edge runs it) in front of every origin given,
// configured with the issuer alone: the JWKS URL is derived from it as
// worker/cmd/edge derives it. Its clock is the test clock of the first origin.
// It returns the edge's URL, or "" in -short (no module is built).
func startIssuerEdge(t *testing.T, issuer string, first *testStack, more ...*testStack) string {
	t.Helper()
	if testing.Short() {
		t.Log("-short: no edge (building its module takes a while)")
		return ""
	}
	mod := edgeModule(t)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	edgeURL := "http://" + ln.Addr().String()
	urls := []string{first.OriginURL}
	for _, o := range more {
		urls = append(urls, o.OriginURL)
	}
	h, err := wazero.New(ctx, mod, wazero.Config{
		Origins: urls, Issuer: issuer, JWKSURL: strings.TrimSuffix(issuer, "/") + "/.well-known/jwks.json",
		Audience: "lectern-api", Secret: "a-test-secret-of-at-least-32-characters",
		ResourceMetadata: edgeURL + "/.well-known/oauth-protected-resource", Instances: 1, Now: first.Clock().Now,
		DialTimeout: time.Second, OriginBackoff: time.Second,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		h.Close(context.Background())
	})
	return edgeURL
}

// edgeModule builds the edge module with standard Go and compiles it for
// the wazero host, closed when t ends.
func edgeModule(t *testing.T) *wazero.Module {
	t.Helper()
	wasm := filepath.Join(t.TempDir(), "worker.wasm")
	if err := wasmbuild.BuildModule(".", "", wasm, "github.com/lectern-api/lectern/worker/wasm"); err != nil {
		t.Fatalf("build the edge module: %v", err)
	}
	code, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := wazero.Compile(context.Background(), code)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(context.Background()) })
	return mod
}
