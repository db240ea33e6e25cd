package sqlitemeter_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestSharedFiles checks that the files sqlitemeter and pgmeter share
// stay identical but for their package clause.
func TestSharedFiles(t *testing.T) {
	for _, name := range []string{"eval.go", "commit.go"} {
		a, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("..", "pgmeter", name))
		if err != nil {
			t.Fatal(err)
		}
		_, a, _ = bytes.Cut(a, []byte("\n"))
		_, b, _ = bytes.Cut(b, []byte("\n"))
		if !bytes.Equal(a, b) {
			t.Errorf("sqlitemeter/%s and pgmeter/%s differ beyond the package clause", name, name)
		}
	}
}
