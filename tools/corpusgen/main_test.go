package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestRunPrintsSummaryLast(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"-out", t.TempDir(), "-small", "-seed", "3", "-date", "2026-12-24"}, &out, &errb); err != nil {
		t.Fatal(err, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	for _, k := range []string{"tiers", "subjects", "classes", "media", "testprepItems", "contentVersion"} {
		if _, ok := got[k]; !ok {
			t.Errorf("summary lacks %q: %s", k, lines[len(lines)-1])
		}
	}
	if len(got) != 6 {
		t.Errorf("summary has %d keys, want 6", len(got))
	}
	if v, _ := got["contentVersion"].(string); !strings.HasPrefix(v, "2026-12-24+") {
		t.Errorf("contentVersion %q does not carry the -date", v)
	}
}

func TestRunUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run(nil, &out, &errb); err == nil {
		t.Error("no -out: want an error")
	}
}

func TestRunScaleRefusedWithSmall(t *testing.T) {
	var out, errb bytes.Buffer
	if err := run([]string{"-out", t.TempDir(), "-small", "-scale", "2"}, &out, &errb); err == nil {
		t.Error("-small -scale 2: want an error")
	}
}
