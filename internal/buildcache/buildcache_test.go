package buildcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// module writes a one-package module with a fake compiler: a script that
// writes its second argument's package source into its first (the
// output) and counts its runs in runs.
func module(t *testing.T) (root, compiler, runs string) {
	t.Helper()
	root = t.TempDir()
	write := func(name, data string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.24\n", 0o644)
	write("p/p.go", "package p\n\nconst V = 1\n", 0o644)
	write("p/testdata/vector.txt", "a\n", 0o644)
	write("q/q.go", "package q\n", 0o644) // not a dependency of p
	tools := t.TempDir()
	runs = filepath.Join(tools, "runs")
	compiler = filepath.Join(tools, "compile.sh")
	if err := os.WriteFile(compiler, []byte("#!/bin/sh\necho run >> "+runs+"\ncat p/p.go > \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root, compiler, runs
}

func TestRun(t *testing.T) {
	t.Setenv("LECTERN_BUILD_CACHE", t.TempDir())
	root, compiler, runs := module(t)
	build := func(out string) Build {
		return Build{Dir: root, Command: []string{compiler, out}, Out: out, Packages: []string{"./p"}}
	}
	count := func() int {
		data, _ := os.ReadFile(runs)
		return strings.Count(string(data), "run")
	}
	step := func(name, out string, wantCached bool, wantRuns int) {
		t.Helper()
		cached, err := Run(build(out))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cached != wantCached || count() != wantRuns {
			t.Errorf("%s: cached %v after %d compiler runs, want %v after %d", name, cached, count(), wantCached, wantRuns)
		}
		got, err := os.ReadFile(out)
		src, _ := os.ReadFile(filepath.Join(root, "p/p.go"))
		if err != nil || string(got) != string(src) {
			t.Errorf("%s: output %q (%v), want %q", name, got, err, src)
		}
	}
	dir := t.TempDir()
	step("first build", filepath.Join(dir, "a"), false, 1)
	step("same inputs, another output path", filepath.Join(dir, "b"), true, 1)
	if err := os.WriteFile(filepath.Join(root, "q/q.go"), []byte("package q\n\nconst W = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	step("a package the build does not read changed", filepath.Join(dir, "c"), true, 1)
	if err := os.WriteFile(filepath.Join(root, "p/p.go"), []byte("package p\n\nconst V = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	step("a source changed", filepath.Join(dir, "d"), false, 2)
	if err := os.WriteFile(filepath.Join(root, "p/testdata/vector.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	step("its testdata changed", filepath.Join(dir, "e"), false, 3)
	step("unchanged again", filepath.Join(dir, "f"), true, 3)

	// The same module elsewhere (a fresh clone) finds the build.
	clone := t.TempDir()
	if err := os.CopyFS(clone, os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	root = clone
	step("a clone", filepath.Join(dir, "clone"), true, 3)

	t.Setenv("LECTERN_BUILD_CACHE", "off")
	step("cache off", filepath.Join(dir, "g"), false, 4)
}

// TestKeyOfEnvironment: the same sources built with another environment
// (GOOS, flags) are another entry.
func TestKeyOfEnvironment(t *testing.T) {
	root, compiler, _ := module(t)
	b := Build{Dir: root, Command: []string{compiler, "out"}, Out: "out", Packages: []string{"./p"}}
	k1, err := b.Key()
	if err != nil {
		t.Fatal(err)
	}
	b.Env = []string{"CGO_ENABLED=0"}
	k2, err := b.Key()
	if err != nil {
		t.Fatal(err)
	}
	b.Out, b.Command = "elsewhere", []string{compiler, "elsewhere"}
	k3, err := b.Key()
	if err != nil {
		t.Fatal(err)
	}
	if k1 == k2 {
		t.Error("an environment changed and the key did not")
	}
	if k2 != k3 {
		t.Error("only the output path changed and the key did")
	}
}

func TestCommandFails(t *testing.T) {
	t.Setenv("LECTERN_BUILD_CACHE", t.TempDir())
	root, _, _ := module(t)
	out := filepath.Join(t.TempDir(), "out")
	_, err := Run(Build{Dir: root, Command: []string{"false", out}, Out: out, Packages: []string{"./p"}})
	if err == nil {
		t.Fatal("a failing command: no error")
	}
	if _, err := Run(Build{Dir: root, Command: []string{"false", out}, Out: out, Packages: []string{"./p"}}); err == nil {
		t.Fatal("a failing command, again: no error (a failure was cached)")
	}
}
