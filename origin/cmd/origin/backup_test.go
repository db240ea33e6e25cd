package main

import (
	"database/sql"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSQLiteBackupRestores (issue #18, point 4; docs/operations.md,
// "Backups and restore"): a SQLite backup taken with VACUUM INTO while the
// origin serves holds the organisations, the clients, the identity
// provider's signing keys and the meters (one database file holds the
// store and the meters) as they were when it was taken (checkRestore).
func TestSQLiteBackupRestores(t *testing.T) {
	corpusDir := filepath.Join(t.TempDir(), "corpus")
	writeCorpus(t, corpusDir)
	liveDir, backup := t.TempDir(), filepath.Join(t.TempDir(), "lectern.db")
	env := testEnv(liveDir, map[string]string{"LECTERN_CORPUS": corpusDir, "LECTERN_ISSUER": "https://auth.lectern.test"})
	restoredEnv := testEnv(t.TempDir(), map[string]string{"LECTERN_CORPUS": corpusDir, "LECTERN_ISSUER": "https://auth.lectern.test",
		"LECTERN_DB": backup})
	checkRestore(t, env, restoredEnv, func() {
		// From another connection, while the origin serves.
		db, err := sql.Open("sqlite", filepath.Join(liveDir, "lectern.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`VACUUM INTO ?`, backup); err != nil {
			t.Fatalf("VACUUM INTO: %v", err)
		}
	}, func() {})
}

// TestPostgresBackupRestores is the same with the documented pg_dump and
// pg_restore: the dump is taken while the origin serves, the schema is
// dropped (the database lost), restored from the dump, and an origin
// started on it. Skipped without LECTERN_TEST_PG or the PostgreSQL client
// programs.
func TestPostgresBackupRestores(t *testing.T) {
	dsn, pool := testPG(t, "the PostgreSQL backup test")
	for _, prog := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("%s not found: the PostgreSQL backup test skipped", prog)
		}
	}
	u, _ := url.Parse(dsn)
	schema := u.Query().Get("search_path")
	server := os.Getenv("LECTERN_TEST_PG") // the database, without the test's search_path
	corpusDir := filepath.Join(t.TempDir(), "corpus")
	writeCorpus(t, corpusDir)
	env := testEnv(t.TempDir(), map[string]string{"LECTERN_CORPUS": corpusDir, "LECTERN_ISSUER": "https://auth.lectern.test",
		"LECTERN_DB": dsn})
	dump := filepath.Join(t.TempDir(), "lectern.dump")
	run := func(name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	checkRestore(t, env, env, func() {
		run("pg_dump", "-Fc", "-n", schema, "-f", dump, "-d", server)
	}, func() {
		if _, err := pool.Exec(t.Context(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Fatal(err)
		}
		run("pg_restore", "--no-owner", "-d", server, dump)
	})
}

// checkRestore starts an origin on env, has it serve and bill an
// organisation, calls backup while it serves, bills once more (not in
// the backup), stops it, calls restore, and starts an origin on
// restoredEnv. That one, with the same secret and issuer, shows the
// month's meters of the backup's moment, accepts a token minted before
// the backup and one minted now from the same client, and bills on top.
func checkRestore(t *testing.T, env, restoredEnv func(string) string, backup, restore func()) {
	t.Helper()
	live := bootStack(t, env, nil)
	defer live.Close()
	id, secret := live.org(`{"orgId":"acme","orgName":"Acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := live.token(id, secret, "content.read")
	for range 3 {
		if r := live.get("GET", "/v1/tiers", tok); r.status != 200 {
			t.Fatalf("tiers: %d %s", r.status, r.body)
		}
	}
	before := live.meters("acme")["month"].(map[string]any)
	calls := before["calls"].(float64)
	backup()
	live.get("GET", "/v1/tiers", tok)
	if n := live.calls("acme"); n != calls+1 {
		t.Fatalf("the live origin billed %v calls, want %v", n, calls+1)
	}
	live.Close()
	restore()

	restored := bootStack(t, restoredEnv, nil)
	defer restored.Close()
	// The month's meters (the hour's would move at an hour boundary).
	if got := restored.meters("acme")["month"]; string(mustJSON(got)) != string(mustJSON(before)) {
		t.Errorf("restored month meters %v, want the backup's %v", got, before)
	}
	if r := restored.get("GET", "/v1/tiers", tok); r.status != 200 {
		t.Errorf("a token minted before the backup, on the restored origin: %d %s", r.status, r.body)
	}
	if r := restored.get("GET", "/v1/tiers", restored.token(id, secret, "content.read")); r.status != 200 {
		t.Errorf("a token of the restored client: %d %s", r.status, r.body)
	}
	if n := restored.calls("acme"); n != calls+2 {
		t.Errorf("the restored origin's calls meter %v after two requests, want %v", n, calls+2)
	}
}

// mustJSON is v as JSON (maps with their keys sorted).
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
