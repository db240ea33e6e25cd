// Package buildcache keeps what the tests and tools build again and again
// from unchanged sources, the edge module and the TinyGo test binaries, by
// the hash of everything that makes their bytes: a TinyGo build takes a
// minute of CPU, a cached one a file copy. Go's own build cache does this
// for Go packages; TinyGo has none for a whole program.
//
// The key hashes the command (its arguments and environment), the
// compiler (its path, size and time) and the Go toolchain it builds with,
// and every file of the module's packages the build reads (go list -deps,
// with -test for a test binary), testdata included, and go.mod and go.sum.
// Entries live in the user's cache directory (LECTERN_BUILD_CACHE names
// another; "off" builds every time), written by rename so that concurrent
// test binaries never read a partial one; entries unused for a week are
// removed.
package buildcache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Build is one build: Command run in Dir (the module's root) writes the
// file at Out. The command's arguments name Out; Key replaces it with a
// placeholder, so the key does not depend on where the output goes.
type Build struct {
	Dir     string   // where the command runs, in the module
	Command []string // the compiler and its arguments
	Env     []string // added to the environment (NAME=value), part of the key
	Out     string   // the file the command writes
	// Packages are the package patterns whose sources the output is made
	// of (with their dependencies in the module); Test lists those of
	// their tests too.
	Packages []string
	Test     bool
	// ListEnv is the environment Packages are listed in (the target's
	// GOOS and GOARCH: TinyGo takes them from its flags); nil: Env.
	ListEnv []string
}

// keep is how long an unused entry stays.
const keep = 7 * 24 * time.Hour

// Dir is the cache's directory: LECTERN_BUILD_CACHE, else lectern/builds
// in the user's cache directory. "" means off.
func Dir() string {
	switch d := os.Getenv("LECTERN_BUILD_CACHE"); d {
	case "off":
		return ""
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(base, "lectern", "builds")
	default:
		return d
	}
}

// Run makes b.Out: a copy of the cached output of the same inputs, or the
// command's output, then kept. It reports whether the output came from the
// cache. When the inputs cannot be hashed, or the cache is off or cannot
// be written, it runs the command as it is.
func Run(b Build) (cached bool, err error) {
	dir := Dir()
	if dir == "" {
		return false, b.run()
	}
	key, err := b.Key()
	if err != nil {
		return false, b.run()
	}
	entry := filepath.Join(dir, key)
	if copyFile(entry, b.Out) == nil {
		now := time.Now()
		os.Chtimes(entry, now, now) // used: kept another week
		return true, nil
	}
	if err := b.run(); err != nil {
		return false, err
	}
	if os.MkdirAll(dir, 0o755) == nil {
		prune(dir)
		tmp := fmt.Sprintf("%s.%d.tmp", entry, os.Getpid())
		if copyFile(b.Out, tmp) == nil && os.Rename(tmp, entry) != nil {
			os.Remove(tmp)
		}
	}
	return false, nil
}

func (b Build) run() error {
	if len(b.Command) == 0 {
		return errors.New("buildcache: no command")
	}
	cmd := exec.Command(b.Command[0], b.Command[1:]...)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), b.Env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(b.Command, " "), err, out)
	}
	return nil
}

// Key is the hash of b's inputs, in hex.
func (b Build) Key() (string, error) {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s\n", len(s), s) }
	field("lectern buildcache 1")
	for _, a := range b.Command {
		if a == b.Out {
			a = "<out>"
		}
		field(a)
	}
	for _, kv := range b.Env {
		field(kv)
	}
	compiler, err := exec.LookPath(b.Command[0])
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(compiler)
	if err != nil {
		return "", err
	}
	field(fmt.Sprintf("%s %d %d", compiler, fi.Size(), fi.ModTime().UnixNano()))
	goenv, err := b.goCmd(b.Env, "env", "GOMOD", "GOROOT", "GOVERSION", "GOFLAGS")
	if err != nil {
		return "", err
	}
	gomod, rest, _ := strings.Cut(goenv, "\n")
	field(rest) // not where the module is: a fresh clone finds its builds
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("buildcache: not in a module")
	}
	root := filepath.Dir(gomod)
	args := []string{"list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}"}
	if b.Test {
		args = append(args, "-test")
	}
	listEnv := b.Env
	if b.ListEnv != nil {
		listEnv = b.ListEnv
	}
	dirs, err := b.goCmd(listEnv, append(args, b.Packages...)...)
	if err != nil {
		return "", err
	}
	var inModule []string
	for _, d := range strings.Fields(dirs) {
		if d == root || strings.HasPrefix(d, root+string(filepath.Separator)) {
			inModule = append(inModule, d)
		}
	}
	slices.Sort(inModule)
	inModule = slices.Compact(inModule)
	files := []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	for _, d := range inModule {
		// The package's files, and its testdata (a test may embed it).
		ents, err := os.ReadDir(d)
		if err != nil {
			return "", err
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				files = append(files, filepath.Join(d, e.Name()))
			}
		}
		filepath.WalkDir(filepath.Join(d, "testdata"), func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				files = append(files, p)
			}
			return nil
		})
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f) // the module may be anywhere
		field(rel)
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) && filepath.Dir(f) == root {
			continue // a module without go.sum
		}
		if err != nil {
			return "", err
		}
		field(string(data))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// goCmd runs the go command in b.Dir with env added and returns its
// output.
func (b Build) goCmd(env []string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = b.Dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// copyFile copies src to dst, mode 0644 (0755 when src is executable).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if fi.Mode()&0o100 != 0 {
		mode = 0o755
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// prune removes the entries unused for longer than keep, and temporary
// files a killed run left.
func prune(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > keep {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
