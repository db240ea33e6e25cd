package wiring

import (
	"path/filepath"
	"testing"

	"github.com/lectern-api/lectern/origin/store"
)

func TestIsPostgres(t *testing.T) {
	for dsn, want := range map[string]bool{
		"postgres://u@h/db":   true,
		"postgresql://u@h/db": true,
		"var/lectern.db":      false,
		"/tmp/postgres.db":    false,
		"":                    false,
	} {
		if got := IsPostgres(dsn); got != want {
			t.Errorf("IsPostgres(%q) = %v, want %v", dsn, got, want)
		}
	}
}

// TestOpenStoresSQLite opens both stores on one SQLite file; PostgreSQL
// is exercised by origin/cmd/origin's suites under LECTERN_TEST_PG.
func TestOpenStoresSQLite(t *testing.T) {
	s, m, err := OpenStores(t.Context(), filepath.Join(t.TempDir(), "lectern.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The store keeps the progress records.
	ps, err := ProgressOf(s)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := ps.Progress(t.Context(), "org", "ana"); err != nil || r.Version != 0 {
		t.Errorf("progress of nobody: %+v, %v", r, err)
	}
	// A store without them is refused.
	if _, err := ProgressOf(struct{ store.Store }{s}); err == nil {
		t.Error("ProgressOf accepted a store without progress records")
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}
