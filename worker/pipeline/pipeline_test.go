package pipeline

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/etag"
	"github.com/lectern-api/lectern/shared/token"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

const rid = "req-test-0001"

// The front's refusals are answered by the edge with the origin's exact
// response (origin/server writeError): status, headers, body.
func TestLocalErrors(t *testing.T) {
	good := sign("k1", t0, nil)
	noScope := sign("k1", t0, claims{"scope": "service-api/content.read"})
	rm := testCfg.ResourceMetadata
	tests := []struct {
		name   string
		req    Request
		status int
		extra  map[string]string // headers besides the five every error has
		body   string
	}{
		{"unknown route", get("/v1/nope", "", t0ms, "X-Request-Id", rid), 404, nil,
			`{"error":{"code":"NOT_FOUND","message":"No route matches this path. Every route begins with /v1; see /v1/openapi.json.","requestId":"req-test-0001"}}`},
		{"outside /v1", get("/internal/gate", "", t0ms, "X-Request-Id", rid), 404, nil,
			`{"error":{"code":"NOT_FOUND","message":"No route matches this path. Every route begins with /v1; see /v1/openapi.json.","requestId":"req-test-0001"}}`},
		{"wrong method", Request{Method: "DELETE", Path: "/v1/tiers", Now: t0ms, Headers: []Header{{"X-Request-Id", rid}}}, 405,
			map[string]string{"Allow": "GET"},
			`{"error":{"code":"METHOD_NOT_ALLOWED","message":"DELETE is not served on this path; use GET.","requestId":"req-test-0001","allow":["GET"]}}`},
		{"HEAD", Request{Method: "HEAD", Path: "/v1/media/urls", Now: t0ms, Headers: []Header{{"X-Request-Id", rid}}}, 405,
			map[string]string{"Allow": "GET"},
			`{"error":{"code":"METHOD_NOT_ALLOWED","message":"HEAD is not served on this path; use GET.","requestId":"req-test-0001","allow":["GET"]}}`},
		{"no token", get("/v1/tiers", "", t0ms, "x-request-id", rid), 401,
			map[string]string{"Www-Authenticate": `Bearer realm="lectern", error="invalid_token", error_description="authorization header missing", resource_metadata="` + rm + `"`},
			`{"error":{"code":"invalid_token","message":"The bearer token was not accepted: authorization header missing.","requestId":"req-test-0001"}}`},
		{"basic auth", get("/v1/tiers", "", t0ms, "X-Request-Id", rid, "Authorization", "Basic eDp5"), 401,
			map[string]string{"Www-Authenticate": `Bearer realm="lectern", error="invalid_token", error_description="authorization scheme is not Bearer", resource_metadata="` + rm + `"`},
			`{"error":{"code":"invalid_token","message":"The bearer token was not accepted: authorization scheme is not Bearer.","requestId":"req-test-0001"}}`},
		{"expired", get("/v1/tiers", "", t0.Add(931*time.Second).UnixMilli(), "X-Request-Id", rid, "Authorization", "Bearer "+good), 401,
			map[string]string{"Www-Authenticate": `Bearer realm="lectern", error="invalid_token", error_description="token expired", resource_metadata="` + rm + `"`},
			`{"error":{"code":"invalid_token","message":"The bearer token was not accepted: token expired.","requestId":"req-test-0001"}}`},
		{"bad signature", get("/v1/tiers", "", t0ms, "X-Request-Id", rid, "Authorization", "Bearer "+good[:len(good)-4]+"AAAA"), 401,
			map[string]string{"Www-Authenticate": `Bearer realm="lectern", error="invalid_token", error_description="signature invalid", resource_metadata="` + rm + `"`},
			`{"error":{"code":"invalid_token","message":"The bearer token was not accepted: signature invalid.","requestId":"req-test-0001"}}`},
		{"scope", get("/v1/testprep/act/items", "limit=0", t0ms, "X-Request-Id", rid, "Authorization", "Bearer "+noScope), 403,
			map[string]string{"Www-Authenticate": `Bearer realm="lectern", error="insufficient_scope", error_description="The token lacks the scope service-api/testprep.read that this route requires.", scope="service-api/testprep.read", resource_metadata="` + rm + `"`},
			`{"error":{"code":"insufficient_scope","message":"The token lacks the scope service-api/testprep.read that this route requires.","requestId":"req-test-0001","scope":"service-api/testprep.read"}}`},
		{"learner", get("/v1/progress", "", t0ms, "X-Request-Id", rid, "Authorization", "Bearer "+sign("k1", t0, claims{"scope": "service-api/progress.read"})), 403, nil,
			`{"error":{"code":"LEARNER_REQUIRED","message":"This route needs an interactive learner token (authorization_code grant); a client_credentials token has no learner.","requestId":"req-test-0001"}}`},
		{"bad limit", get("/v1/subjects", "limit=0", t0ms, "X-Request-Id", rid, "Authorization", "Bearer "+good), 400, nil,
			`{"error":{"code":"BAD_REQUEST","message":"limit must be an integer from 1 to 100; it is rejected, never clamped.","requestId":"req-test-0001","parameter":"limit","received":0,"min":1,"max":100}}`},
		{"unknown parameter", get("/v1/tiers", "limt=5", t0ms, "X-Request-Id", rid, "Authorization", "Bearer "+good), 400, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPipeline()
			installKeys(t, p, t0, "k1")
			out := p.Start(tt.req)
			wantKind(t, out, Response)
			if out.Status != tt.status {
				t.Errorf("got status %d, want %d", out.Status, tt.status)
			}
			if tt.body != "" && string(out.Body) != tt.body {
				t.Errorf("body:\n got %s\nwant %s", out.Body, tt.body)
			}
			want := map[string]string{"X-Request-Id": rid, "Cache-Control": "private", "Vary": "Authorization, Accept-Encoding",
				"Content-Type": "application/json", "Content-Length": itoa(len(out.Body))}
			for k, v := range tt.extra {
				want[k] = v
			}
			if want, got := want, headerMap(t, out.Headers); !reflect.DeepEqual(want, got) {
				t.Errorf("headers: got %v, want %v", got, want)
			}
			if !slices.IsSortedFunc(out.Headers, func(a, b Header) int { return strings.Compare(a.Name, b.Name) }) {
				t.Errorf("headers not sorted: %v", out.Headers)
			}
			if len(p.pending) != 0 {
				t.Errorf("%d requests left pending", len(p.pending))
			}
		})
	}
}

func TestRequestID(t *testing.T) {
	gen := regexp.MustCompile(`^req_[0-9a-f]{24}$`)
	for _, tt := range []struct {
		in   string
		keep bool
	}{
		{"abcdefgh", true}, {"A.b-c_d0", true}, {strings.Repeat("a", 64), true},
		{"", false}, {"abcdefg", false}, {strings.Repeat("a", 65), false}, {"abcd efgh", false}, {"abcdéfgh", false},
	} {
		p := newPipeline()
		out := p.Start(get("/v1/nope", "", t0ms, "X-Request-Id", tt.in))
		got := headerMap(t, out.Headers)["X-Request-Id"]
		if tt.keep && got != tt.in || !tt.keep && !gen.MatchString(got) {
			t.Errorf("X-Request-Id %q: got %q", tt.in, got)
		}
		if !strings.Contains(string(out.Body), `"requestId":"`+got+`"`) {
			t.Errorf("body %s does not carry %s", out.Body, got)
		}
	}
}

// Three requests need the JWKS at once: one subrequest, two parks, both
// woken by the output that ends the fetch.
func TestJWKSSingleFlight(t *testing.T) {
	p := newPipeline()
	tok := "Bearer " + sign("k1", t0, nil)
	a := p.Start(get("/v1/tiers", "", t0ms, "Authorization", tok))
	b := p.Start(get("/v1/tiers", "", t0ms+5, "Authorization", tok))
	c := p.Start(get("/v1/subjects", "", t0ms+9, "Authorization", tok))
	wantKind(t, a, Subrequest)
	if a.Method != "GET" || a.URL != testCfg.JWKSURL || a.Forward {
		t.Errorf("got subrequest %s %s forward=%v, want GET %s", a.Method, a.URL, a.Forward, testCfg.JWKSURL)
	}
	wantKind(t, b, Park)
	wantKind(t, c, Park)

	out := p.Resume(ResumeMsg{Handle: a.Handle, Status: 200, Body: tokentest.JWKS("k1"), Now: t0ms + 50})
	wantKind(t, out, Subrequest)
	if !out.Forward {
		t.Errorf("request a: got %+v, want a forward", out)
	}
	if want, got := []Handle{b.Handle, c.Handle}, out.Wake; !reflect.DeepEqual(want, got) {
		t.Errorf("wake: got %v, want %v", got, want)
	}
	for _, h := range []Handle{b.Handle, c.Handle} {
		out := p.Resume(ResumeMsg{Handle: h, Wake: true, Now: t0ms + 60})
		wantKind(t, out, Subrequest)
		if !out.Forward || len(out.Wake) != 0 {
			t.Errorf("woken %d: got %+v, want a forward", h, out)
		}
	}
}

// A failed fetch wakes the parked requests too; with no keys they are
// refused (the origin's answer: the kid is unknown) and no second fetch
// starts within the rate limit.
func TestJWKSFetchFails(t *testing.T) {
	p := newPipeline()
	tok := "Bearer " + sign("k1", t0, nil)
	a := p.Start(get("/v1/tiers", "", t0ms, "Authorization", tok))
	b := p.Start(get("/v1/tiers", "", t0ms, "Authorization", tok))
	wantKind(t, b, Park)
	out := p.Resume(ResumeMsg{Handle: a.Handle, Status: 0, Error: "connection refused", Now: t0ms + 10})
	wantKind(t, out, Response)
	if out.Status != 401 || !strings.Contains(string(out.Body), "unknown key id") {
		t.Errorf("got %d %s, want 401 unknown key id", out.Status, out.Body)
	}
	if want, got := []Handle{b.Handle}, out.Wake; !reflect.DeepEqual(want, got) {
		t.Errorf("wake: got %v, want %v", got, want)
	}
	out = p.Resume(ResumeMsg{Handle: b.Handle, Wake: true, Now: t0ms + 20})
	if out.Kind != Response || out.Status != 401 {
		t.Errorf("woken: got %s %d, want a 401", out.Kind, out.Status)
	}
	// Past the rate limit a new request fetches again.
	out = p.Start(get("/v1/tiers", "", t0ms+31_000, "Authorization", tok))
	if out.Kind != Subrequest || out.URL != testCfg.JWKSURL {
		t.Errorf("after 31 s: got %+v, want a JWKS fetch", out)
	}
}

// A fetch the host never answers is presumed lost after
// token.DefaultInFlightTimeout: the next request that needs keys starts
// another, and an output that starts none wakes the parked.
func TestJWKSFetchLost(t *testing.T) {
	p := newPipeline()
	tok := "Bearer " + sign("k1", t0, nil)
	a := p.Start(get("/v1/tiers", "", t0ms, "Authorization", tok))
	b := p.Start(get("/v1/tiers", "", t0ms, "Authorization", tok))
	wantKind(t, b, Park)
	// Past the timeout, an output that fetches nothing wakes b.
	d := p.Start(get("/v1/nope", "", t0ms+31_000))
	if want, got := []Handle{b.Handle}, d.Wake; !reflect.DeepEqual(want, got) {
		t.Errorf("wake: got %v, want %v", got, want)
	}
	// b, woken, starts the next fetch; c parks behind it.
	out := p.Resume(ResumeMsg{Handle: b.Handle, Wake: true, Now: t0ms + 31_001})
	if out.Kind != Subrequest || out.URL != testCfg.JWKSURL {
		t.Fatalf("woken b: got %+v, want a JWKS fetch", out)
	}
	c := p.Start(get("/v1/tiers", "", t0ms+31_002, "Authorization", tok))
	wantKind(t, c, Park)
	// a's late answer is ignored: a waits for b's fetch like everyone else.
	wantKind(t, p.Resume(ResumeMsg{Handle: a.Handle, Status: 200, Body: tokentest.JWKS("k1"), Now: t0ms + 31_003}), Park)
	out = p.Resume(ResumeMsg{Handle: b.Handle, Status: 200, Body: tokentest.JWKS("k1"), Now: t0ms + 31_010})
	wantKind(t, out, Subrequest)
	slices.Sort(out.Wake)
	if want, got := []Handle{a.Handle, c.Handle}, out.Wake; !reflect.DeepEqual(want, got) {
		t.Errorf("wake: got %v, want %v", got, want)
	}
}

// A token naming a kid the set lacks refreshes the set once, then is
// verified again; within the rate limit another unknown kid is refused
// without a fetch.
func TestUnknownKidRefresh(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	now := t0.Add(2 * time.Minute)
	out := p.Start(get("/v1/tiers", "", now.UnixMilli(), "Authorization", "Bearer "+sign("k2", now, nil)))
	wantKind(t, out, Subrequest)
	if out.URL != testCfg.JWKSURL {
		t.Fatalf("got %s, want the JWKS", out.URL)
	}
	out = p.Resume(ResumeMsg{Handle: out.Handle, Status: 200, Body: tokentest.JWKS("k1", "k2"), Now: now.UnixMilli() + 10})
	wantKind(t, out, Subrequest)
	if !out.Forward {
		t.Errorf("got %+v, want a forward", out)
	}
	out = p.Start(get("/v1/tiers", "", now.UnixMilli()+20_000, "Authorization", "Bearer "+sign("k3", now, nil)))
	wantKind(t, out, Response)
	if out.Status != 401 || !strings.Contains(string(out.Body), "unknown key id") {
		t.Errorf("got %d %s, want 401 unknown key id", out.Status, out.Body)
	}
}

// A stale set is served while it is refreshed in the background: a token
// whose kid the set holds is forwarded at once, and the output that does
// so asks the host for the JWKS under a handle of no request's. A token of
// a kid the set lacks parks behind that fetch; its answer ends the
// refresh (kind done, waking it), and the new key then verifies.
func TestStaleSetRefreshedInBackground(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	now := t0.Add(token.DefaultMaxAge + time.Minute)
	ms := now.UnixMilli()
	a := p.Start(get("/v1/tiers", "", ms, "Authorization", "Bearer "+sign("k1", now, nil)))
	wantKind(t, a, Subrequest)
	if !a.Forward {
		t.Fatalf("stale set: got %s %s, want a forward (not a wait for the JWKS)", a.Method, a.URL)
	}
	bg := a.Refresh.Handle
	if bg == 0 || a.Refresh.URL != testCfg.JWKSURL || bg == a.Handle || p.pending[bg] != nil {
		t.Fatalf("refresh: got %+v, want the JWKS under a handle of its own", a.Refresh)
	}
	// While it is out: a known kid goes on with no second fetch; an
	// unknown one parks behind it.
	b := p.Start(get("/v1/subjects", "", ms+1, "Authorization", "Bearer "+sign("k1", now, claims{"jti": "j2"})))
	wantKind(t, b, Subrequest)
	if !b.Forward || b.Refresh.Handle != 0 {
		t.Errorf("during the refresh: got %+v, want a forward and no refresh", b)
	}
	c := p.Start(get("/v1/tiers", "", ms+2, "Authorization", "Bearer "+sign("k2", now, nil)))
	wantKind(t, c, Park)
	if next := p.Start(get("/v1/openapi.json", "", ms+3)); next.Handle == bg {
		t.Errorf("a request got the refresh's handle %d", bg)
	}

	d := p.Resume(ResumeMsg{Handle: bg, Status: 200, Body: tokentest.JWKS("k1", "k2"), Now: ms + 10})
	wantKind(t, d, Done)
	if d.Handle != bg || !reflect.DeepEqual(d.Wake, []Handle{c.Handle}) || d.Refresh.Handle != 0 {
		t.Errorf("refresh answer: got %+v, want done waking %d", d, c.Handle)
	}
	if got := p.keys.FetchedAt(); !got.Equal(time.UnixMilli(ms + 10)) {
		t.Errorf("set fetched at %v, want the refresh's answer", got)
	}
	out := p.Resume(ResumeMsg{Handle: c.Handle, Wake: true, Now: ms + 11})
	if out.Kind != Subrequest || !out.Forward {
		t.Errorf("woken k2 token: got %s %d %s, want a forward", out.Kind, out.Status, out.Body)
	}
	out = p.Start(get("/v1/tiers", "", ms+12, "Authorization", "Bearer "+sign("k2", now, claims{"jti": "j3"})))
	if out.Kind != Subrequest || !out.Forward || out.Refresh.Handle != 0 {
		t.Errorf("new k2 token: got %+v, want a forward", out)
	}
	// A second answer for the same handle (or a late one) is no fetch in
	// flight: a host error, which changes nothing.
	if out := p.Resume(ResumeMsg{Handle: bg, Status: 200, Body: tokentest.JWKS("k1"), Now: ms + 20}); out.Kind != Response || out.Status != 500 {
		t.Errorf("second answer: got %s %d, want 500", out.Kind, out.Status)
	}
	if p.keys.Keys().Len() != 2 {
		t.Errorf("set has %d keys after a late answer, want 2", p.keys.Keys().Len())
	}
}

// A background refresh that fails keeps the stale set; one the host never
// answers is presumed lost after token.DefaultInFlightTimeout, and the
// next refresh begins once the rate limit allows.
func TestStaleSetRefreshFails(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	now := t0.Add(token.DefaultMaxAge + time.Minute)
	ms := now.UnixMilli()
	tok := func(jti string) string { return "Bearer " + sign("k1", now, claims{"jti": jti}) }
	a := p.Start(get("/v1/tiers", "", ms, "Authorization", tok("a")))
	d := p.Resume(ResumeMsg{Handle: a.Refresh.Handle, Status: 0, Error: "timeout", Now: ms + 10})
	wantKind(t, d, Done)
	if p.keys.Keys() == nil || p.keys.Err() == nil {
		t.Fatalf("failed refresh: keys %v err %v, want the stale set and the error", p.keys.Keys(), p.keys.Err())
	}
	// Within the rate limit: no refresh. Past it: one, never answered.
	if out := p.Start(get("/v1/tiers", "", ms+20_000, "Authorization", tok("b"))); !out.Forward || out.Refresh.Handle != 0 {
		t.Errorf("within the rate limit: got %+v, want a forward alone", out)
	}
	lost := p.Start(get("/v1/tiers", "", ms+31_000, "Authorization", tok("c")))
	if !lost.Forward || lost.Refresh.Handle == 0 {
		t.Fatalf("past the rate limit: got %+v, want a forward with a refresh", lost)
	}
	next := p.Start(get("/v1/tiers", "", ms+62_000, "Authorization", tok("d")))
	if !next.Forward || next.Refresh.Handle == 0 || next.Refresh.Handle == lost.Refresh.Handle {
		t.Fatalf("after the lost refresh: got %+v, want a forward with a new refresh", next)
	}
	// The lost one's late answer is ignored; the new one's ends it.
	if out := p.Resume(ResumeMsg{Handle: lost.Refresh.Handle, Status: 200, Body: tokentest.JWKS("k1", "k9"), Now: ms + 62_001}); out.Kind != Response || out.Status != 500 {
		t.Errorf("late answer: got %s %d, want 500", out.Kind, out.Status)
	}
	if _, ok := p.keys.Keys().Lookup("k9"); ok {
		t.Error("a late answer replaced the set")
	}
	wantKind(t, p.Resume(ResumeMsg{Handle: next.Refresh.Handle, Status: 200, Body: tokentest.JWKS("k1", "k9"), Now: ms + 62_002}), Done)
	if _, ok := p.keys.Keys().Lookup("k9"); !ok {
		t.Error("the refresh in flight did not install its set")
	}
}

// A verified token is served from the cache until it expires: with its
// key gone from the set, it still passes; once expired it is verified
// again and refused as expired.
func TestTokenCache(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	tok := "Bearer " + sign("k1", t0, nil)
	wantKind(t, p.Start(get("/v1/tiers", "", t0ms, "Authorization", tok)), Subrequest)
	installKeys(t, p, t0.Add(time.Minute), "k2") // k1 gone; the rate limit keeps it from being refetched
	out := p.Start(get("/v1/tiers", "", t0ms+61_000, "Authorization", tok))
	if out.Kind != Subrequest || !out.Forward {
		t.Errorf("cached token: got %s %d %s, want a forward", out.Kind, out.Status, out.Body)
	}
	installKeys(t, p, t0.Add(2*time.Minute), "k1")
	out = p.Start(get("/v1/tiers", "", t0.Add(930*time.Second).UnixMilli(), "Authorization", tok))
	if out.Kind != Response || !strings.Contains(string(out.Body), "token expired") {
		t.Errorf("expired cached token: got %s %d %s, want 401 token expired", out.Kind, out.Status, out.Body)
	}
	if _, ok := p.tokens.m[tok[len("Bearer "):]]; ok {
		t.Error("expired token still cached")
	}
}

func TestTokenCacheBounded(t *testing.T) {
	c := newTokenCache(3)
	exp := claimsExpiring(t0.Add(time.Hour))
	for _, k := range []string{"a", "b", "c", "a", "d", "e"} {
		c.put(k, exp)
	}
	var got []string
	for k := range c.m {
		got = append(got, k)
	}
	slices.Sort(got)
	if want, got := []string{"c", "d", "e"}, got; !reflect.DeepEqual(want, got) {
		t.Errorf("kept: got %v, want %v", got, want)
	}
	if len(c.ring) != 3 {
		t.Errorf("ring of %d, want 3", len(c.ring))
	}
}

// TestCachesGrow: the bounded caches take room as entries come, not all
// at once: TinyGo's collector scans every slot of a live slice each cycle.
func TestCachesGrow(t *testing.T) {
	tc, oc := newTokenCache(MaxTokens), newOrgCache(MaxOrgs)
	tc.put("a", claimsExpiring(t0.Add(time.Hour)))
	oc.put(orgKey{id: "k"}, "acme", "00ff", version)
	if cap(tc.ring) > 8 || cap(oc.ring) > 8 {
		t.Errorf("one entry each: rings of capacity %d and %d", cap(tc.ring), cap(oc.ring))
	}
	// Full, a ring is exactly its bound.
	const n = 1000
	full := newTokenCache(n)
	for i := range n + 10 {
		full.put(strconv.Itoa(i), claimsExpiring(t0.Add(time.Hour)))
	}
	if len(full.ring) != n || cap(full.ring) != n || len(full.m) != n {
		t.Errorf("%d entries in a cache of %d: ring %d/%d, map %d", n+10, n, len(full.ring), cap(full.ring), len(full.m))
	}
}

// learnOrg runs one forward of a GET /v1/subjects for acme and answers it
// with the origin's edge headers.
func learnOrg(t testing.TB, p *Pipeline, tok string, grants, version string) {
	t.Helper()
	out := p.Start(get("/v1/subjects", "", t0ms, "Authorization", tok))
	wantKind(t, out, Subrequest)
	out = p.Resume(ResumeMsg{Handle: out.Handle, Status: 200, Now: t0ms + 5, Headers: []Header{
		{"Content-Type", "application/json"}, {"X-Lectern-Org", "acme"}, {"X-Lectern-Grants", grants},
		{"X-Service-Content-Version", version},
	}})
	wantKind(t, out, Response)
}

const version = "2026-11-01+abcdef012345"

func candidateTag(grants string) string {
	return etag.Derive(etag.Input{Version: version, Route: 4, Target: "subjectSlug=algebra", Params: "tier=high",
		Org: "acme", Grants: grants})
}

func TestForwardPassthrough(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	tok := "Bearer " + sign("k1", t0, nil)
	req := Request{Method: "POST", Path: "/v1/media/urls", Query: "", Now: t0ms, Headers: []Header{
		{"Authorization", tok}, {"Content-Type", "application/json"}, {"Content-Length", "40"},
		{"Connection", "keep-alive, X-Custom"}, {"X-Custom", "hop"}, {"Keep-Alive", "timeout=5"},
		{"Proxy-Authorization", "x"}, {"Host", "edge.test"}, {"TE", "trailers"}, {"Upgrade", "h2c"},
		{"X-Lectern-Edge", "forged"}, {"x-lectern-org", "forged"}, {"X-Request-Id", "bad id"},
		{"Accept-Encoding", "gzip"}, {"Expect", "100-continue"},
	}, BodySHA256: edgesig.BodyHash([]byte(`{"assetIds":["a"]}`))}
	sent := slices.Clone(req.Headers)
	out := p.Start(req)
	wantKind(t, out, Subrequest)
	if !reflect.DeepEqual(req.Headers, sent) {
		t.Errorf("Start wrote to the caller's fields: %v", req.Headers)
	}
	if !out.Forward || out.Method != "POST" || out.URL != "http://origin.test/v1/media/urls" {
		t.Errorf("got %s %s forward=%v", out.Method, out.URL, out.Forward)
	}
	h := headerMap(t, out.Headers)
	id := h["X-Request-Id"]
	if !regexp.MustCompile(`^req_[0-9a-f]{24}$`).MatchString(id) {
		t.Errorf("X-Request-Id %q", id)
	}
	verifySig(t, h["X-Lectern-Edge"], edgesig.Message{Purpose: edgesig.Forward, Method: "POST", Host: "origin.test", Target: "/v1/media/urls",
		Body: req.BodySHA256, Auth: tok, RequestID: id, Header: sentFields(h)}, t0ms)
	delete(h, "X-Lectern-Edge")
	delete(h, "X-Request-Id")
	want := map[string]string{"Authorization": tok, "Content-Type": "application/json", "Content-Length": "40", "Accept-Encoding": "gzip"}
	if want, got := want, h; !reflect.DeepEqual(want, got) {
		t.Errorf("forwarded headers: got %v, want %v", got, want)
	}

	origin := []Header{{"Cache-Control", "no-store"}, {"Content-Type", "application/json"}, {"Content-Encoding", "gzip"},
		{"Content-Length", "512"}, {"X-Request-Id", id}, {"X-Lectern-Org", "acme"}, {"X-Lectern-Grants", "00ff"},
		{"x-lectern-other", "1"}, {"X-Service-Content-Version", version}}
	out = p.Resume(ResumeMsg{Handle: out.Handle, Status: 200, Headers: origin, Now: t0ms + 30})
	wantKind(t, out, Response)
	if !out.Passthrough || out.Status != 200 || out.Body != nil {
		t.Errorf("got %+v, want a passthrough 200", out)
	}
	wantH := []Header{{"Cache-Control", "no-store"}, {"Content-Type", "application/json"}, {"Content-Encoding", "gzip"},
		{"Content-Length", "512"}, {"X-Request-Id", id}, {"X-Service-Content-Version", version}}
	if want, got := wantH, out.Headers; !reflect.DeepEqual(want, got) {
		t.Errorf("passthrough headers: got %v, want %v", got, want)
	}
	if want, got := (orgEntry{org: "acme", grants: "00ff", version: version}), p.orgs.m[orgKey{id: "acme"}]; !reflect.DeepEqual(want, got) {
		t.Errorf("org cache: got %v, want %v", got, want)
	}
	if len(p.pending) != 0 || p.pendingBytes != 0 {
		t.Errorf("pending %d (%d bytes) after the answer", len(p.pending), p.pendingBytes)
	}
}

// The protected-resource metadata is the origin's; the edge forwards it
// without authenticating.
func TestWellKnownForwarded(t *testing.T) {
	p := newPipeline()
	out := p.Start(get("/.well-known/oauth-protected-resource", "", t0ms))
	wantKind(t, out, Subrequest)
	if !out.Forward || out.URL != "http://origin.test/.well-known/oauth-protected-resource" {
		t.Errorf("got %+v", out)
	}
}

func TestForwardFailure(t *testing.T) {
	p := newPipeline()
	out := p.Start(get("/v1/openapi.json", "", t0ms, "X-Request-Id", rid))
	wantKind(t, out, Subrequest)
	out = p.Resume(ResumeMsg{Handle: out.Handle, Status: 0, Error: "dial tcp: connection refused", Now: t0ms + 3})
	wantKind(t, out, Response)
	want := `{"error":{"code":"INTERNAL","message":"The origin could not be reached; it is safe to retry once. Quote the requestId if it persists.","requestId":"req-test-0001"}}`
	if out.Status != 500 || string(out.Body) != want {
		t.Errorf("got %d %s, want 500 %s", out.Status, out.Body, want)
	}
}

func TestUnknownHandle(t *testing.T) {
	p := newPipeline()
	for _, in := range []ResumeMsg{{Handle: 99, Status: 200, Now: t0ms}, {Handle: 0, Now: t0ms}, {Handle: 7, Wake: true}} {
		out := p.Resume(in)
		if out.Kind != Response || out.Status != 500 || !strings.Contains(string(out.Body), `"INTERNAL"`) || out.Handle != in.Handle {
			t.Errorf("resume %+v: got %+v", in, out)
		}
	}
	// A wake for a request that is not parked is a host error too.
	out := p.Start(get("/v1/openapi.json", "", t0ms))
	out = p.Resume(ResumeMsg{Handle: out.Handle, Wake: true, Now: t0ms})
	if out.Status != 500 {
		t.Errorf("wake of a forward: got %d", out.Status)
	}
}

// gateSetup learns acme's ETag inputs and starts a conditional request
// whose candidate matches, which must be a gate call.
func gateSetup(t *testing.T) (*Pipeline, string, Output) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	tok := "Bearer " + sign("k1", t0, nil)
	learnOrg(t, p, tok, "00ff", version)
	inm := `W/"0000000000000000", ` + candidateTag("00ff")
	out := p.Start(get("/v1/subjects/algebra", "tier=high&detail=full", t0ms+1000, "Authorization", tok,
		"If-None-Match", inm, "X-Request-Id", rid, "Accept-Encoding", "br"))
	wantKind(t, out, Subrequest)
	if out.Forward || out.Method != "POST" || out.URL != "http://origin.test/internal/gate" {
		t.Fatalf("got %s %s forward=%v, want the gate", out.Method, out.URL, out.Forward)
	}
	h := headerMap(t, out.Headers)
	target := "/v1/subjects/algebra?tier=high&detail=full"
	verifySig(t, h["X-Lectern-Edge"], edgesig.Message{Purpose: edgesig.Gate, Method: "POST", Host: "origin.test", Target: target,
		Auth: tok, RequestID: rid, Header: sentFields(h)}, t0ms+1000)
	delete(h, "X-Lectern-Edge")
	want := map[string]string{"Authorization": tok, "If-None-Match": inm, "X-Request-Id": rid, "X-Lectern-Target": target}
	if want, got := want, h; !reflect.DeepEqual(want, got) {
		t.Errorf("gate headers: got %v, want %v", got, want)
	}
	return p, tok, out
}

func TestGate304(t *testing.T) {
	p, _, out := gateSetup(t)
	tag := candidateTag("00ff")
	out = p.Resume(ResumeMsg{Handle: out.Handle, Status: 204, Now: t0ms + 1010, Headers: []Header{
		{"Cache-Control", "private"}, {"Date", "Sun, 01 Nov 2026 12:00:01 GMT"}, {"Etag", tag},
		{"Ratelimit-Limit", "1000"}, {"Ratelimit-Remaining", "998"}, {"Vary", "Authorization, Accept-Encoding"},
		{"X-Lectern-Grants", "00ff"}, {"X-Lectern-Org", "acme"}, {"X-Request-Id", rid},
		{"X-Service-Content-Version", version},
	}})
	wantKind(t, out, Response)
	if out.Status != 304 || out.Body != nil || out.Passthrough {
		t.Errorf("got %d body=%q passthrough=%v, want a bodiless 304", out.Status, out.Body, out.Passthrough)
	}
	want := []Header{{"Cache-Control", "private"}, {"Etag", tag}, {"Ratelimit-Limit", "1000"}, {"Ratelimit-Remaining", "998"},
		{"Vary", "Authorization, Accept-Encoding"}, {"X-Request-Id", rid}, {"X-Service-Content-Version", version}}
	if want, got := want, out.Headers; !reflect.DeepEqual(want, got) {
		t.Errorf("304 headers: got %v, want %v", got, want)
	}
	if len(p.pending) != 0 {
		t.Errorf("%d pending", len(p.pending))
	}
}

func TestGate412Forwards(t *testing.T) {
	p, tok, out := gateSetup(t)
	out = p.Resume(ResumeMsg{Handle: out.Handle, Status: 412, Now: t0ms + 1010, Headers: []Header{{"X-Request-Id", rid}}})
	wantKind(t, out, Subrequest)
	if !out.Forward || out.Method != "GET" || out.URL != "http://origin.test/v1/subjects/algebra?tier=high&detail=full" {
		t.Fatalf("got %s %s forward=%v, want the forward", out.Method, out.URL, out.Forward)
	}
	h := headerMap(t, out.Headers)
	if h["Authorization"] != tok || h["Accept-Encoding"] != "br" || h["X-Request-Id"] != rid {
		t.Errorf("forward headers %v", h)
	}
	verifySig(t, h["X-Lectern-Edge"], edgesig.Message{Purpose: edgesig.Forward, Method: "GET", Host: "origin.test",
		Target: "/v1/subjects/algebra?tier=high&detail=full", Auth: tok, RequestID: rid, Header: sentFields(h)}, t0ms+1010)
}

// sentFields looks up the header fields of a subrequest (headerMap) by
// name in any case: a Message's Header for the fields it signs.
func sentFields(h map[string]string) func(string) string {
	return func(name string) string {
		for k, v := range h {
			if strings.EqualFold(k, name) {
				return v
			}
		}
		return ""
	}
}

// verifySig checks sig is the module's signature of m at now (ms).
func verifySig(t *testing.T, sig string, m edgesig.Message, now int64) {
	t.Helper()
	keys := edgesig.KeysOf([]byte(testCfg.Secret))
	if _, err := edgesig.Verify(&keys, sig, &m, now); err != nil {
		t.Errorf("X-Lectern-Edge %q does not verify for %+v: %v", sig, m, err)
	}
}

// Any other gate status is the origin's answer, body included.
func TestGateError(t *testing.T) {
	p, _, out := gateSetup(t)
	body := `{"error":{"code":"ORG_SUSPENDED","message":"suspended","requestId":"req-test-0001"}}`
	out = p.Resume(ResumeMsg{Handle: out.Handle, Status: 403, Now: t0ms + 1010, Body: []byte(body), Headers: []Header{
		{"Cache-Control", "private"}, {"Content-Length", "999"}, {"Content-Type", "application/json"},
		{"Vary", "Authorization, Accept-Encoding"}, {"X-Lectern-Org", "acme"}, {"X-Request-Id", rid},
	}})
	wantKind(t, out, Response)
	if out.Status != 403 || string(out.Body) != body {
		t.Errorf("got %d %s", out.Status, out.Body)
	}
	want := []Header{{"Cache-Control", "private"}, {"Content-Length", itoa(len(body))}, {"Content-Type", "application/json"},
		{"Vary", "Authorization, Accept-Encoding"}, {"X-Request-Id", rid}}
	if want, got := want, out.Headers; !reflect.DeepEqual(want, got) {
		t.Errorf("headers: got %v, want %v", got, want)
	}
}

// No gate without a matching candidate: no cache entry, another org, a
// stale digest, a route without a derived validator, no If-None-Match.
func TestNoGate(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	tok := "Bearer " + sign("k1", t0, nil)
	other := "Bearer " + sign("k1", t0, claims{"org": nil, "client_id": "c9"})
	inm := candidateTag("00ff")
	check := func(name string, r Request) {
		t.Helper()
		out := p.Start(r)
		if out.Kind != Subrequest || !out.Forward {
			t.Errorf("%s: got %s %s, want a forward", name, out.Kind, out.URL)
		}
	}
	check("nothing learnt", get("/v1/subjects/algebra", "tier=high", t0ms, "Authorization", tok, "If-None-Match", inm))
	learnOrg(t, p, tok, "00ff", version)
	check("other org", get("/v1/subjects/algebra", "tier=high", t0ms, "Authorization", other, "If-None-Match", inm))
	check("stale digest", get("/v1/subjects/algebra", "tier=high", t0ms, "Authorization", tok, "If-None-Match", candidateTag("0100")))
	check("other params", get("/v1/subjects/algebra", "tier=middle", t0ms, "Authorization", tok, "If-None-Match", inm))
	check("no validator", get("/v1/license", "", t0ms, "Authorization", tok, "If-None-Match", "*"))
	check("no If-None-Match", get("/v1/subjects/algebra", "tier=high", t0ms, "Authorization", tok))
	// "*" matches any current tag (spec: Conditional requests §3).
	out := p.Start(get("/v1/subjects/algebra", "", t0ms, "Authorization", tok, "If-None-Match", "*"))
	if out.Kind != Subrequest || out.Forward {
		t.Errorf("*: got %+v, want the gate", out)
	}
}

// A client_credentials token without an org claim is cached by client.
func TestOrgKeyByClient(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	tok := "Bearer " + sign("k1", t0, claims{"org": nil})
	learnOrg(t, p, tok, "00ff", version)
	if _, ok := p.orgs.m[orgKey{client: true, id: "client1"}]; !ok {
		t.Fatalf("org cache %v, want an entry for client1", p.orgs.m)
	}
	out := p.Start(get("/v1/subjects/algebra", "tier=high", t0ms, "Authorization", tok, "If-None-Match", candidateTag("00ff")))
	if out.Kind != Subrequest || out.Forward {
		t.Errorf("got %+v, want the gate", out)
	}
}

func TestPendingBounded(t *testing.T) {
	p := newPipeline()
	for i := 0; i < MaxPending; i++ {
		if out := p.Start(get("/v1/openapi.json", "", t0ms)); out.Kind != Subrequest {
			t.Fatalf("request %d: got %s", i, out.Kind)
		}
	}
	out := p.Start(get("/v1/openapi.json", "", t0ms))
	if out.Kind != Response || out.Status != 500 {
		t.Errorf("full table: got %s %d, want 500", out.Kind, out.Status)
	}
	// Requests stuck past staleAfter make room.
	out = p.Start(get("/v1/openapi.json", "", t0ms+staleAfter+1))
	if out.Kind != Subrequest {
		t.Errorf("after the sweep: got %s %d", out.Kind, out.Status)
	}
}

func TestHeadersBounded(t *testing.T) {
	p := newPipeline()
	r := get("/v1/tiers", "", t0ms)
	for i := 0; i <= MaxHeaders; i++ {
		r.Headers = append(r.Headers, Header{"X-A", "b"})
	}
	out := p.Start(r)
	if out.Status != 400 || !strings.Contains(string(out.Body), `"parameter":"headers"`) {
		t.Errorf("got %d %s", out.Status, out.Body)
	}
}

// TestFilterHeaders: fields are filtered in place, except when a
// Connection field names others, wherever it stands.
func TestFilterHeaders(t *testing.T) {
	never := func(string) bool { return false }
	for _, tc := range []struct{ in, want []Header }{
		{[]Header{{"A", "1"}, {"Host", "x"}, {"B", "2"}}, []Header{{"A", "1"}, {"B", "2"}}},
		{[]Header{{"Connection", "X-Foo"}, {"A", "1"}, {"X-Foo", "hop"}, {"B", "2"}}, []Header{{"A", "1"}, {"B", "2"}}},
		{[]Header{{"A", "1"}, {"X-Foo", "hop"}, {"connection", "close, x-foo"}}, []Header{{"A", "1"}}},
	} {
		in := slices.Clone(tc.in)
		if got := filterHeaders(in, never); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("filterHeaders(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestStartKeepsCallersFields: a forward's fields are a copy; the
// caller's, without a Connection field too, are as they were.
func TestStartKeepsCallersFields(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	req := get("/v1/subjects", "limit=5", t0ms, "Host", "edge.test", "X-Request-Id", "bad id", "Authorization", "Bearer "+sign("k1", t0, nil), "Accept", "*/*")
	sent := slices.Clone(req.Headers)
	wantKind(t, p.Start(req), Subrequest)
	if !reflect.DeepEqual(req.Headers, sent) {
		t.Errorf("Start wrote to the caller's fields:\n got %v\nwant %v", req.Headers, sent)
	}
}
