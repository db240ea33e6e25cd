package lease_test

import (
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	base := os.Getenv("LECTERN_TEST_PG")
	if base == "" {
		t.Skip("LECTERN_TEST_PG not set: PostgreSQL skipped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to LECTERN_TEST_PG: %v", err)
	}
	defer conn.Close(ctx)
	schema := "lease_test_" + strings.ToLower(rand.Text()[:12])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("LECTERN_TEST_PG: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	m, err := pgmeter.New(t.Context(), u.String(), pgmeter.Options{})
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
