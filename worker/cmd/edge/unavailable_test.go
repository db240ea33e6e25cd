package main

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/lectern-api/lectern/worker/wazero"
)

// TestOriginUnavailableFailsOver (issue #33, point 4): an origin that
// answers an idempotent request 503 (its bundle store has no room: it
// applied nothing) is passed over for the next; a POST's 503 is the
// client's answer; when every origin answers 503, so does the edge.
func TestOriginUnavailableFailsOver(t *testing.T) {
	var full atomic.Int64
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wazero.ProbePath {
			return
		}
		full.Add(1)
		w.Header().Set("Retry-After", "10")
		w.Header().Set("X-Request-Id", r.Header.Get("X-Request-Id"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":{"code":"INTERNAL","message":"no room","requestId":"` + r.Header.Get("X-Request-Id") + `","retryAfterSeconds":10}}`))
	}))
	t.Cleanup(busy.Close)
	b, sb := startOrigin(t, "b")
	base := startEdge(t, busy.URL+","+sb.URL)
	for i := range 6 {
		if status, from, code := send(t, base, "GET", ""); status != 200 || from != "b" {
			t.Errorf("GET %d with one origin full: %d %s %s, want 200 from b", i, status, from, code)
		}
	}
	if full.Load() == 0 || b.got.Load() != 6 {
		t.Errorf("the full origin was asked %d times, b answered %d of 6; want some and all", full.Load(), b.got.Load())
	}
	posts503 := 0
	for range 4 {
		switch status, _, _ := send(t, base, "POST", "{}"); status {
		case 200:
		case 503:
			posts503++
		default:
			t.Errorf("POST: %d", status)
		}
	}
	if posts503 == 0 {
		t.Errorf("no POST was answered the full origin's 503: a POST must not be sent again")
	}

	only := startEdge(t, busy.URL+","+busy.URL+"/again")
	if status, _, code := send(t, only, "GET", ""); status != 503 || code != "INTERNAL" {
		t.Errorf("every origin full: %d %s, want 503 INTERNAL", status, code)
	}
}
