package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/version"
	"github.com/lectern-api/lectern/shared/logbuftest"
)

func TestTraceID(t *testing.T) {
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for in, want := range map[string]string{
		"00-" + trace + "-00f067aa0ba902b7-01":                    trace,
		"00-" + trace + "-00f067aa0ba902b7-00":                    trace,
		"01-" + trace + "-00f067aa0ba902b7-01-whatever":           trace, // a later version: its extra is ignored
		"01-" + trace + "-00f067aa0ba902b7-01":                    trace,
		"00-" + trace + "-00f067aa0ba902b7-01-extra":              "", // version 00 has nothing after
		"ff-" + trace + "-00f067aa0ba902b7-01":                    "",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "",
		"00-" + trace + "-0000000000000000-01":                    "",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": "", // uppercase
		"00-" + trace + "-00f067aa0ba902b7-0":                     "",
		"00_" + trace + "-00f067aa0ba902b7-01":                    "",
		"01-" + trace + "-00f067aa0ba902b7-01x":                   "",
		"":                                                        "",
	} {
		got, ok := TraceID(in)
		if got != want || ok != (want != "") {
			t.Errorf("TraceID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	a, b := NewTraceparent(), NewTraceparent()
	if _, ok := TraceID(a); !ok || a == b || !strings.HasPrefix(a, "00-") || !strings.HasSuffix(a, "-00") {
		t.Errorf("NewTraceparent: %q, %q", a, b)
	}
}

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct{ format, level, want string }{
		{"yaml", "info", "LECTERN_LOG_FORMAT"},
		{"json", "verbose", "LECTERN_LOG_LEVEL"},
	} {
		if _, err := NewLogger(io.Discard, tc.format, tc.level); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %q: %v, want an error naming %s", tc.format, tc.level, err, tc.want)
		}
	}
	var def bytes.Buffer
	dl, err := NewLogger(&def, "", "")
	if err != nil {
		t.Fatal(err)
	}
	dl.Debug("hidden")
	dl.Info("shown")
	if got := def.String(); strings.Contains(got, "hidden") || !strings.Contains(got, `"level":"INFO","msg":"shown"`) {
		t.Errorf("defaults (json at info): %q", got)
	}
	var buf bytes.Buffer
	log, err := NewLogger(&buf, "TEXT", "Warn")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.Contains(got, "level=WARN msg=shown") {
		t.Errorf("text at warn: %q", got)
	}
}

// serve serves h behind Access (a, with its Log writing to logs) on a
// real listener; the returned get waits for the access line of its
// request to be written before it returns.
func serve(t *testing.T, a *Access, h http.Handler) func(method, path string, hdr ...string) *http.Response {
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	done := make(chan struct{}, 1)
	wrapped := a.Wrap(h)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wrapped.ServeHTTP(w, r)
		done <- struct{}{}
	})
	return func(method, path string, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		<-done
		return resp
	}
}

// api answers like the origin: X-Request-Id, and error bodies for the
// paths that name one; /boom is a 500.
var api = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Request-Id", r.Header.Get("X-Request-Id"))
	FromContext(r.Context()).SetOrg("acme")
	switch {
	case r.URL.Path == "/boom":
		w.WriteHeader(500)
		io.WriteString(w, `{"error":{"code":"INTERNAL","message":"x","requestId":"r"}}`)
	case strings.HasPrefix(r.URL.Path, "/v1/lessons/"):
		FromContext(r.Context()).Billed("calls", "lessonreads")
		FromContext(r.Context()).Billed("calls")
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"code":"LESSON_NOT_FOUND","message":"x","requestId":"r"}}`)
	default:
		io.WriteString(w, `{"ok":true}`)
	}
})

func lines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		out = append(out, m)
	}
	return out
}

// TestAccessLine: the fields of a line, the route's template (never the
// path), the code read from an error body, the levels.
func TestAccessLine(t *testing.T) {
	var logs logbuftest.Buffer
	log, _ := NewLogger(&logs, "json", "info")
	get := serve(t, &Access{Log: log}, api)

	get("GET", "/v1/lessons/high/algebra-basics/3", "X-Request-Id", "req-line-0001")
	get("GET", "/v1/tiers", "X-Request-Id", "req-line-0002", "Authorization", "Bearer secret-token")
	get("BREW", "/nowhere/12345", "X-Request-Id", "req-line-0003")
	got := lines(t, logs.String())
	if len(got) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(got), logs.String())
	}
	for i, want := range []map[string]any{
		{"requestId": "req-line-0001", "route": "/v1/lessons/{tier}/{subjectSlug}/{classNum}", "status": 404.0,
			"code": "LESSON_NOT_FOUND", "billed": "calls+lessonreads", "org": "acme", "level": "INFO", "method": "GET"},
		{"requestId": "req-line-0002", "route": "/v1/tiers", "status": 200.0, "billed": "none", "code": nil},
		{"requestId": "req-line-0003", "route": "unmatched", "method": "_OTHER", "status": 200.0},
	} {
		for k, v := range want {
			if got[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v (%v)", i, k, got[i][k], v, got[i])
			}
		}
	}
	if s := logs.String(); strings.Contains(s, "secret-token") || strings.Contains(s, "algebra-basics") || strings.Contains(s, "12345") {
		t.Errorf("a token or a path in the log:\n%s", s)
	}

	// At warn, a 200 or a 4xx is not logged, a 500 is, at ERROR.
	var warn logbuftest.Buffer
	log, _ = NewLogger(&warn, "json", "warn")
	get = serve(t, &Access{Log: log}, api)
	get("GET", "/v1/tiers", "X-Request-Id", "req-warn-0001")
	get("GET", "/v1/lessons/high/x/1", "X-Request-Id", "req-warn-0002")
	get("GET", "/boom", "X-Request-Id", "req-warn-0003")
	got = lines(t, warn.String())
	if len(got) != 1 || got[0]["requestId"] != "req-warn-0003" || got[0]["level"] != "ERROR" || got[0]["code"] != "INTERNAL" {
		t.Errorf("at warn: %v", got)
	}

	// Text.
	var text logbuftest.Buffer
	log, _ = NewLogger(&text, "text", "debug")
	serve(t, &Access{Log: log}, api)("GET", "/v1/tiers", "X-Request-Id", "req-text-0001")
	if s := text.String(); !strings.Contains(s, "level=INFO msg=request requestId=req-text-0001 traceId=") ||
		!strings.Contains(s, "route=/v1/tiers status=200 org=acme billed=none durationMs=") {
		t.Errorf("text line: %q", s)
	}
}

// TestAccessTrace: at the edge (Edge) the request's traceparent is the
// one logged and handed on: a valid one kept, another replaced; without
// Edge it is only read.
func TestAccessTrace(t *testing.T) {
	const valid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, edge := range []bool{true, false} {
		var seen atomic.Value
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Store(r.Header.Get(TraceHeader))
			w.Header().Set("X-Request-Id", r.Header.Get("X-Request-Id"))
		})
		var logs logbuftest.Buffer
		log, _ := NewLogger(&logs, "json", "info")
		get := serve(t, &Access{Log: log, Edge: edge}, h)
		get("GET", "/v1/tiers", "X-Request-Id", "req-trace-0001", TraceHeader, valid)
		get("GET", "/v1/tiers", "X-Request-Id", "req-trace-0002", TraceHeader, "garbage")
		got := lines(t, logs.String())
		if got[0]["traceId"] != "0af7651916cd43dd8448eb211c80319c" {
			t.Errorf("edge %v: valid traceparent logged as %v", edge, got[0]["traceId"])
		}
		handed := seen.Load().(string)
		trace, ok := TraceID(handed)
		switch {
		case edge && (!ok || got[1]["traceId"] != trace):
			t.Errorf("edge: an invalid traceparent handed on as %q, logged %v", handed, got[1]["traceId"])
		case !edge && handed != "garbage":
			t.Errorf("origin: the traceparent was changed to %q", handed)
		}
		if _, billed := got[0]["billed"]; billed == edge {
			t.Errorf("edge %v: billed in the line: %v", edge, got[0])
		}
		if edge {
			// Two fields, each valid, are none (W3C Trace Context §3.2).
			srv := httptest.NewServer((&Access{Log: log, Edge: true}).Wrap(h))
			req, _ := http.NewRequest("GET", srv.URL+"/v1/tiers", nil)
			req.Header.Add(TraceHeader, valid)
			req.Header.Add(TraceHeader, valid)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			srv.Close()
			if s := seen.Load().(string); s == valid {
				t.Errorf("two traceparent fields: %q handed on", s)
			}
		}
	}
}

func TestHealth(t *testing.T) {
	var runs atomic.Int64
	var fail atomic.Bool
	fail.Store(true)
	hl := &Health{TTL: time.Hour, Checks: []Check{
		{Name: "database", Func: func(context.Context) error {
			runs.Add(1)
			if fail.Load() {
				return errors.New("closed")
			}
			return nil
		}},
		{Name: "corpus", Func: func(context.Context) error { return nil }},
	}}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(418) })
	srv := httptest.NewServer(hl.Wrap(next))
	t.Cleanup(srv.Close)
	probe := func(method, path string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if code, m := probe("GET", ReadyPath); code != 503 || m["status"] != "not ready" || !slices.Equal(names(m), []string{"database"}) {
		t.Errorf("/readyz not ready: %d %v", code, m)
	}
	// The release, and the commit when the build recorded one (a test
	// binary records none: the body then has none).
	var commit any
	if c := version.Read().Commit; c != "" {
		commit = c
	}
	if code, m := probe("GET", HealthPath); code != 200 || m["status"] != "ok" || m["version"] != version.Release || m["commit"] != commit {
		t.Errorf("/healthz: %d %v, want the release %s", code, m, version.Release)
	}
	fail.Store(false)
	for range 5 {
		probe("GET", ReadyPath) // within the TTL: the verdict kept
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the checks ran %d times within the TTL, want 1", n)
	}
	hl.mu.Lock()
	hl.TTL = time.Nanosecond
	hl.mu.Unlock()
	if code, m := probe("GET", ReadyPath); code != 200 || m["status"] != "ready" {
		t.Errorf("/readyz ready: %d %v", code, m)
	}
	if code, _ := probe("HEAD", ReadyPath); code != 200 {
		t.Errorf("HEAD /readyz: %d", code)
	}
	for _, tc := range [][2]string{{"POST", ReadyPath}, {"GET", "/v1/tiers"}, {"GET", "/readyz/x"}} {
		if code, _ := probe(tc[0], tc[1]); code != 418 {
			t.Errorf("%s %s: %d, want the wrapped handler's", tc[0], tc[1], code)
		}
	}
}

func names(m map[string]any) []string {
	var out []string
	l, _ := m["notReady"].([]any)
	for _, v := range l {
		out = append(out, v.(string))
	}
	return out
}

// TestMetricsSeries: requests through Access with Metrics make the
// duration histogram by template, method and status, and the refusals by
// code; a corpus version and a meter commit their series.
func TestMetricsSeries(t *testing.T) {
	m := NewMetrics()
	get := serve(t, &Access{Log: logDiscard(), Metrics: m}, api)
	get("GET", "/v1/lessons/high/algebra-basics/3")
	get("GET", "/v1/tiers")
	get("GET", "/v1/tiers")
	m.MeterCommit(3, time.Millisecond, nil)
	m.JWKSFetch("url", errors.New("refused"))
	version := "2026-11-01+abc"
	m.CorpusVersion(func() string { return version })

	scrape := func() string {
		srv := httptest.NewServer(m.Handler())
		defer srv.Close()
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	body := scrape()
	for _, want := range []string{
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="200",http_route="/v1/tiers"} 2`,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="404",http_route="/v1/lessons/{tier}/{subjectSlug}/{classNum}"} 1`,
		`lectern_refusals_total{error_code="LESSON_NOT_FOUND"} 1`,
		`lectern_meter_commit_batch_size_sum 3`,
		`lectern_meter_commit_duration_seconds_count{result="ok"} 1`,
		`lectern_jwks_fetches_total{result="error",source="url"} 1`,
		`lectern_corpus_content_version{content_version="2026-11-01+abc"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("lacks %s", want)
		}
	}
	if strings.Contains(body, "algebra-basics") {
		t.Error("a path in the metrics")
	}
	version = "2026-12-01+def"
	if body := scrape(); !strings.Contains(body, `content_version="2026-12-01+def"} 1`) || strings.Contains(body, "2026-11-01+abc") {
		t.Errorf("after a reload, the version series:\n%s", body)
	}
}

func logDiscard() *slog.Logger { l, _ := NewLogger(io.Discard, "json", "info"); return l }

// BenchmarkAccess is the cost the access log and the metrics add to a
// request: the wrapped handler answers at once, the line goes to
// io.Discard as JSON.
func BenchmarkAccess(b *testing.B) {
	log, _ := NewLogger(io.Discard, "json", "info")
	h := (&Access{Log: log, Metrics: NewMetrics()}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_0123456789abcdef01234567")
		FromContext(r.Context()).SetOrg("acme")
		FromContext(r.Context()).Billed("calls")
		w.Write([]byte(`{}`))
	}))
	req := httptest.NewRequest("GET", "/v1/subjects/algebra", nil)
	req.Header.Set(TraceHeader, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

// BenchmarkBare is BenchmarkAccess's handler alone, for the difference.
func BenchmarkBare(b *testing.B) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_0123456789abcdef01234567")
		w.Write([]byte(`{}`))
	})
	req := httptest.NewRequest("GET", "/v1/subjects/algebra", nil)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

// TestTemplateNamesTheInternalEndpoints: the edge's gate, lease and usage
// calls are named by their paths in the log and the metrics, not
// "unmatched"; anything else outside the route table is.
func TestTemplateNamesTheInternalEndpoints(t *testing.T) {
	for path, want := range map[string]string{
		"/internal/gate":    "/internal/gate",
		"/internal/lease":   "/internal/lease",
		"/internal/usage":   "/internal/usage",
		"/internal/revoke":  "unmatched", // the edge host's, never the origin's
		"/internal/lease/x": "unmatched",
	} {
		if got := Template("POST", path); got != want {
			t.Errorf("Template(POST, %s) = %q, want %q", path, got, want)
		}
	}
}

// readFromWriter is a ResponseWriter whose ReadFrom is counted.
type readFromWriter struct {
	*httptest.ResponseRecorder
	readFroms int
}

func (w *readFromWriter) ReadFrom(r io.Reader) (int64, error) {
	w.readFroms++
	return io.Copy(w.ResponseRecorder, r)
}

// A file served through the access log (io.CopyN, as http.ServeContent
// copies) reaches the connection's ReadFrom
// (sendfile), and is logged 200; an error answer goes through Write, so
// its code is read.
func TestLogWriterReadFrom(t *testing.T) {
	rw := &readFromWriter{ResponseRecorder: httptest.NewRecorder()}
	lw := &logWriter{ResponseWriter: rw}
	if n, err := io.CopyN(lw, strings.NewReader("file bytes"), 10); n != 10 || err != nil || rw.readFroms != 1 || lw.status != 200 {
		t.Errorf("copy: %d %v, %d ReadFrom calls, status %d", n, err, rw.readFroms, lw.status)
	}
	rw = &readFromWriter{ResponseRecorder: httptest.NewRecorder()}
	lw = &logWriter{ResponseWriter: rw}
	lw.WriteHeader(404)
	io.CopyN(lw, strings.NewReader(`{"error":{"code":"NOT_FOUND"}}`), 30)
	if rw.readFroms != 0 || errorCode(lw.head.Bytes()) != "NOT_FOUND" {
		t.Errorf("an error answer: %d ReadFrom calls, head %q", rw.readFroms, lw.head.Bytes())
	}
}
