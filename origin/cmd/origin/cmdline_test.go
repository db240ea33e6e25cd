package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/origin/cmdline"
)

// TestHelpAndVersion: `origin -h` and `origin -version` answer on stdout
// and start nothing (run returns at once with cmdline.ErrDone, which main
// turns into exit status 0).
func TestHelpAndVersion(t *testing.T) {
	for arg, want := range map[string]string{"-h": "$LECTERN_DB", "-version": "origin "} {
		var out bytes.Buffer
		err := run(context.Background(), []string{arg}, func(string) string { return "" }, &out)
		if !errors.Is(err, cmdline.ErrDone) || !strings.Contains(out.String(), want) {
			t.Errorf("%s: %v\n%s", arg, err, out.String())
		}
	}
	if _, err := parseConfig(nil, func(k string) string { return map[string]string{"LECTERN_TEST_CLOCK": "on"}[k] }); err == nil {
		t.Error("LECTERN_TEST_CLOCK=on: accepted")
	}
}
