package wazero

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/lectern-api/lectern/internal/buildcache"
)

// Toolchain names the toolchain that built a module, from its custom
// sections: standard Go writes "go:buildid" and a "producers" section
// naming its version; TinyGo (with -no-debug) writes neither.
func Toolchain(wasm []byte) string {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return "unknown (not a WebAssembly module)"
	}
	var buildID bool
	var producers []byte
	for b := wasm[8:]; len(b) > 0; {
		id := b[0]
		size, n := binary.Uvarint(b[1:])
		if n <= 0 || uint64(len(b)-1-n) < size {
			break
		}
		sec := b[1+n : 1+n+int(size)]
		b = b[1+n+int(size):]
		if id != 0 {
			continue
		}
		nameLen, m := binary.Uvarint(sec)
		if m <= 0 || uint64(len(sec)-m) < nameLen {
			continue
		}
		switch name := string(sec[m : m+int(nameLen)]); name {
		case "go:buildid":
			buildID = true
		case "producers":
			producers = sec[m+int(nameLen):]
		}
	}
	switch {
	case bytes.Contains(producers, []byte("TinyGo")), bytes.Contains(producers, []byte("tinygo")):
		return "TinyGo"
	case buildID:
		// The version is a length-prefixed string of the producers section.
		if i := bytes.Index(producers, []byte("go1.")); i > 0 && i+int(producers[i-1]) <= len(producers) {
			return "standard Go (" + string(producers[i:i+int(producers[i-1])]) + ")"
		}
		return "standard Go"
	default:
		return "TinyGo"
	}
}

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
