package shared

import (
	"go/parser"
	"go/token"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// doc.go lists every package of the module, so that list must follow the
// tree: a package added without a line, or a line left after its package
// went, fails here.
func TestDocListsEveryPackage(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		if fields := strings.Fields(line); strings.HasPrefix(line, "\t") && len(fields) > 1 {
			listed = append(listed, fields[0])
		}
	}

	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = ".." // the module's root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	cmd = exec.Command("go", "list", "-m")
	cmd.Dir = ".."
	mod, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	prefix := strings.TrimSpace(string(mod)) + "/"
	var pkgs []string
	for _, p := range strings.Fields(string(out)) {
		pkgs = append(pkgs, strings.TrimPrefix(p, prefix))
	}

	for _, p := range pkgs {
		if !slices.Contains(listed, p) {
			t.Errorf("doc.go does not list package %s", p)
		}
	}
	for _, p := range listed {
		if !slices.Contains(pkgs, p) {
			t.Errorf("doc.go lists %s, which is not a package of the module", p)
		}
	}
	if len(listed) != len(pkgs) {
		t.Errorf("doc.go lists %d lines for %d packages (a package listed twice?)", len(listed), len(pkgs))
	}
}
