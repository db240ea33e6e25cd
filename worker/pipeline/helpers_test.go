package pipeline

import (
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/token"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

// The fixed world of these tests.
var (
	t0       = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	t0ms     = t0.UnixMilli()
	testCfg  = Config{Origin: "http://origin.test/", JWKSURL: "http://idp.test/.well-known/jwks.json", Issuer: "http://idp.test", Audience: "lectern-api", Secret: "0123456789abcdef0123456789abcdef", ResourceMetadata: "http://edge.test/.well-known/oauth-protected-resource"}
	allScope = "service-api/content.read service-api/content.export service-api/testprep.read service-api/media.download"
)

// counter is a deterministic io.Reader for request ids.
type counter struct{ n byte }

func (c *counter) Read(b []byte) (int, error) {
	for i := range b {
		c.n++
		b[i] = c.n
	}
	return len(b), nil
}

func newPipeline() *Pipeline {
	cfg := testCfg
	cfg.Random = &counter{}
	return New(cfg)
}

// claims are a token's claims; sign fills the defaults.
type claims = tokentest.Claims

// sign makes an EdDSA JWT with key kid, issued at iat, living 900 s.
func sign(kid string, iat time.Time, c claims) string {
	full := claims{"iss": testCfg.Issuer, "aud": testCfg.Audience, "sub": "client1", "client_id": "client1",
		"org": "acme", "scope": allScope, "iat": iat.Unix(), "nbf": iat.Unix(), "exp": iat.Add(900 * time.Second).Unix(), "jti": "j1"}
	for k, v := range c {
		full[k] = v // nil removes k
	}
	return tokentest.Mint(kid, full)
}

// installKeys gives p a JWKS fetched at now, as a finished fetch would.
func installKeys(t testing.TB, p *Pipeline, now time.Time, kids ...string) {
	t.Helper()
	set, err := token.ParseJWKS(tokentest.JWKS(kids...))
	if err != nil {
		t.Fatal(err)
	}
	p.keys.BeginRefresh(now)
	p.keys.EndRefresh(now, set, nil)
}

func get(path, query string, now int64, h ...string) Request {
	r := Request{Method: "GET", Path: path, Query: query, Now: now}
	for i := 0; i+1 < len(h); i += 2 {
		r.Headers = append(r.Headers, Header{h[i], h[i+1]})
	}
	return r
}

// headerMap is h as a map, failing on a repeated name.
func headerMap(t testing.TB, h []Header) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, kv := range h {
		if _, dup := m[kv.Name]; dup {
			t.Errorf("header %s repeated", kv.Name)
		}
		m[kv.Name] = kv.Value
	}
	return m
}

func wantKind(t testing.TB, out Output, k Kind) {
	t.Helper()
	if out.Kind != k {
		t.Fatalf("got output %s (status %d, body %s), want %s", out.Kind, out.Status, out.Body, k)
	}
}

func claimsExpiring(exp time.Time) token.Claims { return token.Claims{Expiry: exp} }
