// Package pgschema gives a tool a temporary PostgreSQL schema of the
// database a DSN names (tools/meterbench, tools/soak), as the PostgreSQL
// tests confine themselves to one.
package pgschema

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// New creates a schema named prefix plus random hex in the database base
// names, and returns a DSN that selects it (search_path) and a function
// that drops it, reporting a failure on standard error.
func New(ctx context.Context, base, prefix string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	schema := fmt.Sprintf("%s%012x", prefix, rand.Uint64()>>16)
	ident := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		return "", nil, err
	}
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			fmt.Fprintf(os.Stderr, "drop schema %s: %v\n", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+ident+" CASCADE"); err != nil {
			fmt.Fprintf(os.Stderr, "drop schema %s: %v\n", schema, err)
		}
	}
	dsn := fmt.Sprintf("%s search_path=%s", base, schema)
	if u, err := url.Parse(base); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		dsn = u.String()
	}
	return dsn, drop, nil
}
