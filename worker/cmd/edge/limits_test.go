package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/httpsrv"
	"github.com/lectern-api/lectern/internal/proctest"
	"github.com/lectern-api/lectern/shared/logbuftest"
	"github.com/lectern-api/lectern/worker/wazero/wazerotest"
)

// hang is how long these tests wait for what must happen within the
// short limits they configure before calling it a hang.
const hang = 10 * time.Second

// buildModule writes the module, a standard Go build made once per test
// binary, into the test's directory, and returns its path.
func buildModule(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "worker.wasm")
	if err := os.WriteFile(path, wazerotest.GoModule(t), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startEdge serves the edge in front of origin (one base URL, or several,
// comma-separated) with short limits, changed by the options, and returns
// its base URL. It runs in the test's process, not as a child (the
// options change fields a child's settings cannot reach), and is awaited
// as the child edges are: by its ready line (proctest.Await, EdgeURL).
func startEdge(t *testing.T, origin string, options ...func(*config)) string {
	t.Helper()
	base, _ := startEdgeLog(t, origin, options...)
	return base
}

// startEdgeLog is startEdge, also returning what the edge logs once it
// serves.
func startEdgeLog(t *testing.T, origin string, options ...func(*config)) (string, *logbuftest.Buffer) {
	t.Helper()
	cfg, err := parseConfig([]string{"-addr", "127.0.0.1:0", "-wasm", buildModule(t), "-instances", "1", "-origin-url", origin},
		env(map[string]string{"LECTERN_SECRET": "a-test-secret-of-at-least-32-characters"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.UsageLog = filepath.Join(t.TempDir(), "usage.log")
	cfg.Limits = httpsrv.Limits{ReadHeader: 500 * time.Millisecond, Read: 500 * time.Millisecond}
	cfg.ForwardTimeout = 500 * time.Millisecond
	for _, o := range options {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, cfg, pw)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	logs := new(logbuftest.Buffer)
	base, ok := proctest.Await(pr, logs, proctest.EdgeURL)
	if !ok {
		t.Fatal("the edge printed no address")
	}
	return base, logs
}

// errorAnswer reads an answer that must be the API's error body.
func errorAnswer(t *testing.T, resp *http.Response) (code, param string) {
	t.Helper()
	defer resp.Body.Close()
	var e struct {
		Error struct{ Code, RequestID, Parameter string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("%d: not the error body: %v", resp.StatusCode, err)
	}
	if e.Error.RequestID == "" || e.Error.RequestID != resp.Header.Get("X-Request-Id") {
		t.Errorf("requestId %q, X-Request-Id %q", e.Error.RequestID, resp.Header.Get("X-Request-Id"))
	}
	return e.Error.Code, e.Error.Parameter
}

// TestHungOrigin: an origin that accepts a forward and never answers
// gets the client 500 INTERNAL in the error body at the forward timeout;
// one that stops in the middle of its body has the answer cut off; one
// that answers is passed through, body and all.
func TestHungOrigin(t *testing.T) {
	stop := make(chan struct{})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch r.URL.Query().Get("origin") {
		case "hangs":
			<-stop
		case "stops":
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte(`{"resource":`))
			w.(http.Flusher).Flush()
			<-stop
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"received":%d}`, len(b))
		}
	}))
	defer origin.Close()
	defer close(stop) // before the close, which waits for the handlers
	base := startEdge(t, origin.URL)
	client := &http.Client{Timeout: hang}
	const path = "/.well-known/oauth-protected-resource" // forwarded without a token

	resp, err := client.Get(base + path + "?origin=hangs")
	if err != nil {
		t.Fatalf("a hung origin: %v", err)
	}
	if code, _ := errorAnswer(t, resp); resp.StatusCode != 500 || code != "INTERNAL" {
		t.Errorf("a hung origin: %d %s, want 500 INTERNAL", resp.StatusCode, code)
	}

	resp, err = client.Get(base + path + "?origin=stops")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil || strings.Contains(err.Error(), "Client.Timeout") {
		t.Errorf("an origin stopping in its body: %v, want the answer cut off before %s", err, hang)
	}

	for _, body := range []string{"", strings.Repeat("x", 4000)} {
		resp, err = client.Post(base+path, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf(`{"received":%d}`, len(body)); resp.StatusCode != 200 || string(b) != want {
			t.Errorf("a forward of %d bytes: %d %s, want 200 %s", len(body), resp.StatusCode, b, want)
		}
	}
}

// TestEdgeSlowBody: a body sent a byte at a time loses its connection at
// the read limit, whether the edge forwards it or answers without it.
func TestEdgeSlowBody(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.ReadAll(r.Body) }))
	defer origin.Close()
	base := startEdge(t, origin.URL)
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/v1/media/urls"} {
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: a\r\nContent-Length: 1000\r\n\r\n")
		closed := make(chan struct{})
		go func() { io.Copy(io.Discard, c); close(closed) }()
		giveUp := time.After(hang)
	trickle:
		for {
			select {
			case <-closed:
				break trickle
			case <-giveUp:
				t.Errorf("POST %s: a trickling body still holds its connection after %s", path, hang)
				break trickle
			case <-time.After(20 * time.Millisecond):
				c.Write([]byte("x"))
			}
		}
		c.Close()
	}
}

// TestEdgeRefusals: requests net/http refuses before the module sees
// them are answered in the API's error body with the host's request id.
func TestEdgeRefusals(t *testing.T) {
	base := startEdge(t, "http://127.0.0.1:1")
	for _, tc := range []struct{ name, request, param string }{
		{"malformed request line", "GET\r\n\r\n", ""},
		{"headers over the limit", "GET /v1/tiers HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("a", httpsrv.Default.MaxHeaderBytes+8<<10) + "\r\n\r\n", "headers"},
	} {
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(hang))
		io.WriteString(c, tc.request)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		code, param := errorAnswer(t, resp)
		c.Close()
		if resp.StatusCode != 400 || code != "BAD_REQUEST" || param != tc.param || !strings.HasPrefix(resp.Header.Get("X-Request-Id"), "edge_") {
			t.Errorf("%s: %d %s parameter %q id %q, want 400 BAD_REQUEST parameter %q", tc.name, resp.StatusCode, code, param,
				resp.Header.Get("X-Request-Id"), tc.param)
		}
	}
}
