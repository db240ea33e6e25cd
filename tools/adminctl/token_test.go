package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeptToken: without -token and LECTERN_ADMIN_TOKEN, adminctl uses the
// token the origin keeps in var/admin-token (make run's), read in the
// working directory; without that file it says what to set.
func TestKeptToken(t *testing.T) {
	env := serve(t)
	noToken := func(k string) string {
		if k == "LECTERN_ADMIN_TOKEN" {
			return ""
		}
		return env(k)
	}
	t.Chdir(t.TempDir())
	if _, _, err := adminctl(t, noToken, "health"); err == nil || !strings.Contains(err.Error(), "no admin token") ||
		!strings.Contains(err.Error(), adminTokenFile) {
		t.Errorf("no token and no %s: %v", adminTokenFile, err)
	}
	if err := os.MkdirAll("var", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.FromSlash(adminTokenFile), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, err := adminctl(t, noToken, "health"); err != nil {
		t.Errorf("with %s: %v (%v)", adminTokenFile, err, out)
	}
	// LECTERN_ADMIN_TOKEN, when set, is used rather than the file.
	if _, _, err := adminctl(t, func(k string) string {
		if k == "LECTERN_ADMIN_TOKEN" {
			return "wrong"
		}
		return env(k)
	}, "health"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("LECTERN_ADMIN_TOKEN=wrong beside the file: %v", err)
	}
}
