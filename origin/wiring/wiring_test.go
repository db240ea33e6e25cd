package wiring

import (
	"path/filepath"
	"testing"
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
	if err := m.Close(); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}
