package pgmeter_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/metertest"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
)

// baseDSN is the database the tests run in, each in a schema of its own;
// without it they skip.
func baseDSN(t *testing.T) string {
	dsn := os.Getenv("LECTERN_TEST_PG")
	if dsn == "" {
		t.Skip("LECTERN_TEST_PG not set: PostgreSQL meter suite skipped")
	}
	return dsn
}

// newSchema creates a fresh schema, dropped when t ends, and returns a
// DSN whose search_path selects it.
func newSchema(t *testing.T, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to LECTERN_TEST_PG: %v", err)
	}
	defer conn.Close(ctx)
	schema := "meter_test_" + strings.ToLower(rand.Text()[:12])
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
	return withSearchPath(base, schema)
}

func withSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return fmt.Sprintf("%s search_path=%s", dsn, schema)
}

func openStore(t *testing.T, dsn string, opts pgmeter.Options) meter.Store {
	t.Helper()
	s, err := pgmeter.New(t.Context(), dsn, opts)
	if err != nil {
		t.Fatalf("open meter store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// opener returns the suite's open: one schema per test, created on the
// test's first call and reopened on later ones.
func opener(opts pgmeter.Options) func(t *testing.T) meter.Store {
	var dsns sync.Map // *testing.T → DSN
	return func(t *testing.T) meter.Store {
		base := baseDSN(t)
		d, ok := dsns.Load(t)
		if !ok {
			d, _ = dsns.LoadOrStore(t, newSchema(t, base))
		}
		return openStore(t, d.(string), opts)
	}
}

func TestMeter(t *testing.T) {
	baseDSN(t)
	metertest.Run(t, metertest.Shared, opener(pgmeter.Options{}))
}

// The baseline tools/meterbench measures against is a correct store too,
// and its many connections contend on row locks as two origins would.
func TestMeterNoGroupCommit(t *testing.T) {
	baseDSN(t)
	metertest.Run(t, metertest.Shared, opener(pgmeter.Options{NoGroupCommit: true, MaxConns: 16}))
}

// dsnEnv names the database the crash test's child serves.
const dsnEnv = "LECTERN_METER_TEST_DSN"

func TestCrash(t *testing.T) {
	dsn := newSchema(t, baseDSN(t))
	metertest.Crash(t, "TestHelperProcess", []string{dsnEnv + "=" + dsn}, func(t *testing.T) meter.Store {
		return openStore(t, dsn, pgmeter.Options{})
	})
}

// TestHelperProcess is the crash test's child: it serves a store until
// TestCrash kills it. In any other run it does nothing.
func TestHelperProcess(t *testing.T) {
	if !metertest.IsChild() {
		return
	}
	s, err := pgmeter.New(context.Background(), os.Getenv(dsnEnv), pgmeter.Options{})
	if err != nil {
		t.Fatalf("open meter store: %v", err)
	}
	metertest.Serve(s)
}
