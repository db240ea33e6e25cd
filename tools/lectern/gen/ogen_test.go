package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOgen runs a second generator, ogen (pinned in testdata/ogen/go.mod),
// over the description unchanged and vets the package it writes, when
// LECTERN_OGEN=1: the description is meant for any Go generator, not the
// one the lectern command uses. It is not part of make test: its output
// is some 230,000 lines (vetting it takes seconds, building it most of a
// minute on two cores) and its runtime would otherwise enter go.mod;
// .ci/run runs it (docs/decisions/openapi-description-go-clients.md).
// Skipped when the modules are not in the module cache; nothing is
// downloaded.
func TestOgen(t *testing.T) {
	if os.Getenv("LECTERN_OGEN") != "1" {
		t.Skip("ogen check skipped: set LECTERN_OGEN=1 (after go -C tools/lectern/gen/testdata/ogen mod download)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join("testdata", "ogen", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	desc, err := description(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "openapi.json"), desc, 0o644); err != nil {
		t.Fatal(err)
	}
	goCmd := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, goCommand(), args...)
		cmd.Dir = tmp
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=-mod=readonly")
		return cmd.CombinedOutput()
	}
	out, err := goCmd("tool", "ogen", "-package", "client", "-target", "client", "-clean", "openapi.json")
	if err != nil {
		if bytes.Contains(out, []byte("GOPROXY=off")) {
			t.Skipf("ogen check skipped: its modules are not in the module cache (go -C tools/lectern/gen/testdata/ogen mod download):\n%s", out)
		}
		t.Fatalf("ogen rejects the description: %v\n%s", err, out)
	}
	t.Logf("ogen:\n%s", summarise(out))
	if out, err := goCmd("vet", "./client"); err != nil {
		t.Fatalf("ogen's client does not compile: %v\n%s", err, out)
	}
}

// summarise is ogen's log with each repeated message once, and a count.
func summarise(log []byte) string {
	var order []string
	n := map[string]int{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(log)), "\n") {
		// A message is its text before the structured fields, which name a place.
		msg, _, _ := strings.Cut(line, "\t{")
		if n[msg] == 0 {
			order = append(order, msg)
		}
		n[msg]++
	}
	var b strings.Builder
	for _, msg := range order {
		b.WriteString(msg)
		if n[msg] > 1 {
			b.WriteString(" (×" + strconv.Itoa(n[msg]) + ")")
		}
		b.WriteByte('\n')
	}
	return b.String()
}
