package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/origin/wiring"
)

// restoreMemoryLimit puts the process's memory limit back after the test.
func restoreMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
}

// Without GOMEMLIMIT the origin sets the memory limit once its corpus is
// served, doubles it while a reload builds and sets it again after the
// swap; with GOMEMLIMIT it leaves the operator's limit alone.
func TestMemoryLimitSet(t *testing.T) {
	restoreMemoryLimit(t)
	debug.SetMemoryLimit(math.MaxInt64)
	s := newStack(t)
	lim := debug.SetMemoryLimit(-1)
	if lim == math.MaxInt64 || uint64(lim) < wiring.Footprint() {
		t.Fatalf("after the start: memory limit %d, footprint %d", lim, wiring.Footprint())
	}

	dir := filepath.Join(t.TempDir(), "corpus2")
	if _, err := gen.Write(dir, gen.Options{Seed: 2, Small: true}); err != nil {
		t.Fatal(err)
	}
	s.liftMemoryLimit()
	if got := debug.SetMemoryLimit(-1); got < 2*lim*9/10 || got == math.MaxInt64 {
		t.Fatalf("lifted: memory limit %d, want about twice %d", got, lim)
	}
	b, _ := json.Marshal(map[string]string{"dir": dir})
	if code, m := s.admin("POST", "/admin/v1/corpus/reload", string(b)); code != 200 {
		t.Fatalf("reload: %d %v", code, m)
	}
	if got := debug.SetMemoryLimit(-1); got >= 2*lim*9/10 {
		t.Fatalf("after the reload: memory limit %d, still the lifted one (%d before)", got, lim)
	}
}

func TestMemoryLimitOperators(t *testing.T) {
	restoreMemoryLimit(t)
	const operators = 3 << 30
	debug.SetMemoryLimit(operators) // as the runtime does from GOMEMLIMIT
	dir := t.TempDir()
	writeCorpus(t, filepath.Join(dir, "corpus"))
	s := bootStack(t, testEnv(dir, map[string]string{"GOMEMLIMIT": "3GiB"}), nil)
	t.Cleanup(func() { s.Close() })
	if got := debug.SetMemoryLimit(-1); got != operators {
		t.Fatalf("with GOMEMLIMIT: the origin set the memory limit to %d", got)
	}
	s.liftMemoryLimit()
	s.settleMemory()
	if got := debug.SetMemoryLimit(-1); got != operators {
		t.Fatalf("with GOMEMLIMIT: a reload's lift and settle set the memory limit to %d", got)
	}
}
