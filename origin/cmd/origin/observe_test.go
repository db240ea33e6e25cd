package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/internal/telemetry/telemetrytest"
	"github.com/lectern-api/lectern/internal/version"
)

// The access log (issue #18, point 1): one JSON line a request on the
// public API, with its request id, trace id, route template, status,
// organisation, error code and billing; never a token or a secret.
func TestAccessLog(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")

	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if r := s.get("GET", "/v1/tiers", tok, "X-Request-Id", "obs-req-0001", "Traceparent", tp); r.status != 200 {
		t.Fatalf("tiers: %d %s", r.status, r.body)
	}
	line := telemetrytest.Line(t, s.out.String, "obs-req-0001")
	for k, want := range map[string]any{"level": "INFO", "traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "method": "GET",
		"route": "/v1/tiers", "status": 200.0, "org": "acme", "billed": "calls"} {
		if line[k] != want {
			t.Errorf("200 line: %s = %v, want %v (%v)", k, line[k], want, line)
		}
	}
	if _, ok := line["code"]; ok {
		t.Errorf("200 line has a code: %v", line)
	}
	if d, ok := line["durationMs"].(float64); !ok || d < 0 {
		t.Errorf("200 line: durationMs %v", line["durationMs"])
	}

	// A refusal after the gate: its code, the call it billed, the route's
	// template and not its path; a trace id made when none came.
	r := s.get("GET", "/v1/subjects/no-such-subject-slug", tok, "X-Request-Id", "obs-req-0002")
	var body struct{ Error struct{ Code string } }
	json.Unmarshal(r.body, &body)
	line = telemetrytest.Line(t, s.out.String, "obs-req-0002")
	if r.status < 400 || line["code"] != body.Error.Code || line["status"] != float64(r.status) ||
		line["route"] != "/v1/subjects/{subjectSlug}" || line["billed"] != "calls" || line["org"] != "acme" {
		t.Errorf("refusal %d %s: line %v", r.status, body.Error.Code, line)
	}
	if trace, _ := line["traceId"].(string); len(trace) != 32 {
		t.Errorf("no trace id made for a request without traceparent: %v", line)
	}

	// A 401: its code, nothing billed, no organisation, no token.
	const bad = "eyJhbGciOiJFZERTQSJ9.not-a-real-token.c2lnbmF0dXJl"
	if r := s.get("GET", "/v1/tiers", bad, "X-Request-Id", "obs-req-0003"); r.status != 401 {
		t.Fatalf("bad token: %d", r.status)
	}
	line = telemetrytest.Line(t, s.out.String, "obs-req-0003")
	if line["status"] != 401.0 || line["code"] != "invalid_token" || line["billed"] != "none" || line["org"] != nil {
		t.Errorf("401 line: %v", line)
	}
	out := s.out.String()
	for _, secretText := range []string{bad, tok, secret, s.AdminToken, "no-such-subject-slug"} {
		if strings.Contains(out, secretText) {
			t.Errorf("the log holds %.20q…", secretText)
		}
	}
}

// The settings refuse what they do not know, naming the variable; text
// is a format, and the flags mirror the variables.
func TestLogSettings(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"LECTERN_LOG_LEVEL": "verbose"}, nil, "LECTERN_LOG_LEVEL"},
		{map[string]string{"LECTERN_LOG_FORMAT": "xml"}, nil, "LECTERN_LOG_FORMAT"},
		{nil, []string{"-log-level", "loud"}, "LECTERN_LOG_LEVEL"},
	} {
		_, err := parseConfig(tc.args, func(k string) string { return tc.env[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v, want an error naming %s", tc.env, tc.args, err, tc.want)
		}
	}
	c, err := parseConfig([]string{"-log-format", "text", "-log-level", "debug"}, func(string) string { return "" })
	if err != nil || c.LogFormat != "text" || c.LogLevel != "debug" {
		t.Errorf("flags: %q %q %v", c.LogFormat, c.LogLevel, err)
	}

	dir := t.TempDir()
	writeCorpus(t, dir+"/corpus")
	s := bootStack(t, testEnv(dir, map[string]string{"LECTERN_LOG_FORMAT": "text"}), nil)
	t.Cleanup(func() { s.Close() })
	s.get("GET", "/v1/tiers", "", "X-Request-Id", "obs-text-0001")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.out.String(), "msg=request requestId=obs-text-0001 ") {
		if time.Now().After(deadline) {
			t.Fatalf("no text access line:\n%s", s.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(s.out.String(), "route=/v1/tiers status=401 code=invalid_token") {
		t.Errorf("text line lacks its fields:\n%s", s.out.String())
	}
}

// GET /metrics on the admin listener, behind the admin token: the
// request-duration histogram by route template and status, and the
// other series.
func TestMetrics(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")
	tag := s.get("GET", "/v1/tiers", tok).header.Get("ETag")
	s.get("GET", "/v1/subjects/no-such-subject-slug", tok)
	s.get("GET", "/v1/tiers", "garbage")
	if resp := s.gate("/v1/tiers", tok, tag, "obs-gate-0001", true); resp.StatusCode != 204 {
		t.Fatalf("gate: %d", resp.StatusCode)
	}

	scrape := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", s.AdminURL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := scrape(""); code != 401 {
		t.Errorf("/metrics without the admin token: %d, want 401", code)
	}
	// The access line (and its count) comes once the handler returns:
	// wait for the last request's.
	want := []string{
		`http_server_request_duration_seconds_bucket{http_request_method="GET",http_response_status_code="200",http_route="/v1/tiers",le="0.005"}`,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="401",http_route="/v1/tiers"} 1`,
		`http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="204",http_route="/internal/gate"} 1`,
		`lectern_refusals_total{error_code="invalid_token"} 1`,
		`lectern_edge_calls_total{http_response_status_code="204",kind="gate"} 1`,
		`lectern_corpus_content_version{content_version="` + s.Content().ContentVersion + `"} 1`,
		`lectern_jwks_fetches_total{result="ok",source="store"}`,
		`lectern_meter_apply_duration_seconds_count{result="ok"}`,
		`lectern_meter_commit_batch_size_count`,
		`lectern_meter_commit_duration_seconds_count{result="ok"}`,
		`go_goroutines`,
	}
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		var code int
		code, body = scrape(s.AdminToken)
		if code != 200 {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s:\n%s", missing, body)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if strings.Contains(body, "no-such-subject-slug") || !strings.Contains(body, `http_route="/v1/subjects/{subjectSlug}"`) {
		t.Errorf("/metrics names a path, or not the template")
	}
}

// GET /healthz and /readyz on the public API, without a token: ready
// once the stack serves; with the database closed, /readyz (and the
// admin API's health) answers 503 naming it, while /healthz stays 200.
func TestHealthEndpoints(t *testing.T) {
	s := newStack(t)
	probe := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(s.OriginURL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if code, m := probe(telemetry.HealthPath); code != 200 || m["status"] != "ok" || m["version"] != version.Release {
		t.Errorf("/healthz: %d %v, want the release %s", code, m, version.Release)
	}
	if code, m := probe(telemetry.ReadyPath); code != 200 || m["status"] != "ready" {
		t.Errorf("/readyz: %d %v", code, m)
	}
	// Not the API's: a POST is the API's 404, as any unknown path.
	resp, err := http.Post(s.OriginURL+telemetry.ReadyPath, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("POST /readyz: %d, want the API's 404", resp.StatusCode)
	}

	s.Store().Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, m := probe(telemetry.ReadyPath)
		if code == 503 {
			// The dev provider's keys are read from the database too.
			if got, _ := json.Marshal(m["notReady"]); string(got) != `["database","jwks"]` {
				t.Errorf("/readyz with the database closed: %v, want database and jwks named", m)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz with the database closed: %d %v", code, m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := probe(telemetry.HealthPath); code != 200 {
		t.Errorf("/healthz with the database closed: %d, want 200", code)
	}
	if code, _ := s.admin("GET", "/admin/v1/health", ""); code != 503 {
		t.Errorf("admin health with the database closed: %d, want 503", code)
	}
}
