package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/version"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
)

// runSyncCmd runs `lectern sync args… dir` against s and returns its exit
// status and its JSON summary.
func runSyncCmd(t *testing.T, s *testStack, dir string, args ...string) (int, summary) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append(append([]string{"sync", "-json"}, args...), dir), s.env(), &out, &errb)
	var sum summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("summary: %v: %s (stderr %s)", err, out.Bytes(), errb.Bytes())
	}
	if code != 0 && code != exitStopped {
		t.Logf("lectern sync exited %d: %s", code, errb.Bytes())
	}
	return code, sum
}

// checkMirror checks that dir holds every subject of want, each file as
// its manifest says.
func checkMirror(t *testing.T, dir string, want []string) {
	t.Helper()
	for _, ref := range want {
		sub := filepath.Join(dir, filepath.FromSlash(ref))
		b, err := os.ReadFile(filepath.Join(sub, "manifest.json"))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		var m bundleManifest
		if err := json.Unmarshal(b, &m); err != nil || m.Subject != ref || len(m.Files) == 0 {
			t.Fatalf("%s: manifest %v %+v", ref, err, m)
		}
		for _, f := range m.Files {
			data, err := os.ReadFile(filepath.Join(sub, f.Name))
			sum := sha256.Sum256(data)
			if err != nil || int64(len(data)) != f.Bytes || hex.EncodeToString(sum[:]) != f.SHA256 {
				t.Fatalf("%s/%s: %d bytes (%v), not as the manifest says", ref, f.Name, len(data), err)
			}
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, metaDir, "tmp"))
	if len(entries) != 0 {
		t.Errorf("downloads left in progress: %v", entries)
	}
}

// The first run mirrors every granted subject from exports (one export
// each, no lesson read); a second with nothing changed bills nothing;
// after a corpus rebuild that changed one subject, only that subject is
// exported again; a subject no longer granted leaves the mirror.
func TestSync(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	subjects := s.subjects()

	code, sum := runSyncCmd(t, s, dir)
	if code != 0 || !sum.Complete || sum.Subjects.Fetched != len(subjects) || sum.Subjects.Held != len(subjects) {
		t.Fatalf("first run: exit %d, %+v", code, sum)
	}
	checkMirror(t, dir, subjects)
	u := s.usage()
	if got := u.Get(meter.HourLessonReads); got != 0 {
		t.Errorf("the sync read %d lessons", got)
	}
	if got := s.exports(); got != len(subjects) {
		t.Errorf("%d exports for %d subjects", got, len(subjects))
	}
	if sum.Billed["exports"] != int64(len(subjects)) || sum.Billed["calls"] != u.Get(meter.MonthCalls) {
		t.Errorf("billed %v, the meters say %d calls", sum.Billed, u.Get(meter.MonthCalls))
	}

	// Nothing changed: nothing billed.
	code, sum = runSyncCmd(t, s, dir)
	if code != 0 || !sum.Complete || sum.Subjects.Fetched != 0 || sum.Subjects.Unchanged != len(subjects) {
		t.Fatalf("second run: exit %d, %+v", code, sum)
	}
	if after := s.usage(); after.Counters != u.Counters {
		t.Errorf("a run with nothing changed billed: %v → %v", u.Counters, after.Counters)
	}
	for k, v := range sum.Billed {
		if v != 0 {
			t.Errorf("summary: billed %d %s", v, k)
		}
	}

	// A rebuild that changed one subject: only it is exported.
	changed := subjects[0]
	tier, slug, _ := strings.Cut(changed, "/")
	s.rebuild(tier, slug)
	before := s.exports()
	code, sum = runSyncCmd(t, s, dir)
	if code != 0 || sum.Subjects.Fetched != 1 || sum.Subjects.Unchanged != len(subjects)-1 {
		t.Fatalf("after the rebuild: exit %d, %+v", code, sum)
	}
	if got := s.exports() - before; got != 1 {
		t.Errorf("after the rebuild %d exports, want 1", got)
	}
	checkMirror(t, dir, subjects)
	b, _ := os.ReadFile(filepath.Join(dir, tier, slug, "class-1.json"))
	if !bytes.Contains(b, []byte("(revised)")) {
		t.Error("the changed subject is not the new one")
	}

	// A grant removed: its subjects leave the mirror, nothing exported.
	s.update(func(o *store.Org) { o.Grants = []string{tier} })
	before = s.exports()
	code, sum = runSyncCmd(t, s, dir)
	if code != 0 || sum.Subjects.Fetched != 0 || sum.Subjects.Removed == 0 || s.exports() != before {
		t.Fatalf("after a grant removed: exit %d, %+v", code, sum)
	}
	for _, ref := range subjects {
		_, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(ref)))
		if strings.HasPrefix(ref, tier+"/") != (err == nil) {
			t.Errorf("%s: present %v after the grants became %s", ref, err == nil, tier)
		}
	}
}

// A spent export allowance stops the sync cleanly: exit 3, the summary
// names the quota, the subjects exported before it are held and verified,
// and a run after the allowance is raised completes without exporting
// them again.
func TestSyncQuotaSpent(t *testing.T) {
	two := int64(2)
	s := newTestStack(t, func(o *store.Org) { o.Quota.Exports = &two })
	dir := t.TempDir()
	code, sum := runSyncCmd(t, s, dir)
	if code != exitStopped || sum.Complete || !strings.Contains(sum.Stopped, "EXPORT_LIMIT") || sum.Subjects.Held != 2 {
		t.Fatalf("exit %d, %+v", code, sum)
	}
	st := loadStateFile(t, dir)
	var held []string
	for ref := range st.Subjects {
		held = append(held, ref)
	}
	checkMirror(t, dir, held)
	s.update(func(o *store.Org) { o.Quota.Exports = nil })
	code, sum = runSyncCmd(t, s, dir)
	if code != 0 || !sum.Complete || sum.Subjects.Fetched != len(s.subjects())-2 {
		t.Fatalf("after the raise: exit %d, %+v", code, sum)
	}
	if got := s.exports(); got != len(s.subjects()) {
		t.Errorf("%d exports for %d subjects", got, len(s.subjects()))
	}
}

// -media mints the assets of the subjects held in batches of at most 100
// and downloads them to their location; an hourly mint cap stops it
// cleanly, and the next run fetches only what is missing.
func TestSyncMedia(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	sub := s.subjects()[0]
	code, sum := runSyncCmd(t, s, dir, "-subject", sub)
	if code != 0 || sum.Subjects.Held != 1 {
		t.Fatalf("exit %d, %+v", code, sum)
	}
	var mm struct{ Items []mediaItem }
	b, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(sub), "media-manifest.json"))
	if err := json.Unmarshal(b, &mm); err != nil || len(mm.Items) < 10 {
		t.Fatalf("media manifest: %v, %d items", err, len(mm.Items))
	}
	cap := int64(len(mm.Items) / 2)
	s.update(func(o *store.Org) { o.RateLimits.URLMintsPerHour = &cap })
	code, sum = runSyncCmd(t, s, dir, "-subject", sub, "-media")
	if code != exitStopped || !strings.Contains(sum.Stopped, "hourly") || sum.Media.Fetched == 0 || sum.Media.Fetched > int(cap) {
		t.Fatalf("capped: exit %d, %+v", code, sum)
	}
	s.update(func(o *store.Org) { o.RateLimits.URLMintsPerHour = nil })
	u0 := s.usage()
	before := u0.Get(meter.MonthDownloads)
	code, sum = runSyncCmd(t, s, dir, "-subject", sub, "-media")
	if code != 0 || !sum.Complete || sum.Media.Held != len(mm.Items) {
		t.Fatalf("uncapped: exit %d, %+v", code, sum)
	}
	u1 := s.usage()
	if minted := u1.Get(meter.MonthDownloads) - before; minted != int64(len(mm.Items)-int(cap)) && minted != int64(len(mm.Items))-int64(sum.Media.Fetched) {
		t.Errorf("the second run minted %d", minted)
	}
	for _, it := range mm.Items {
		st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(it.Location)))
		if err != nil || st.Size() != it.Bytes {
			t.Fatalf("%s at %s: %v", it.MediaID, it.Location, err)
		}
	}
}

func loadStateFile(t *testing.T, dir string) state {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, metaDir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestChallengeParam(t *testing.T) {
	for h, want := range map[string]string{
		`Bearer realm="api", error="invalid_token", resource_metadata="https://a.example/.well-known/oauth-protected-resource"`: "https://a.example/.well-known/oauth-protected-resource",
		`Bearer resource_metadata=https://b.example/x, error=invalid_token`:                                                     "https://b.example/x",
		`Bearer xresource_metadata="no", resource_metadata="yes"`:                                                               "yes",
		`Bearer realm="a\"b", resource_metadata="q\"x"`:                                                                         `q"x`,
		`Bearer realm="api"`: "",
	} {
		if got := challengeParam(h, "resource_metadata"); got != want {
			t.Errorf("challengeParam(%q) = %q, want %q", h, got, want)
		}
	}
	if got := wellKnown("https://idp.example/tenant/"); got != "https://idp.example/.well-known/oauth-authorization-server/tenant" {
		t.Errorf("wellKnown = %s", got)
	}
	for u, ok := range map[string]bool{"https://api.example": true, "http://127.0.0.1:8787": true, "http://localhost:9090/x": true,
		"http://[::1]:1": true, "http://api.example": false, "ftp://api.example": false, "/v1": false} {
		if err := secureURL(u); (err == nil) != ok {
			t.Errorf("secureURL(%q) = %v", u, err)
		}
	}
}

func TestHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"help"}, func(string) string { return "" }, &out, &errb); code != 0 || !strings.Contains(out.String(), "lectern sync") {
		t.Errorf("help: %d %s", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"-version"}, func(string) string { return "" }, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "lectern "+version.Release+" (") {
		t.Errorf("-version: %d %q", code, out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"sync", "-h"}, func(string) string { return "" }, &out, &errb); code != 0 {
		t.Errorf("sync -h: %d", code)
	}
	if code := run(context.Background(), []string{"sync", t.TempDir()}, func(string) string { return "" }, &out, &errb); code != 2 {
		t.Errorf("sync without the environment: %d, want 2", code)
	}
}

// A sync killed with SIGKILL at any moment and run again completes: a
// subject it verified (in the state when it was killed) is never exported
// again, at most one export a kill is made twice (a kill between the
// export's answer and the state's write), and no reader of DIR ever sees
// a subject that is not whole.
func TestSyncKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and kills it repeatedly")
	}
	s := newTestStack(t, nil)
	bin := filepath.Join(t.TempDir(), "lectern")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "LECTERN_URL="+s.URL, "LECTERN_CLIENT_ID="+s.ClientID, "LECTERN_CLIENT_SECRET="+s.Secret)
	kills := 0
	verifiedAt := map[string]int{} // a subject verified when killed: its exports then
	for round := 0; ; round++ {
		if round == 40 {
			t.Fatal("40 rounds without completing")
		}
		cmd := exec.Command(bin, "sync", "-quiet", dir)
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			checkMirror(t, dir, s.subjects())
			if got, n := s.exports(), len(s.subjects()); got > n+kills {
				t.Errorf("%d exports for %d subjects and %d kills", got, n, kills)
			}
			per := s.exportsBySubject()
			for ref, then := range verifiedAt {
				if per[ref] != then {
					t.Errorf("%s was verified with %d exports, and exported again (%d)", ref, then, per[ref])
				}
			}
			t.Logf("complete after %d kills; %d exports for %d subjects", kills, s.exports(), len(s.subjects()))
			return
		case <-time.After(time.Duration(40+rand.IntN(200)) * time.Millisecond):
			cmd.Process.Kill()
			<-done
			kills++
		}
		// Whatever the kill interrupted, every subject in DIR is whole.
		st := loadStateFileOrZero(t, dir)
		var held []string
		per := s.exportsBySubject()
		for ref := range st.Subjects {
			held = append(held, ref)
			if _, ok := verifiedAt[ref]; !ok {
				verifiedAt[ref] = per[ref]
			}
		}
		checkMirrorLinks(t, dir, held)
	}
}

// checkMirrorLinks checks each subject held is whole (checkMirror without
// the downloads in progress, which a kill leaves to be resumed).
func checkMirrorLinks(t *testing.T, dir string, held []string) {
	t.Helper()
	tmp := filepath.Join(dir, metaDir, "tmp")
	saved := tmp + ".check"
	os.Rename(tmp, saved)
	os.MkdirAll(tmp, 0o755)
	checkMirror(t, dir, held)
	os.RemoveAll(tmp)
	os.Rename(saved, tmp)
}

func loadStateFileOrZero(t *testing.T, dir string) state {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, metaDir, "state.json")); err != nil {
		return state{}
	}
	return loadStateFile(t, dir)
}

// A calls quota spent before the listing stops cleanly too (exit 3,
// naming the quota), with nothing billed.
func TestSyncCallsSpent(t *testing.T) {
	zero := int64(0)
	s := newTestStack(t, func(o *store.Org) { o.Quota.Calls = &zero })
	code, sum := runSyncCmd(t, s, t.TempDir())
	if code != exitStopped || !strings.Contains(sum.Stopped, "QUOTA_EXCEEDED") || sum.Subjects.Held != 0 {
		t.Fatalf("exit %d, %+v", code, sum)
	}
	u := s.usage()
	if got := u.Get(meter.MonthCalls); got != 0 {
		t.Errorf("billed %d calls", got)
	}
}
