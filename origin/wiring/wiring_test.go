package wiring

import (
	"path/filepath"
	"testing"

	"github.com/lectern-api/lectern/origin/meter"
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
	// The meters keep the edge's leases: the origin grants them.
	d := Deployment{Secret: []byte("a-test-secret-of-at-least-32-characters")}
	if d.Leases(m, LeaseSettings{}, nil, nil) == nil {
		t.Error("no lease manager on the SQLite meters")
	}
	if d.Leases(struct{ meter.Store }{m}, LeaseSettings{}, nil, nil) != nil {
		t.Error("a lease manager on meters that keep no leases")
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// The limit is the footprint plus its headroom: at least memHeadroomMin,
// a share of the footprint when that is larger.
func TestMemoryLimitHeadroom(t *testing.T) {
	for _, tt := range []struct {
		footprint uint64
		want      int64
	}{
		{100 << 20, 100<<20 + memHeadroomMin},
		{600 << 20, 600<<20 + 100<<20},
	} {
		if got := MemoryLimit(tt.footprint); got != tt.want {
			t.Errorf("MemoryLimit(%d MiB) = %d MiB, want %d MiB", tt.footprint>>20, got>>20, tt.want>>20)
		}
	}
}
