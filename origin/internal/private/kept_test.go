package private

import (
	"log/slog"
	"os"
	"strings"
	"testing"
)

// The secret of a PostgreSQL deployment (not local) is never made up in
// var/, and var/ is not touched (issue #14, point 5).
func TestSharedSecretNotMadeUp(t *testing.T) {
	t.Chdir(t.TempDir())
	if _, err := Secret("", false, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "LECTERN_SECRET") {
		t.Errorf("a shared database's secret made up: %v", err)
	}
	if _, err := os.Stat(StateDir); !os.IsNotExist(err) {
		t.Errorf("Secret for a shared database touched %s/ (%v)", StateDir, err)
	}
}
