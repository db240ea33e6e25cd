package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/wiring"
	"github.com/lectern-api/lectern/shared/logbuftest"
)

// stack is the running origin, as start returns it (wiring.Origin); a
// test that talks to an origin of another process makes one of its URLs
// and admin token alone (kill_test.go, peers_test.go).
type stack = wiring.Origin

// testStack runs the whole origin stack on loopback ports with a small
// corpus, a temporary SQLite database and the test clock.
type testStack struct {
	*stack
	t   *testing.T
	out *logbuftest.Buffer // servers log to it while the test reads
}

func newStack(t *testing.T) *testStack {
	t.Helper()
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	st := bootStack(t, testEnv(dir, map[string]string{"LECTERN_TEST_CLOCK": "1"}), nil)
	t.Cleanup(func() { st.Close() })
	return st
}

// writeCorpus generates the small corpus into dir.
func writeCorpus(t *testing.T, dir string) {
	t.Helper()
	if _, err := gen.Write(dir, gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
}

// testEnv is the environment of a test stack whose database and corpus
// are in dir, on free loopback ports; over adds or replaces variables (an
// empty value unsets one).
func testEnv(dir string, over map[string]string) func(string) string {
	env := map[string]string{
		"LECTERN_ORIGIN_ADDR": "127.0.0.1:0", "LECTERN_IDP_ADDR": "127.0.0.1:0", "LECTERN_ADMIN_ADDR": "127.0.0.1:0",
		"LECTERN_ADMIN_TOKEN": "admin-token-for-tests", "LECTERN_DB": filepath.Join(dir, "lectern.db"),
		"LECTERN_CORPUS": filepath.Join(dir, "corpus"), "LECTERN_SECRET": "a-test-secret-of-at-least-32-characters",
		"LECTERN_BUNDLE_DIR": filepath.Join(dir, "bundles"), "LECTERN_DEMO": "1",
	}
	for k, v := range over {
		env[k] = v
	}
	return func(k string) string { return env[k] }
}

// bootStack starts a stack on getenv's settings, with edit (when not nil)
// applied to its configuration; the caller closes it.
func bootStack(t *testing.T, getenv func(string) string, edit func(*config)) *testStack {
	t.Helper()
	cfg, err := parseConfig(nil, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	out := new(logbuftest.Buffer)
	st, err := start(context.Background(), cfg, out)
	if err != nil {
		t.Fatal(err)
	}
	return &testStack{stack: st, t: t, out: out}
}

// admin calls the admin API and decodes its JSON answer.
func (s *testStack) admin(method, path, body string) (int, map[string]any) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.AdminURL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// org creates an organisation with body and a client with scopes, and
// returns a token for the client.
func (s *testStack) org(body string, scopes ...string) (clientID, secret string) {
	s.t.Helper()
	if code, m := s.admin("POST", "/admin/v1/orgs", body); code != 201 {
		s.t.Fatalf("create org: %d %v", code, m)
	}
	var o struct{ OrgID string }
	json.Unmarshal([]byte(body), &o)
	b, _ := json.Marshal(map[string]any{"scopes": scopes})
	code, m := s.admin("POST", "/admin/v1/orgs/"+o.OrgID+"/clients", string(b))
	if code != 201 {
		s.t.Fatalf("create client: %d %v", code, m)
	}
	return m["clientId"].(string), m["clientSecret"].(string)
}

// token gets a client_credentials token with an unmodified OAuth2 client.
func (s *testStack) token(clientID, secret string, scopes ...string) string {
	s.t.Helper()
	full := make([]string, len(scopes))
	for i, sc := range scopes {
		full[i] = "service-api/" + sc
	}
	cc := clientcredentials.Config{ClientID: clientID, ClientSecret: secret, TokenURL: s.IdPURL + "/oauth2/token", Scopes: full}
	tok, err := cc.Token(context.Background())
	if err != nil {
		s.t.Fatalf("token: %v", err)
	}
	return tok.AccessToken
}

type response struct {
	status int
	header http.Header
	body   []byte
	err    struct {
		Code      string   `json:"code"`
		Message   string   `json:"message"`
		RequestID string   `json:"requestId"`
		Grant     string   `json:"grant"`
		Tiers     []string `json:"tiers"`
		Scope     string   `json:"scope"`
	}
}

func (s *testStack) get(method, path, tok string, hdr ...string) response {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.OriginURL+path, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return s.send(req)
}

// send sends req to the stack and reads its answer, checking an error
// body and the X-Request-Id.
func (s *testStack) send(req *http.Request) response {
	s.t.Helper()
	method, path := req.Method, req.URL.Path
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	r := response{status: resp.StatusCode, header: resp.Header}
	r.body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 && method != "HEAD" { // a HEAD answer has no body
		var e struct {
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(r.body, &e); err != nil {
			s.t.Fatalf("%s %s: %d body is not the error body: %s", method, path, r.status, r.body)
		}
		json.Unmarshal(e.Error, &r.err)
		if r.err.RequestID == "" || r.err.RequestID != resp.Header.Get("X-Request-Id") {
			s.t.Errorf("%s %s: requestId %q, X-Request-Id %q", method, path, r.err.RequestID, resp.Header.Get("X-Request-Id"))
		}
	}
	if resp.Header.Get("X-Request-Id") == "" {
		s.t.Errorf("%s %s: no X-Request-Id", method, path)
	}
	return r
}

func (s *testStack) expect(r response, status int, code string) {
	s.t.Helper()
	if r.status != status || r.err.Code != code {
		s.t.Fatalf("got %d %s, want %d %s: %s", r.status, r.err.Code, status, code, r.body)
	}
}

// meters returns the organisation's monthly and hourly meters.
func (s *testStack) meters(org string) map[string]any {
	s.t.Helper()
	code, m := s.admin("GET", "/admin/v1/orgs/"+org, "")
	if code != 200 {
		s.t.Fatalf("get org: %d %v", code, m)
	}
	return m["meters"].(map[string]any)
}

func (s *testStack) calls(org string) float64 {
	return s.meters(org)["month"].(map[string]any)["calls"].(float64)
}

const allTiers = `["topics","college","high","middle","primary"]`

func TestRequestIDsAndRouting(t *testing.T) {
	s := newStack(t)
	r := s.get("GET", "/v1/teachers", "")
	s.expect(r, 404, "NOT_FOUND")
	r = s.get("GET", "/", "")
	s.expect(r, 404, "NOT_FOUND")
	r = s.get("HEAD", "/v1/tiers", "")
	if r.status != 405 || r.header.Get("Allow") != "GET" || r.header.Get("X-Request-Id") == "" {
		t.Errorf("HEAD: %d Allow %q", r.status, r.header.Get("Allow"))
	}
	r = s.get("POST", "/v1/tiers", "")
	s.expect(r, 405, "METHOD_NOT_ALLOWED")
	r = s.get("GET", "/v1/tiers", "")
	s.expect(r, 401, "invalid_token")
	// A well-formed incoming request id is kept (the edge forwards its own).
	r = s.get("GET", "/v1/tiers", "", "X-Request-Id", "edge-1234abcd")
	if r.header.Get("X-Request-Id") != "edge-1234abcd" {
		t.Errorf("incoming request id not kept: %q", r.header.Get("X-Request-Id"))
	}
	for _, h := range []string{"Cache-Control", "Vary"} {
		if r.header.Get(h) == "" {
			t.Errorf("401 lacks %s", h)
		}
	}
}

// spec: Authentication §6: a missing, malformed, non-Bearer, expired or
// unverifiable token answers 401 invalid_token with a challenge that points
// at OAuth discovery and names the reason.
func TestUnauthorized(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")
	parts := strings.Split(tok, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	for _, tc := range []struct {
		name, auth, reason string
	}{
		{"missing", "", "authorization header missing"},
		{"basic", "Basic YTpi", "authorization scheme is not Bearer"},
		{"two tokens", "Bearer a b", "malformed bearer credentials"},
		{"garbage", "Bearer abc", "malformed token"},
		{"tampered", "Bearer " + tampered, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := []string{}
			if tc.auth != "" {
				req = []string{"Authorization", tc.auth}
			}
			r := s.get("GET", "/v1/tiers", "", req...)
			s.expect(r, 401, "invalid_token")
			ch := r.header.Get("WWW-Authenticate")
			want := `resource_metadata="` + s.OriginURL + `/.well-known/oauth-protected-resource"`
			if !strings.HasPrefix(ch, `Bearer realm="lectern", error="invalid_token"`) || !strings.Contains(ch, want) ||
				!strings.Contains(ch, `error_description="`+tc.reason) {
				t.Errorf("challenge %q", ch)
			}
		})
	}
	// Expired: the token lives 900 s (plus 30 s leeway).
	if r := s.get("GET", "/v1/tiers", tok); r.status != 200 {
		t.Fatalf("fresh token: %d %s", r.status, r.body)
	}
	if code, m := s.admin("POST", "/admin/v1/clock", `{"advanceSeconds":931}`); code != 200 {
		t.Fatalf("advance clock: %d %v", code, m)
	}
	r := s.get("GET", "/v1/tiers", tok)
	s.expect(r, 401, "invalid_token")
	if !strings.Contains(r.header.Get("WWW-Authenticate"), `error_description="token expired"`) {
		t.Errorf("expired challenge %q", r.header.Get("WWW-Authenticate"))
	}

	// RFC 9728: the document the challenge points at.
	resp, err := http.Get(s.OriginURL + "/.well-known/oauth-protected-resource")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		Scopes               []string `json:"scopes_supported"`
	}
	json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if meta.Resource != s.OriginURL || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != s.IdPURL || len(meta.Scopes) != 6 {
		t.Errorf("protected resource metadata: %+v", meta)
	}
}

// spec: Authentication §7: a token lacking the route's scope answers 403
// insufficient_scope naming the scope in the body and the challenge.
func TestInsufficientScope(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "testprep.read", "content.read")
	tok := s.token(id, secret, "testprep.read")
	r := s.get("GET", "/v1/tiers", tok)
	s.expect(r, 403, "insufficient_scope")
	if r.err.Scope != "service-api/content.read" {
		t.Errorf("scope key %q", r.err.Scope)
	}
	if ch := r.header.Get("WWW-Authenticate"); !strings.Contains(ch, `error="insufficient_scope"`) || !strings.Contains(ch, `scope="service-api/content.read"`) {
		t.Errorf("challenge %q", ch)
	}
}

// spec: States and transitions, and Authentication §8: each gate code on
// the next call after its state changes, and access again on the next
// call after it is undone. /v1/license answers throughout.
func TestGateTransitions(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")
	ok := func(step string) {
		t.Helper()
		if r := s.get("GET", "/v1/tiers", tok); r.status != 200 {
			t.Fatalf("%s: %d %s", step, r.status, r.body)
		}
	}
	patch := func(body string) {
		t.Helper()
		if code, m := s.admin("PATCH", "/admin/v1/orgs/acme", body); code != 200 {
			t.Fatalf("patch %s: %d %v", body, code, m)
		}
	}
	license := func(step, status string) {
		t.Helper()
		r := s.get("GET", "/v1/license", tok)
		var l struct{ Status string }
		json.Unmarshal(r.body, &l)
		if r.status != 200 || l.Status != status {
			t.Fatalf("%s: license %d %s", step, r.status, r.body)
		}
	}
	ok("active")
	for _, tc := range []struct {
		name, set, undo, code, status string
	}{
		{"suspended", `{"status":"suspended"}`, `{"status":"active"}`, "ORG_SUSPENDED", "suspended"},
		{"agreement", `{"requiredEclaVersion":2}`, `{"eclaVersion":2}`, "LICENSE_REQUIRED", "active"},
		{"expired", `{"renewsAt":"2020-01-01T00:00:00Z"}`, `{"renewsAt":"2099-01-01T00:00:00Z"}`, "LICENSE_EXPIRED", "active"},
	} {
		patch(tc.set)
		s.expect(s.get("GET", "/v1/tiers", tok), 403, tc.code)
		license(tc.name, tc.status)
		patch(tc.undo)
		ok("after " + tc.name)
	}
	if code, _ := s.admin("DELETE", "/admin/v1/orgs/acme", ""); code != 204 {
		t.Fatalf("delete: %d", code)
	}
	s.expect(s.get("GET", "/v1/tiers", tok), 403, "NO_ORGANIZATION")
	s.expect(s.get("GET", "/v1/license", tok), 403, "NO_ORGANIZATION")
}

// spec: Authentication §8: TIER_NOT_LICENSED when no grant covers the
// tier, CONTENT_NOT_GRANTED naming the grant when the tier is licensed for
// other subjects; AMBIGUOUS_SUBJECT names the tiers.
func TestEntitlement(t *testing.T) {
	s := newStack(t)
	c := s.Content()
	var shared string // a slug in two tiers
	for _, sub := range c.Subjects {
		if len(c.SlugTiers(sub.Slug)) > 1 {
			shared = sub.Slug
			break
		}
	}
	if shared == "" {
		t.Fatal("the small corpus has no slug in two tiers")
	}
	tiers := c.SlugTiers(shared)
	id, secret := s.org(`{"orgId":"acme","contentGrants":["`+tiers[0]+`/`+shared+`"]}`, "content.read")
	tok := s.token(id, secret, "content.read")
	if r := s.get("GET", "/v1/subjects/"+shared+"?tier="+tiers[0], tok); r.status != 200 {
		t.Fatalf("granted subject: %d %s", r.status, r.body)
	}
	s.expect(s.get("GET", "/v1/subjects/"+shared+"?tier="+tiers[1], tok), 403, "TIER_NOT_LICENSED")
	r := s.get("GET", "/v1/subjects/"+shared, tok)
	s.expect(r, 400, "AMBIGUOUS_SUBJECT")
	if strings.Join(r.err.Tiers, ",") != strings.Join(tiers, ",") {
		t.Errorf("tiers %v, want %v", r.err.Tiers, tiers)
	}
	var other string // another subject of the granted tier
	for _, sub := range c.Tier(tiers[0]).Subjects {
		if sub.Slug != shared {
			other = sub.Slug
		}
	}
	r = s.get("GET", "/v1/subjects/"+other+"?tier="+tiers[0], tok)
	s.expect(r, 403, "CONTENT_NOT_GRANTED")
	if r.err.Grant != tiers[0]+"/"+other {
		t.Errorf("grant %q", r.err.Grant)
	}
	// Grants are re-read on every request: granting the tier opens it.
	if code, m := s.admin("PATCH", "/admin/v1/orgs/acme", `{"contentGrants":["`+tiers[0]+`"]}`); code != 200 {
		t.Fatalf("patch: %d %v", code, m)
	}
	if r := s.get("GET", "/v1/subjects/"+other+"?tier="+tiers[0], tok); r.status != 200 {
		t.Fatalf("after grant: %d %s", r.status, r.body)
	}
	s.expect(s.get("GET", "/v1/subjects/no-such-subject", tok), 404, "UNKNOWN_SUBJECT")
}

// spec: Limits: refusals by authentication, scope, entitlement, parameter
// validation and unknown routes bill nothing; /v1/license is unmetered.
func TestRefusalsBillNothing(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","contentGrants":["high"]}`, "content.read", "testprep.read")
	tok := s.token(id, secret, "content.read")
	narrow := s.token(id, secret, "testprep.read")
	c := s.Content()
	var college string
	for _, sub := range c.Tier("college").Subjects {
		college = sub.Slug
	}
	for _, r := range []response{
		s.get("GET", "/v1/tiers", ""),                                      // 401
		s.get("GET", "/v1/tiers", "not.a.token"),                           // 401
		s.get("GET", "/v1/tiers", narrow),                                  // 403 scope
		s.get("GET", "/v1/subjects/"+college+"?tier=college", tok),         // 403 entitlement
		s.get("GET", "/v1/subjects/"+college+"?tier=college&limit=5", tok), // 400 parameter
		s.get("GET", "/v1/subjects/x?detail=verbose", tok),                 // 400 parameter
		s.get("GET", "/v1/teachers", tok),                                  // 404 route
		s.get("HEAD", "/v1/tiers", tok),                                    // 405
		s.get("GET", "/v1/license", tok),                                   // unmetered
	} {
		if r.status == 200 && !strings.Contains(string(r.body), `"orgId"`) {
			t.Errorf("unexpected success: %s", r.body)
		}
	}
	if n := s.calls("acme"); n != 0 {
		t.Fatalf("refusals billed %v calls", n)
	}
	s.get("GET", "/v1/tiers", tok)
	if n := s.calls("acme"); n != 1 {
		t.Fatalf("one call billed %v", n)
	}
}

// spec: Resources, Licence status: every field; unmetered, no ETag, never
// cached.
func TestLicense(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","orgName":"Acme","contentGrants":["high","college/algebra"],
		"quota":{"calls":1000,"downloads":null},"rateLimits":{"lessonReadsPerHour":50},"requiredEclaVersion":1}`, "content.read")
	tok := s.token(id, secret, "content.read")
	s.get("GET", "/v1/tiers", tok)
	r := s.get("GET", "/v1/license", tok)
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r.header.Get("ETag") != "" || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("ETag %q Cache-Control %q", r.header.Get("ETag"), r.header.Get("Cache-Control"))
	}
	var l map[string]any
	json.Unmarshal(r.body, &l)
	for _, k := range []string{"orgId", "orgName", "tier", "status", "contentGrants", "quota", "rateLimits", "resetsAt",
		"eclaVersion", "requiredEclaVersion", "renewsAt", "contentVersion", "licenseUrl"} {
		if _, ok := l[k]; !ok {
			t.Errorf("licence status lacks %s", k)
		}
	}
	q := l["quota"].(map[string]any)
	if calls := q["calls"].(map[string]any); calls["used"].(float64) != 1 || calls["limit"].(float64) != 1000 {
		t.Errorf("quota.calls %v", calls)
	}
	if d := q["downloads"].(map[string]any); d["limit"] != nil || d["used"].(float64) != 0 {
		t.Errorf("quota.downloads %v", d)
	}
	if rl := l["rateLimits"].(map[string]any); rl["lessonReadsPerHour"].(float64) != 50 || rl["callsPerHour"] != nil {
		t.Errorf("rateLimits %v", rl)
	}
	now := s.Clock().Now()
	wantReset := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	if l["resetsAt"] != wantReset || l["contentVersion"] != s.Content().ContentVersion {
		t.Errorf("resetsAt %v (want %s), contentVersion %v", l["resetsAt"], wantReset, l["contentVersion"])
	}
	if n := s.calls("acme"); n != 1 {
		t.Errorf("license billed: calls %v", n)
	}
}

// make run on a new database creates the demo organisation and prints its
// credentials; they work.
func TestDemoOrganisation(t *testing.T) {
	s := newStack(t)
	out := s.out.String()
	get := func(label string) string {
		i := strings.Index(out, label)
		if i < 0 {
			t.Fatalf("output lacks %q:\n%s", label, out)
		}
		return strings.Fields(out[i+len(label):])[0]
	}
	tok := s.token(get("client id"), get("client secret"), "content.read")
	if r := s.get("GET", "/v1/tiers", tok); r.status != 200 {
		t.Fatalf("demo token: %d %s", r.status, r.body)
	}
	_ = url.Values{}
}
