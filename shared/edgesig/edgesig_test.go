package edgesig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"testing"

	"github.com/lectern-api/lectern/shared/subkey"
)

func TestSignVerify(t *testing.T) {
	key := subkey.Derive([]byte("a-test-secret-of-at-least-32-characters"), subkey.Edge)
	const now = 1_790_000_000
	sig := Sign(key, Forward, "GET", "/v1/tiers?x=1", "req-1", now)
	if !Verify(key, sig, Forward, "GET", "/v1/tiers?x=1", "req-1", now+10) {
		t.Fatal("a fresh signature does not verify")
	}
	for name, ok := range map[string]bool{
		"other purpose": Verify(key, sig, Gate, "GET", "/v1/tiers?x=1", "req-1", now),
		"other method":  Verify(key, sig, Forward, "POST", "/v1/tiers?x=1", "req-1", now),
		"other target":  Verify(key, sig, Forward, "GET", "/v1/tiers?x=2", "req-1", now),
		"other request": Verify(key, sig, Forward, "GET", "/v1/tiers?x=1", "req-2", now),
		"too old":       Verify(key, sig, Forward, "GET", "/v1/tiers?x=1", "req-1", now+MaxSkew+1),
		"other key":     Verify(subkey.Derive([]byte("another secret of at least 32 chars!!"), subkey.Edge), sig, Forward, "GET", "/v1/tiers?x=1", "req-1", now),
		"no key":        Verify(nil, sig, Forward, "GET", "/v1/tiers?x=1", "req-1", now),
		"garbage":       Verify(key, "v1=zz", Forward, "GET", "/v1/tiers?x=1", "req-1", now),
		"tampered":      Verify(key, sig[:len(sig)-1]+"0", Forward, "GET", "/v1/tiers?x=1", "req-1", now),
	} {
		if ok {
			t.Errorf("%s verifies", name)
		}
	}
}

// The signed string is the length-prefixed fields, as the package doc
// says; a reused Signer signs each request as a fresh one would.
func TestSignerFormat(t *testing.T) {
	key := subkey.Derive([]byte("a-test-secret-of-at-least-32-characters"), subkey.Edge)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("2:v14:gate4:POST13:/v1/tiers?x=15:req-110:1790000000"))
	want := "v1=1790000000." + hex.EncodeToString(m.Sum(nil))
	s := NewSigner(key)
	s.Sign(Forward, "GET", "/v1/a-much-longer-target?with=a&query=string", "req-other-id", 1)
	if got := s.Sign(Gate, "POST", "/v1/tiers?x=1", "req-1", 1_790_000_000); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := Sign(key, Gate, "POST", "/v1/tiers?x=1", "req-1", 1_790_000_000); got != want {
		t.Errorf("Sign: got %s, want %s", got, want)
	}
	if got := string(s.Append([]byte("x"), Gate, "POST", "/v1/tiers?x=1", "req-1", 1_790_000_000)); got != "x"+want {
		t.Errorf("Append: got %s, want x%s", got, want)
	}
}

func TestDigits(t *testing.T) {
	for _, n := range []int64{0, 9, 10, 1_790_000_000, -1, -10, 1<<63 - 1, -1 << 63} {
		if got, want := digits(n), len(strconv.FormatInt(n, 10)); got != want {
			t.Errorf("digits(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestSignerAllocations: a signature appended to room the caller has
// costs nothing (the edge makes one for every request it passes on).
func TestSignerAllocations(t *testing.T) {
	s := NewSigner(subkey.Derive([]byte("a-test-secret-of-at-least-32-characters"), subkey.Edge))
	dst := make([]byte, 0, 128)
	s.Append(dst, Gate, "POST", "/v1/tiers?x=1", "req-1", 1_790_000_000)
	if n := testing.AllocsPerRun(100, func() {
		s.Append(dst, Gate, "POST", "/v1/lessons/high/algebra-1/3?detail=full", "req_0123456789abcdef01234567", 1_790_000_000)
	}); n != 0 {
		t.Errorf("%.1f allocations per signature, want 0", n)
	}
}
