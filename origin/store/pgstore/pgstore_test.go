package pgstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lectern-api/lectern/origin/progress/progresstest"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/store/pgstore"
	"github.com/lectern-api/lectern/origin/store/storetest"
)

// TestStore runs the conformance suite against the PostgreSQL database
// named by LECTERN_TEST_PG, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable. Each subtest
// gets a fresh schema, dropped when it ends, so runs do not collide.
func TestStore(t *testing.T) {
	dsn := os.Getenv("LECTERN_TEST_PG")
	if dsn == "" {
		t.Skip("LECTERN_TEST_PG not set: PostgreSQL store suite skipped")
	}
	admin, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatalf("LECTERN_TEST_PG: %v", err)
	}
	t.Cleanup(admin.Close)
	storetest.Run(t, storetest.Shared, func(t *testing.T) storetest.Opener {
		schema := newSchema(t, admin)
		return func(ctx context.Context) (store.Store, error) {
			return pgstore.New(ctx, withSearchPath(dsn, schema))
		}
	})
}

// newSchema creates an empty schema that is dropped when the test ends.
func newSchema(t *testing.T, admin *pgxpool.Pool) string {
	t.Helper()
	schema := fmt.Sprintf("lectern_test_%016x", rand.Uint64())
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.Exec(t.Context(), "CREATE SCHEMA "+ident); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+ident+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	return schema
}

// withSearchPath adds search_path to a URL or keyword/value DSN; pgx sends
// it to the server as a runtime parameter.
func withSearchPath(dsn, schema string) string {
	return withParam(dsn, "search_path", schema)
}

// withParam adds the runtime parameter name=value to a URL or
// keyword/value DSN.
func withParam(dsn, name, value string) string {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dsn + " " + name + "=" + value
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestProgress runs progresstest against LECTERN_TEST_PG, each subtest in
// a fresh schema that every Store it opens shares.
func TestProgress(t *testing.T) {
	dsn := os.Getenv("LECTERN_TEST_PG")
	if dsn == "" {
		t.Skip("LECTERN_TEST_PG not set: PostgreSQL progress suite skipped")
	}
	admin, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatalf("LECTERN_TEST_PG: %v", err)
	}
	t.Cleanup(admin.Close)
	var schemas sync.Map // *testing.T → schema
	progresstest.Run(t, progresstest.Shared, func(t *testing.T) progresstest.Store {
		schema, ok := schemas.Load(t)
		if !ok {
			schema, _ = schemas.LoadOrStore(t, newSchema(t, admin))
		}
		s, err := pgstore.New(t.Context(), withSearchPath(dsn, schema.(string)))
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		return s
	})
}

// BenchmarkProgress runs progresstest.Bench against LECTERN_TEST_PG.
func BenchmarkProgress(b *testing.B) {
	dsn := os.Getenv("LECTERN_TEST_PG")
	if dsn == "" {
		b.Skip("LECTERN_TEST_PG not set: PostgreSQL progress benchmark skipped")
	}
	admin, err := pgxpool.New(b.Context(), dsn)
	if err != nil {
		b.Fatalf("LECTERN_TEST_PG: %v", err)
	}
	defer admin.Close()
	schema := fmt.Sprintf("lectern_bench_%016x", rand.Uint64())
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.Exec(b.Context(), "CREATE SCHEMA "+ident); err != nil {
		b.Fatalf("create schema: %v", err)
	}
	defer admin.Exec(context.Background(), "DROP SCHEMA "+ident+" CASCADE")
	s, err := pgstore.New(b.Context(), withSearchPath(dsn, schema))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	progresstest.Bench(b, s)
}
