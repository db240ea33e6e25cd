package wiring

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/clock"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
)

// countingStore counts the reads of the signing keys.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (s *countingStore) SigningKeys(ctx context.Context) ([]store.SigningKey, error) {
	s.reads.Add(1)
	return s.Store.SigningKeys(ctx)
}

// TestMadeUpKidsRateLimited (issue #14, point 5): tokens naming kids the
// database does not hold, hundreds at once and again, make the origin's
// verifier read the keys at most once a second (storeKeysMinInterval).
func TestMadeUpKidsRateLimited(t *testing.T) {
	db, err := sqlitestore.New(t.Context(), filepath.Join(t.TempDir(), "lectern.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cs := &countingStore{Store: db}
	o := &Origin{store: cs, clock: clock.New(nil), log: slog.New(slog.DiscardHandler)}
	d := Deployment{Secret: []byte("a-test-secret-of-at-least-32-characters"), Issuer: "https://auth.example", Audience: "lectern-api"}
	_, verifier, err := o.identity(t.Context(), d, Options{}) // no identity provider, the keys from the database
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	begin, before := time.Now(), cs.reads.Load()
	for round := range 5 {
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				h := b64(fmt.Appendf(nil, `{"alg":"EdDSA","typ":"JWT","kid":"made-up-%d-%d"}`, round, i))
				if _, err := verifier.Authenticate(t.Context(), "Bearer "+h+"."+b64([]byte(`{}`))+".AAAA"); err == nil {
					t.Error("a token of a made-up kid was accepted")
				}
			})
		}
		wg.Wait()
	}
	reads := cs.reads.Load() - before
	limit := 1 + int64(time.Since(begin)/time.Second) // the rule: one read a second at most
	t.Logf("500 made-up kids in %v: %d reads of the keys", time.Since(begin), reads)
	if reads < 1 || reads > limit {
		t.Errorf("500 made-up kids read the keys %d times, want 1 to %d", reads, limit)
	}
}
