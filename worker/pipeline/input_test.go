package pipeline

import (
	"fmt"
	"reflect"
	"testing"
)

// Bad input at the edges of HTTP (issue #13, point 7), in the module: an
// empty path, repeated Authorization and If-None-Match field lines. The
// same requests through a real edge and origin are in wasmtest.

// An empty path (a CONNECT's authority-form target, or an absolute-form
// target without a path) is 404 NOT_FOUND, the origin's answer, not a 500
// for a message the codec could not read.
func TestEmptyPath(t *testing.T) {
	p := newPipeline()
	for _, method := range []string{"GET", "CONNECT"} {
		msg := fmt.Sprintf(`{"method":%q,"path":"","query":"","headers":[["X-Request-Id",%q]],"now":%d}`, method, rid, t0ms)
		out := decodeOut(t, p.HandleStart([]byte(msg)))
		want := `{"error":{"code":"NOT_FOUND","message":"No route matches this path. Every route begins with /v1; see /v1/openapi.json.","requestId":"req-test-0001"}}`
		if out.Status != 404 || out.Body == nil || *out.Body != want {
			t.Errorf("%s with an empty path: got %d %v, want 404 %s", method, out.Status, out.Body, want)
		}
	}
	// CONNECT on a route's path is that route's 405.
	out := p.Start(Request{Method: "CONNECT", Path: "/v1/tiers", Now: t0ms, Headers: []Header{{"X-Request-Id", rid}}})
	if out.Status != 405 || headerMap(t, out.Headers)["Allow"] != "GET" {
		t.Errorf("CONNECT /v1/tiers: got %d %v %s, want 405 with Allow: GET", out.Status, out.Headers, out.Body)
	}
}

// Two Authorization field lines, or two combined into one (a Fetch API
// host's Headers join them with ", "), are a malformed request: 400
// BAD_REQUEST naming the header, with an invalid_request challenge (RFC
// 6750 §3.1), after routing and before the token is looked at.
func TestRepeatedAuthorization(t *testing.T) {
	good := "Bearer " + sign("k1", t0, nil)
	rm := testCfg.ResourceMetadata
	body := `{"error":{"code":"BAD_REQUEST","message":"The request has more than one Authorization header; send exactly one: Authorization: Bearer <token>.","requestId":"req-test-0001","parameter":"Authorization"}}`
	challenge := `Bearer realm="lectern", error="invalid_request", error_description="The request has more than one Authorization header; send exactly one: Authorization: Bearer <token>.", resource_metadata="` + rm + `"`
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{"two good lines", get("/v1/tiers", "", t0ms, "X-Request-Id", rid, "Authorization", good, "Authorization", good)},
		{"good then junk", get("/v1/tiers", "", t0ms, "X-Request-Id", rid, "Authorization", good, "authorization", "Basic eDp5")},
		{"combined", get("/v1/tiers", "", t0ms, "X-Request-Id", rid, "Authorization", good+", "+good)},
		{"before validation", get("/v1/subjects", "limit=0", t0ms, "X-Request-Id", rid, "Authorization", good, "Authorization", good)},
	} {
		p := newPipeline()
		installKeys(t, p, t0, "k1")
		out := p.Start(tc.req)
		wantKind(t, out, Response)
		if out.Status != 400 || string(out.Body) != body {
			t.Errorf("%s: got %d %s, want 400 %s", tc.name, out.Status, out.Body, body)
		}
		if got := headerMap(t, out.Headers)["Www-Authenticate"]; got != challenge {
			t.Errorf("%s: challenge %q, want %q", tc.name, got, challenge)
		}
	}
	// Routing comes first: an unknown path is 404 whatever the headers.
	p := newPipeline()
	out := p.Start(get("/v1/nope", "", t0ms, "Authorization", good, "Authorization", good))
	if out.Status != 404 {
		t.Errorf("unknown route with two Authorization lines: got %d, want 404", out.Status)
	}
	// A route without a scope does not authenticate, so does not look.
	out = p.Start(get("/v1/openapi.json", "", t0ms, "Authorization", good, "Authorization", good))
	if out.Kind != Subrequest || !out.Forward {
		t.Errorf("openapi.json with two Authorization lines: got %+v, want a forward", out)
	}
}

// Two If-None-Match field lines are one list (RFC 9110 §5.3, §13.1.2): a
// tag on the second line matches, and the gate call carries the lines
// combined as the origin combines them.
func TestRepeatedIfNoneMatch(t *testing.T) {
	p := newPipeline()
	installKeys(t, p, t0, "k1")
	tok := "Bearer " + sign("k1", t0, nil)
	learnOrg(t, p, tok, "00ff", version)
	tag := candidateTag("00ff")
	out := p.Start(get("/v1/subjects/algebra", "tier=high&detail=full", t0ms+1000, "Authorization", tok,
		"If-None-Match", `W/"0000000000000000"`, "X-Request-Id", rid, "if-none-match", tag))
	wantKind(t, out, Subrequest)
	if out.Forward || out.URL != "http://origin.test/internal/gate" {
		t.Fatalf("got %s %s forward=%v, want the gate", out.Method, out.URL, out.Forward)
	}
	if got, want := headerMap(t, out.Headers)["If-None-Match"], `W/"0000000000000000", `+tag; got != want {
		t.Errorf("gate If-None-Match %q, want %q", got, want)
	}
	// Through the codec too, whose requests are reused: the combined
	// value is the request's own.
	for i := range 3 {
		msg := fmt.Sprintf(`{"method":"GET","path":"/v1/subjects/algebra","query":"tier=high","headers":[["Authorization",%q],["If-None-Match","W/\"%016d\""],["If-None-Match",%q]],"now":%d}`,
			tok, i, tag, t0ms+2000)
		o := decodeOut(t, p.HandleStart([]byte(msg)))
		var inm []string
		for _, kv := range o.Headers {
			if kv[0] == "If-None-Match" {
				inm = append(inm, kv[1])
			}
		}
		if want := []string{fmt.Sprintf(`W/"%016d", %s`, i, tag)}; o.URL != "http://origin.test/internal/gate" || !reflect.DeepEqual(inm, want) {
			t.Errorf("codec, round %d: got %s with If-None-Match %q, want the gate with %q", i, o.URL, inm, want)
		}
	}
}
