package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/internal/private"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/origin/wiring"
)

// TestWalkThrough (issue #18, point 2): with LECTERN_ADMIN_TOKEN unset,
// make run's admin token is made once into var/admin-token (0600) and is
// the same at the next start, whose walk-through, on a database that has
// the demo organisation, creates a client with adminctl rather than
// printing a curl of an unset $TOKEN. Every variable either walk-through
// uses, it sets first. tools/stack's TestWalkThroughRuns runs the second
// one in a shell.
func TestWalkThrough(t *testing.T) {
	corpusDir := filepath.Join(t.TempDir(), "corpus")
	writeCorpus(t, corpusDir)
	t.Chdir(t.TempDir())
	env := testEnv(t.TempDir(), map[string]string{"LECTERN_ADMIN_TOKEN": "", "LECTERN_CORPUS": corpusDir,
		"LECTERN_DB": "var/lectern.db"})

	first := bootStack(t, env, nil)
	token := first.AdminToken
	first.Close()
	if len(token) < 32 {
		t.Fatalf("admin token %q", token)
	}
	if got := mode(t, private.AdminTokenFile); got != 0o600 {
		t.Errorf("%s is %v, want -rw-------", private.AdminTokenFile, got)
	}
	if b, _ := os.ReadFile(private.AdminTokenFile); strings.TrimSpace(string(b)) != token {
		t.Errorf("%s holds %q, the stack used %q", private.AdminTokenFile, b, token)
	}
	out := first.out.String()
	if !strings.Contains(out, "admin token        "+token) || !strings.Contains(out, "client secret") {
		t.Errorf("the first start's walk-through lacks the admin token or the client:\n%s", out)
	}
	checkWalk(t, "first start", out)

	second := bootStack(t, env, nil)
	defer second.Close()
	if second.AdminToken != token {
		t.Errorf("admin token %q after a restart, was %q", second.AdminToken, token)
	}
	if code, _ := second.admin("GET", "/admin/v1/orgs/demo", ""); code != 200 {
		t.Errorf("the kept token: GET the demo org: %d", code)
	}
	out = second.out.String()
	if !strings.Contains(out, "admin token        "+token) {
		t.Errorf("the second start does not print the kept token:\n%s", out)
	}
	if !strings.Contains(out, "adminctl -addr "+second.AdminURL+" client create demo -scopes content.read,content.export,media.download") ||
		!strings.Contains(out, "$(cat "+private.AdminTokenFile+")") {
		t.Errorf("the walk-through on an existing database does not create a client with adminctl:\n%s", out)
	}
	checkWalk(t, "second start", out)

	// A configured token is used as it is and not written.
	os.Remove(private.AdminTokenFile)
	third := bootStack(t, testEnv(t.TempDir(), map[string]string{"LECTERN_CORPUS": corpusDir}), nil)
	third.Close()
	if third.AdminToken != "admin-token-for-tests" || strings.Contains(third.out.String(), "admin-token-for-tests") {
		t.Errorf("configured token: %q used, or printed:\n%s", third.AdminToken, third.out)
	}
	if _, err := os.Stat(private.AdminTokenFile); !os.IsNotExist(err) {
		t.Errorf("a configured token was kept in %s (%v)", private.AdminTokenFile, err)
	}
}

// checkWalk fails when the walk-through in out ("Try it" on) uses a shell
// variable it has not set on an earlier line or earlier on the same line.
func checkWalk(t *testing.T, when, out string) {
	t.Helper()
	i := strings.Index(out, "Try it")
	if i < 0 {
		t.Fatalf("%s: no walk-through:\n%s", when, out)
	}
	set := map[string]bool{}
	use := regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
	assign := regexp.MustCompile(`(?:^|[\s;(])([A-Za-z_][A-Za-z0-9_]*)=`)
	for _, line := range strings.Split(out[i:], "\n")[1:] {
		// A use on the right of an assignment comes before it: $(...)
		// runs first. Uses are checked, then the line's assignments made.
		for _, m := range use.FindAllStringSubmatch(line, -1) {
			if !set[m[1]] && !assignedBefore(line, m[1]) {
				t.Errorf("%s: the walk-through uses $%s, which it never sets:\n%s", when, m[1], out[i:])
			}
		}
		for _, m := range assign.FindAllStringSubmatch(line, -1) {
			set[m[1]] = true
		}
	}
}

// assignedBefore reports whether line sets name before it uses it, as in
// `LECTERN_ADMIN_TOKEN=$(cat f) cmd ... "$LECTERN_ADMIN_TOKEN"`.
func assignedBefore(line, name string) bool {
	a, u := strings.Index(line, name+"="), strings.Index(line, "$"+name)
	return a >= 0 && a < u
}

// TestProductionStartCreatesNothing (issue #28, point 5): without
// LECTERN_DEMO (make run sets it), an origin on a new database creates no
// organisation and no client, and prints no secret: the admin token it
// generated is named by its file (0600), not shown.
func TestProductionStartCreatesNothing(t *testing.T) {
	corpusDir := filepath.Join(t.TempDir(), "corpus")
	writeCorpus(t, corpusDir)
	t.Chdir(t.TempDir())
	st := bootStack(t, testEnv(t.TempDir(), map[string]string{"LECTERN_ADMIN_TOKEN": "", "LECTERN_DEMO": "",
		"LECTERN_CORPUS": corpusDir, "LECTERN_DB": "var/lectern.db"}), nil)
	defer st.Close()
	out := st.out.String()
	if strings.Contains(out, st.AdminToken) || strings.Contains(out, "client secret") || strings.Contains(out, "demo") {
		t.Errorf("a production start printed a secret or the demo:\n%s", out)
	}
	if !strings.Contains(out, "admin token        kept in "+private.AdminTokenFile) || !strings.Contains(out, "API (direct)") {
		t.Errorf("a production start does not name its addresses and the admin token's file:\n%s", out)
	}
	if code, _ := st.admin("GET", "/admin/v1/orgs/"+wiring.DemoOrg, ""); code != 404 {
		t.Errorf("GET the demo organisation after a production start: %d, want 404", code)
	}
	if _, err := st.Store().GetOrg(t.Context(), wiring.DemoOrg); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the demo organisation: %v, want none", err)
	}
}
