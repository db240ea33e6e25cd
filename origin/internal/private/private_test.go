package private

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOpenSQLite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	db := filepath.Join(dir, "lectern.db")
	loose, err := OpenSQLite(db)
	if err != nil || len(loose) != 0 {
		t.Fatalf("on a new path: %v, %v", loose, err)
	}
	for path, want := range map[string]os.FileMode{dir: DirMode, db: FileMode} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want %v", path, fi.Mode(), err, want)
		}
	}
	if _, err := os.Stat(db + "-wal"); err == nil {
		t.Error("a -wal was created: only SQLite creates it")
	}
	os.Chmod(db, 0o644)
	os.WriteFile(db+"-wal", nil, 0o600)
	os.Chmod(db+"-wal", 0o664) // past the umask
	loose, err = OpenSQLite(db)
	if err != nil || loose[db] != 0o644 || loose[db+"-wal"] != 0o664 || len(loose) != 2 {
		t.Fatalf("over loose files: %v, %v", loose, err)
	}
	for _, path := range []string{db, db + "-wal"} {
		if fi, _ := os.Stat(path); fi.Mode().Perm() != FileMode {
			t.Errorf("%s: %v after tightening", path, fi.Mode())
		}
	}
}
