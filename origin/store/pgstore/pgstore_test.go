package pgstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/lectern-api/lectern/internal/pgschema"
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
	const what = "the PostgreSQL store suite"
	pgschema.Base(t, what)
	storetest.Run(t, storetest.Shared, func(t *testing.T) storetest.Opener {
		dsn := pgschema.ForTest(t, what)
		return func(ctx context.Context) (store.Store, error) {
			return pgstore.New(ctx, dsn)
		}
	})
}

// TestProgress runs progresstest against LECTERN_TEST_PG, each subtest in
// a fresh schema that every Store it opens shares.
func TestProgress(t *testing.T) {
	const what = "the PostgreSQL progress suite"
	pgschema.Base(t, what)
	var dsns sync.Map // *testing.T → DSN
	progresstest.Run(t, progresstest.Shared, func(t *testing.T) progresstest.Store {
		dsn, ok := dsns.Load(t)
		if !ok {
			dsn, _ = dsns.LoadOrStore(t, pgschema.ForTest(t, what))
		}
		s, err := pgstore.New(t.Context(), dsn.(string))
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		return s
	})
}

// BenchmarkProgress runs progresstest.Bench against LECTERN_TEST_PG.
func BenchmarkProgress(b *testing.B) {
	s, err := pgstore.New(b.Context(), pgschema.ForTest(b, "the PostgreSQL progress benchmark"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	progresstest.Bench(b, s)
}
