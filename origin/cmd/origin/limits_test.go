package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/httpsrv"
	"github.com/lectern-api/lectern/internal/telemetry/telemetrytest"
)

// shortLimits are the listeners' limits in these tests: a trickling
// client is cut off in a fraction of a second. hang is how long a test
// waits for that before calling it a hang.
var shortLimits = httpsrv.Limits{ReadHeader: 500 * time.Millisecond, Read: 500 * time.Millisecond}

const hang = 10 * time.Second

// newLimitedStack is newStack with the listeners' limits set.
func newLimitedStack(t *testing.T, limits httpsrv.Limits) *testStack {
	t.Helper()
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	st := bootStack(t, testEnv(dir, nil), func(c *config) { c.Limits = limits })
	t.Cleanup(func() { st.Close() })
	return st
}

// trickleBody sends head declaring a body of 1,000 bytes, then a byte
// every 20 ms, and reports whether the server closed the connection
// within hang.
func trickleBody(t *testing.T, base, head string) bool {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, head+"Content-Length: 1000\r\n\r\n")
	closed := make(chan struct{})
	go func() { io.Copy(io.Discard, c); close(closed) }()
	giveUp := time.After(hang)
	for {
		select {
		case <-closed:
			return true
		case <-giveUp:
			return false
		case <-time.After(20 * time.Millisecond):
			c.Write([]byte("x"))
		}
	}
}

// TestSlowBodies: on each of the origin's three listeners a body sent a
// byte at a time loses its connection at the read limit, and the stack
// still shuts down at once; requests sent in one go are served.
func TestSlowBodies(t *testing.T) {
	s := newLimitedStack(t, shortLimits)
	for _, tc := range []struct{ name, base, head string }{
		{"origin", s.OriginURL, "POST /v1/media/urls HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"},
		{"identity provider", s.IdPURL, "POST /oauth2/token HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\n"},
		{"admin", s.AdminURL, "POST /admin/v1/orgs HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer " + s.AdminToken + "\r\n"},
	} {
		if !trickleBody(t, tc.base, tc.head) {
			t.Errorf("%s: a trickling body still holds its connection after %s", tc.name, hang)
		}
	}
	// Legitimate requests: an organisation, a token, a read.
	clientID, secret := s.org(`{"orgId":"slow","orgName":"Slow","contentGrants":["middle"]}`, "content.read")
	tok := s.token(clientID, secret, "content.read")
	if r := s.get("GET", "/v1/tiers", tok); r.status != 200 {
		t.Errorf("GET /v1/tiers: %d %s", r.status, r.body)
	}

	// A trickling client in flight does not hold Close (Shutdown).
	c, err := net.Dial("tcp", strings.TrimPrefix(s.AdminURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /admin/v1/orgs HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer "+s.AdminToken+"\r\nContent-Length: 1000\r\n\r\n{")
	go func() {
		for range 1000 {
			time.Sleep(20 * time.Millisecond)
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- s.stack.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(hang):
		t.Fatalf("Close is held by a trickling client after %s", hang)
	}
}

// TestBodyReadTimeout: a body cut off by the read limit, on the two
// routes that read one (withBody), is answered 408 with the error body
// (code BAD_REQUEST naming body, Connection: close), bills nothing, and
// the access log says 408: not the empty 200 net/http wrote when the
// handler wrote nothing.
func TestBodyReadTimeout(t *testing.T) {
	s := newLimitedStack(t, shortLimits)
	clientID, secret := s.org(`{"orgId":"trickle","contentGrants":["middle"]}`, "content.read", "media.download")
	tok := s.token(clientID, secret, "media.download")
	learner := s.learnerToken("trickle", "ana", "progress.read", "progress.write")
	lesson := s.Content().Lessons[0].ID
	for i, tc := range []struct{ name, head string }{
		{"mint", "POST /v1/media/urls HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nAuthorization: Bearer " + tok + "\r\n"},
		{"progress", "PUT /v1/progress/" + lesson + " HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nAuthorization: Bearer " + learner + "\r\n"},
	} {
		before := s.calls("trickle")
		id := fmt.Sprintf("trickle-req-%04d", i)
		got := trickleAnswer(t, s.OriginURL, tc.head+"X-Request-Id: "+id+"\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(got)), nil)
		if err != nil {
			t.Fatalf("%s: no answer (%v): %q", tc.name, err, got)
		}
		var e struct {
			Error struct{ Code, Parameter, RequestID string }
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		if err != nil || resp.StatusCode != http.StatusRequestTimeout || e.Error.Code != "BAD_REQUEST" || e.Error.Parameter != "body" ||
			e.Error.RequestID != id || !resp.Close {
			t.Errorf("%s: %d %+v (%v), close %v; want 408 BAD_REQUEST naming body, Connection: close: %q", tc.name, resp.StatusCode, e, err, resp.Close, got)
		}
		line := telemetrytest.Line(t, s.out.String, id)
		if line["status"] != 408.0 || line["code"] != "BAD_REQUEST" || line["billed"] != "none" {
			t.Errorf("%s: access log %v, want status 408, code BAD_REQUEST, billed none", tc.name, line)
		}
		if after := s.calls("trickle"); after != before {
			t.Errorf("%s: billed %v calls", tc.name, after-before)
		}
	}
}

// trickleAnswer sends head declaring a body of 1,000 bytes, then a byte
// every 20 ms, and returns what the server wrote until it closed the
// connection (within hang).
func trickleAnswer(t *testing.T, base, head string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(hang))
	io.WriteString(c, head+"Content-Length: 1000\r\n\r\n")
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case b := <-got:
			return b
		case <-tick.C:
			c.Write([]byte(" "))
		}
	}
}

// TestNetHTTPRefusals: requests net/http refuses before any handler are
// answered in the API's error body, with a request id, on each listener.
func TestNetHTTPRefusals(t *testing.T) {
	s := newStack(t)
	for _, base := range []string{s.OriginURL, s.IdPURL, s.AdminURL} {
		for _, tc := range []struct{ name, request, param string }{
			{"malformed request line", "GET\r\n\r\n", ""},
			{"headers over the limit", "GET /v1/tiers HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("a", httpsrv.Default.MaxHeaderBytes+8<<10) + "\r\n\r\n", "headers"},
			{"no Host", "GET /v1/tiers HTTP/1.1\r\n\r\n", "Host"},
		} {
			c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(hang))
			io.WriteString(c, tc.request)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("%s %s: %v", base, tc.name, err)
			}
			var e struct {
				Error struct{ Code, RequestID, Parameter string }
			}
			err = json.NewDecoder(resp.Body).Decode(&e)
			c.Close()
			if err != nil || resp.StatusCode != 400 || e.Error.Code != "BAD_REQUEST" || e.Error.Parameter != tc.param ||
				e.Error.RequestID == "" || e.Error.RequestID != resp.Header.Get("X-Request-Id") {
				t.Errorf("%s %s: %d %+v (%v), want 400 BAD_REQUEST parameter %q with the request id", base, tc.name, resp.StatusCode, e, err, tc.param)
			}
		}
	}
}
