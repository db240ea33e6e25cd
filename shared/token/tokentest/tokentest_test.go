package tokentest_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/token"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

// TestMintVerifies: a minted token verifies against the JWKS of its kid,
// and not against another's.
func TestMintVerifies(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	raw := tokentest.Mint("k1", tokentest.Claims{"iss": "https://idp.test", "aud": "lectern-api", "sub": "c1",
		"client_id": "c1", "org": "acme", "scope": "service-api/content.read", "iat": now.Unix(),
		"exp": now.Add(time.Minute).Unix(), "jti": nil})
	v := token.Verifier{Issuer: "https://idp.test", Audience: "lectern-api", Leeway: token.DefaultLeeway}
	set, err := token.ParseJWKS(tokentest.JWKS("k0", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	c, f := v.Verify(raw, set, now)
	if f != nil {
		t.Fatalf("Verify: %+v", f)
	}
	if c.Org != "acme" || c.ClientID != "c1" || c.ID != "" {
		t.Errorf("claims %+v", c)
	}
	other, _ := token.ParseJWKS(tokentest.JWKS("k2"))
	if _, f := v.Verify(raw, other, now); f == nil {
		t.Error("verified against a set without its kid")
	}
}

// TestClaimsJSON: the payload is the JSON encoding/json writes for the
// same map, names sorted, nil values left out.
func TestClaimsJSON(t *testing.T) {
	c := tokentest.Claims{"scope": "a b", "exp": int64(1793534400), "n": 3, "ok": true, "aud": []string{"x", "y"},
		"gone": nil, "quote": `a"b\c`}
	want := map[string]any{}
	for k, v := range c {
		if v != nil {
			want[k] = v
		}
	}
	w, _ := json.Marshal(want)
	if got := string(c.JSON()); got != string(w) {
		t.Errorf("JSON = %s, want %s", got, w)
	}
}
