package wiring

import (
	"math"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/store"
)

// openOrigin opens a whole origin on loopback ports with the small
// corpus and a new SQLite database, with edit (when not nil) applied to
// its options; it is closed when the test ends. origin/cmd/origin's
// tests run it from the command's settings.
func openOrigin(t *testing.T, edit func(*Options)) *Origin {
	t.Helper()
	dir := t.TempDir()
	if _, err := gen.Write(filepath.Join(dir, "corpus"), gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	opts := Options{OriginAddr: "127.0.0.1:0", IdPAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0",
		AdminToken: "admin-token-for-tests", DB: filepath.Join(dir, "lectern.db"), Corpus: filepath.Join(dir, "corpus"),
		Secret: "a-test-secret-of-at-least-32-characters", Audience: "lectern-api", BundleDir: filepath.Join(dir, "bundles"),
		MemoryLimit: true}
	if edit != nil {
		edit(&opts)
	}
	o, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// writeCorpus2 generates the small corpus of another version into a new
// directory and returns it and its version.
func writeCorpus2(t *testing.T) (dir, version string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "corpus2")
	sum, err := gen.Write(dir, gen.Options{Seed: 2, Small: true})
	if err != nil {
		t.Fatal(err)
	}
	return dir, sum.ContentVersion
}

// An open origin follows the deployment's corpus record: another origin's
// reload, recorded in the database, is served within a few reads.
func TestOpenFollowsTheRecord(t *testing.T) {
	o := openOrigin(t, func(opts *Options) { opts.CorpusSync = 50 * time.Millisecond })
	dir, v2 := writeCorpus2(t)
	if err := o.Store().RecordCorpus(t.Context(), store.CorpusRecord{Dir: dir, ContentVersion: v2, LoadedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for o.Content().ContentVersion != v2 {
		if time.Now().After(deadline) {
			t.Fatalf("still serving %s 10 s after %s was recorded", o.Content().ContentVersion, v2)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restoreMemoryLimit puts the process's memory limit back after the test.
func restoreMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}

// With Options.MemoryLimit (GOMEMLIMIT unset) the origin sets the memory
// limit once its corpus is served, doubles it while a reload builds and
// sets it again after the swap.
func TestMemoryLimitSet(t *testing.T) {
	restoreMemoryLimit(t)
	debug.SetMemoryLimit(math.MaxInt64)
	o := openOrigin(t, nil)
	lim := debug.SetMemoryLimit(-1)
	if lim == math.MaxInt64 || uint64(lim) < Footprint() {
		t.Fatalf("after the start: memory limit %d, footprint %d", lim, Footprint())
	}

	dir, _ := writeCorpus2(t)
	ReloadMemoryLimit(true) // what a reload does first
	if got := debug.SetMemoryLimit(-1); got < 2*lim*9/10 || got == math.MaxInt64 {
		t.Fatalf("lifted: memory limit %d, want about twice %d", got, lim)
	}
	if _, err := o.Corpus().Reload(t.Context(), dir); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := debug.SetMemoryLimit(-1); got >= 2*lim*9/10 {
		t.Fatalf("after the reload: memory limit %d, still the lifted one (%d before)", got, lim)
	}
}

// Without Options.MemoryLimit (the operator set GOMEMLIMIT) the origin
// leaves the operator's limit alone, at its start and through a reload's
// lift and settle.
func TestMemoryLimitOperators(t *testing.T) {
	restoreMemoryLimit(t)
	const operators = 3 << 30
	debug.SetMemoryLimit(operators) // as the runtime does from GOMEMLIMIT
	o := openOrigin(t, func(opts *Options) { opts.MemoryLimit = false })
	if got := debug.SetMemoryLimit(-1); got != operators {
		t.Fatalf("with GOMEMLIMIT: the origin set the memory limit to %d", got)
	}
	dir, _ := writeCorpus2(t)
	if _, err := o.Corpus().Reload(t.Context(), dir); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := debug.SetMemoryLimit(-1); got != operators {
		t.Fatalf("with GOMEMLIMIT: a reload's lift and settle set the memory limit to %d", got)
	}
}
