package storetest

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/lectern-api/lectern/origin/store"
)

// SecretHashReplacer is the store method the identity provider upgrades
// a client's stored secret hash with (origin/idp, issue #36): a compare
// and swap on the hash.
type SecretHashReplacer interface {
	ReplaceClientSecretHash(ctx context.Context, id string, oldHash, newHash []byte) error
}

// RunClientSecretHashes holds a backend's ReplaceClientSecretHash to its
// contract: the new hash is stored only while the old one is there
// (store.ErrNotFound otherwise, the stored hash unchanged), of concurrent
// replacements of one hash exactly one wins, a missing client is
// ErrNotFound, and the hash is stored as given, byte for byte, across a
// reopen. newDB is Run's.
func RunClientSecretHashes(t *testing.T, newDB func(t *testing.T) Opener) {
	t.Run("ReplaceClientSecretHash", func(t *testing.T) {
		t.Parallel()
		open := newDB(t)
		s, stop := openRestartable(t, open)
		rs, ok := s.(SecretHashReplacer)
		if !ok {
			t.Fatalf("%T has no ReplaceClientSecretHash", s)
		}
		mustCreateOrg(t, s, fullOrg("acme"))
		c := fullClient("c1", "acme")
		c.SecretHash = []byte("$2a$10$an0ld.bcrypt.hash.of.the.kind.0.4.0.stored.xxxxxxxxxxxxx")
		mustCreateClient(t, s, c)
		keyed := []byte("$lectern-hs256$0a1b2c3d$" + string([]byte{0, 0xff, '$'}))

		wantErr(t, "replace of a stale hash", rs.ReplaceClientSecretHash(t.Context(), "c1", []byte("not the hash"), keyed), store.ErrNotFound)
		wantErr(t, "replace of a missing client", rs.ReplaceClientSecretHash(t.Context(), "ghost", c.SecretHash, keyed), store.ErrNotFound)
		if got := mustGetClient(t, s, "c1").SecretHash; !bytes.Equal(got, c.SecretHash) {
			t.Fatalf("after refused replacements: hash %q, want %q", got, c.SecretHash)
		}

		// Concurrent upgrades of one hash (several origins at a client's
		// first tokens): one wins, the others are ErrNotFound.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() { errs <- rs.ReplaceClientSecretHash(context.Background(), "c1", c.SecretHash, keyed) })
		}
		wg.Wait()
		close(errs)
		won := 0
		for err := range errs {
			switch {
			case err == nil:
				won++
			default:
				wantErr(t, "a concurrent replacement that lost", err, store.ErrNotFound)
			}
		}
		if won != 1 {
			t.Errorf("concurrent replacements: %d won, want 1", won)
		}
		stop()
		s = openStore(t, open)
		got := mustGetClient(t, s, "c1")
		if !bytes.Equal(got.SecretHash, keyed) {
			t.Errorf("after a reopen: hash %q, want %q", got.SecretHash, keyed)
		}
		want := fullClient("c1", "acme")
		if got.OrgID != want.OrgID || !slices.Equal(got.Scopes, want.Scopes) || !slices.Equal(got.GrantTypes, want.GrantTypes) ||
			!slices.Equal(got.RedirectURIs, want.RedirectURIs) {
			t.Errorf("after the replacement: client %+v, want the other fields of %+v", got, want)
		}
	})
}

func mustGetClient(t *testing.T, s store.Store, id string) *store.Client {
	t.Helper()
	c, err := s.GetClient(t.Context(), id)
	if err != nil {
		t.Fatalf("GetClient(%s): %v", id, err)
	}
	return c
}
