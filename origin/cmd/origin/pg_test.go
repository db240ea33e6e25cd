package main

import (
	"maps"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lectern-api/lectern/internal/pgschema"
)

// testPG returns LECTERN_TEST_PG confined to a new schema, dropped when
// the test ends, as a LECTERN_DB URL, and a pool on the database for the
// test's own queries. Without LECTERN_TEST_PG the test is skipped, saying
// that what (the suite) needs PostgreSQL.
func testPG(t *testing.T, what string) (string, *pgxpool.Pool) {
	t.Helper()
	// The schema is dropped after the pool and the test's origins are
	// closed: their cleanups are registered later, so they run first.
	dsn := pgschema.ForTest(t, what)
	admin, err := pgxpool.New(t.Context(), pgschema.Base(t, what))
	if err != nil {
		t.Fatalf("LECTERN_TEST_PG: %v", err)
	}
	t.Cleanup(admin.Close)
	return dsn, admin
}

// pgDSN is testPG's LECTERN_DB URL alone.
func pgDSN(t *testing.T, what string) string {
	t.Helper()
	dsn, _ := testPG(t, what)
	return dsn
}

// onBothStores runs f on a stack with the test clock over the corpus,
// once on SQLite and once on PostgreSQL (skipped without LECTERN_TEST_PG,
// saying that what needs it).
func onBothStores(t *testing.T, what string, f func(*testing.T, *testStack)) {
	onBothStoresWith(t, what, nil, f)
}

// onBothStoresWith is onBothStores with more settings (NAME: value).
func onBothStoresWith(t *testing.T, what string, more map[string]string, f func(*testing.T, *testStack)) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			dir := t.TempDir()
			writeCorpus(t, filepath.Join(dir, "corpus"))
			env := map[string]string{"LECTERN_TEST_CLOCK": "1"}
			maps.Copy(env, more)
			if store == "postgres" {
				env["LECTERN_DB"] = pgDSN(t, what+" on PostgreSQL")
				env["LECTERN_ISSUER"] = "https://auth.lectern.test" // required with PostgreSQL; never fetched
			}
			s := bootStack(t, testEnv(dir, env), nil)
			defer s.Close()
			f(t, s)
		})
	}
}
