package tools

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestProductImportsNoTool fails when a Go file outside tools/ imports a
// package under it. It reads every file, test files and files behind any
// build constraint included, so a wasip1-only or test-only import counts
// too; a package that never imports tools/ directly cannot reach it
// through another.
func TestProductImportsNoTool(t *testing.T) {
	const root = ".."
	tools := modulePath(t, root) + "/tools"
	var seen int
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p == root {
				return nil
			}
			// What the go command ignores, tools/ itself, and nested modules.
			if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || p == filepath.Join(root, "tools") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		seen++
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if path == tools || strings.HasPrefix(path, tools+"/") {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s imports %s: the product never imports a tool", filepath.ToSlash(rel), path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("found no Go file outside tools/: the walk checked nothing")
	}
}

// modulePath reads the module path from root/go.mod.
func modulePath(t *testing.T, root string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

// TestReadmeListsEveryVariable fails when a non-test Go file names a
// LECTERN_ environment variable that README.md does not: the commands
// read their settings from the environment, and the README is where a
// user finds them. Test-support packages (their directory ends in
// "test") are left out: their variables are the tests' own.
func TestReadmeListsEveryVariable(t *testing.T) {
	const root = ".."
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`"(LECTERN_[A-Z0-9_]+)"`)
	found := map[string]string{} // variable: a file naming it
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || strings.HasSuffix(d.Name(), "test")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range name.FindAllStringSubmatch(string(b), -1) {
			found[m[1]] = filepath.ToSlash(p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found["LECTERN_DB"] == "" {
		t.Fatal("no file names LECTERN_DB: the walk checked nothing")
	}
	for v, file := range found {
		if !regexp.MustCompile("`" + v + "`").Match(readme) {
			t.Errorf("%s reads %s, which README.md does not list", file, v)
		}
	}
}
