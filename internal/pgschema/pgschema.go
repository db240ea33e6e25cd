// Package pgschema gives a temporary PostgreSQL schema of a database and
// a DSN confined to it (search_path), so that runs sharing one database
// do not collide: New for a tool's run (tools/meterbench, tools/soak),
// ForTest for a test, in the database LECTERN_TEST_PG names (the test is
// skipped without it).
package pgschema

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env names the database the PostgreSQL tests run in, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable; unset, they
// are skipped.
const Env = "LECTERN_TEST_PG"

// New creates a schema named prefix plus random hex in the database base
// names, and returns a DSN that selects it (search_path) and a function
// that drops it, reporting a failure on standard error.
func New(ctx context.Context, base, prefix string) (string, func(), error) {
	schema, err := create(ctx, base, prefix)
	if err != nil {
		return "", nil, err
	}
	remove := func() {
		if err := drop(base, schema); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return WithParam(base, "search_path", schema), remove, nil
}

// Base is the database Env names. Without it t is skipped, the message
// naming what (the test or suite that needs PostgreSQL).
func Base(t testing.TB, what string) string {
	t.Helper()
	base := os.Getenv(Env)
	if base == "" {
		t.Skip(Env + " not set: " + what + " skipped")
	}
	return base
}

// ForTest creates a schema in the database Env names (skipping t as Base
// does) and returns a DSN that selects it; the schema is dropped when t
// ends.
func ForTest(t testing.TB, what string) string {
	t.Helper()
	base := Base(t, what)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	schema, err := create(ctx, base, "lectern_test_")
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	t.Cleanup(func() {
		if err := drop(base, schema); err != nil {
			t.Error(err)
		}
	})
	return WithParam(base, "search_path", schema)
}

// WithParam adds the run-time parameter name=value to a URL or a
// keyword/value DSN; pgx sends it to the server.
func WithParam(dsn, name, value string) string {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return dsn + " " + name + "=" + value
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// create creates a schema named prefix plus random hex in the database
// base names, and returns its name.
func create(ctx context.Context, base, prefix string) (string, error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("%s%012x", prefix, rand.Uint64()>>16)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", fmt.Errorf("create schema %s: %w", schema, err)
	}
	return schema, nil
}

// drop drops schema and all it holds from the database base names.
func drop(base, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}

// Terminate ends, as pg_terminate_backend does (an operator, a server
// restart), every session of the database dsn names whose
// application_name is app, and returns how many it ended, once they are
// gone.
func Terminate(t testing.TB, dsn, app string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	for {
		var left int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
}
