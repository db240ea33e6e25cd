// Package vectorstest is for tests: it reads the testdata vector files of
// the shared/ packages, for their tests and for wasmtest, which drives the
// same files through the module, so that the native and the wasm pipeline
// are held to one truth. It is TinyGo-safe, as all of shared/ is.
//
// A vector file holds one case a line, its fields separated by "----":
//
//	input ---- expected
//
// Blank lines, "#" alone and lines starting with "# " are comments (so an
// input may itself start with "#").
package vectorstest

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// Vector is one case of a vector file: its line number, for messages, and
// its fields, each trimmed of spaces; the last is the expectation.
type Vector struct {
	Line   int
	Fields []string
}

// Read reads the vector file at path, whose every case has nfields
// fields. It stops the test on a malformed line or an empty file.
func Read(t testing.TB, path string, nfields int) []Vector {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var vs []Vector
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || line == "#" || strings.HasPrefix(line, "# ") {
			continue
		}
		fields := strings.Split(line, "----")
		if len(fields) != nfields {
			t.Fatalf("%s:%d: got %d fields, want %d: %q", path, n, len(fields), nfields, line)
		}
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		vs = append(vs, Vector{Line: n, Fields: fields})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatalf("%s: no vectors", path)
	}
	return vs
}
