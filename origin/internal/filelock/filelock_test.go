//go:build unix

package filelock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// Two spellings of one database's lock (a symlinked directory) are one
// lock; it is free again once closed.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	f, err := Lock(filepath.Join(real, "db.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(filepath.Join(link, "db.lock")); !errors.Is(err, ErrHeld) {
		t.Fatalf("second lock through a symlink: %v, want ErrHeld", err)
	}
	f.Close()
	g, err := Lock(filepath.Join(link, "db.lock"))
	if err != nil {
		t.Fatalf("lock after close: %v", err)
	}
	g.Close()
}
