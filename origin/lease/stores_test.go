package lease_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
)

// leaseStore is meters that keep leases.
type leaseStore interface {
	meter.Store
	meter.LeaseStore
}

// backends are the lease stores every test runs on: the meters' own,
// SQLite always and PostgreSQL when LECTERN_TEST_PG names a database (a
// schema of its own per test).
var backends = []struct {
	name string
	open func(t *testing.T) leaseStore
}{
	{"sqlite", func(t *testing.T) leaseStore { return openSQLite(t) }},
	{"pg", openPG},
}

// eachBackend runs test on every backend.
func eachBackend(t *testing.T, test func(t *testing.T, s leaseStore)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b.open(t)) })
	}
}

func openSQLite(t *testing.T) *sqlitemeter.Store {
	t.Helper()
	m, err := sqlitemeter.New(context.Background(), filepath.Join(t.TempDir(), "m.db"), sqlitemeter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func openPG(t *testing.T) leaseStore {
	t.Helper()
	m, err := pgmeter.New(t.Context(), pgschema.ForTest(t, "the lease tests on PostgreSQL"), pgmeter.Options{})
	if err != nil {
		t.Fatalf("open meter store: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// recorded is the lease of id as s records it, while it is open.
func recorded(t *testing.T, s meter.LeaseStore, org, id string) meter.Lease {
	t.Helper()
	ls, err := s.OpenLeases(context.Background(), org, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.ID == id {
			return l
		}
	}
	t.Fatalf("lease %s of %s is not open", id, org)
	return meter.Lease{}
}
