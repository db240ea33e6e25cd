package apierr

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The spec's Errors table, row by row.
var specTable = []struct {
	status int
	code   Code
}{
	{400, "BAD_REQUEST"}, {400, "INVALID_PARAMETER"}, {400, "BAD_LESSON_ID"}, {400, "BAD_MEDIA_ID"},
	{400, "CURSOR_EXPIRED"}, {400, "BATCH_TOO_LARGE"}, {400, "AMBIGUOUS_SUBJECT"},
	{401, "invalid_token"}, {401, "invalid_request"},
	{403, "insufficient_scope"}, {403, "NO_ORGANIZATION"}, {403, "LICENSE_REQUIRED"}, {403, "LICENSE_EXPIRED"},
	{403, "TIER_NOT_LICENSED"}, {403, "CONTENT_NOT_GRANTED"}, {403, "ORG_SUSPENDED"}, {403, "LEARNER_REQUIRED"},
	{404, "UNKNOWN_SUBJECT"}, {404, "LESSON_NOT_FOUND"}, {404, "UNKNOWN_MEDIA"}, {404, "UNKNOWN_TEST"},
	{404, "UNKNOWN_SECTION"}, {404, "NOT_FOUND"},
	{405, "METHOD_NOT_ALLOWED"}, {409, "WRITE_CONFLICT"}, {413, "PAYLOAD_TOO_LARGE"},
	{429, "RATE_LIMITED"}, {429, "QUOTA_EXCEEDED"}, {429, "EXPORT_LIMIT"}, {500, "INTERNAL"},
}

func TestCodesAreTheSpecs(t *testing.T) {
	codes := Codes()
	if len(codes) != len(specTable) {
		t.Fatalf("got %d codes, want %d", len(codes), len(specTable))
	}
	for i, row := range specTable {
		if codes[i] != row.code {
			t.Errorf("code %d: got %s, want %s", i, codes[i], row.code)
		}
		if got := Status(row.code); got != row.status {
			t.Errorf("Status(%s) = %d, want %d", row.code, got, row.status)
		}
		if !Known(row.code) {
			t.Errorf("Known(%s) = false", row.code)
		}
	}
	if Known("TEAPOT") || Status("TEAPOT") != 500 {
		t.Error("an unknown code is known or not 500")
	}
	for _, c := range Extensions() {
		if slices.Contains(codes, c) || !Known(c) || Status(c) == 500 {
			t.Errorf("extension %s: in the spec's list, unknown or 500", c)
		}
	}
}

// spec: Errors: every error has {"error": {"code", "message", "requestId",
// ...}} and requestId equals X-Request-Id.
func TestBody(t *testing.T) {
	e := &Error{Code: BadRequest, Message: `limit "x" <bad>` + "\n\u2028", Parameter: "limit",
		Received: "0", ReceivedNumber: true, Min: Int(1), Max: Int(100)}
	b := e.AppendJSON(nil, "req-\"7")
	var got struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	want := map[string]any{"code": "BAD_REQUEST", "message": "limit \"x\" <bad>\n\u2028", "requestId": "req-\"7",
		"parameter": "limit", "received": 0.0, "min": 1.0, "max": 100.0}
	if len(got.Error) != len(want) {
		t.Errorf("got keys %v, want %v", got.Error, want)
	}
	for k, v := range want {
		if got.Error[k] != v {
			t.Errorf("%s: got %#v, want %#v", k, got.Error[k], v)
		}
	}
	if !strings.HasPrefix(string(b), `{"error":{"code":"BAD_REQUEST","message":`) {
		t.Errorf("key order: %s", b)
	}
}

func TestEveryKey(t *testing.T) {
	e := &Error{Code: QuotaExceeded, Message: "m", Parameter: "p", Allowed: []string{"a"}, Received: "r",
		Min: Int(1), Max: Int(2), Grant: "high/algebra", Tiers: []string{"high", "college"}, Allow: []string{"GET"},
		Scope: "service-api/content.read", RetryAfter: Int(30), QuotaResetsAt: "2026-12-01T00:00:00Z", Hint: "h",
		ExportsUsed: Int(5), ExportsLimit: Int(5)}
	var got struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(e.AppendJSON(nil, "r1"), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"code", "message", "requestId", "parameter", "allowed", "received", "min", "max", "grant",
		"tiers", "allow", "scope", "retryAfterSeconds", "quotaResetsAt", "hint", "exportsUsed", "exportsLimit"} {
		if _, ok := got.Error[k]; !ok {
			t.Errorf("key %s missing", k)
		}
	}
	// Empty lists are written (an empty allowed list says "none").
	b := (&Error{Code: BadRequest, Message: "m", Allowed: []string{}}).AppendJSON(nil, "r")
	if !strings.Contains(string(b), `"allowed":[]`) {
		t.Errorf("empty allowed dropped: %s", b)
	}
}

// spec: every 429 carries Retry-After; 405 carries Allow.
func TestHeaders(t *testing.T) {
	e := &Error{Code: MethodNotAllowed, Allow: []string{"GET", "PUT"}}
	if h := e.Headers(); len(h) != 1 || h[0] != (Header{"Allow", "GET, PUT"}) {
		t.Errorf("405 headers: %v", h)
	}
	e = &Error{Code: RateLimited, RetryAfter: Int(1200)}
	if h := e.Headers(); len(h) != 1 || h[0] != (Header{"Retry-After", "1200"}) {
		t.Errorf("429 headers: %v", h)
	}
	if h := New(BadRequest, "x").Headers(); len(h) != 0 {
		t.Errorf("400 headers: %v", h)
	}
}

// Issue #13: an error echoed a 200 KB slug twice. Every echo of client
// text is cut to MaxEcho bytes (the message to MaxMessage) on a UTF-8
// boundary and marked with Ellipsis; short values are untouched.
func TestEchoIsCapped(t *testing.T) {
	long := strings.Repeat("é", 100_000) // 2-byte runes: a cut at an odd byte must back off
	e := &Error{Code: UnknownSubject, Received: long, Parameter: long, Grant: long,
		Message: "No subject has the slug " + long + "."}
	b := e.AppendJSON(nil, "req-1")
	if len(b) > 2*MaxMessage {
		t.Fatalf("body is %d bytes", len(b))
	}
	var got struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	for key, max := range map[string]int{"received": MaxEcho, "parameter": MaxEcho, "grant": MaxEcho, "message": MaxMessage} {
		s, _ := got.Error[key].(string)
		cut, ok := strings.CutSuffix(s, Ellipsis)
		if !ok || len(cut) > max || len(cut) < max-3 || strings.ContainsRune(cut, '\uFFFD') {
			t.Errorf("%s: %d bytes %q, want at most %d bytes of whole runes and %q", key, len(s), s, max, Ellipsis)
		}
	}
	// A number too long to echo whole is echoed as a cut string.
	n := &Error{Code: BadRequest, Received: strings.Repeat("9", 5000), ReceivedNumber: true}
	if err := json.Unmarshal(n.AppendJSON(nil, "r"), &got); err != nil {
		t.Fatal(err)
	}
	if s, ok := got.Error["received"].(string); !ok || s != strings.Repeat("9", MaxEcho)+Ellipsis {
		t.Errorf("long number: received %v", got.Error["received"])
	}
	// Short values are as given; Clip agrees with the body.
	short := &Error{Code: BadRequest, Received: "abc", Message: "m"}
	if want := `{"error":{"code":"BAD_REQUEST","message":"m","requestId":"r","received":"abc"}}`; string(short.AppendJSON(nil, "r")) != want {
		t.Errorf("short: got %s, want %s", short.AppendJSON(nil, "r"), want)
	}
	if Clip("abc") != "abc" || Clip(long) != strings.Repeat("é", MaxEcho/2)+Ellipsis {
		t.Errorf("Clip: %q", Clip(long))
	}
}
