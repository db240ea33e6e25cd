package idp

import (
	"context"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/token"
)

// publicKeys is a PublicKeys over s with the providers' settings.
func publicKeys(t *testing.T, s store.Store, c *clock.Clock, sealKey []byte) *PublicKeys {
	t.Helper()
	k, err := NewPublicKeys(Config{Issuer: "https://idp.test", Audience: testAudience, Store: s, Now: c.Now, SealKey: sealKey})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// sameKeys reports whether set holds exactly the keys kids.
func sameKeys(set *token.KeySet, kids []string) bool {
	if set.Len() != len(kids) {
		return false
	}
	for _, kid := range kids {
		if _, ok := set.Lookup(kid); !ok {
			return false
		}
	}
	return true
}

// TestPublicKeys (issue #14, point 5): a verifier reading the store holds
// what the providers' JWKS publishes at every step of a rotation (a new
// key from its creation, a retired one until its tokens expire), and
// reading never creates a key.
func TestPublicKeys(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := clock.New(nil)
			s := open(t)
			pub := publicKeys(t, s, c, testSealKey)
			set, err := pub.KeySet(t.Context())
			if err != nil || set.Len() != 0 {
				t.Fatalf("on an empty store: %d keys, %v; want none", set.Len(), err)
			}
			if stored, _ := s.SigningKeys(t.Context()); len(stored) != 0 {
				t.Fatalf("reading the keys created %d", len(stored))
			}

			p, err := provider(t, s, c, testSealKey)
			if err != nil {
				t.Fatal(err)
			}
			check := func(step string) *token.KeySet {
				t.Helper()
				kids, _ := jwksKIDs(t, p)
				set, err := pub.KeySet(t.Context())
				if err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if !sameKeys(set, kids) {
					t.Errorf("%s: the store's keys (%d) are not the JWKS's %v", step, set.Len(), kids)
				}
				return set
			}
			raw, _ := mint(t, p)
			if !verifies(raw, check("first key"), c.Now()) {
				t.Error("a token of the first key does not verify with the store's keys")
			}
			c.Advance(DefaultRotateAfter - DefaultPublishAhead)
			mint(t, p) // creates the next key, published ahead
			check("next key published")
			c.Advance(DefaultPublishAhead)
			raw, _ = mint(t, p)
			if !verifies(raw, check("next key signs"), c.Now()) {
				t.Error("a token of the next key does not verify with the store's keys")
			}
			c.Advance(DefaultTokenTTL + retireMargin)
			if set := check("first key retired"); set.Len() != 1 {
				t.Errorf("the retired key is still held: %d keys", set.Len())
			}

			other := publicKeys(t, s, c, []byte("another-seal-key-0123456789abcde"))
			if _, err := other.KeySet(t.Context()); err == nil {
				t.Error("keys sealed under another secret were read")
			}
		})
	}
}

// TestConcurrentFirstStart (issue #14, point 5): providers started at once
// on an empty PostgreSQL database, each on a store of its own as origins
// are, agree on one signing key: one key is stored, every provider signs
// with it, and every token verifies with the keys read from the store.
func TestConcurrentFirstStart(t *testing.T) {
	dsn := os.Getenv("LECTERN_TEST_PG")
	if dsn == "" {
		t.Skip("LECTERN_TEST_PG not set: concurrent starts on PostgreSQL skipped")
	}
	t.Parallel()
	dsn = freshSchema(t, dsn)
	c := clock.New(nil)
	const n = 8
	stores := make([]store.Store, n)
	for i := range stores {
		stores[i] = pgStore(t, dsn)
	}
	providers := make([]*IdP, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range providers {
		wg.Go(func() {
			<-gate
			p, err := provider(t, stores[i], c, testSealKey)
			if err != nil {
				t.Error(err)
			}
			providers[i] = p
		})
	}
	close(gate)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if stored, err := stores[0].SigningKeys(t.Context()); err != nil || len(stored) != 1 {
		t.Fatalf("%d providers started at once stored %d keys (%v), want 1", n, len(stored), err)
	}
	set, err := publicKeys(t, pgStore(t, dsn), c, testSealKey).KeySet(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for i, p := range providers {
		raw, kid := mint(t, p)
		if i == 0 {
			first = kid
		}
		if kid != first {
			t.Errorf("provider %d signs with %q, provider 0 with %q", i, kid, first)
		}
		if !verifies(raw, set, c.Now()) {
			t.Errorf("a token of provider %d does not verify with the store's keys", i)
		}
	}
}

// countingStore counts the reads of the signing keys.
type countingStore struct {
	store.Store
	reads atomic.Int32
}

func (s *countingStore) SigningKeys(ctx context.Context) ([]store.SigningKey, error) {
	s.reads.Add(1)
	return s.Store.SigningKeys(ctx)
}

// TestJWKSFromSharedStore (issue #14, point 5): a provider's JWKS lists a
// key another provider on the store created a second ago (a verifier
// fetches the JWKS when a token names a kid it lacks), and reads the
// store at most once a second however often it is fetched.
func TestJWKSFromSharedStore(t *testing.T) {
	t.Parallel()
	c := clock.New(nil)
	s := &countingStore{Store: newStore(t)}
	b, err := provider(t, s, c, testSealKey)
	if err != nil {
		t.Fatal(err)
	}
	// q rotates every 2 s, so it makes the next key after 1 s.
	q, err := New(t.Context(), Config{Issuer: "https://idp.test", Audience: testAudience, Store: s, Now: c.Now,
		SealKey: testSealKey, RotateAfter: 2 * time.Second, PublishAhead: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	if kids, _ := jwksKIDs(t, b); len(kids) != 1 {
		t.Fatalf("JWKS %v: want the one key", kids)
	}
	mint(t, q) // makes the next key
	want, _ := jwksKIDs(t, q)
	if len(want) != 2 {
		t.Fatalf("JWKS of q %v: want the first key and the next", want)
	}
	reads := s.reads.Load()
	for range 100 {
		if _, err := b.JWKS(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.reads.Load() - reads; n != 0 {
		t.Errorf("100 JWKS fetches within a second read the store %d times, want 0", n)
	}
	c.Advance(jwksReloadEvery)
	if kids, _ := jwksKIDs(t, b); !slices.Equal(kids, want) {
		t.Errorf("JWKS %v a second after another provider made a key: want %v", kids, want)
	}
}
