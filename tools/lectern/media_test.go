package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
)

// mediaEdit is what smallMedia does to each asset of a subject.
type mediaEdit struct {
	real bool // write the file into the corpus's media store, and its sha256
	lie  bool // ... with other bytes than the sha256 says (a lying origin)
	move int  // move the move-th asset (1-based; 0: none) to another location
}

// smallMedia makes every asset of subject ref a few hundred bytes (the
// generated sizes run to megabytes), as e says, gives the corpus a new
// contentVersion and serves it. It returns the subject's assets as the
// corpus lists them: location -> bytes of the file (nil when not real).
func (s *testStack) smallMedia(ref string, e mediaEdit) map[string][]byte {
	s.t.Helper()
	p := filepath.Join(s.Corpus, "lessons", filepath.FromSlash(ref)+".json")
	b, err := os.ReadFile(p)
	if err != nil {
		s.t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		s.t.Fatal(err)
	}
	assets := map[string][]byte{}
	n := 0
	for _, c := range doc["classes"].([]any) {
		for _, cd := range c.(map[string]any)["cards"].([]any) {
			for _, m := range cd.(map[string]any)["media"].([]any) {
				m := m.(map[string]any)
				n++
				if n == e.move {
					m["location"] = strings.Replace(m["location"].(string), "media/", "media/moved/", 1)
				}
				data := []byte(fmt.Sprintf("asset %d of %s\n%s", n, ref, strings.Repeat("x", n%97)))
				m["bytes"] = len(data)
				loc := m["location"].(string)
				assets[loc] = nil
				if e.real {
					sum := sha256.Sum256(data)
					m["sha256"] = hex.EncodeToString(sum[:])
					assets[loc] = data
					served := data
					if e.lie {
						served = bytes.ToUpper(data)
					}
					dst := filepath.Join(s.Corpus, filepath.FromSlash(loc))
					if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
						s.t.Fatal(err)
					}
					if err := os.WriteFile(dst, served, 0o644); err != nil {
						s.t.Fatal(err)
					}
				}
			}
		}
	}
	b, _ = json.Marshal(doc)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.newVersion()
	return assets
}

// newVersion gives the corpus a contentVersion it never had, and serves it.
func (s *testStack) newVersion() {
	s.t.Helper()
	mp := filepath.Join(s.Corpus, "corpus.json")
	mb, err := os.ReadFile(mp)
	if err != nil {
		s.t.Fatal(err)
	}
	old := s.Content.Load().ContentVersion
	sum := sha256.Sum256([]byte(old))
	next := "2026-11-03+" + hex.EncodeToString(sum[:6])
	if err := os.WriteFile(mp, []byte(strings.Replace(string(mb), old, next, 1)), 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.Load()
	if got := s.Content.Load().ContentVersion; got != next {
		s.t.Fatalf("the corpus serves %s, want %s", got, next)
	}
}

// mediaFiles lists the files under dir/media, as locations.
func mediaFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	filepath.WalkDir(filepath.Join(dir, "media"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			got[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	return got
}

// Issue #35, point 6: the media of a subject no longer granted, and an
// asset moved by a corpus change, leave the mirror; the rest stay. Before,
// both stayed for good.
func TestSyncRemovesStaleMedia(t *testing.T) {
	s := newTestStack(t, nil)
	subs := s.subjects()
	var a, b string // subjects of two tiers
	for _, ref := range subs {
		if a == "" {
			a = ref
		} else if strings.Split(ref, "/")[0] != strings.Split(a, "/")[0] {
			b = ref
			break
		}
	}
	assetsA := s.smallMedia(a, mediaEdit{})
	assetsB := s.smallMedia(b, mediaEdit{})
	dir := t.TempDir()
	args := []string{"-subject", a + "," + b, "-media", "-keep-previous", "0"}
	if code, sum := runSyncCmd(t, s, dir, args...); code != 0 || sum.Media.Held != len(assetsA)+len(assetsB) {
		t.Fatalf("first run: exit %d, %+v", code, sum.Media)
	}
	if got := mediaFiles(t, dir); len(got) != len(assetsA)+len(assetsB) {
		t.Fatalf("%d media files, want %d", len(got), len(assetsA)+len(assetsB))
	}

	// An asset of b moves: its old file goes, the new one comes.
	moved := s.smallMedia(b, mediaEdit{move: 3})
	code, sum := runSyncCmd(t, s, dir, args...)
	if code != 0 || sum.Media.Removed != 1 || sum.Media.Fetched != 1 {
		t.Fatalf("after a move: exit %d, %+v; want 1 removed and 1 fetched", code, sum.Media)
	}
	got := mediaFiles(t, dir)
	for loc := range moved {
		if !got[loc] {
			t.Errorf("%s missing after the move", loc)
		}
	}
	if len(got) != len(assetsA)+len(moved) {
		t.Errorf("%d media files after the move, want %d", len(got), len(assetsA)+len(moved))
	}

	// a's tier is no longer granted: a and its media go, b's stay.
	s.update(func(o *store.Org) { o.Grants = []string{strings.Split(b, "/")[0]} })
	code, sum = runSyncCmd(t, s, dir, "-subject", b, "-media", "-keep-previous", "0")
	if code != 0 || sum.Media.Removed != len(assetsA) || sum.Subjects.Removed != 1 {
		t.Fatalf("after the grant removal: exit %d, subjects %+v, media %+v; want %d media removed", code, sum.Subjects, sum.Media, len(assetsA))
	}
	got = mediaFiles(t, dir)
	for loc := range assetsA {
		if got[loc] {
			t.Errorf("%s of the removed subject is still there", loc)
		}
	}
	if len(got) != len(moved) {
		t.Errorf("%d media files left, want b's %d", len(got), len(moved))
	}
	if _, err := os.Stat(filepath.Join(dir, "media", strings.Split(a, "/")[0])); err == nil {
		t.Errorf("the removed tier's media directory is still there")
	}
}

// Issue #35, point 6: an asset whose manifest entry has a sha256 is
// checked against it: a lying origin's bytes are never installed; an
// asset changed locally at the same size is noticed (its stamp moved)
// and fetched again, billing one download; lectern check reports it.
func TestSyncMediaSHA256(t *testing.T) {
	s := newTestStack(t, nil)
	ref := s.subjects()[0]
	assets := s.smallMedia(ref, mediaEdit{real: true, lie: true})
	dir := t.TempDir()
	code, sum := runSyncCmd(t, s, dir, "-subject", ref, "-media")
	if code == 0 || !strings.Contains(sum.Error, "sha256") {
		t.Fatalf("lying origin: exit %d, %+v, error %q; want a sha256 refusal", code, sum.Media, sum.Error)
	}
	if got := mediaFiles(t, dir); len(got) != 0 {
		t.Fatalf("%d media installed from a lying origin, want none", len(got))
	}

	assets = s.smallMedia(ref, mediaEdit{real: true})
	code, sum = runSyncCmd(t, s, dir, "-subject", ref, "-media")
	if code != 0 || sum.Media.Held != len(assets) {
		t.Fatalf("honest origin: exit %d, %+v", code, sum.Media)
	}
	for loc, want := range assets {
		if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(loc))); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("%s: %v, other bytes", loc, err)
		}
	}
	if code, _ := checkCmd(t, dir); code != 0 {
		t.Fatalf("check of a whole mirror: exit %d", code)
	}

	// The same size, other bytes, locally.
	var victim string
	for loc := range assets {
		victim = loc
		break
	}
	p := filepath.Join(dir, filepath.FromSlash(victim))
	if err := os.WriteFile(p, bytes.ToUpper(assets[victim]), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := checkCmd(t, dir)
	if code != exitDifferences || !strings.Contains(out, strings.TrimPrefix(victim, "media/")) || !strings.Contains(out, "sha256") {
		t.Fatalf("check after a local change: exit %d: %s", code, out)
	}
	before := s.downloads()
	code, sum = runSyncCmd(t, s, dir, "-subject", ref, "-media")
	if code != 0 || sum.Media.Fetched != 1 {
		t.Fatalf("repair: exit %d, %+v; want 1 fetched", code, sum.Media)
	}
	if n := s.downloads() - before; n != 1 {
		t.Errorf("the repair billed %d downloads, want 1", n)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, assets[victim]) {
		t.Errorf("%s not repaired", victim)
	}
	// Nothing moved: nothing is read again, nothing billed.
	before = s.downloads()
	if code, sum = runSyncCmd(t, s, dir, "-subject", ref, "-media"); code != 0 || sum.Media.Fetched != 0 {
		t.Fatalf("a run with nothing to do: exit %d, %+v", code, sum.Media)
	}
	if n := s.downloads() - before; n != 0 {
		t.Errorf("a run with nothing to do billed %d downloads", n)
	}
	// An extra file under media/ is reported.
	if err := os.WriteFile(filepath.Join(dir, "media", "stray.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := checkCmd(t, dir); code != exitDifferences || !strings.Contains(out, "stray.bin: extra") {
		t.Errorf("check with a stray media file: exit %d: %s", code, out)
	}
}

// The media downloads say their progress: assets and bytes done of all.
func TestSyncMediaProgress(t *testing.T) {
	s := newTestStack(t, nil)
	ref := s.subjects()[0]
	assets := s.smallMedia(ref, mediaEdit{})
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"sync", "-subject", ref, "-media", t.TempDir()}, s.env(), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.Bytes())
	}
	want := fmt.Sprintf("media %d/%d assets, ", len(assets), len(assets))
	if !strings.Contains(errb.String()+out.String(), want) {
		t.Errorf("no %q line in the progress:\n%s", want, errb.Bytes())
	}
}

// downloads is the organisation's monthly downloads used.
func (s *testStack) downloads() int64 {
	u := s.usage()
	return u.Get(meter.MonthDownloads)
}

// checkCmd runs lectern check DIR: its exit status and what it wrote.
func checkCmd(t *testing.T, dir string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"check", dir}, func(string) string { return "" }, &out, &errb)
	return code, out.String() + errb.String()
}
