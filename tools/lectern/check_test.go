package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// noNetwork makes every request of the default transport fail the test,
// for the commands that must not use the network.
func noNetwork(t *testing.T) {
	t.Helper()
	old := http.DefaultTransport
	http.DefaultTransport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("a request to %s", r.URL)
		return nil, errors.New("no network in this test")
	})
	t.Cleanup(func() { http.DefaultTransport = old })
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// runSyncErr runs `lectern sync -json args… dir` and returns its exit
// status, its summary and its standard error.
func runSyncErr(t *testing.T, s *testStack, dir string, args ...string) (int, summary, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append(append([]string{"sync", "-json"}, args...), dir), s.env(), &out, &errb)
	var sum summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("summary: %v: %s (stderr %s)", err, out.Bytes(), errb.Bytes())
	}
	return code, sum, errb.String()
}

// objectFile is the path of a file of the subject ref in the mirror's
// object (what the subject's link names).
func objectFile(t *testing.T, dir, ref, name string) string {
	t.Helper()
	h := loadStateFile(t, dir).Subjects[ref]
	if h == nil {
		t.Fatalf("%s not held", ref)
	}
	return filepath.Join(dir, metaDir, "objects", h.Object, name)
}

// sameSizeEdit changes a byte of the file at path, keeping its size and
// its modification time: only a rehash sees it.
func sameSizeEdit(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0x20
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// lectern check verifies the mirror with no network (every request would
// fail the test, and nothing is billed): a clean mirror exits 0; a file
// edited in place (its size and time kept: only a rehash sees it), a file
// removed, a file added and a subject the mirror does not hold are each a
// line, and it exits 1; usage errors exit 2 (#35, point 5).
func TestCheck(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	if code, sum := runSyncCmd(t, s, dir); code != 0 || !sum.Complete {
		t.Fatalf("sync: exit %d, %+v", code, sum)
	}
	subjects := s.subjects()
	u := s.usage()
	noNetwork(t)
	check := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"check"}, args...), s.env(), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := check(dir); code != 0 || out != "" || !strings.Contains(errs, fmt.Sprintf("%d subjects", len(subjects))) {
		t.Fatalf("a clean mirror: exit %d, %q %q", code, out, errs)
	}

	a, b := subjects[0], subjects[1]
	sameSizeEdit(t, objectFile(t, dir, a, "class-1.json"))
	if err := os.Remove(objectFile(t, dir, b, "class-1.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(objectFile(t, dir, b, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	tier, _, _ := strings.Cut(a, "/")
	if err := os.Mkdir(filepath.Join(dir, tier, "stray"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errs := check(dir)
	want := []string{
		a + "/class-1.json: changed (its sha256 is not the manifest's)",
		b + "/class-1.json: missing",
		b + "/notes.txt: extra (not in the manifest)",
		tier + "/stray: extra",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("check's output lacks %q:\n%s", w, out)
		}
	}
	if code != exitDifferences || strings.Count(out, "\n") != len(want) || !strings.Contains(errs, "4 differences") {
		t.Errorf("a damaged mirror: exit %d, want %d; %q %q", code, exitDifferences, out, errs)
	}
	code, out, _ = check("-json", dir)
	var rep checkReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitDifferences || rep.Clean || len(rep.Differences) != len(want) {
		t.Errorf("check -json: exit %d, %v, %+v", code, err, rep)
	}

	for _, args := range [][]string{{}, {dir, dir}, {"-bogus", dir}, {t.TempDir()}} {
		if code, _, errs := check(args...); code != 2 {
			t.Errorf("check %q: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	if code, _, _ := check("-h"); code != 0 {
		t.Errorf("check -h: exit %d", code)
	}
	var help bytes.Buffer
	run(context.Background(), []string{"check", "-h"}, s.env(), &help, &help)
	if !strings.Contains(help.String(), "1 a difference") || !strings.Contains(help.String(), "without the network") {
		t.Errorf("check -h says no exit status:\n%s", help.String())
	}
	if after := s.usage(); after.Counters != u.Counters {
		t.Errorf("check billed: %v → %v", u.Counters, after.Counters)
	}
}

// A sync notices a subject changed locally and repairs it with a new
// export, saying what it bills before it is made; a file only touched is
// rehashed and kept (no export); an edit keeping size and time passes a
// plain run and is repaired by -verify; a state file without the files'
// stamps (an older lectern's) is read and gets them, with no export
// (#35, point 5).
func TestSyncRepairs(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	if code, sum := runSyncCmd(t, s, dir); code != 0 || !sum.Complete {
		t.Fatalf("sync: exit %d, %+v", code, sum)
	}
	subjects := s.subjects()
	a := subjects[0]
	h := loadStateFile(t, dir).Subjects[a]
	if len(h.Stamps) != h.Files || h.Manifest == "" || h.Classes == 0 {
		t.Fatalf("the state records of %s: %d stamps for %d files, manifest %q, %d classes", a, len(h.Stamps), h.Files, h.Manifest, h.Classes)
	}

	// Touched only: rehashed, kept.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(objectFile(t, dir, a, "class-1.json"), later, later); err != nil {
		t.Fatal(err)
	}
	before := s.exports()
	code, sum, errs := runSyncErr(t, s, dir)
	if code != 0 || sum.Subjects.Repaired != 0 || s.exports() != before {
		t.Fatalf("a file touched: exit %d, %d exports, %+v %s", code, s.exports()-before, sum, errs)
	}

	// Changed and removed: a new export of that subject, said first.
	p := objectFile(t, dir, a, "class-1.json")
	if err := os.WriteFile(p, []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(objectFile(t, dir, a, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	per := s.exportsBySubject()
	code, sum, errs = runSyncErr(t, s, dir)
	wantLine := fmt.Sprintf("%s: 1 file missing locally; re-export bills 1 export, %d downloads and 1 call", a, h.Classes)
	if code != 0 || sum.Subjects.Repaired != 1 || sum.Subjects.Fetched != 1 || !strings.Contains(errs, wantLine) {
		t.Fatalf("a damaged subject: exit %d, %+v, want %q in %s", code, sum, wantLine, errs)
	}
	if got := s.exportsBySubject(); got[a] != per[a]+1 || s.exports() != before+1 {
		t.Errorf("exports %v → %v, want one of %s", per, got, a)
	}
	checkMirror(t, dir, subjects)

	p = objectFile(t, dir, a, "class-1.json")
	if err := os.WriteFile(p, []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, sum, errs = runSyncErr(t, s, dir)
	wantLine = fmt.Sprintf("%s: 1 file changed locally; re-export bills 1 export, %d downloads and 1 call", a, h.Classes)
	if sum.Subjects.Repaired != 1 || !strings.Contains(errs, wantLine) {
		t.Fatalf("a changed file: %+v, want %q in %s", sum, wantLine, errs)
	}
	checkMirror(t, dir, subjects)

	// Same size, same time: a plain run keeps it, -verify repairs it.
	sameSizeEdit(t, objectFile(t, dir, a, "class-1.json"))
	before = s.exports()
	if _, sum := runSyncCmd(t, s, dir); sum.Subjects.Repaired != 0 || s.exports() != before {
		t.Fatalf("an edit of the same size and time, without -verify: %+v", sum)
	}
	if _, sum := runSyncCmd(t, s, dir, "-verify"); sum.Subjects.Repaired != 1 || s.exports() != before+1 {
		t.Fatalf("-verify: %+v, %d exports", sum, s.exports()-before)
	}
	checkMirror(t, dir, subjects)

	// An older state file: no stamps, no manifest hash.
	st := loadStateFile(t, dir)
	for _, h := range st.Subjects {
		h.Stamps, h.Manifest, h.Classes = nil, "", 0
	}
	raw, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, metaDir, "state.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	u := s.usage()
	if code, sum := runSyncCmd(t, s, dir); code != 0 || sum.Subjects.Repaired != 0 || sum.Subjects.Unchanged != len(subjects) {
		t.Fatalf("an older state: exit %d, %+v", code, sum)
	}
	if after := s.usage(); after.Counters != u.Counters {
		t.Errorf("an older state, nothing changed: billed %v → %v", u.Counters, after.Counters)
	}
	for ref, h := range loadStateFile(t, dir).Subjects {
		if len(h.Stamps) != h.Files {
			t.Errorf("%s: %d stamps for %d files after a run", ref, len(h.Stamps), h.Files)
		}
	}
}
