package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/link"
)

// The bundle settings: LECTERN_BUNDLE_RESERVE_MB and the default
// directory (beside the SQLite database; with PostgreSQL one an origin,
// named by its port when it listens: wiring.BundleDirOf).
func TestBundleSettings(t *testing.T) {
	for _, tc := range []struct {
		name, db, dir, reserve string
		wantDir                string
		wantReserve            int64
		wantErr                bool
	}{
		{name: "defaults", db: "var/lectern.db", wantDir: "var/bundles"},
		{name: "postgres", db: "postgres://x@db/lectern", wantDir: ""},
		{name: "set", db: "var/lectern.db", dir: "/srv/bundles", reserve: "64", wantDir: "/srv/bundles", wantReserve: 64 << 20},
		{name: "none", db: "var/lectern.db", reserve: "0", wantDir: "var/bundles", wantReserve: -1},
		{name: "negative", db: "var/lectern.db", reserve: "-1", wantErr: true},
		{name: "not a number", db: "var/lectern.db", reserve: "10%", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"LECTERN_DB": tc.db, "LECTERN_BUNDLE_DIR": tc.dir, "LECTERN_BUNDLE_RESERVE_MB": tc.reserve,
				"LECTERN_SECRET": "a-test-secret-of-at-least-32-characters", "LECTERN_ISSUER": "https://auth.example.org"}
			cfg, err := parseConfig(nil, func(k string) string { return env[k] })
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), "LECTERN_BUNDLE_RESERVE_MB") {
					t.Fatalf("got %v, want an error naming LECTERN_BUNDLE_RESERVE_MB", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BundleDir != tc.wantDir || cfg.bundleReserve != tc.wantReserve {
				t.Errorf("got directory %q, reserve %d; want %q, %d", cfg.BundleDir, cfg.bundleReserve, tc.wantDir, tc.wantReserve)
			}
		})
	}
}

// exportLinks exports n subjects of the stack's corpus as zip links for
// a new organisation, and returns the links' paths and a content.read
// token of the organisation.
func exportLinks(t *testing.T, s *testStack, n int) (paths []string, readTok string) {
	t.Helper()
	id, sec := s.org(`{"orgId":"bundler","contentGrants":`+allTiers+`}`, "content.export", "content.read")
	tok := s.token(id, sec, "content.export")
	for _, sub := range s.Content().Subjects[:n] {
		r := s.get("GET", "/v1/exports/subjects/"+sub.Slug+"?tier="+sub.Tier, tok)
		var res struct{ URL string }
		if r.status != 200 || json.Unmarshal(r.body, &res) != nil || res.URL == "" {
			t.Fatalf("export of %s: %d %s", sub.Slug, r.status, r.body)
		}
		paths = append(paths, res.URL[strings.Index(res.URL, link.Prefix):])
	}
	return paths, s.token(id, sec, "content.read")
}

// issue #33, point 4: the bundle directory removed under downloads (it
// was a 500 on every download until someone made it again). The store
// makes it again at the next build: every download answers 200, through
// a real listener, and the directory is back, private and locked.
func TestBundleDirRemovedUnderDownloads(t *testing.T) {
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	s := bootStack(t, testEnv(dir, nil), nil)
	defer s.Close()
	bundleDir := filepath.Join(dir, "bundles") // testEnv's LECTERN_BUNDLE_DIR
	paths, _ := exportLinks(t, s, 4)

	statuses := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 { // at most 8 downloads of one organisation at once
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ { // 80 downloads in all: within the burst of 100
				r := s.get("GET", paths[(w+i)%len(paths)], "")
				mu.Lock()
				statuses[r.status]++
				mu.Unlock()
				if r.status != 200 {
					t.Errorf("download: got %d %s, want 200: %s", r.status, r.err.Code, r.body)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	go func() {
		for range 5 {
			select {
			case <-stop:
				return
			case <-time.After(60 * time.Millisecond):
			}
			os.RemoveAll(bundleDir)
		}
	}()
	wg.Wait()
	close(stop)
	t.Logf("statuses %v, store %+v", statuses, s.Bundles().Stats())
	if st := s.Bundles().Stats(); st.MissingDir == 0 {
		t.Errorf("the store saw its directory missing %d times, want at least once: stats %+v", st.MissingDir, st)
	}
	if r := s.get("GET", paths[0], ""); r.status != 200 {
		t.Fatalf("a download after: got %d, want 200", r.status)
	}
	if info, err := os.Stat(bundleDir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("the directory made again: %v (%v), want 0700", info, err)
	}
	if strings.Contains(s.out.String(), `"level":"ERROR"`) {
		t.Errorf("errors logged:\n%s", s.out)
	}
}

// wantDownload checks a download's answer: 200, or 503 with Retry-After
// in the error body; never anything else.
func wantDownload(t *testing.T, r response, want int) {
	t.Helper()
	switch {
	case r.status != want:
		t.Fatalf("download: got %d %s, want %d: %s", r.status, r.err.Code, want, r.body)
	case want == http.StatusServiceUnavailable && (r.header.Get("Retry-After") == "" || r.err.Code != "INTERNAL" ||
		!strings.Contains(string(r.body), `"retryAfterSeconds":`)):
		t.Errorf("503: Retry-After %q, body %s; want Retry-After and the error body", r.header.Get("Retry-After"), r.body)
	}
}

// bundleMetric is the value of a bundle series on the admin API's
// /metrics, as its exposition writes it after the name and labels.
func bundleMetric(t *testing.T, s *testStack, series string) string {
	t.Helper()
	for _, line := range strings.Split(scrape(t, s), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	t.Fatalf("no series %s in /metrics", series)
	return ""
}
