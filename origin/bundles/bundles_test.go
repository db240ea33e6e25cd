package bundles

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func open(t *testing.T, dir string, max int64) *Store {
	t.Helper()
	s, err := Open(dir, max)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func read(t *testing.T, f *os.File, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// get reads key's bundle from s, built with build when s lacks it.
func get(t *testing.T, s *Store, key string, build func(io.Writer) error) string {
	t.Helper()
	f, err := s.Get(context.Background(), key, "", build)
	return read(t, f, err)
}

func writing(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

func TestKey(t *testing.T) {
	if Key("ab", "c") == Key("a", "bc") {
		t.Error("two lists of parts share a key")
	}
	if !validKey(Key("x")) || validKey("x") || validKey(strings.Repeat("G", 64)) {
		t.Error("validKey")
	}
}

// Many Gets of one key at once build it once; all read the same bytes.
func TestBuiltOnce(t *testing.T) {
	s := open(t, t.TempDir(), 0)
	key := Key("bundle")
	var builds atomic.Int32
	release := make(chan struct{})
	build := func(w io.Writer) error {
		builds.Add(1)
		<-release
		_, err := io.WriteString(w, "zip bytes")
		return err
	}
	var wg sync.WaitGroup
	got := make([]string, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := s.Get(context.Background(), key, "", build)
			got[i] = read(t, f, err)
		}()
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	for _, g := range got {
		if g != "zip bytes" {
			t.Fatalf("read %q", g)
		}
	}
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
	if st := s.Stats(); st.Builds != 1 || st.Files != 1 || st.Bytes != int64(len("zip bytes")) {
		t.Errorf("stats %+v", st)
	}
	// Later Gets read the file; build is not called.
	f, err := s.Get(context.Background(), key, "", func(io.Writer) error { t.Error("built again"); return nil })
	read(t, f, err)
}

// A failed build stores nothing and leaves no file; the next Get builds.
func TestBuildFails(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	key := Key("x")
	boom := errors.New("boom")
	_, err := s.Get(context.Background(), key, "", func(w io.Writer) error {
		io.WriteString(w, strings.Repeat("half", 1<<15))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Get = %v, want the build's error", err)
	}
	if des, _ := os.ReadDir(dir); len(des) != 1 || des[0].Name() != lockName {
		t.Errorf("a failed build left %v", des)
	}
	f, err := s.Get(context.Background(), key, "", writing("whole"))
	if g := read(t, f, err); g != "whole" {
		t.Errorf("read %q", g)
	}
}

// A bundle is visible only whole: while it is built, the directory holds
// a temporary file and no file under its key.
func TestAtomic(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	key := Key("y")
	mid := make(chan struct{})
	goOn := make(chan struct{})
	done := make(chan string)
	go func() {
		f, err := s.Get(context.Background(), key, "", func(w io.Writer) error {
			io.WriteString(w, strings.Repeat("a", 200<<10)) // past the buffer
			close(mid)
			<-goOn
			_, err := io.WriteString(w, "end")
			return err
		})
		done <- read(t, f, err)
	}()
	<-mid
	if _, err := os.Stat(filepath.Join(dir, key)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the key's file exists while it is built: %v", err)
	}
	close(goOn)
	if g := <-done; !strings.HasSuffix(g, "end") || len(g) != 200<<10+3 {
		t.Errorf("read %d bytes", len(g))
	}
}

// Past the bound the least recently used bundle goes; a reader holding it
// open reads it whole.
func TestEviction(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 25)
	ctx := context.Background()
	a, b, c := Key("a"), Key("b"), Key("c")
	get(t, s, a, writing(strings.Repeat("a", 10)))
	get(t, s, b, writing(strings.Repeat("b", 10)))
	held, err := s.Get(ctx, a, "", writing("rebuilt")) // a is now the most recent
	if err != nil {
		t.Fatal(err)
	}
	get(t, s, c, writing(strings.Repeat("c", 10))) // 30 > 25: b goes
	if _, err := os.Stat(filepath.Join(dir, b)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("b was not evicted: %v", err)
	}
	if st := s.Stats(); st.Evictions != 1 || st.Bytes != 20 || st.Files != 2 {
		t.Errorf("stats %+v", st)
	}
	get(t, s, c, writing(strings.Repeat("C", 30))) // held
	get(t, s, b, writing(strings.Repeat("B", 30))) // bigger than the bound alone: kept, the rest go
	if st := s.Stats(); st.Files != 1 || st.Bytes != 30 {
		t.Errorf("after an outsized bundle: %+v", st)
	}
	if g := read(t, held, nil); g != strings.Repeat("a", 10) {
		t.Errorf("an evicted bundle held open reads %q", g)
	}
}

// A store opened again keeps the bundles it holds and drops partial ones.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	key := Key("kept")
	get(t, s, key, writing("kept"))
	os.WriteFile(filepath.Join(dir, Key("half")+".123"+tmpSuffix), []byte("half"), 0o600)
	os.WriteFile(filepath.Join(dir, "README"), []byte("not a bundle"), 0o600)
	os.WriteFile(filepath.Join(dir, "notes.tmp"), []byte("not ours"), 0o600)
	if _, err := Open(dir, 0); err == nil {
		t.Fatal("a second store opened a directory another holds")
	}
	s.Close()
	s2 := open(t, dir, 0)
	if _, err := os.Stat(filepath.Join(dir, "notes.tmp")); err != nil {
		t.Error("Open removed a temporary file that is not a bundle's")
	}
	f, err := s2.Get(context.Background(), key, "", func(io.Writer) error { t.Error("built again"); return nil })
	if g := read(t, f, err); g != "kept" {
		t.Errorf("read %q", g)
	}
	if _, err := os.Stat(filepath.Join(dir, Key("half")+".123"+tmpSuffix)); !errors.Is(err, os.ErrNotExist) {
		t.Error("a temporary file survived Open")
	}
	if st := s2.Stats(); st.Files != 1 {
		t.Errorf("stats %+v", st)
	}
	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("the directory's mode: %v %v", info.Mode(), err)
	}
}

// A Get whose context ends while it waits returns; the build goes on for
// the Gets still waiting.
func TestWaitCancelled(t *testing.T) {
	s := open(t, t.TempDir(), 0)
	key := Key("slow")
	goOn := make(chan struct{})
	build := func(w io.Writer) error { <-goOn; return writing("slow")(w) }
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	stays := make(chan string)
	go func() {
		_, err := s.Get(ctx, key, "", build)
		errc <- err
	}()
	go func() {
		f, err := s.Get(context.Background(), key, "", build)
		stays <- read(t, f, err)
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Get = %v, want context.Canceled", err)
	}
	close(goOn)
	if g := <-stays; g != "slow" {
		t.Errorf("read %q, want the build's bytes", g)
	}
	if st := s.Stats(); st.Builds != 1 {
		t.Errorf("%d builds, want 1", st.Builds)
	}
}

func TestMalformedKey(t *testing.T) {
	s := open(t, t.TempDir(), 0)
	if _, err := s.Get(context.Background(), "../x", "", writing("x")); err == nil {
		t.Error("a malformed key was accepted")
	}
}

// Purge removes every bundle held, counted apart from evictions; the next
// Get builds again, a reader holding a purged bundle reads it whole, and a
// bundle being built during Purge is stored when its build ends.
func TestPurge(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 0)
	ctx := context.Background()
	a, b, c := Key("a"), Key("b"), Key("c")
	get(t, s, a, writing("aaa"))
	get(t, s, b, writing("bbbb"))
	held, err := s.Get(ctx, a, "", writing("rebuilt"))
	if err != nil {
		t.Fatal(err)
	}
	goOn := make(chan struct{})
	building := make(chan struct{})
	done := make(chan string)
	go func() {
		f, err := s.Get(ctx, c, "", func(w io.Writer) error {
			close(building)
			<-goOn
			return writing("ccccc")(w)
		})
		done <- read(t, f, err)
	}()
	<-building
	if err := s.Purge(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Purged != 2 || st.Evictions != 0 || st.Files != 0 || st.Bytes != 0 {
		t.Errorf("after Purge: %+v", st)
	}
	for _, k := range []string{a, b} {
		if _, err := os.Stat(filepath.Join(dir, k)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a purged bundle's file: %v", err)
		}
	}
	if g := read(t, held, nil); g != "aaa" {
		t.Errorf("a purged bundle held open reads %q", g)
	}
	close(goOn)
	if g := <-done; g != "ccccc" {
		t.Errorf("the bundle built during Purge reads %q", g)
	}
	f, err := s.Get(ctx, c, "", func(io.Writer) error { t.Error("the bundle built during Purge was built again"); return nil })
	read(t, f, err)
	var builds int
	f, err = s.Get(ctx, a, "", func(w io.Writer) error { builds++; return writing("again")(w) })
	if g := read(t, f, err); g != "again" || builds != 1 {
		t.Errorf("after Purge: read %q with %d builds, want a new build", g, builds)
	}
	if st := s.Stats(); st.Builds != 4 || st.Files != 2 || st.Bytes != int64(len("ccccc")+len("again")) {
		t.Errorf("stats %+v", st)
	}
}

// A build that has not started when every Get waiting for it has left is
// dropped: nobody pays for bundle work nobody waits for.
func TestAbandonedBuildDropped(t *testing.T) {
	s := open(t, t.TempDir(), 0)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range cap(s.builds) { // every build token taken by a slow build
		wg.Add(1)
		go func() {
			defer wg.Done()
			get(t, s, Key("slow", string(rune('a'+i))), func(w io.Writer) error { <-release; return writing("x")(w) })
		}()
	}
	for len(s.builds) < cap(s.builds) {
		time.Sleep(time.Millisecond)
	}
	var built atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Get(ctx, Key("queued"), "", func(w io.Writer) error { built.Store(true); return writing("q")(w) }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get = %v", err)
	}
	close(release)
	wg.Wait()
	time.Sleep(20 * time.Millisecond)
	if built.Load() {
		t.Error("an abandoned build ran")
	}
	if g := get(t, s, Key("queued"), writing("again")); g != "again" {
		t.Errorf("read %q after an abandoned build", g)
	}
}

// A build whose waiters all leave while it writes ends at its next write,
// and stores nothing.
func TestAbandonedBuildStopped(t *testing.T) {
	s := open(t, t.TempDir(), 0)
	started, goOn := make(chan struct{}), make(chan struct{})
	var writeErr atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := s.Get(ctx, Key("big"), "", func(w io.Writer) error {
			io.WriteString(w, strings.Repeat("a", 100<<10))
			close(started)
			<-goOn
			_, err := io.WriteString(w, strings.Repeat("b", 100<<10))
			writeErr.Store(fmt.Sprint(err))
			return err
		})
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Get = %v", err)
	}
	close(goOn)
	for i := 0; writeErr.Load() == nil; i++ {
		if i == 200 {
			t.Fatal("the build did not end")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(writeErr.Load().(string), "abandoned") {
		t.Errorf("the build's write after its waiters left: %v", writeErr.Load())
	}
	time.Sleep(20 * time.Millisecond)
	if st := s.Stats(); st.Builds != 0 || st.Files != 0 {
		t.Errorf("stats %+v after an abandoned build", st)
	}
	if g := get(t, s, Key("big"), writing("small")); g != "small" {
		t.Errorf("read %q", g)
	}
}
