package pgstore_test

import (
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lectern-api/lectern/origin/internal/pgsession"
	"github.com/lectern-api/lectern/origin/store/pgstore"
)

// TestSessionBounds (issue #14, point 4): every connection of the store's
// pool runs with pgsession's lock, idle-in-transaction and statement
// timeouts, so a stalled origin holding locks costs the others a short,
// stated delay; a bound the DSN sets itself is kept.
func TestSessionBounds(t *testing.T) {
	dsn := os.Getenv("LECTERN_TEST_PG")
	if dsn == "" {
		t.Skip("LECTERN_TEST_PG not set: PostgreSQL session bounds skipped")
	}
	admin, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatalf("LECTERN_TEST_PG: %v", err)
	}
	t.Cleanup(admin.Close)
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
		{"defaults", withSearchPath(dsn, newSchema(t, admin)), map[string]time.Duration{
			"lock_timeout":                        pgsession.LockTimeout,
			"idle_in_transaction_session_timeout": pgsession.IdleInTransaction,
			"statement_timeout":                   pgsession.StatementTimeout,
		}},
		{"the DSN's own", withParam(withSearchPath(dsn, newSchema(t, admin)), "lock_timeout", "500ms"), map[string]time.Duration{
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
