package main

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestSQLiteBackupRestores (issue #18, point 4; docs/operations.md,
// "Backups"): a SQLite backup taken with VACUUM INTO while the origin
// serves holds the organisations, the clients, the identity provider's
// signing keys and the meters (one database file holds the store and the
// meters) as they were when it was taken. An origin started on the copy,
// with the same secret and issuer, accepts a token minted before the
// backup and one minted after the restore from the same client, shows the
// meters of the backup's moment, and bills the next request on top.
func TestSQLiteBackupRestores(t *testing.T) {
	corpusDir := filepath.Join(t.TempDir(), "corpus")
	writeCorpus(t, corpusDir)
	env := func(dir string) func(string) string {
		return testEnv(dir, map[string]string{"LECTERN_CORPUS": corpusDir, "LECTERN_ISSUER": "https://auth.lectern.test"})
	}
	liveDir := t.TempDir()
	live := bootStack(t, env(liveDir), nil)
	defer live.Close()
	id, secret := live.org(`{"orgId":"acme","orgName":"Acme","contentGrants":`+allTiers+`}`, "content.read")
	tok := live.token(id, secret, "content.read")
	for range 3 {
		if r := live.get("GET", "/v1/tiers", tok); r.status != 200 {
			t.Fatalf("tiers: %d %s", r.status, r.body)
		}
	}
	before := live.meters("acme")

	// The backup, from another connection while the origin serves.
	db, err := sql.Open("sqlite", filepath.Join(liveDir, "lectern.db"))
	if err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "lectern.db")
	if _, err := db.Exec(`VACUUM INTO ?`, backup); err != nil {
		t.Fatalf("VACUUM INTO: %v", err)
	}
	db.Close()
	// Billed after the backup: not in it.
	live.get("GET", "/v1/tiers", tok)
	if n := live.calls("acme"); n != before["month"].(map[string]any)["calls"].(float64)+1 {
		t.Fatalf("the live origin billed %v calls", n)
	}
	live.Close()

	restoredEnv := env(t.TempDir())
	restored := bootStack(t, func(k string) string {
		if k == "LECTERN_DB" {
			return backup
		}
		return restoredEnv(k)
	}, nil)
	defer restored.Close()
	// The month's meters (the hour's would move at an hour boundary).
	if got := restored.meters("acme")["month"]; string(mustJSON(got)) != string(mustJSON(before["month"])) {
		t.Errorf("restored month meters %v, want the backup's %v", got, before["month"])
	}
	if r := restored.get("GET", "/v1/tiers", tok); r.status != 200 {
		t.Errorf("a token minted before the backup, on the restored origin: %d %s", r.status, r.body)
	}
	if r := restored.get("GET", "/v1/tiers", restored.token(id, secret, "content.read")); r.status != 200 {
		t.Errorf("a token of the restored client: %d %s", r.status, r.body)
	}
	if n, want := restored.calls("acme"), before["month"].(map[string]any)["calls"].(float64)+2; n != want {
		t.Errorf("the restored origin's calls meter %v after two requests, want %v", n, want)
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
