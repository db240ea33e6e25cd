// Package deptest is for the guard test of each shipped command (README,
// Layout: origin/cmd/origin, worker/cmd/edge, tools/adminctl,
// tools/lectern): what ships links no development code, which Dev names.
// It reads the command's dependencies as the go command does
// (`go list -deps`), so an import through any other package counts.
package deptest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// builds are the development packages whose names do not end in "test":
// the build tools, and the kit tests share with the tools' runs
// (pgschema).
var builds = map[string]string{
	"internal/buildcache": "a build tool (the module and TinyGo test binaries cached)",
	"worker/wasmbuild":    "a build tool (the edge module's build)",
	"internal/pgschema":   "a test and tool kit (temporary PostgreSQL schemas)",
}

// Dev says why the module's package at path (from the module's root, as
// "internal/buildcache") is development code that no shipped command may
// link, or "" when it may: a build tool or test kit named in this
// package, a package whose name ends in "test" (the test kits'
// convention: proctest, wazerotest, storetest), or one of what the
// tools share (tools/internal/...).
func Dev(path string) string {
	if why := builds[path]; why != "" {
		return why
	}
	if strings.HasSuffix(path[strings.LastIndex(path, "/")+1:], "test") {
		return "a test kit (its name ends in \"test\")"
	}
	if path == "tools/internal" || strings.HasPrefix(path, "tools/internal/") {
		return "what the tools share (tools/internal)"
	}
	return ""
}

// Links lists what the package in dir (a command's folder) links that it
// must not, one line each: the module's packages Dev names, and any
// package that imports "testing", whatever its name.
func Links(dir string) ([]string, error) {
	cmd := exec.Command("go", "list", "-deps", "-test=false",
		"-f", "{{.ImportPath}}\t{{with .Module}}{{if .Main}}{{.Path}}{{end}}{{end}}\t{{join .Imports \" \"}}", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		if e, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%v\n%s", err, e.Stderr)
		}
		return nil, fmt.Errorf("go list -deps: %v", err)
	}
	var bad []string
	var n int
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("go list -deps: unexpected line %q", line)
		}
		n++
		pkg, mod, imports := f[0], f[1], strings.Fields(f[2])
		if mod != "" {
			if why := Dev(strings.TrimPrefix(pkg, mod+"/")); why != "" {
				bad = append(bad, pkg+": "+why)
				continue
			}
		}
		for _, imp := range imports {
			if imp == "testing" {
				bad = append(bad, pkg+": imports testing")
			}
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("go list -deps listed nothing in %s", dir)
	}
	return bad, nil
}

// ShipsNoDevCode fails t for each package the command in the test's
// working directory (its own folder) links that it must not (Links).
func ShipsNoDevCode(t testing.TB) {
	t.Helper()
	bad, err := Links(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("a shipped command links %s", b)
	}
}
