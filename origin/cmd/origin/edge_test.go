package main

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/shared/edgesig"
)

var testEdgeKeys = edgesig.KeysOf([]byte("a-test-secret-of-at-least-32-characters"))

// gate makes the edge's gate call for a conditional GET of target.
func (s *testStack) gate(target, tok, inm, reqID string, sign bool) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.OriginURL+"/internal/gate", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("If-None-Match", inm)
	req.Header.Set("X-Request-Id", reqID)
	req.Header.Set("X-Lectern-Target", target)
	if sign {
		httpsig.Sign(testEdgeKeys, edgesig.Gate, req, nil, s.Clock().Now())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// docs/edge.md, origin protocol: the gate answers 204 with the 304's
// headers (one call billed), 412 when the request is not a 304 (nothing
// billed), the request's own error otherwise, and nothing without a valid
// signature.
func TestGate(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := s.token(id, secret, "content.read")
	first := s.get("GET", "/v1/tiers", tok)
	tag := first.header.Get("ETag")
	if tag == "" {
		t.Fatal("no ETag on /v1/tiers")
	}
	before := s.calls("acme")

	resp := s.gate("/v1/tiers", tok, tag, "edge-req-0001", true)
	if resp.StatusCode != 204 || resp.Header.Get("ETag") != tag || resp.Header.Get("X-Service-Content-Version") == "" {
		t.Fatalf("gate on a match: %d %v", resp.StatusCode, resp.Header)
	}
	if got := s.calls("acme"); got != before+1 {
		t.Errorf("a gate 304 billed %v calls, want 1", got-before)
	}
	// The origin's own 304 carries the same headers as the gate's 204.
	direct := s.get("GET", "/v1/tiers", tok, "If-None-Match", tag)
	for _, h := range []string{"ETag", "X-Service-Content-Version", "Cache-Control", "Vary"} {
		if direct.header.Get(h) != resp.Header.Get(h) {
			t.Errorf("%s: 304 %q, gate %q", h, direct.header.Get(h), resp.Header.Get(h))
		}
	}

	before = s.calls("acme")
	if resp := s.gate("/v1/tiers", tok, `W/"0000000000000000"`, "edge-req-0002", true); resp.StatusCode != 412 {
		t.Errorf("gate on a miss: %d, want 412", resp.StatusCode)
	}
	if got := s.calls("acme"); got != before {
		t.Errorf("a gate miss billed %v calls", got-before)
	}
	if resp := s.gate("/v1/tiers", tok, tag, "edge-req-0003", false); resp.StatusCode != 404 {
		t.Errorf("unsigned gate: %d, want 404", resp.StatusCode)
	}
	if resp := s.gate("/v1/tiers", "bad", tag, "edge-req-0004", true); resp.StatusCode != 401 {
		t.Errorf("gate with a bad token: %d, want 401", resp.StatusCode)
	}
	s.admin("PATCH", "/admin/v1/orgs/acme", `{"status":"suspended"}`)
	if resp := s.gate("/v1/tiers", tok, tag, "edge-req-0005", true); resp.StatusCode != 403 {
		t.Errorf("gate for a suspended org: %d, want 403", resp.StatusCode)
	}
	s.admin("PATCH", "/admin/v1/orgs/acme", `{"status":"active"}`)
	if resp := s.gate("/v1/license", tok, tag, "edge-req-0006", true); resp.StatusCode != 412 {
		t.Errorf("gate on a route without a derived validator: %d, want 412", resp.StatusCode)
	}

	// A forward signed by the edge learns the org and grants digest; an
	// unsigned request does not.
	u, _ := url.Parse(s.OriginURL)
	sig := edgesig.NewSigner(testEdgeKeys, 1).Sign(&edgesig.Message{Purpose: edgesig.Forward, Method: "GET", Host: u.Host,
		Target: "/v1/tiers", Auth: "Bearer " + tok, RequestID: "edge-req-0007",
		Fields: []edgesig.Field{{Name: "accept-encoding", Value: "identity"}}}, s.Clock().Now().UnixMilli())
	fwd := s.get("GET", "/v1/tiers", tok, "X-Request-Id", "edge-req-0007", "Accept-Encoding", "identity", edgesig.Header, sig)
	if fwd.header.Get("X-Lectern-Org") != "acme" || len(fwd.header.Get("X-Lectern-Grants")) != 16 {
		t.Errorf("forward answer lacks the edge headers: %v", fwd.header)
	}
	if plain := s.get("GET", "/v1/tiers", tok); plain.header.Get("X-Lectern-Org") != "" || plain.header.Get("X-Lectern-Grants") != "" {
		t.Errorf("a direct answer carries edge headers: %v", plain.header)
	}
}
