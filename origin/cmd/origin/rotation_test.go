package main

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/idp"
)

// TestKeyRotationNo401 (issue #13, point 5): past RotateAfter on the test
// clock, after a request has just refetched the JWKS, a new token is
// accepted at once ("get a new token and retry once" works), and so is a
// token of the next key once it signs.
func TestKeyRotationNo401(t *testing.T) {
	s := newStack(t)
	id, secret := s.org(`{"orgId":"acme","contentGrants":`+allTiers+`}`, "content.read")
	old := s.token(id, secret, "content.read")
	if r := s.get("GET", "/v1/tiers", old); r.status != 200 {
		t.Fatalf("fresh token: %d %s", r.status, r.body)
	}

	s.Clock().Advance(idp.DefaultRotateAfter + time.Second)
	// The expired token's request refreshes the origin's stale JWKS.
	if r := s.get("GET", "/v1/tiers", old); r.status != 401 {
		t.Fatalf("expired token: %d %s", r.status, r.body)
	}
	tok := s.token(id, secret, "content.read")
	if kid(t, tok) != kid(t, old) {
		t.Errorf("right after RotateAfter the token is signed by %q, a key verifiers may not hold yet", kid(t, tok))
	}
	if r := s.get("GET", "/v1/tiers", tok); r.status != 200 {
		t.Fatalf("a new token right after RotateAfter: %d %s", r.status, r.body)
	}

	s.Clock().Advance(idp.DefaultPublishAhead + time.Second)
	next := s.token(id, secret, "content.read")
	if kid(t, next) == kid(t, tok) {
		t.Fatalf("after PublishAhead the token is still signed by %q", kid(t, tok))
	}
	if r := s.get("GET", "/v1/tiers", next); r.status != 200 {
		t.Fatalf("a token of the next key: %d %s", r.status, r.body)
	}
}

// kid is the kid of a JWT's header.
func kid(t *testing.T, jwt string) string {
	t.Helper()
	h, err := base64.RawURLEncoding.DecodeString(strings.Split(jwt, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct{ Kid string }
	json.Unmarshal(h, &hdr)
	return hdr.Kid
}
