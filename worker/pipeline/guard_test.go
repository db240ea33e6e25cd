package pipeline

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// guest reports, for a test that reads this package's sources or runs the
// go command, that the tests run as a WebAssembly guest (wasmtest runs
// them compiled by TinyGo), where it cannot: the native run checks the
// same sources. (It logs rather than skips: TinyGo's t.Skip cannot stop a
// test on wasip1, which lacks runtime.Goexit.)
func guest(t *testing.T) bool {
	if runtime.GOOS == "wasip1" {
		t.Log("a source check: the native run makes it")
		return true
	}
	return false
}

// The pipeline is compiled into the TinyGo reactor: like shared/, it may
// not reach encoding/json, net/http, database/sql or syscall/js, nor
// import reflect itself (the module is built by TinyGo with
// -scheduler=none: docs/edge.md).
func TestNoForbiddenDeps(t *testing.T) {
	if guest(t) {
		return
	}
	list := func(args ...string) []string {
		cmd := exec.Command("go", append([]string{"list"}, args...)...)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	banned := map[string]bool{"encoding/json": true, "net/http": true, "database/sql": true, "syscall/js": true}
	for _, dep := range list("-deps", "-test=false", ".", "../wasm") {
		if banned[dep] {
			t.Errorf("the reactor depends on %s", dep)
		}
	}
	for _, imp := range list("-f", `{{join .Imports " "}}`, ".") {
		if imp == "reflect" {
			t.Errorf("pipeline imports %s", imp)
		}
	}
}

// Time arrives in the messages: a wazero guest's clock is fake unless the
// host gives it one, and a reactor's must not be trusted.
func TestNoWallClock(t *testing.T) {
	if guest(t) {
		return
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), "time.Now(") || strings.Contains(string(b), "go func") {
				t.Errorf("%s reads the wall clock or starts a goroutine", name)
			}
		}
	}
}
