package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/wiring"
)

// A backend is the database the rows that touch storage run on: SQLite
// in the bench's temporary directory, or PostgreSQL in a fresh schema of
// the database -db names (internal/pgschema), dropped at the end. Every
// section but worker and module runs once per backend of -db, in turn,
// each pass with its own (a) measured in its own rounds; every row says
// which backend it ran on.
type backend struct {
	name string // "sqlite" or "postgres", as the rows are labelled
	url  string // the PostgreSQL database (postgres://…); "" for SQLite
}

// parseBackends reads -db: "sqlite", a postgres:// URL, or both
// separated by a comma (SQLite first when both).
func parseBackends(s string) ([]backend, error) {
	var out []backend
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "sqlite":
			out = append(out, backend{name: "sqlite"})
		case wiring.IsPostgres(f):
			out = append(out, backend{name: "postgres", url: f})
		default:
			return nil, fmt.Errorf("-db: %q is neither sqlite nor a postgres:// URL", f)
		}
	}
	for i, b := range out {
		for _, o := range out[:i] {
			if o.name == b.name {
				return nil, fmt.Errorf("-db: %s given twice", b.name)
			}
		}
	}
	return out, nil
}

// hasPostgres reports whether bs includes PostgreSQL.
func hasPostgres(bs []backend) bool {
	for _, b := range bs {
		if b.url != "" {
			return true
		}
	}
	return false
}

// label is the backend's name as printed in the table's header.
func (b backend) label() string {
	if b.url != "" {
		return "PostgreSQL"
	}
	return "SQLite"
}

// database returns the LECTERN_DB of a new, empty database of b: a file
// under dir for SQLite, a new schema for PostgreSQL (prefix names it),
// and the function that drops it (nil for SQLite, whose file goes with
// the bench's directory).
func (b backend) database(ctx context.Context, dir, prefix string) (string, func(), error) {
	if b.url == "" {
		return filepath.Join(dir, "lectern.db"), nil, nil
	}
	dsn, drop, err := pgschema.New(ctx, b.url, prefix)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: a schema for the bench: %w", err)
	}
	return dsn, drop, nil
}

// childBackend is the backend of the current pass: the child origins
// (startChild: memory, downloads, leases' CPU, scale) open their
// database on it.
var childBackend = backend{name: "sqlite"}

// noStorage are the ids of rows that touch no storage, whatever -db
// says: measured once, in the first pass, and labelled "-".
var noStorage = map[string]bool{"g": true, "h": true}
