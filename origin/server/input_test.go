package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
)

// Bad input at the edges of HTTP (issue #13, point 7), at the origin over
// a real listener. wasmtest sends the same requests through the edge and
// holds both tiers' answers to be the same.

// raw sends one request written by hand (a request line net/http's client
// cannot send) on a new connection and reads the answer.
func (h *harness) raw(request string) resp {
	h.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.api, "http://"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		h.t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		h.t.Fatalf("%q: %v", request, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// An empty path and CONNECT: 404 NOT_FOUND for a target that has no path
// (it is "/", RFC 9110 §4.2.3), 405 with Allow for CONNECT on a route.
func TestEmptyPathAndConnect(t *testing.T) {
	h := newHarness(t)
	host := strings.TrimPrefix(h.api, "http://")
	for _, tc := range []struct {
		name, request string
		status        int
		code          string
	}{
		{"absolute form without a path", "GET http://" + host + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n", 404, "NOT_FOUND"},
		{"CONNECT authority form", "CONNECT " + host + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n", 404, "NOT_FOUND"},
		{"CONNECT on a route", "CONNECT /v1/tiers HTTP/1.1\r\nHost: " + host + "\r\n\r\n", 405, "METHOD_NOT_ALLOWED"},
	} {
		r := h.raw(tc.request)
		r.wantError(t, tc.status, tc.code)
		if tc.status == 405 && r.header.Get("Allow") != "GET" {
			t.Errorf("%s: Allow %q, want GET", tc.name, r.header.Get("Allow"))
		}
	}
}

// Two Authorization lines: 400 BAD_REQUEST naming the header, with an
// invalid_request challenge, nothing billed; one good line still passes.
func TestRepeatedAuthorization(t *testing.T) {
	h := newHarness(t)
	tok := h.org("acme", "high")
	before := h.usage("acme")
	for _, second := range []string{"Bearer " + tok, "Basic eDp5", ""} {
		r := h.doHeaders("GET", "/v1/tiers", "Authorization", "Bearer "+tok, "Authorization", second)
		e := r.wantError(t, 400, "BAD_REQUEST")
		if e.Parameter != "Authorization" {
			t.Errorf("parameter %q, want Authorization", e.Parameter)
		}
		if c := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(c, `Bearer realm="lectern", error="invalid_request", `) {
			t.Errorf("challenge %q", c)
		}
	}
	h.billed("acme", before, 0, 0)
	if r := h.doHeaders("GET", "/v1/tiers", "Authorization", "Bearer "+tok); r.status != 200 {
		t.Errorf("one Authorization line: %d %s", r.status, r.body)
	}
}

// Two If-None-Match lines are one list (RFC 9110 §5.3): the current tag
// on the second line is a 304.
func TestRepeatedIfNoneMatch(t *testing.T) {
	h := newHarness(t)
	tok := h.org("acme", "high")
	first := h.get("/v1/tiers", tok)
	tag := first.header.Get("ETag")
	if first.status != 200 || tag == "" {
		t.Fatalf("GET /v1/tiers: %d, ETag %q", first.status, tag)
	}
	r := h.doHeaders("GET", "/v1/tiers", "Authorization", "Bearer "+tok,
		"If-None-Match", `W/"0000000000000000"`, "If-None-Match", tag)
	if r.status != 304 {
		t.Errorf("tag on the second If-None-Match line: got %d, want 304", r.status)
	}
	r = h.doHeaders("GET", "/v1/tiers", "Authorization", "Bearer "+tok,
		"If-None-Match", `W/"0000000000000000"`, "If-None-Match", `"1111111111111111"`)
	if r.status != 200 {
		t.Errorf("no tag matches: got %d, want 200", r.status)
	}
}

// An unknown 200 KB slug is echoed cut: received and message hold at most
// apierr.MaxEcho bytes of it.
func TestUnknownSubjectEchoIsCapped(t *testing.T) {
	h := newHarness(t)
	tok := h.org("acme", "high")
	slug := strings.Repeat("a", 200<<10)
	r := h.get("/v1/subjects/"+slug, tok)
	e := r.wantError(t, 404, "UNKNOWN_SUBJECT")
	if len(r.body) > 1024 {
		t.Errorf("the answer is %d bytes", len(r.body))
	}
	want := strings.Repeat("a", apierr.MaxEcho) + apierr.Ellipsis
	if e.Received != want || !strings.Contains(e.Message, want) || strings.Contains(e.Message, want[:apierr.MaxEcho]+"a") {
		t.Errorf("received %.300q, message %.400q", e.Received, e.Message)
	}
}

// doHeaders sends a body-less request with header lines given as name,
// value pairs, each added (so a name may repeat).
func (h *harness) doHeaders(method, path string, hdr ...string) resp {
	h.t.Helper()
	req, err := http.NewRequest(method, h.api+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return h.send(req)
}
