package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/internal/telemetry/telemetrytest"
	"github.com/lectern-api/lectern/internal/version"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

// traceOrigin is an origin that records the traceparent of every call it
// gets, by path: /v1/tiers answers 200 with what the edge learns an
// organisation's ETag candidates from, the gate 412 (not a 304: forward),
// and /healthz 200 while up.
type traceOrigin struct {
	mu   sync.Mutex
	got  map[string][]string // path → traceparents, in order
	down bool
}

func (o *traceOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.got[r.URL.Path] = append(o.got[r.URL.Path], r.Header.Get("Traceparent"))
	down := o.down
	o.mu.Unlock()
	w.Header().Set("X-Request-Id", r.Header.Get("X-Request-Id")) // as the origin does
	switch {
	case r.URL.Path == telemetry.HealthPath && down:
		w.WriteHeader(http.StatusServiceUnavailable)
	case r.URL.Path == edgesig.GatePath:
		w.WriteHeader(http.StatusPreconditionFailed)
	default:
		w.Header().Set(edgesig.OrgHeader, "acme")
		w.Header().Set(edgesig.GrantsHeader, "g1")
		w.Header().Set("X-Service-Content-Version", "2026-11-01+abc")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}
}

func (o *traceOrigin) calls(path string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.got[path]...)
}

// TestEdgeTraceparent: the edge passes a valid incoming traceparent to
// the origin on forwards and gate calls, replaces an invalid or missing
// one with one it makes, and logs the trace id in its access line, with
// the route's template, the status and, on a refusal, the code; never
// the token.
func TestEdgeTraceparent(t *testing.T) {
	const issuer = "http://idp.test"
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(tokentest.JWKS("k1"))
	}))
	t.Cleanup(jwks.Close)
	o := &traceOrigin{got: map[string][]string{}}
	origin := httptest.NewServer(o)
	t.Cleanup(origin.Close)
	base, logs := startEdgeLog(t, origin.URL, func(c *config) {
		c.Issuer, c.JWKSURL = issuer, jwks.URL
	})
	tok := tokentest.Mint("k1", tokentest.Claims{"iss": issuer, "aud": "lectern-api", "sub": "c1", "client_id": "c1",
		"org": "acme", "scope": "service-api/content.read", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()})

	get := func(path, traceparent, reqID string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Request-Id", reqID)
		if traceparent != "" {
			req.Header.Set("Traceparent", traceparent)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}

	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	// A forward, which also teaches the edge the organisation's candidate.
	if resp := get("/v1/tiers", tp, "edge-trace-0001"); resp.StatusCode != 200 {
		t.Fatalf("forward: %d", resp.StatusCode)
	}
	if got := o.calls("/v1/tiers"); len(got) != 1 || got[0] != tp {
		t.Errorf("forward carried traceparent %q, want %q", got, tp)
	}
	line := telemetrytest.Line(t, logs.String, "edge-trace-0001")
	if line["traceId"] != "4bf92f3577b34da6a3ce929d0e0e4736" || line["route"] != "/v1/tiers" || line["status"] != 200.0 ||
		line["method"] != "GET" || line["level"] != "INFO" || line["billed"] != nil {
		t.Errorf("edge access line: %v", line)
	}

	// A conditional request: a gate call, then (412) a forward; both
	// carry the traceparent.
	const tp2 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	get("/v1/tiers", tp2, "edge-trace-0002", "If-None-Match", "*")
	if got := o.calls(edgesig.GatePath); len(got) != 1 || got[0] != tp2 {
		t.Errorf("gate call carried traceparent %q, want [%q]", got, tp2)
	}
	if got := o.calls("/v1/tiers"); len(got) != 2 || got[1] != tp2 {
		t.Errorf("forward after the gate carried %q, want %q second", got, tp2)
	}

	// An invalid one, and none: the origin gets a new valid one, and the
	// line logs its trace id.
	for i, in := range []string{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""} {
		id := []string{"edge-trace-0003", "edge-trace-0004"}[i]
		get("/v1/tiers", in, id)
		got := o.calls("/v1/tiers")
		sent := got[len(got)-1]
		trace, ok := telemetry.TraceID(sent)
		if !ok || sent == in {
			t.Errorf("traceparent %q: the origin got %q, want a new valid one", in, sent)
		}
		if line := telemetrytest.Line(t, logs.String, id); line["traceId"] != trace {
			t.Errorf("traceparent %q: logged trace %v, sent %q", in, line["traceId"], trace)
		}
	}

	// A refusal at the edge: its code in the line, the token nowhere.
	req, _ := http.NewRequest("GET", base+"/v1/subjects/x", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	req.Header.Set("X-Request-Id", "edge-trace-0005")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	line = telemetrytest.Line(t, logs.String, "edge-trace-0005")
	if resp.StatusCode != 401 || line["status"] != 401.0 || line["code"] != "invalid_token" || line["route"] != "/v1/subjects/{subjectSlug}" {
		t.Errorf("401 at the edge: %d, line %v", resp.StatusCode, line)
	}
	if out := logs.String(); strings.Contains(out, "not-a-token") || strings.Contains(out, tok) {
		t.Errorf("a token in the edge's log:\n%s", out)
	}
}

// TestEdgeHealth: /healthz is 200 while the edge serves; /readyz is 200
// when the JWKS has a key and an origin answers its /healthz, else 503
// naming what is not ready.
func TestEdgeHealth(t *testing.T) {
	var jwksDown sync.Mutex
	var jwksOff bool
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jwksDown.Lock()
		off := jwksOff
		jwksDown.Unlock()
		if off {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Write(tokentest.JWKS("k1"))
	}))
	t.Cleanup(jwks.Close)
	o := &traceOrigin{got: map[string][]string{}}
	origin := httptest.NewServer(o)
	t.Cleanup(origin.Close)
	base, _ := startEdgeLog(t, origin.URL, func(c *config) { c.JWKSURL = jwks.URL })

	probe := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	// ready waits out the verdict's TTL until /readyz answers want.
	ready := func(want int) map[string]any {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, m := probe(telemetry.ReadyPath)
			if code == want {
				return m
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz: %d %v, want %d", code, m, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if code, m := probe(telemetry.HealthPath); code != 200 || m["status"] != "ok" || m["version"] != version.Release {
		t.Errorf("/healthz: %d %v, want the release %s", code, m, version.Release)
	}
	if m := ready(200); m["status"] != "ready" {
		t.Errorf("/readyz: %v", m)
	}
	o.mu.Lock()
	o.down = true
	o.mu.Unlock()
	jwksDown.Lock()
	jwksOff = true
	jwksDown.Unlock()
	m := ready(503)
	if got, _ := json.Marshal(m["notReady"]); string(got) != `["jwks","origin"]` {
		t.Errorf("/readyz not ready: %v, want jwks and origin named", m)
	}
	if code, _ := probe(telemetry.HealthPath); code != 200 {
		t.Errorf("/healthz while not ready: %d, want 200", code)
	}
	if len(o.calls("/healthz")) == 0 {
		t.Error("the edge's readiness never asked the origin")
	}
}
