package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fetch resumes what a part file holds with Range and If-Range, starts
// again when the bytes changed or the part is longer than the file, and
// takes a 416 for the whole file as done.
func TestFetchResume(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789"), 5000)
	tag := `"v1"`
	var ranges atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Range") != "" {
			ranges.Add(1)
		}
		w.Header().Set("ETag", tag)
		http.ServeContent(w, r, "b.zip", time.Time{}, bytes.NewReader(content))
	}))
	defer srv.Close()
	part := filepath.Join(t.TempDir(), "b.zip")
	ctx := context.Background()
	check := func(what string) {
		t.Helper()
		got, err := os.ReadFile(part)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("%s: %d bytes, want %d (%v)", what, len(got), len(content), err)
		}
	}

	// A whole download, then a resume of its first third.
	etag, err := fetch(ctx, srv.Client(), srv.URL, part, "", nil, nil)
	if err != nil || etag != tag {
		t.Fatalf("fetch: %q %v", etag, err)
	}
	check("whole")
	os.Truncate(part, int64(len(content)/3))
	var from int64 = -1
	if _, err := fetch(ctx, srv.Client(), srv.URL, part, tag, func(have, total int64, _ string) error { from = have; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	check("resumed")
	if from != int64(len(content)/3) || ranges.Load() != 1 {
		t.Errorf("resumed from %d with %d range requests", from, ranges.Load())
	}

	// A stale validator: the server sends the whole file.
	os.Truncate(part, 100)
	if _, err := fetch(ctx, srv.Client(), srv.URL, part, `"v0"`, nil, nil); err != nil {
		t.Fatal(err)
	}
	check("stale If-Range")

	// Whole already: 416 for the range past the end, taken as done.
	if _, err := fetch(ctx, srv.Client(), srv.URL, part, tag, nil, nil); err != nil {
		t.Fatal(err)
	}
	check("416")

	// Longer than the file: emptied, and downloaded again.
	os.WriteFile(part, append(append([]byte(nil), content...), "extra"...), 0o644)
	if _, err := fetch(ctx, srv.Client(), srv.URL, part, tag, nil, nil); err != nil {
		t.Fatal(err)
	}
	check("longer")
}

// A link the server no longer serves is errLinkGone; a 429 with a short
// Retry-After is waited out.
func TestFetchRefusals(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/gone"):
			w.WriteHeader(404)
			w.Write([]byte(`{"error":{"code":"NOT_FOUND","message":"This link has expired","requestId":"r"}}`))
		case n.Add(1) == 1:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			w.Write([]byte(`{"error":{"code":"RATE_LIMITED","message":"m","requestId":"r"}}`))
		default:
			w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	if _, err := fetch(context.Background(), srv.Client(), srv.URL+"/gone", filepath.Join(dir, "a"), "", nil, nil); err == nil || !strings.Contains(err.Error(), "no longer served") {
		t.Errorf("gone: %v", err)
	}
	if _, err := fetch(context.Background(), srv.Client(), srv.URL+"/x", filepath.Join(dir, "b"), "", nil, nil); err != nil || n.Load() != 2 {
		t.Errorf("429 then 200: %v after %d requests", err, n.Load())
	}
}

func TestValidLocation(t *testing.T) {
	for loc, want := range map[string]bool{
		"media/high/algebra/1/c1.mp3": true,
		"media/x":                     true,
		".lectern/state.json":         false,
		"high/algebra/x":              false,
		"media/../.lectern/state":     false,
		"media/.hidden":               false,
		"media//x":                    false,
		"/media/x":                    false,
		`media/a\b`:                   false,
		"media/":                      false,
	} {
		if got := validLocation(loc); got != want {
			t.Errorf("validLocation(%q) = %v, want %v", loc, got, want)
		}
	}
	for slug, want := range map[string]bool{"algebra": true, "world-history": true, "a1": true, "": false, "../x": false, "-a": false, "A": false} {
		if got := validSlug(slug); got != want {
			t.Errorf("validSlug(%q) = %v, want %v", slug, got, want)
		}
	}
}
