package subkey

import (
	"encoding/hex"
	"testing"
)

const testSecret = "a-test-secret-of-at-least-32-characters"

// TestDeriveIsPinned pins the derivation, HMAC-SHA-256(secret,
// "lectern/"+purpose) (values from Python's hmac): a change would orphan
// every sealed seed, cursor and tag, and split the origin from edges not
// yet redeployed.
func TestDeriveIsPinned(t *testing.T) {
	for purpose, want := range map[string]string{
		Edge:   "db0f4872b2247b7b6f507c2c17707a5df71964b51d24f9ddefb1d7eed68cddc9",
		Cursor: "f049ac58d7f8d0e5063396531785849b36ac16ac286fba23713c94bf2aaf726c",
	} {
		if got := hex.EncodeToString(Derive([]byte(testSecret), purpose)); got != want {
			t.Errorf("Derive(secret, %q) = %s, want %s", purpose, got, want)
		}
	}
}

func TestPurposesHaveTheirOwnKeys(t *testing.T) {
	seen := map[string]string{}
	for _, p := range []string{Tag, Cursor, IDPKeys, Edge, Canary, Links, Webhooks, Changes} {
		k := hex.EncodeToString(Derive([]byte(testSecret), p))
		if q, dup := seen[k]; dup {
			t.Errorf("purposes %q and %q share a key", q, p)
		}
		seen[k] = p
	}
	if hex.EncodeToString(Derive([]byte(testSecret), Edge)) == hex.EncodeToString(Derive([]byte("another secret of at least 32 chars!!"), Edge)) {
		t.Error("two secrets derive the same edge key")
	}
}
