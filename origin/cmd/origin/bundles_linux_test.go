package main

import (
	"errors"
	"github.com/lectern-api/lectern/internal/tmpfstest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fillVolume writes path until its volume is full, then gives back
// leave bytes of it.
func fillVolume(t *testing.T, path string, leave int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var n int64
	for {
		w, err := f.Write(chunk)
		n += int64(w)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	if err := f.Truncate(max(n-leave, 0)); err != nil {
		t.Fatal(err)
	}
}

// issue #33, point 4: a full volume under the bundles. Downloads answer
// 503 with Retry-After in the error body, never 500, each logged once
// with its cause; lesson reads keep answering 200; and once space is
// back the same downloads answer 200 with nothing done by hand. On a
// volume of their own the bundles meet ENOSPC (no reserve); beside the
// SQLite database (the default layout) the default reserve refuses them
// first, so the database keeps room to write its meters.
func TestBundleVolumeFull(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: fills a tmpfs under a real origin")
	}
	for _, tc := range []struct {
		name       string
		size       string
		beside     bool   // the database on the bundles' volume, the bundles beside it
		reserve    string // LECTERN_BUNDLE_RESERVE_MB
		wantReason string // of lectern_bundles_refusals_total
	}{
		{name: "own volume", size: "1m", reserve: "0", wantReason: "full"},
		{name: "beside the database", size: "16m", beside: true, wantReason: "reserve"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeCorpus(t, filepath.Join(dir, "corpus"))
			vol := tmpfstest.Mount(t, tc.size)
			over := map[string]string{"LECTERN_BUNDLE_DIR": filepath.Join(vol, "bundles"), "LECTERN_BUNDLE_RESERVE_MB": tc.reserve}
			if tc.beside {
				over["LECTERN_DB"], over["LECTERN_BUNDLE_DIR"] = filepath.Join(vol, "lectern.db"), "" // bundles beside it
			}
			s := bootStack(t, testEnv(dir, over), nil)
			defer s.Close()
			if got := s.Bundles().Dir(); !strings.HasPrefix(got, vol) {
				t.Fatalf("the bundles are in %s, want them on the small volume %s", got, vol)
			}
			paths, readTok := exportLinks(t, s, 3)
			lesson := "/v1/lessons/" + s.Content().Lessons[0].ID

			filler := filepath.Join(vol, "filler")
			fillVolume(t, filler, s.Bundles().Reserve()/2) // below the reserve, or (none) full
			for i := 0; i < 6; i++ {
				wantDownload(t, s.get("GET", paths[i%len(paths)], ""), 503)
				s.expect(s.get("GET", lesson, readTok), 200, "")
			}
			if st := s.Bundles().Stats(); st.Files != 0 {
				t.Errorf("the store holds %d bundles on a full volume", st.Files)
			}
			if got := bundleMetric(t, s, `lectern_bundles_refusals_total{reason="`+tc.wantReason+`"}`); got != "6" {
				t.Errorf("refusals for the %s: got %s, want 6", tc.wantReason, got)
			}
			if logged := strings.Count(s.out.String(), "no room to keep it"); logged != 6 {
				t.Errorf("got %d log lines of the 503s' cause, want 6:\n%s", logged, s.out)
			}
			if strings.Contains(s.out.String(), `"msg":"internal error"`) {
				t.Errorf("a 500 was logged:\n%s", s.out)
			}

			os.Remove(filler) // space back
			for _, p := range paths {
				wantDownload(t, s.get("GET", p, ""), 200)
			}
			s.expect(s.get("GET", lesson, readTok), 200, "")
			if st := s.Bundles().Stats(); st.Files != len(paths) {
				t.Errorf("space back: the store holds %d bundles, want %d", st.Files, len(paths))
			}
		})
	}
}
