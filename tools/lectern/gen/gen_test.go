package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// apiDir is the client package, from this one.
const apiDir = "../api"

// TestClientUpToDate regenerates the client from the description as the
// origin serves it and fails when the committed client.gen.go differs:
// the file is the generator's, never edited by hand, and a change to the
// route table or to origin/openapi shows here until it is regenerated.
func TestClientUpToDate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	desc, err := description(tmp)
	if err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(tmp, clientFile)
	if err := generate(ctx, apiDir, desc, got, tmp); err != nil {
		t.Fatalf("%v\n(the module cache needs go.mod's modules: go mod download)", err)
	}
	want, err := os.ReadFile(filepath.Join(apiDir, clientFile))
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, want) {
		t.Errorf("tools/lectern/api/%s differs from what the served description generates (%s); regenerate it:\n\t%s",
			clientFile, firstDiff(want, fresh), regenerate)
	}
}

// firstDiff names the first line where got differs from want.
func firstDiff(want, got []byte) string {
	w, g := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	for i := range min(len(w), len(g)) {
		if !bytes.Equal(w[i], g[i]) {
			return fmt.Sprintf("first at line %d: committed %.120q, generated %.120q", i+1, w[i], g[i])
		}
	}
	return fmt.Sprintf("committed %d lines, generated %d", len(w), len(g))
}
