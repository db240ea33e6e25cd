package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/internal/pgsession"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/pgstore"
)

// TestSessionBounds (issue #14, point 4): every connection of the store's
// pool runs with pgsession's lock, idle-in-transaction and statement
// timeouts, so a stalled origin holding locks costs the others a short,
// stated delay; a bound the DSN sets itself is kept.
func TestSessionBounds(t *testing.T) {
	const what = "the PostgreSQL session bounds test"
	show := func(t *testing.T, s *pgstore.Store, name string) time.Duration {
		t.Helper()
		var v string
		if err := pgstore.Pool(s).QueryRow(t.Context(), "SHOW "+name).Scan(&v); err != nil {
			t.Fatalf("SHOW %s: %v", name, err)
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SHOW %s = %q: %v", name, v, err)
		}
		return d
	}
	for _, tc := range []struct {
		name string
		dsn  string
		want map[string]time.Duration
	}{
		{"defaults", pgschema.ForTest(t, what), map[string]time.Duration{
			"lock_timeout":                        pgsession.LockTimeout,
			"idle_in_transaction_session_timeout": pgsession.IdleInTransaction,
			"statement_timeout":                   pgsession.StatementTimeout,
		}},
		{"the DSN's own", pgschema.WithParam(pgschema.ForTest(t, what), "lock_timeout", "500ms"), map[string]time.Duration{
			"lock_timeout":      500 * time.Millisecond,
			"statement_timeout": pgsession.StatementTimeout,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := pgstore.New(t.Context(), tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for name, want := range tc.want {
				if got := show(t, s, name); got != want {
					t.Errorf("%s: got %v, want %v", name, got, want)
				}
			}
		})
	}
}

// TestSigningKeyTableWait (issue #28, point 3): a peer holding the
// signing-key table's lock longer than lock_timeout (2 s) delays an
// origin's key rotation at start; it waits, and then adds its key.
func TestSigningKeyTableWait(t *testing.T) {
	schemaDSN := pgschema.ForTest(t, "the PostgreSQL lock wait test")
	s, err := pgstore.New(t.Context(), schemaDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	peer, err := pgx.Connect(t.Context(), schemaDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close(context.Background())
	tx, err := peer.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "LOCK TABLE signing_keys IN SHARE ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	const hold = 3 * time.Second
	// The peer's transaction is not idle (idle_in_transaction would end
	// it): it runs a statement for hold while it holds the lock.
	done := make(chan struct{})
	go func() {
		defer close(done)
		tx.Exec(context.Background(), "SELECT pg_sleep($1)", hold.Seconds())
		tx.Rollback(context.Background())
	}()
	defer func() { <-done }()
	now := time.Now().UTC().Truncate(time.Second)
	began := time.Now()
	added, err := s.AddSigningKeyUnlessNewer(t.Context(), store.SigningKey{KID: "k-wait", Alg: "EdDSA", Private: []byte("sealed"), CreatedAt: now}, now.Add(-time.Hour))
	if err != nil || !added {
		t.Fatalf("add a key while a peer held the table for %s: added %v, %v", hold, added, err)
	}
	if took := time.Since(began); took < hold-500*time.Millisecond {
		t.Errorf("added after %s, before the peer let go (%s)", took, hold)
	}
}
