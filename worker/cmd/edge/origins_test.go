package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/param"
	"github.com/lectern-api/lectern/worker/wazero"
)

// forwarded is a path the edge forwards without a token, whatever the
// method, body and all.
const forwarded = "/.well-known/oauth-protected-resource"

// countingOrigin answers every request 200 {"origin":name,"received":n}
// (n the bytes of its body) and counts what it received.
type countingOrigin struct {
	name string
	got  atomic.Int64
}

func (o *countingOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == wazero.ProbePath { // the edge's liveness probe: not a request of the test's
		return
	}
	b, _ := io.ReadAll(r.Body)
	o.got.Add(1)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"origin":%q,"received":%d}`, o.name, len(b))
}

func startOrigin(t *testing.T, name string) (*countingOrigin, *httptest.Server) {
	o := &countingOrigin{name: name}
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	return o, srv
}

// deadOrigin returns the URL of a port nothing listens on (a listener's,
// closed) and a function that starts listening there again.
func deadOrigin(t *testing.T, name string) (url string, revive func() *countingOrigin) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr, func() *countingOrigin {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s again: %v", addr, err)
		}
		o := &countingOrigin{name: name}
		srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: o}}
		srv.Start()
		t.Cleanup(srv.Close)
		return o
	}
}

// send sends method to the edge with body and returns the status and,
// for a 200, the answering origin's name; anything else must be the API's
// error body.
func send(t *testing.T, base, method, body string) (status int, from, code string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+forwarded, strings.NewReader(body))
	resp, err := (&http.Client{Timeout: hang}).Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if resp.StatusCode != 200 {
		code, _ = errorAnswer(t, resp)
		return resp.StatusCode, "", code
	}
	defer resp.Body.Close()
	var answer struct {
		Origin   string
		Received int
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("%s: the origin's answer: %v", method, err)
	}
	// The edge forwards at most param.MaxBody+1 bytes: no route takes
	// more, and the origin answers that many as too large.
	if want := min(len(body), param.MaxBody+1); answer.Received != want {
		t.Errorf("%s of %d bytes: the origin received %d, want %d", method, len(body), answer.Received, want)
	}
	return resp.StatusCode, answer.Origin, ""
}

// TestOriginsSpread: with two origins, successive requests alternate
// between them (round robin), bodies and all.
func TestOriginsSpread(t *testing.T) {
	a, sa := startOrigin(t, "a")
	b, sb := startOrigin(t, "b")
	base := startEdge(t, sa.URL+","+sb.URL)
	var order []string
	for i := range 20 {
		method, body := "GET", ""
		if i%3 == 0 {
			method, body = "POST", strings.Repeat("x", 100+i)
		}
		status, from, code := send(t, base, method, body)
		if status != 200 {
			t.Fatalf("%s: %d %s", method, status, code)
		}
		order = append(order, from)
	}
	for i := 1; i < len(order); i++ {
		if order[i] == order[i-1] {
			t.Errorf("requests %d and %d both went to %s, want them spread: %q", i-1, i, order[i], order)
			break
		}
	}
	if a.got.Load() != 10 || b.got.Load() != 10 {
		t.Errorf("origins received %d and %d of 20 requests, want 10 each", a.got.Load(), b.got.Load())
	}
}

// TestOriginDown: with one origin's listener closed, every request
// succeeds through the other, POSTs with a body included (a failed dial
// sent nothing); and the dead origin is then left alone for the backoff:
// listening again, it receives nothing within it, and requests come back
// to it once it is over.
func TestOriginDown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backoff time.Duration
	}{{"no backoff", time.Nanosecond}, {"backoff", time.Hour}} {
		t.Run(tc.name, func(t *testing.T) {
			dead, revive := deadOrigin(t, "a")
			b, sb := startOrigin(t, "b")
			base := startEdge(t, dead+","+sb.URL, func(c *config) { c.OriginBackoff = tc.backoff })
			for i := range 12 {
				method, body := "GET", ""
				if i%2 == 0 {
					method, body = "POST", `{"n":`+fmt.Sprint(i)+`}`
				}
				if status, from, code := send(t, base, method, body); status != 200 || from != "b" {
					t.Errorf("%s %d with origin a down: %d %s %s, want 200 from b", method, i, status, from, code)
				}
			}
			if b.got.Load() != 12 {
				t.Errorf("b received %d of 12", b.got.Load())
			}
			a := revive()
			if tc.backoff == time.Hour {
				for range 6 {
					send(t, base, "GET", "")
				}
				if n := a.got.Load(); n != 0 {
					t.Errorf("a, in its backoff after a failed dial, received %d of 6 requests", n)
				}
				return
			}
			// The backoff (a nanosecond) is over: a is back in the rotation.
			for range 6 {
				send(t, base, "GET", "")
			}
			if n := a.got.Load(); n != 3 {
				t.Errorf("a, listening again after its backoff, received %d of 6 requests, want 3", n)
			}
		})
	}
}

// TestOriginBackoffEnds: an origin in its backoff gets requests again,
// within a bounded wait, once the backoff is over.
func TestOriginBackoffEnds(t *testing.T) {
	dead, revive := deadOrigin(t, "a")
	_, sb := startOrigin(t, "b")
	base := startEdge(t, dead+","+sb.URL, func(c *config) { c.OriginBackoff = 300 * time.Millisecond })
	send(t, base, "GET", "")
	send(t, base, "GET", "") // one of the two dialled a: it is in its backoff
	a := revive()
	deadline := time.Now().Add(hang)
	for a.got.Load() == 0 && time.Now().Before(deadline) {
		if status, _, code := send(t, base, "GET", ""); status != 200 {
			t.Fatalf("GET: %d %s", status, code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a.got.Load() == 0 {
		t.Errorf("a, listening again, received nothing in %s after a backoff of 300 ms", hang)
	}
}

// resetOrigin accepts connections, reads one request whole, counts it and
// resets the connection without answering: a request that reached an
// origin which then failed.
func resetOrigin(t *testing.T) (url string, got *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(hang))
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				if _, err := io.ReadAll(req.Body); err != nil {
					return
				}
				got.Add(1)
				c.(*net.TCPConn).SetLinger(0) // close with RST
			}()
		}
	}()
	return "http://" + ln.Addr().String(), got
}

// TestOriginResetAfterSend: an origin that receives a request and then
// resets the connection. A POST it received, with a body or without one
// (as the gate call), is not sent to the other origin (it may have been
// applied, or metered): the client gets 500 INTERNAL in the error body.
// GET and PUT are idempotent: they are sent to the other origin and
// succeed, the PUT's body sent again (the edge reads a body before it
// forwards it, cut at param.MaxBody+1 bytes: a longer one is refused
// by the origin whole or cut alike).
func TestOriginResetAfterSend(t *testing.T) {
	resets, aGot := resetOrigin(t)
	b, sb := startOrigin(t, "b")
	base := startEdge(t, resets+","+sb.URL)
	for _, tc := range []struct {
		method, body string
		retried      bool
	}{
		{"POST", `{"mediaIds":["m1"]}`, false},
		{"POST", "", false},
		{"GET", "", true},
		{"PUT", `{"score":80}`, true},
		{"PUT", strings.Repeat("x", 100<<10), true},
	} {
		aBefore, bBefore := aGot.Load(), b.got.Load()
		var ok, failed int64
		for i := range 6 {
			status, from, code := send(t, base, tc.method, tc.body)
			switch {
			case status == 200 && from == "b":
				ok++
			case status == 500 && code == "INTERNAL" && !tc.retried:
				failed++
			default:
				t.Errorf("%s %d of %d bytes: %d %s %s", tc.method, i, len(tc.body), status, from, code)
			}
		}
		aN, bN := aGot.Load()-aBefore, b.got.Load()-bBefore
		switch {
		case aN == 0:
			t.Errorf("%s of %d bytes: the resetting origin received none of 6", tc.method, len(tc.body))
		case tc.retried && (ok != 6 || bN != 6):
			t.Errorf("%s of %d bytes: b received %d, the client got %d 200s of 6, want all 6 sent on to b",
				tc.method, len(tc.body), bN, ok)
		case !tc.retried && (failed != aN || bN != ok || ok+failed != 6):
			t.Errorf("%s of %d bytes: the resetting origin received %d, b %d; the client got %d 200s and %d 500s; "+
				"want every one a received answered 500 and not sent to b", tc.method, len(tc.body), aN, bN, ok, failed)
		}
	}
}

// TestOriginsAllDown: when every origin's dial fails, the client gets the
// answer of one unreachable origin: 500 INTERNAL in the error body; with
// a single origin, it is dialled again on the next request (no backoff),
// as before several origins existed.
func TestOriginsAllDown(t *testing.T) {
	a, _ := deadOrigin(t, "a")
	b, _ := deadOrigin(t, "b")
	base := startEdge(t, a+","+b)
	for _, method := range []string{"GET", "POST"} {
		if status, _, code := send(t, base, method, "{}"); status != 500 || code != "INTERNAL" {
			t.Errorf("%s with both origins down: %d %s, want 500 INTERNAL", method, status, code)
		}
	}

	one, revive := deadOrigin(t, "one")
	base = startEdge(t, one)
	if status, _, code := send(t, base, "GET", ""); status != 500 || code != "INTERNAL" {
		t.Errorf("GET with the one origin down: %d %s, want 500 INTERNAL", status, code)
	}
	revive()
	if status, from, code := send(t, base, "GET", ""); status != 200 || from != "one" {
		t.Errorf("GET with the one origin back: %d %s %s, want 200 from it at once", status, from, code)
	}
}

// silentOrigin returns the URL of a listener that never accepts and whose
// accept queue is full (its backlog cut to 0, one connection queued): the
// kernel drops further connection attempts, so a dial neither succeeds
// nor is refused, as with an origin behind a dead link.
func silentOrigin(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { err = syscall.Listen(int(fd), 0) })
	if err != nil {
		t.Skipf("cannot cut the backlog: %v", err)
	}
	for range 8 {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 300*time.Millisecond)
		if err != nil {
			return "http://" + ln.Addr().String() // the queue is full: dials hang
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("this kernel accepts connections past a full backlog: no silent origin to test with")
	return ""
}

// TestOriginSilent: an origin whose dials hang (no refusal). With a dial
// timeout under the forward timeout, every request succeeds through the
// other origin, POSTs too (nothing was sent); the default with several
// origins is such a timeout. With a dial cut by the forward timeout
// instead, that request fails, 500 INTERNAL, but the origin goes into its
// backoff all the same: the requests after it succeed.
func TestOriginSilent(t *testing.T) {
	silent := silentOrigin(t)
	b, sb := startOrigin(t, "b")
	base := startEdge(t, silent+","+sb.URL, func(c *config) { c.DialTimeout = 200 * time.Millisecond; c.OriginBackoff = time.Nanosecond })
	for i := range 4 {
		method := []string{"GET", "POST"}[i%2]
		if status, from, code := send(t, base, method, `{}`); status != 200 || from != "b" {
			t.Errorf("%s %d, one origin silent, dial timeout 200 ms: %d %s %s, want 200 from b", method, i, status, from, code)
		}
	}
	if b.got.Load() != 4 {
		t.Errorf("b received %d of 4", b.got.Load())
	}

	base = startEdge(t, silent+","+sb.URL, func(c *config) { c.DialTimeout = time.Minute; c.OriginBackoff = time.Hour })
	var failed int
	for i := range 6 {
		status, from, code := send(t, base, "GET", "")
		switch {
		case status == 500 && code == "INTERNAL" && i < 2:
			failed++ // the one sent to the silent origin first, cut at the forward timeout
		case status != 200 || from != "b":
			t.Errorf("GET %d, one origin silent, cut by the forward timeout: %d %s %s", i, status, from, code)
		}
	}
	if failed != 1 {
		t.Errorf("%d of the first two GETs failed, want the one that tried the silent origin", failed)
	}

	// The default dial timeout with several origins (3 s) is under the
	// default forward timeout (30 s; 10 s here): the request fails over.
	base = startEdge(t, silent+","+sb.URL, func(c *config) { c.DialTimeout = 0; c.ForwardTimeout = 10 * time.Second })
	for i := range 2 {
		if status, from, code := send(t, base, "POST", `{}`); status != 200 || from != "b" {
			t.Errorf("POST %d, one origin silent, the default dial timeout: %d %s %s, want 200 from b", i, status, from, code)
		}
	}
}

// frozenOrigin returns the URL of an origin that accepts connections and
// reads requests but never answers, its liveness probe included: a
// process stopped with SIGSTOP, whose sockets the kernel keeps. release
// ends the requests it holds.
func frozenOrigin(t *testing.T) (url string, got *atomic.Int64) {
	hold := make(chan struct{})
	got = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != wazero.ProbePath {
			got.Add(1)
		}
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hold); srv.Close() })
	return srv.URL, got
}

// TestOriginFrozen (issue #28, point 1): one of two origins stops
// answering without closing its sockets. The liveness probes eject it
// within about a second: a GET waiting on it goes on to the other origin,
// a POST that may have reached it is answered 500 INTERNAL, neither after
// more than a couple of seconds (not the 30 s forward timeout); once it
// is ejected every request goes to the other origin.
func TestOriginFrozen(t *testing.T) {
	frozen, frozenGot := frozenOrigin(t)
	b, sb := startOrigin(t, "b")
	// The forward timeout as deployed (30 s), not the tests' 500 ms: the
	// probes, not it, must cut the wait short.
	base := startEdge(t, frozen+","+sb.URL, func(c *config) { c.ForwardTimeout = 30 * time.Second })
	var slowest time.Duration
	var failedPosts int
	for i := range 12 {
		method := []string{"GET", "POST"}[i%2]
		began := time.Now()
		status, from, code := send(t, base, method, `{}`)
		slowest = max(slowest, time.Since(began))
		switch {
		case status == 200 && from == "b":
		case method == "POST" && status == 500 && code == "INTERNAL":
			failedPosts++
		default:
			t.Errorf("%s %d, one origin frozen: %d %s %s", method, i, status, from, code)
		}
	}
	// Ejection takes ProbeFailures probes (250 ms apart, 500 ms each at
	// most); an attempt waits that long at most, then fails over.
	t.Logf("the slowest request took %s", slowest)
	if bound := 3 * time.Second; slowest > bound {
		t.Errorf("the slowest request took %s with an origin frozen, want under %s", slowest, bound)
	}
	if failedPosts > 1 {
		t.Errorf("%d POSTs failed: only one sent before the ejection may", failedPosts)
	}
	if n := frozenGot.Load(); n > 2 {
		t.Errorf("the frozen origin was sent %d requests, want at most the first one or two", n)
	}
	if b.got.Load() < 10 {
		t.Errorf("b received %d of 12", b.got.Load())
	}
}
