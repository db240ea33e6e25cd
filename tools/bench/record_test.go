package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFigures(t *testing.T) {
	for in, want := range map[string][]float64{
		"8,653 req/s":              {8653},
		"p50 1.58 ms, p99 11.6 ms": {1.58, 11.6},
		"574,301 bytes":            {574301},
		"":                         nil,
		"h2 12 x3, ratio 0.5×":     {12, 0.5},
		"-3.5 µs":                  {-3.5},
	} {
		if got := figures(in); !slices.Equal(got, want) {
			t.Errorf("figures(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestRecordRoundTrip: a run's record is written under its start time and
// commit, the newest is read back, and each row is compared with the same
// row of the previous run.
func TestRecordRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if prev, _ := latest(dir); prev != nil {
		t.Fatalf("latest of an empty directory: %+v", prev)
	}
	t0 := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
	older := newRecord(context.Background(), dir, []string{"-only", "content"}, t0)
	older.add([]row{{id: "a", what: "bare handler", result: "10,000 req/s"}, {id: "k", what: "  zip export", result: "20.00 ms"}})
	if _, err := older.write(dir); err != nil {
		t.Fatal(err)
	}
	newer := newRecord(context.Background(), dir, nil, t0.Add(time.Hour))
	newer.Commit = "abc123"
	newer.add([]row{{id: "a", what: "bare handler", result: "9,000 req/s"}, {id: "k", what: "zip export", result: "15.00 ms"}, {id: "l", what: "new row", result: "1 ms"}})
	path, err := newer.write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "20261126T160000Z-abc123.json" {
		t.Errorf("written as %s", path)
	}
	prev, prevPath := latest(dir)
	if prevPath != path || prev.Commit != "abc123" || len(prev.Rows) != 3 || prev.Machine.GOMAXPROCS == 0 {
		t.Fatalf("latest: %s %+v", prevPath, prev)
	}
	for i, want := range []string{"-10.0% (was 10,000 req/s)", "-25.0% (was 20.00 ms)", "new"} {
		if got := change(older, newer.Rows[i]); got != want {
			t.Errorf("change of %q: %q, want %q", newer.Rows[i].What, got, want)
		}
	}
	if got := change(nil, newer.Rows[0]); got != "" {
		t.Errorf("change without a previous run: %q", got)
	}
	if !strings.HasPrefix(older.Machine.Go, "go") {
		t.Errorf("machine: %+v", older.Machine)
	}
}
