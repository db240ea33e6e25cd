package pgschema

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
)

func TestWithParam(t *testing.T) {
	got := []string{
		WithParam("postgres://u@h:5432/db", "search_path", "s1"),
		WithParam("postgres://u@h:5432/db?sslmode=disable", "application_name", "peer-0"),
		WithParam("postgresql://u@h/db?search_path=old", "search_path", "s2"),
		WithParam("host=h dbname=db", "search_path", "s3"),
	}
	want := []string{
		"postgres://u@h:5432/db?search_path=s1",
		"postgres://u@h:5432/db?application_name=peer-0&sslmode=disable",
		"postgresql://u@h/db?search_path=s2",
		"host=h dbname=db search_path=s3",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WithParam (-want +got):\n%s", diff)
	}
}

// TestForTest: the DSN selects a new, empty schema, and the schema is
// dropped when the test that made it ends.
func TestForTest(t *testing.T) {
	Base(t, "the pgschema test")
	var dsn string
	t.Run("make", func(t *testing.T) {
		dsn = ForTest(t, "the pgschema test")
		schema := searchPath(t, dsn)
		if !strings.HasPrefix(schema, "lectern_test_") {
			t.Errorf("search_path %q, want a schema lectern_test_…", schema)
		}
		if n := schemas(t, dsn, schema); n != 1 {
			t.Errorf("%d schemas named %s, want 1", n, schema)
		}
	})
	if t.Failed() {
		return
	}
	if n := schemas(t, dsn, searchPath(t, dsn)); n != 0 {
		t.Errorf("the schema is still there after its test ended")
	}
}

// searchPath is the search_path dsn sets.
func searchPath(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.RuntimeParams["search_path"]
}

// schemas counts the schemas named schema in dsn's database.
func schemas(t *testing.T, dsn, schema string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
