package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/store"
)

// -dry-run says what a run would do with each subject and what it would
// bill, and bills nothing (only the unmetered GET /v1/license), changes
// nothing (not the state, not an empty DIR); what it predicts for a
// repair is what the run then bills (#35, point 5).
func TestSyncDryRun(t *testing.T) {
	s := newTestStack(t, nil)
	dir := filepath.Join(t.TempDir(), "mirror")
	subjects := s.subjects()
	dry := func(args ...string) (summary, string) {
		t.Helper()
		u := s.usage()
		var before []byte
		before, _ = os.ReadFile(filepath.Join(dir, metaDir, "state.json"))
		var out, errb bytes.Buffer
		code := run(context.Background(), append(append([]string{"sync", "-dry-run"}, args...), dir), s.env(), &out, &errb)
		if code != 0 {
			t.Fatalf("-dry-run: exit %d: %s", code, errb.String())
		}
		if after := s.usage(); after.Counters != u.Counters {
			t.Errorf("-dry-run billed: %v → %v", u.Counters, after.Counters)
		}
		if after, _ := os.ReadFile(filepath.Join(dir, metaDir, "state.json")); !bytes.Equal(before, after) {
			t.Error("-dry-run changed the state")
		}
		var sum summary
		out.Reset()
		run(context.Background(), append(append([]string{"sync", "-dry-run", "-json"}, args...), dir), s.env(), &out, &errb)
		if err := json.Unmarshal(out.Bytes(), &sum); err != nil || sum.DryRun == nil {
			t.Fatalf("-dry-run -json: %v: %s", err, out.String())
		}
		return sum, errb.String()
	}
	actions := func(sum summary) map[string]string {
		m := map[string]string{}
		for _, p := range sum.DryRun.Plan {
			m[p.Subject] = p.Action
		}
		return m
	}

	// Nothing held: the listing names what a run fetches.
	sum, text := dry()
	if _, err := os.Stat(dir); err == nil {
		t.Error("-dry-run made DIR")
	}
	if !sum.DryRun.Unknown || actions(sum)["high/*"] != "fetch" || !strings.Contains(text, "billed nothing") {
		t.Errorf("an empty mirror: %+v\n%s", sum.DryRun, text)
	}

	if code, sum := runSyncCmd(t, s, dir); code != 0 || !sum.Complete {
		t.Fatalf("sync: exit %d, %+v", code, sum)
	}
	// Current: every subject unchanged, nothing to bill.
	sum, text = dry()
	for _, ref := range subjects {
		if actions(sum)[ref] != "unchanged" {
			t.Errorf("a current mirror: %s %q", ref, actions(sum)[ref])
		}
	}
	if sum.DryRun.Unknown || sum.DryRun.AtMost["exports"]+sum.DryRun.AtMost["calls"]+sum.DryRun.AtMost["downloads"] != 0 ||
		!strings.Contains(text, "a run would bill exports 0, downloads 0, calls 0") {
		t.Errorf("a current mirror: %+v\n%s", sum.DryRun, text)
	}

	// A subject changed locally: a repair, and its bill is the run's.
	a := subjects[0]
	if err := os.WriteFile(objectFile(t, dir, a, "class-1.json"), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, text = dry()
	t.Logf("-dry-run of a damaged subject:\n%s", text)
	classes := int64(loadStateFile(t, dir).Subjects[a].Classes)
	// The export; the listing too only if the change feed (free) cannot
	// answer from the since the last run recorded (#37).
	want := map[string]int64{"exports": 1, "downloads": classes, "calls": 1}
	most := map[string]int64{"exports": 1, "downloads": classes, "calls": 2}
	if actions(sum)[a] != "repair" || !equalBill(sum.DryRun.AtLeast, want) || !equalBill(sum.DryRun.AtMost, most) {
		t.Errorf("a damaged subject: %+v, want %v to %v\n%s", sum.DryRun, want, most, text)
	}
	if code, got := runSyncCmd(t, s, dir); code != 0 || got.Subjects.Repaired != 1 || !equalBill(got.Billed, want) {
		t.Errorf("the run after the dry run: exit %d, billed %v, the dry run said %v", code, got.Billed, want)
	}

	// A rebuild: each subject fetched if its digest moved; only the
	// listing knows, so the bill is a range.
	tier, slug, _ := strings.Cut(a, "/")
	s.rebuild(tier, slug)
	sum, text = dry()
	if actions(sum)[a] != "fetch if changed" || sum.DryRun.AtMost["exports"] != int64(len(subjects)) || sum.DryRun.AtLeast["exports"] != 0 ||
		!strings.Contains(text, "at least") {
		t.Errorf("after a rebuild: %+v\n%s", sum.DryRun, text)
	}

	// A grant removed: its subjects are removed, nothing billed for them.
	if code, _ := runSyncCmd(t, s, dir); code != 0 {
		t.Fatal("sync after the rebuild")
	}
	s.update(func(o *store.Org) { o.Grants = []string{tier} })
	sum, _ = dry()
	for _, ref := range subjects {
		if !strings.HasPrefix(ref, tier+"/") && actions(sum)[ref] != "remove" {
			t.Errorf("%s no longer granted: %q", ref, actions(sum)[ref])
		}
	}
}

// equalBill reports whether got bills want's exports, downloads and calls.
func equalBill(got, want map[string]int64) bool {
	for _, k := range []string{"exports", "downloads", "calls"} {
		if got[k] != want[k] {
			return false
		}
	}
	return true
}
