package httpsrv

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// short are the limits of these tests: the waits they cause are
// fractions of a second. hang is how long a test waits for what must
// happen within them before calling it a hang.
var short = Limits{ReadHeader: 300 * time.Millisecond, Read: 300 * time.Millisecond,
	Write: 5 * time.Second, Idle: time.Second, MaxHeaderBytes: 4 << 10, MaxBodyBytes: 1 << 10}

const hang = 10 * time.Second

// serve serves h under l on a loopback port.
func serve(t *testing.T, l Limits, h http.Handler) (addr string, srv *http.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Limits: l}
	srv = New(h, cfg)
	go srv.Serve(Listener(ln, cfg))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), srv
}

// trickle sends a request declaring a body of 1,000 bytes and then one
// byte every 20 ms, until the server closes the connection; it returns
// what the server answered, if anything, once the connection is closed,
// and fails the test when that takes longer than hang.
func trickle(t *testing.T, addr, head string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, head+"Content-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(c) // until the server closes
		got <- string(b)
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(hang)
	for {
		select {
		case s := <-got:
			return s
		case <-tick.C:
			c.Write([]byte("x")) // fails once the server has closed; the read then ends
		case <-deadline:
			t.Fatalf("the connection of a trickling body is still open after %s", hang)
			return ""
		}
	}
}

// TestTricklingBody: a body sent a byte at a time is cut off at
// Read, whether the handler reads it or leaves it to net/http; the
// handler that reads it sees the error.
func TestTricklingBody(t *testing.T) {
	readErr := make(chan error, 1)
	addr, _ := serve(t, short, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/read" {
			_, err := io.ReadAll(r.Body)
			readErr <- err
			if err != nil {
				return
			}
		}
		w.WriteHeader(401) // answered without reading the body
	}))
	trickle(t, addr, "POST /read HTTP/1.1\r\nHost: a\r\n")
	if err := <-readErr; err == nil {
		t.Error("the handler read a trickling body without an error")
	}
	if got := trickle(t, addr, "POST /other HTTP/1.1\r\nHost: a\r\n"); !strings.HasPrefix(got, "HTTP/1.1 401") {
		t.Errorf("answer %.100q, want the handler's 401 before the close", got)
	}
}

// TestTricklingHeaders: headers sent a byte at a time are cut off at
// ReadHeader.
func TestTricklingHeaders(t *testing.T) {
	addr, _ := serve(t, short, http.NotFoundHandler())
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closed := make(chan struct{})
	go func() { io.ReadAll(c); close(closed) }()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n")
	for i := 0; ; i++ {
		select {
		case <-closed:
			return
		case <-time.After(20 * time.Millisecond):
			c.Write([]byte("X-A: b\r\n"))
		}
		if time.Duration(i)*20*time.Millisecond > hang {
			t.Fatal("trickling headers are never cut off")
		}
	}
}

// TestShutdownNotStalled: a trickling body does not hold Shutdown past
// Read.
func TestShutdownNotStalled(t *testing.T) {
	addr, srv := serve(t, short, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.ReadAll(r.Body) }))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\nx")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				c.Write([]byte("x"))
			}
		}
	}()
	time.Sleep(50 * time.Millisecond) // the request is being read
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v (a trickling client held it)", err)
	}
}

// TestLegitimate: a whole body is read however long the handler then
// works, and the request's context is not cancelled by the body's
// deadline; keep-alive carries on.
func TestLegitimate(t *testing.T) {
	addr, _ := serve(t, short, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		time.Sleep(2 * short.Read) // past the body's deadline
		if err := r.Context().Err(); err != nil {
			http.Error(w, "context: "+err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%s %d", r.Method, len(b))
	}))
	client := &http.Client{Timeout: hang}
	for _, tc := range []struct{ method, body, want string }{
		{"GET", "", "GET 0"},
		{"POST", strings.Repeat("a", 1000), "POST 1000"},
		{"POST", strings.Repeat("b", 1000), "POST 1000"},
	} {
		req, _ := http.NewRequest(tc.method, "http://"+addr+"/", strings.NewReader(tc.body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != tc.want {
			t.Errorf("%s: %d %q, want 200 %q", tc.method, resp.StatusCode, b, tc.want)
		}
	}
	// A chunked body arrives whole too.
	req, _ := http.NewRequest("POST", "http://"+addr+"/", io.MultiReader(strings.NewReader("abc"), strings.NewReader("def")))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ContentLength != -1 && string(b) != "POST 6" {
		t.Errorf("chunked: %d %q", resp.StatusCode, b)
	}
}

// errorBody reads an answer in the API's error body.
type errorBody struct {
	Error struct {
		Code, Message, RequestID, Parameter string
	}
}

func readAnswer(t *testing.T, r io.Reader) (*http.Response, errorBody) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(r), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e errorBody
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("%d: body is not JSON: %v", resp.StatusCode, err)
	}
	return resp, e
}

// TestBodyTooLarge: a declared body over MaxBodyBytes is refused with the
// error body; a chunked one fails the handler's read.
func TestBodyTooLarge(t *testing.T) {
	readErr := make(chan error, 1)
	addr, _ := serve(t, short, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	}))
	resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader(strings.Repeat("a", 2<<10)))
	if err != nil {
		t.Fatal(err)
	}
	var e errorBody
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 400 || e.Error.Code != "BAD_REQUEST" || e.Error.Parameter != "body" ||
		e.Error.RequestID == "" || e.Error.RequestID != resp.Header.Get("X-Request-Id") {
		t.Errorf("declared: %d %+v", resp.StatusCode, e)
	}
	resp, err = http.Post("http://"+addr+"/", "text/plain", io.MultiReader(strings.NewReader(strings.Repeat("a", 2<<10))))
	if err == nil {
		resp.Body.Close()
	}
	var mbe *http.MaxBytesError
	if err := <-readErr; !errors.As(err, &mbe) {
		t.Errorf("chunked: the handler read %v, want a MaxBytesError", err)
	}
}

// TestHandlerBoundsBody: with HandlerBoundsBody a declared body over
// MaxBodyBytes reaches the handler, which answers it (the admin API: its
// token first); its read still fails past MaxBodyBytes.
func TestHandlerBoundsBody(t *testing.T) {
	l := short
	l.HandlerBoundsBody = true
	type read struct {
		n   int
		err error
	}
	reads := make(chan read, 1)
	addr, _ := serve(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		reads <- read{len(b), err}
		w.WriteHeader(http.StatusTeapot)
	}))
	resp, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader(strings.Repeat("a", 2<<10)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := <-reads
	var mbe *http.MaxBytesError
	if resp.StatusCode != http.StatusTeapot || got.n != int(l.MaxBodyBytes) || !errors.As(got.err, &mbe) {
		t.Errorf("declared 2 KiB: status %d, the handler read %d bytes and %v; want 418, %d bytes and a MaxBytesError",
			resp.StatusCode, got.n, got.err, l.MaxBodyBytes)
	}
}

// TestCannedAnswers: what net/http refuses before any handler is answered
// in the API's error body, over raw TCP; answers of the handler pass
// unchanged.
func TestCannedAnswers(t *testing.T) {
	addr, _ := serve(t, short, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Connection", "close")
		io.WriteString(w, "400 Bad Request") // as close to net/http's own as a handler gets
	}))
	for _, tc := range []struct {
		name, request, param string
	}{
		{"malformed request line", "GARBAGE\r\n\r\n", ""},
		{"malformed header line", "GET / HTTP/1.1\r\nHost: a\r\nno colon\r\n\r\n", ""},
		{"headers over the limit", "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n", "headers"},
		{"unknown transfer coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", "Transfer-Encoding"},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", "Host"},
		{"malformed Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "Host"},
		{"control byte in a header value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\x01c\r\n\r\n", ""},
		{"unsupported version", "GET / HTTP/3.0\r\nHost: a\r\n\r\n", ""},
		{"unsupported Expect", "GET / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n", "Expect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(hang))
			io.WriteString(c, tc.request)
			resp, e := readAnswer(t, c)
			if resp.StatusCode != 400 || e.Error.Code != "BAD_REQUEST" || e.Error.Parameter != tc.param || e.Error.Message == "" {
				t.Errorf("%d %+v, want 400 BAD_REQUEST parameter %q", resp.StatusCode, e, tc.param)
			}
			if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") || id != e.Error.RequestID {
				t.Errorf("X-Request-Id %q, requestId %q", id, e.Error.RequestID)
			}
			if resp.Header.Get("Content-Type") != "application/json" || !resp.Close {
				t.Errorf("headers %v, close %v", resp.Header, resp.Close)
			}
		})
	}
	// The handler's own answer, however it looks, is untouched.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(hang))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "400 Bad Request" || resp.Header.Get("X-Request-Id") != "" {
		t.Errorf("the handler's answer was changed: %d %v %q", resp.StatusCode, resp.Header, b)
	}
}

// TestRecogniseOnlyCanned: writes that merely resemble net/http's own
// answers are not replaced.
func TestRecogniseOnlyCanned(t *testing.T) {
	for _, p := range []string{
		"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request and more",
		"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nDate: x\r\n\r\n400 Bad Request",
		"HTTP/1.1 400 Bad Request: something else\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request: something else",
		"HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\n\r\nbody",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 4",
	} {
		if e := recognise([]byte(p)); e != nil {
			t.Errorf("%q was recognised as %v", p, e)
		}
	}
}
