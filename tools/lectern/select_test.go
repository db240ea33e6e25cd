package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/store"
)

// -tier and -subject update only what they select: on a full mirror they
// remove nothing, and the next full run exports nothing again (#35, 1).
// A subject its grant no longer covers leaves the mirror even outside the
// selection, and says so; -prune removes what the selection does not name.
func TestSyncSelectionKeepsTheRest(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	subjects := s.subjects()
	one := "high/algebra"
	code, sum := runSyncCmd(t, s, dir)
	if code != 0 || sum.Subjects.Held != len(subjects) {
		t.Fatalf("first run: exit %d, %+v", code, sum)
	}
	exports := s.exports()

	for _, args := range [][]string{{"-subject", one}, {"-tier", "high"}, {"-tier", "high,middle", "-subject", one}} {
		code, sum = runSyncCmd(t, s, dir, args...)
		if code != 0 || !sum.Complete || sum.Subjects.Held != len(subjects) || sum.Subjects.Removed != 0 {
			t.Fatalf("%v: exit %d, %+v", args, code, sum)
		}
		checkMirror(t, dir, subjects)
		// The mirror is current as a whole: its selections are too.
		if sum.Billed["calls"] != 0 || sum.Billed["exports"] != 0 || sum.Billed["downloads"] != 0 {
			t.Errorf("%v on a full mirror billed %v", args, sum.Billed)
		}
	}
	code, sum = runSyncCmd(t, s, dir)
	if code != 0 || !sum.Complete || sum.Subjects.Held != len(subjects) || sum.Subjects.Fetched != 0 {
		t.Fatalf("full run after the selections: exit %d, %+v", code, sum)
	}
	if got := s.exports(); got != exports || sum.Billed["exports"] != 0 || sum.Billed["downloads"] != 0 {
		t.Errorf("the full run after the selections exported %d subjects again, billed %v", got-exports, sum.Billed)
	}

	// The grants shrink to high and one middle subject: a run selecting
	// one high subject removes what no grant covers, and says so.
	s.update(func(o *store.Org) { o.Grants = []string{"high", "middle/algebra"} })
	var out, errb strings.Builder
	code = run(t.Context(), []string{"sync", "-subject", one, dir}, s.env(), &out, &errb)
	if code != 0 {
		t.Fatalf("after the grants shrank: exit %d: %s", code, errb.String())
	}
	st := loadStateFile(t, dir)
	for _, ref := range subjects {
		covered := strings.HasPrefix(ref, "high/") || ref == "middle/algebra"
		_, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(ref)))
		if (err == nil) != covered || (st.Subjects[ref] != nil) != covered {
			t.Errorf("%s: in the mirror %v, in the state %v; granted %v", ref, err == nil, st.Subjects[ref] != nil, covered)
		}
		if !covered && !strings.Contains(errb.String(), "removed "+ref+": no longer granted") {
			t.Errorf("the run does not say it removed %s: %s", ref, errb.String())
		}
	}

	// -prune: the mirror becomes the selection.
	code, sum = runSyncCmd(t, s, dir, "-prune", "-subject", one)
	if code != 0 || sum.Subjects.Held != 1 || sum.Subjects.Removed != 4 || sum.Billed["exports"] != 0 {
		t.Fatalf("-prune: exit %d, %+v", code, sum)
	}
	for _, r := range sum.RemovedSubjects {
		if r.Reason != "not selected (-prune)" {
			t.Errorf("-prune removed %+v", r)
		}
	}
	checkMirror(t, dir, []string{one})
	if _, err := os.Lstat(filepath.Join(dir, "high", "biology")); err == nil {
		t.Error("-prune kept high/biology")
	}
}

// -media with -subject mints the assets of the selected subject only,
// not those of every subject held.
func TestSyncSelectionMedia(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	one := "high/algebra"
	if code, sum := runSyncCmd(t, s, dir); code != 0 {
		t.Fatalf("first run: exit %d, %+v", code, sum)
	}
	var mm struct{ Items []mediaItem }
	b, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(one), "media-manifest.json"))
	if err := json.Unmarshal(b, &mm); err != nil || len(mm.Items) == 0 {
		t.Fatalf("media manifest: %v, %d items", err, len(mm.Items))
	}
	code, sum := runSyncCmd(t, s, dir, "-media", "-subject", one)
	if code != 0 || !sum.Complete || sum.Subjects.Held != len(s.subjects()) || sum.Media.Fetched != len(mm.Items) {
		t.Fatalf("-media -subject %s: exit %d, %+v", one, code, sum)
	}
	if got := sum.Billed["downloads"]; got != int64(len(mm.Items)) {
		t.Errorf("-media -subject %s minted %d, its subject has %d assets", one, got, len(mm.Items))
	}
}
