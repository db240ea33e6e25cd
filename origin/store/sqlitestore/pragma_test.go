package sqlitestore

import (
	"path/filepath"
	"testing"
)

// TestPragmas checks the settings the durability claim rests on: WAL with
// synchronous=FULL on the write connection, foreign keys everywhere, and
// read connections that cannot write.
func TestPragmas(t *testing.T) {
	s, err := New(t.Context(), filepath.Join(t.TempDir(), "lectern.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tests := []struct {
		pool   string
		pragma string
		want   string
	}{
		{"write", "journal_mode", "wal"},
		{"write", "synchronous", "2"}, // FULL
		{"write", "foreign_keys", "1"},
		{"write", "busy_timeout", "10000"},
		{"read", "journal_mode", "wal"},
		{"read", "foreign_keys", "1"},
		{"read", "query_only", "1"},
	}
	for _, tt := range tests {
		db := s.db
		if tt.pool == "read" {
			db = s.rdb
		}
		var got string
		if err := db.QueryRowContext(t.Context(), "PRAGMA "+tt.pragma).Scan(&got); err != nil {
			t.Fatalf("%s PRAGMA %s: %v", tt.pool, tt.pragma, err)
		}
		if got != tt.want {
			t.Errorf("%s PRAGMA %s: got %s, want %s", tt.pool, tt.pragma, got, tt.want)
		}
	}
}
