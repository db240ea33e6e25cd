package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/logbuftest"
)

// TestFileModes (issue #13, point 2): make run's first start, in a fresh
// working directory with the default var/ paths, leaves var/ 0700 and
// every file in it 0600: the database, its WAL and shared-memory index,
// the lock files and the secret. A second start tightens what an older
// version (or an operator) left open to others, and logs it.
func TestFileModes(t *testing.T) {
	corpusDir := filepath.Join(t.TempDir(), "corpus")
	writeCorpus(t, corpusDir)
	t.Chdir(t.TempDir())
	env := map[string]string{
		"LECTERN_ORIGIN_ADDR": "127.0.0.1:0", "LECTERN_IDP_ADDR": "127.0.0.1:0", "LECTERN_ADMIN_ADDR": "127.0.0.1:0",
		"LECTERN_ADMIN_TOKEN": "admin-token-for-tests", "LECTERN_CORPUS": corpusDir, "LECTERN_DEMO": "1",
	} // LECTERN_DB and LECTERN_SECRET unset: var/lectern.db and var/secret
	startStack := func() (*testStack, *logbuftest.Buffer) {
		t.Helper()
		st := bootStack(t, func(k string) string { return env[k] }, nil)
		return st, st.out
	}
	files := []string{"var/lectern.db", "var/lectern.db-wal", "var/lectern.db-shm", "var/lectern.db.lock",
		"var/lectern.db.meters.lock", "var/secret"}
	check := func(when string) {
		t.Helper()
		if got := mode(t, "var"); got != 0o700 {
			t.Errorf("%s: var/ is %v, want drwx------", when, got)
		}
		for _, f := range files {
			if got := mode(t, f); got != 0o600 {
				t.Errorf("%s: %s is %v, want -rw-------", when, f, got)
			}
		}
	}

	s, out := startStack()
	// The demo organisation is written on a new database, so the WAL is
	// there; a token and a request use the signing key and the meters.
	field := func(label string) string {
		i := strings.Index(out.String(), label)
		if i < 0 {
			t.Fatalf("output lacks %q:\n%s", label, out)
		}
		return strings.Fields(out.String()[i+len(label):])[0]
	}
	tok := s.token(field("client id"), field("client secret"), "content.read")
	if r := s.get("GET", "/v1/tiers", tok); r.status != 200 {
		t.Fatalf("demo token: %d %s", r.status, r.body)
	}
	check("first start")
	s.Close()

	// An older version's modes: everything readable by others.
	os.Chmod("var", 0o755)
	for _, f := range files {
		os.Chmod(f, 0o644)
	}
	s, out = startStack()
	defer s.Close()
	check("second start over loose modes")
	if n := strings.Count(out.String(), "restricted to its owner"); n < 3 {
		t.Errorf("%d tightenings logged, want one each for var/, var/secret and the database:\n%s", n, out)
	}
}

// mode is path's permission bits (with the directory bit cleared).
func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}
