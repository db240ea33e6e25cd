package pgmig

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/internal/pgsession"
	"github.com/lectern-api/lectern/shared/logbuftest"
)

// TestApplyWaitsForAPeer (issue #28, point 3): an origin that starts while
// a peer holds the migration lock longer than the sessions' lock_timeout
// waits for it, saying so in its log, and then finds the work done or
// does it; it does not exit on the lock timeout.
func TestApplyWaitsForAPeer(t *testing.T) {
	dsn := pgschema.ForTest(t, "the PostgreSQL migration wait test")
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pgsession.Apply(cfg.ConnConfig.RuntimeParams) // lock_timeout 2 s, as an origin's pool
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	const lock = 0x7465737477616974
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(lock)); err != nil {
		t.Fatal(err)
	}
	hold := LockSlice + LogEvery + time.Second
	released := time.AfterFunc(hold, func() { admin.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", int64(lock)) })
	defer released.Stop()

	log := new(logbuftest.Buffer)
	fsys := fstest.MapFS{"m/0001_t.sql": {Data: []byte("CREATE TABLE waited (id int)")}}
	began := time.Now()
	if err := Apply(WithLogger(ctx, slog.New(slog.NewTextHandler(log, nil))), pool, fsys, "m", "test_migrations", lock); err != nil {
		t.Fatalf("apply while a peer held the lock for %s: %v", hold, err)
	}
	if took := time.Since(began); took < hold-time.Second {
		t.Errorf("applied after %s, before the peer released the lock (%s)", took, hold)
	}
	if !strings.Contains(log.String(), "waiting for a lock another origin holds") || !strings.Contains(log.String(), "0001_t.sql") {
		t.Errorf("the wait was not logged:\n%s", log)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM test_migrations").Scan(&n); err != nil || n != 1 {
		t.Errorf("recorded migrations: %d, %v", n, err)
	}
}
