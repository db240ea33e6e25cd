// Package wasmbuild builds the edge's WebAssembly module (worker/wasm) for
// the tests and tools that run it: the pinned TinyGo and where it is
// found, the deployed build's flags, the standard Go build that stands in
// without TinyGo, and BuildModule, which copies the last build of
// unchanged sources (internal/buildcache).
//
// It is a build tool: no shipped command links it (internal/deptest). The
// edge command loads a module built by `make worker`; the host names the
// toolchain that built one (worker/wazero's Toolchain).
package wasmbuild

import (
	"os"
	"os/exec"
	"path/filepath"

	"github.com/lectern-api/lectern/internal/buildcache"
)

// TinyGoVersion is the pinned TinyGo: the Makefile's TINYGO_VERSION, the
// one tools/tinygo/build.sh installs.
const TinyGoVersion = "0.42.0"

// TinyGo finds the pinned TinyGo as the Makefile does: $TINYGO when set,
// else tinygo on PATH, else where tools/tinygo/build.sh installs it
// (~/.cache/lectern/tinygo-<TinyGoVersion>/bin/tinygo). It returns "" when
// there is none.
func TinyGo() string {
	if p := os.Getenv("TINYGO"); p != "" {
		return p
	}
	if p, err := exec.LookPath("tinygo"); err == nil {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	p := filepath.Join(home, ".cache/lectern/tinygo-"+TinyGoVersion+"/bin/tinygo")
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return p
	}
	return ""
}

// TinyGoFlags are the flags of the deployed TinyGo build (the Makefile's
// TINYGO_FLAGS, which must say the same: TestMakefileAgrees): a wasip1
// reactor without a scheduler (no goroutines: each exported call runs to
// completion), no debug sections, and -opt=2, which makes every call about
// a quarter faster than TinyGo's default -opt=z for a module about 30%
// larger.
var TinyGoFlags = []string{"-target=wasip1", "-buildmode=c-shared", "-scheduler=none", "-no-debug", "-opt=2"}

// TinyGoBuild is the argument list of `tinygo` that builds pkg into out
// with TinyGoFlags.
func TinyGoBuild(out, pkg string) []string {
	return append(append([]string{"build"}, TinyGoFlags...), "-o", out, pkg)
}

// GoEnv is the environment of the standard Go build of the module, added
// to the process's (the Makefile's worker-go target).
var GoEnv = []string{"GOOS=wasip1", "GOARCH=wasm"}

// GoBuild is the argument list of `go` that builds pkg into out with
// standard Go, run with GoEnv.
func GoBuild(out, pkg string) []string {
	return []string{"build", "-buildmode=c-shared", "-o", out, pkg}
}

// BuildModule builds pkg, the module's package (a path from root, the
// module's root), into out: with TinyGo at tinygo (TinyGoBuild), or with
// standard Go (GoBuild) when tinygo is "". The output of the last build
// of the same sources and compiler is copied instead (internal/buildcache):
// the tests and tools that build the module build it once a change.
func BuildModule(root, tinygo, out, pkg string) error {
	b := buildcache.Build{Dir: root, Out: out, Packages: []string{pkg}, ListEnv: GoEnv}
	if tinygo != "" {
		b.Command = append([]string{tinygo}, TinyGoBuild(out, pkg)...)
	} else {
		b.Command, b.Env = append([]string{"go"}, GoBuild(out, pkg)...), GoEnv
	}
	_, err := buildcache.Run(b)
	return err
}
