package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A reader that resolved a subject's link before a run swapped it keeps
// reading a whole copy: the previous copy stays for -keep-previous (5m by
// default), runs within the grace keep it, the first run after it
// removes it, billing nothing; -keep-previous 0 removes it at once
// (#35, point 7).
func TestSyncKeepsThePreviousCopy(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	if code, _ := runSyncCmd(t, s, dir); code != 0 {
		t.Fatal("first sync")
	}
	subjects := s.subjects()
	a := subjects[0]
	tier, slug, _ := strings.Cut(a, "/")
	// The reader resolves the link, as docs/integrating.md says.
	resolved, err := filepath.EvalSymlinks(filepath.Join(dir, tier, slug))
	if err != nil {
		t.Fatal(err)
	}
	s.rebuild(tier, slug)
	if code, sum := runSyncCmd(t, s, dir); code != 0 || sum.Subjects.Fetched != 1 {
		t.Fatalf("sync after the rebuild: exit %d, %+v", code, sum)
	}
	readWhole := func(what string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(resolved, "manifest.json"))
		if err != nil {
			t.Fatalf("%s: the reader's copy: %v", what, err)
		}
		var m bundleManifest
		json.Unmarshal(b, &m)
		for _, f := range m.Files {
			if st, err := os.Stat(filepath.Join(resolved, f.Name)); err != nil || st.Size() != f.Bytes {
				t.Fatalf("%s: the reader's copy of %s: %v", what, f.Name, err)
			}
		}
	}
	readWhole("after the swap")
	st := loadStateFile(t, dir)
	if len(st.Retired) != 1 || st.Retired[0].Object != filepath.Base(resolved) || time.Until(st.Retired[0].Until) < 4*time.Minute {
		t.Fatalf("retired: %+v", st.Retired)
	}
	// A run within the grace keeps it.
	if code, _ := runSyncCmd(t, s, dir); code != 0 {
		t.Fatal("sync within the grace")
	}
	readWhole("a run within the grace")
	checkMirror(t, dir, subjects)

	// Its grace passed: the next run, even one with nothing to do,
	// removes it.
	st = loadStateFile(t, dir)
	st.Retired[0].Until = time.Now().Add(-time.Second)
	raw, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, metaDir, "state.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	u := s.usage()
	if code, _ := runSyncCmd(t, s, dir); code != 0 {
		t.Fatal("sync after the grace")
	}
	if _, err := os.Stat(resolved); !os.IsNotExist(err) {
		t.Errorf("the previous copy outlived its grace: %v", err)
	}
	if st := loadStateFile(t, dir); len(st.Retired) != 0 {
		t.Errorf("retired after the grace: %+v", st.Retired)
	}
	if after := s.usage(); after.Counters != u.Counters {
		t.Errorf("removing a previous copy billed: %v → %v", u.Counters, after.Counters)
	}

	// -keep-previous 0: at once (a repair swaps the link too).
	resolved, _ = filepath.EvalSymlinks(filepath.Join(dir, tier, slug))
	if err := os.WriteFile(filepath.Join(resolved, "class-1.json"), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _ := runSyncCmd(t, s, dir, "-keep-previous", "0"); code != 0 {
		t.Fatal("sync -keep-previous 0")
	}
	if _, err := os.Stat(resolved); !os.IsNotExist(err) {
		t.Errorf("-keep-previous 0 kept the previous copy: %v", err)
	}
	if st := loadStateFile(t, dir); len(st.Retired) != 0 {
		t.Errorf("-keep-previous 0: retired %+v", st.Retired)
	}
	checkMirror(t, dir, subjects)
}
