package wasmbuild

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestMakefileAgrees holds the Makefile's TinyGo pin and flags (make cannot
// call Go, so it says them again) to TinyGoVersion and TinyGoFlags.
func TestMakefileAgrees(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `\s*:=\s*([^#\n]*)`).FindSubmatch(mk)
		if m == nil {
			t.Fatalf("the Makefile sets no %s", name)
		}
		return strings.Join(strings.Fields(string(m[1])), " ")
	}
	if got := value("TINYGO_VERSION"); got != TinyGoVersion {
		t.Errorf("Makefile TINYGO_VERSION = %q, TinyGoVersion = %q", got, TinyGoVersion)
	}
	if got, want := value("TINYGO_FLAGS"), strings.Join(TinyGoFlags, " "); got != want {
		t.Errorf("Makefile TINYGO_FLAGS = %q, TinyGoFlags = %q", got, want)
	}
}
