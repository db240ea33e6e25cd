package auth

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/token"
)

// TestKeySource (issue #14, point 5): with Config.Keys (the dev identity
// provider's keys in the shared database) a token of a key the set lacks
// triggers a read, at most one per MinInterval, whatever the number of
// made-up kids; concurrent misses share one read.
func TestKeySource(t *testing.T) {
	ring := &keyring{}
	ring.add(t, "k1")
	var (
		reads atomic.Int32
		clock atomic.Int64
	)
	clock.Store(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	a := New(Config{Issuer: "https://idp.test", Audience: "lectern-api", Now: now,
		MaxAge: time.Minute, MinInterval: time.Second,
		Keys: func(ctx context.Context) (*token.KeySet, error) {
			reads.Add(1)
			time.Sleep(20 * time.Millisecond) // let concurrent requests pile up behind the read
			return token.ParseJWKS([]byte(ring.jwks()))
		}})
	ctx := context.Background()
	accept := func(kid string) error {
		if _, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, kid, now(), "")); err != nil {
			return err
		}
		return nil
	}
	wantReads := func(step string, n int32) {
		t.Helper()
		if got := reads.Load(); got != n {
			t.Fatalf("%s: %d reads of the keys, want %d", step, got, n)
		}
	}
	if err := accept("k1"); err != nil {
		t.Fatal(err)
	}
	wantReads("first token", 1)

	// A key added after the last read: its first token reads again once
	// MinInterval has passed, and is accepted.
	ring.add(t, "k2")
	advance(time.Second)
	if err := accept("k2"); err != nil {
		t.Fatalf("a token of a key added since the last read: %v", err)
	}
	wantReads("a new key", 2)

	// Made-up kids, many at once and again and again within MinInterval:
	// one read, shared by the concurrent misses.
	flood := func(round int) {
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				if accept(fmt.Sprintf("forged-%d-%d", round, i)) == nil {
					t.Error("a token of an unknown key was accepted")
				}
			})
		}
		wg.Wait()
	}
	advance(time.Second)
	flood(0)
	wantReads("a flood of made-up kids", 3)
	for round := 1; round <= 5; round++ {
		advance(100 * time.Millisecond)
		flood(round)
	}
	wantReads("floods within MinInterval", 3)
	advance(time.Second)
	flood(6)
	wantReads("a flood after MinInterval", 4)
	if err := accept("k1"); err != nil {
		t.Errorf("a valid token after the floods: %v", err)
	}
	wantReads("a known kid", 4)

	// MaxAge: a set older than it is read again (in the background; the
	// stale set still verifies).
	advance(time.Minute)
	if err := accept("k2"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(8 * time.Second)
	for reads.Load() != 5 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	wantReads("a stale set", 5)
}
