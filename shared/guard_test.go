package shared

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func goList(t *testing.T, env []string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

var wasm = []string{"GOOS=wasip1", "GOARCH=wasm"}

// shared/ is compiled into the TinyGo edge: these packages must not be
// reachable from it at all.
func TestNoForbiddenDeps(t *testing.T) {
	banned := map[string]bool{"encoding/json": true, "net/http": true, "database/sql": true, "syscall/js": true}
	for _, line := range goList(t, wasm, "-deps", "-test=false", "-f", "{{.ImportPath}}", "./...") {
		if banned[line] {
			t.Errorf("shared/ depends on %s", line)
		}
	}
	// reflect is imported by parts of the standard library TinyGo supports;
	// shared/ itself must not use it.
	for _, line := range goList(t, wasm, "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "./...") {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if imp == "reflect" {
				t.Errorf("%s imports reflect", f[0])
			}
		}
	}
}

// Nothing in shared/ reads the wall clock: a wazero guest's clock is fake
// unless the host provides one, so time is always passed in.
func TestNoWallClock(t *testing.T) {
	for _, dir := range goList(t, nil, "-f", "{{.Dir}}", "./...") {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					t.Errorf("%s/%s starts a goroutine", dir, name)
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && n.Sel.Name == "Now" {
						t.Errorf("%s/%s calls time.Now", dir, name)
					}
				}
				return true
			})
		}
	}
}

func TestBuildsForWasip1(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: builds shared/ for wasip1")
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Env = append(os.Environ(), wasm...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=wasip1 GOARCH=wasm go build ./shared/...: %v\n%s", err, out)
	}
}

// Every package in the module says what it is for.
func TestEveryPackageHasDoc(t *testing.T) {
	for _, line := range goList(t, nil, "-f", "{{.ImportPath}}\t{{.Doc}}", "../...") {
		path, doc, _ := strings.Cut(line, "\t")
		if strings.TrimSpace(doc) == "" {
			t.Errorf("package %s has no package comment", path)
		}
	}
}
