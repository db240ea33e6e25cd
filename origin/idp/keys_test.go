package idp

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/pgstore"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/shared/token"
)

// testSealKey seals the signing keys of every test provider.
var testSealKey = []byte("idp-test-seal-key-0123456789abcd")

// backends are the stores a provider is tested on: SQLite always, and
// PostgreSQL (a fresh schema) when LECTERN_TEST_PG names a database.
func backends(t *testing.T) map[string]func(t *testing.T) store.Store {
	b := map[string]func(t *testing.T) store.Store{
		"sqlite": func(t *testing.T) store.Store {
			s, err := sqlitestore.New(t.Context(), filepath.Join(t.TempDir(), "lectern.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	if os.Getenv(pgschema.Env) == "" {
		t.Log("LECTERN_TEST_PG not set: the PostgreSQL store is skipped")
		return b
	}
	b["postgres"] = func(t *testing.T) store.Store {
		return pgStore(t, freshSchema(t, ""))
	}
	return b
}

// freshSchema is pgschema.ForTest: LECTERN_TEST_PG confined to a new
// schema, dropped when the test ends (the database is the variable's;
// the argument, public_test.go's, is not read).
func freshSchema(t *testing.T, _ string) string {
	t.Helper()
	return pgschema.ForTest(t, "the PostgreSQL store")
}

// pgStore opens a store on dsn, closed when the test ends.
func pgStore(t *testing.T, dsn string) store.Store {
	t.Helper()
	s, err := pgstore.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// provider is an IdP on s, keyed by sealKey, on clock c.
func provider(t *testing.T, s store.Store, c *clock.Clock, sealKey []byte) (*IdP, error) {
	return New(t.Context(), Config{Issuer: "https://idp.test", Audience: testAudience, Store: s, Now: c.Now, SealKey: sealKey})
}

// mint signs a token the way the token endpoint does and returns it with
// the kid it names.
func mint(t *testing.T, p *IdP) (raw, kid string) {
	t.Helper()
	raw, err := p.sign(t.Context(), grant{client: &store.Client{ID: "client-1", OrgID: testOrg}, scope: "service-api/content.read"})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := p.signingKey(t.Context())
	return raw, k.kid
}

// jwksKIDs fetches p's JWKS document and returns its kids, sorted, and
// the parsed set.
func jwksKIDs(t *testing.T, p *IdP) ([]string, *token.KeySet) {
	t.Helper()
	doc, err := p.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	set, err := token.ParseJWKS(doc)
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range p.published(p.now()) {
		kids = append(kids, k.kid)
	}
	slices.Sort(kids)
	return kids, set
}

// verifies reports whether a verifier holding set accepts raw at now.
func verifies(raw string, set *token.KeySet, now time.Time) bool {
	v := token.Verifier{Issuer: "https://idp.test", Audience: testAudience, Leeway: token.DefaultLeeway}
	_, f := v.Verify(raw, set, now)
	return f == nil
}

// TestKeysSealedAtRest (issue #13, point 2): the store holds no signing
// seed in the clear, and a copy of it without the deployment secret
// neither signs nor makes the provider start with a key of its own.
func TestKeysSealedAtRest(t *testing.T) {
	t.Parallel()
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, c := open(t), clock.New(nil)
			p, err := provider(t, s, c, testSealKey)
			if err != nil {
				t.Fatal(err)
			}
			raw, kid := mint(t, p)
			seed := p.opened[kid].priv.Seed()
			stored, err := s.SigningKeys(t.Context())
			if err != nil || len(stored) != 1 {
				t.Fatalf("stored keys: %v, %v; want one", stored, err)
			}
			if bytes.Contains(stored[0].Private, seed) || len(stored[0].Private) == ed25519.SeedSize {
				t.Errorf("the stored key holds the seed in the clear: %x", stored[0].Private)
			}

			// The same secret: a restart signs with the same key.
			again, err := provider(t, s, c, testSealKey)
			if err != nil {
				t.Fatal(err)
			}
			if _, k := mint(t, again); k != kid {
				t.Errorf("after a restart: kid %q, want %q", k, kid)
			}
			_, set := jwksKIDs(t, again)
			if !verifies(raw, set, c.Now()) {
				t.Error("a token from before the restart does not verify")
			}

			// Another secret: a clear error at start, and no new key.
			other := bytes.Repeat([]byte{7}, 32)
			if _, err := provider(t, s, c, other); err == nil || !strings.Contains(err.Error(), "LECTERN_SECRET") {
				t.Errorf("start with another secret: got %v, want an error naming LECTERN_SECRET", err)
			}
			if after, _ := s.SigningKeys(t.Context()); len(after) != 1 {
				t.Errorf("start with another secret added a key: %d keys", len(after))
			}
		})
	}
}

// TestClearKeyIsSealed: a seed an older version stored in the clear is
// sealed in place at start, and keeps signing (tokens survive upgrades).
func TestClearKeyIsSealed(t *testing.T) {
	t.Parallel()
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, c := open(t), clock.New(nil)
			_, priv, _ := ed25519.GenerateKey(rand.Reader)
			kid := keyID(priv.Public().(ed25519.PublicKey))
			if err := s.AddSigningKey(t.Context(), store.SigningKey{KID: kid, Alg: algEdDSA, Private: priv.Seed(),
				CreatedAt: c.Now().Add(-time.Hour)}); err != nil {
				t.Fatal(err)
			}
			p, err := provider(t, s, c, testSealKey)
			if err != nil {
				t.Fatal(err)
			}
			stored, _ := s.SigningKeys(t.Context())
			if len(stored) != 1 || bytes.Contains(stored[0].Private, priv.Seed()) {
				t.Fatalf("after start: %d keys, the first %x; want the one key, sealed", len(stored), stored[0].Private)
			}
			if _, k := mint(t, p); k != kid {
				t.Errorf("signing kid %q, want the upgraded key %q", k, kid)
			}
		})
	}
}

// TestAcceptedSealKey (#34, point 3): a provider whose SealKey is the new
// secret's and AcceptedSealKey the old one's starts on a store sealed
// under the old, signs with the same key (tokens and verifiers keep it),
// and seals it again under the new, so that the old secret can go.
func TestAcceptedSealKey(t *testing.T) {
	t.Parallel()
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, c := open(t), clock.New(nil)
			old, err := provider(t, s, c, testSealKey)
			if err != nil {
				t.Fatal(err)
			}
			_, kid := mint(t, old)
			newKey := bytes.Repeat([]byte{7}, 32)
			p, err := New(t.Context(), Config{Issuer: "https://idp.test", Audience: testAudience, Store: s, Now: c.Now,
				SealKey: newKey, AcceptedSealKey: testSealKey})
			if err != nil {
				t.Fatalf("start with the old secret accepted: %v", err)
			}
			if _, k := mint(t, p); k != kid {
				t.Errorf("signing kid %q, want the old provider's %q", k, kid)
			}
			// Sealed again under the new key: it alone opens the store now.
			if _, err := provider(t, s, c, newKey); err != nil {
				t.Errorf("the new secret alone after the rotation: %v", err)
			}
			if _, err := New(t.Context(), Config{Issuer: "https://idp.test", Audience: testAudience, Store: s, Now: c.Now,
				SealKey: testSealKey, AcceptedSealKey: newKey}); err != nil {
				t.Errorf("an origin still on the old secret, the new one accepted: %v", err)
			}
		})
	}
}

// TestSealBindsKID: a sealed seed moved to another kid's row does not
// open (the kid is the associated data).
func TestSealBindsKID(t *testing.T) {
	t.Parallel()
	p, err := provider(t, newStore(t), clock.New(nil), testSealKey)
	if err != nil {
		t.Fatal(err)
	}
	seed := make([]byte, ed25519.SeedSize)
	sealed := p.seal("kid-a", seed)
	if got, reseal, err := p.unseal("kid-a", sealed); err != nil || reseal != "" || !bytes.Equal(got, seed) {
		t.Fatalf("unseal: %x, %q, %v", got, reseal, err)
	}
	if _, _, err := p.unseal("kid-b", sealed); err == nil {
		t.Error("a seed sealed for kid-a opened as kid-b")
	}
}

// TestRotationPublishesAhead (issue #13, point 5): the next key is in the
// JWKS PublishAhead before it signs, so a verifier that fetched the JWKS
// at any time since holds it; the key it replaces stays published until
// the last token it signed has expired.
func TestRotationPublishesAhead(t *testing.T) {
	t.Parallel()
	c := clock.New(nil)
	p, err := provider(t, newStore(t), c, testSealKey)
	if err != nil {
		t.Fatal(err)
	}
	_, first := mint(t, p)

	c.Advance(DefaultRotateAfter - DefaultPublishAhead)
	if _, k := mint(t, p); k != first {
		t.Errorf("when the next key is made: signing kid %q, want still %q", k, first)
	}
	kids, fetched := jwksKIDs(t, p) // a verifier fetches the JWKS now
	if len(kids) != 2 {
		t.Fatalf("JWKS %v: want the signing key and the next one", kids)
	}
	next := kids[0]
	if next == first {
		next = kids[1]
	}

	c.Advance(DefaultPublishAhead - time.Second)
	if _, k := mint(t, p); k != first {
		t.Errorf("1 s before PublishAhead: signing kid %q, want still %q", k, first)
	}
	c.Advance(time.Second)
	raw, k := mint(t, p)
	if k != next {
		t.Fatalf("after PublishAhead: signing kid %q, want the published %q", k, next)
	}
	if !verifies(raw, fetched, c.Now()) {
		t.Error("a token of the new key does not verify with the JWKS fetched PublishAhead earlier")
	}

	c.Advance(DefaultTokenTTL + retireMargin - time.Second)
	if kids, _ := jwksKIDs(t, p); !slices.Contains(kids, first) {
		t.Errorf("JWKS %v lacks %q while a token it signed may be valid", kids, first)
	}
	c.Advance(time.Second)
	kids, _ = jwksKIDs(t, p)
	if diff := cmp.Diff([]string{next}, kids); diff != "" {
		t.Errorf("JWKS kids once the retired key's tokens expired, want only the next key (-want +got):\n%s", diff)
	}
}

// TestLateRotation: a provider that signed nothing for longer than
// RotateAfter (idle, or stopped) publishes the next key first and keeps
// signing with the old one for PublishAhead; it never signs with a key a
// verifier cannot have fetched.
func TestLateRotation(t *testing.T) {
	t.Parallel()
	c := clock.New(nil)
	s := newStore(t)
	p, err := provider(t, s, c, testSealKey)
	if err != nil {
		t.Fatal(err)
	}
	_, first := mint(t, p)
	_, before := jwksKIDs(t, p)

	c.Advance(DefaultRotateAfter + 10*24*time.Hour)
	p, err = provider(t, s, c, testSealKey) // a start after a long stop
	if err != nil {
		t.Fatal(err)
	}
	raw, k := mint(t, p)
	if k != first {
		t.Errorf("late rotation: signing kid %q, want %q until the next key is published long enough", k, first)
	}
	if !verifies(raw, before, c.Now()) {
		t.Error("the token does not verify with the JWKS a verifier held before")
	}
	if kids, _ := jwksKIDs(t, p); len(kids) != 2 {
		t.Errorf("JWKS %v: want the signing key and the next one", kids)
	}
	if stored, _ := s.SigningKeys(t.Context()); len(stored) != 2 {
		t.Errorf("%d stored keys, want 2", len(stored))
	}
}

// TestSharedStoreRotation: providers sharing a store (several origins on
// PostgreSQL) create one next key between them and publish it alike.
func TestSharedStoreRotation(t *testing.T) {
	t.Parallel()
	c := clock.New(nil)
	s := newStore(t)
	a, err := provider(t, s, c, testSealKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := provider(t, s, c, testSealKey)
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(DefaultRotateAfter - DefaultPublishAhead)
	mint(t, a) // a makes the next key
	ka, _ := jwksKIDs(t, a)
	kb, _ := jwksKIDs(t, b)
	if len(ka) != 2 {
		t.Errorf("JWKS of a %v: want two keys", ka)
	}
	if diff := cmp.Diff(ka, kb); diff != "" {
		t.Errorf("JWKS kids of a (-) and of b (+): want the same keys\n%s", diff)
	}
	if stored, _ := s.SigningKeys(t.Context()); len(stored) != 2 {
		t.Errorf("%d stored keys, want 2", len(stored))
	}
	c.Advance(DefaultPublishAhead)
	_, x := mint(t, a)
	_, y := mint(t, b)
	if x != y {
		t.Errorf("signing kids %q and %q: want one key", x, y)
	}
}

func TestPublishAheadBelowRotateAfter(t *testing.T) {
	t.Parallel()
	_, err := New(t.Context(), Config{Issuer: "https://idp.test", Audience: testAudience, Store: newStore(t),
		SealKey: testSealKey, RotateAfter: time.Hour, PublishAhead: time.Hour})
	if err == nil {
		t.Error("PublishAhead equal to RotateAfter accepted")
	}
	_, err = New(t.Context(), Config{Issuer: "https://idp.test", Audience: testAudience, Store: newStore(t)})
	if err == nil {
		t.Error("no SealKey accepted")
	}
}
