package wasmtest

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// TestKeyRotation (issue #13, point 5): the identity provider publishes
// its next key PublishAhead (2 h) before signing with it, so on the test
// clock past RotateAfter (30 days), just after both tiers refetched their
// stale JWKS, a new token verifies at both tiers at once: no 401 window.
// Once the next key signs, its tokens verify at both tiers too.
func TestKeyRotation(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startOrigin(t)
	forEachBuild(t, func(t *testing.T, b *build) {
		org := "rot-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		e := newEdge(t, b, o, nil)
		tokens := map[string]string{"tok": o.token(t, id, sec, "content.read")}
		first := jwtKID(t, tokens["tok"])
		parity(t, e, o, tokens, "rot-fresh-"+b.name, []scenario{
			{name: "fresh token", method: "GET", target: "/v1/tiers", auth: "tok", status: 200},
		})

		o.advance(t, 30*24*3600+1) // past RotateAfter
		// Both tiers' sets are stale: this request refetches them.
		parity(t, e, o, tokens, "rot-expired-"+b.name, []scenario{
			{name: "expired token", method: "GET", target: "/v1/tiers", auth: "tok", status: 401, code: "invalid_token"},
		})
		tokens["tok"] = o.token(t, id, sec, "content.read") // "get a new token and retry once"
		parity(t, e, o, tokens, "rot-new-"+b.name, []scenario{
			{name: "new token past RotateAfter", method: "GET", target: "/v1/tiers", auth: "tok", status: 200},
		})

		o.advance(t, 2*3600+1) // past PublishAhead: the next key signs
		tokens["tok"] = o.token(t, id, sec, "content.read")
		if jwtKID(t, tokens["tok"]) == first {
			t.Fatalf("past RotateAfter and PublishAhead, still signed by %q", first)
		}
		parity(t, e, o, tokens, "rot-next-"+b.name, []scenario{
			{name: "token of the next key", method: "GET", target: "/v1/tiers", auth: "tok", status: 200},
		})
	})
}

// jwtKID is the kid in a JWT's header.
func jwtKID(t *testing.T, jwt string) string {
	t.Helper()
	h, err := base64.RawURLEncoding.DecodeString(strings.Split(jwt, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var hdr struct{ Kid string }
	json.Unmarshal(h, &hdr)
	return hdr.Kid
}
