package deptest

import (
	"strings"
	"testing"
)

func TestDev(t *testing.T) {
	for path, dev := range map[string]bool{
		"internal/buildcache":                true,
		"worker/wasmbuild":                   true,
		"internal/pgschema":                  true,
		"internal/proctest":                  true,
		"internal/tmpfstest":                 true,
		"internal/deptest":                   true,
		"internal/telemetry/telemetrytest":   true,
		"shared/vectorstest":                 true,
		"shared/logbuftest":                  true,
		"tools/internal/stackbin":            true,
		"tools/lectern/internal/lecterntest": true,
		"worker/wazero/wazerotest":           true,
		"wasmtest":                           true,
		"internal/cmdline":                   false,
		"internal/telemetry":                 false,
		"worker/wazero":                      false,
		"shared/token":                       false,
		"tools/lectern/api":                  false,
		"origin/corpus/gen":                  false,
		"origin/internal/private":            false,
		"internal/buildcache/more":           false, // only the named package
		"tools/internalize":                  false,
	} {
		if got := Dev(path) != ""; got != dev {
			t.Errorf("Dev(%q) = %q, want development code: %v", path, Dev(path), dev)
		}
	}
}

// TestLinksFindsDevCode runs Links on packages that link what no shipped
// command may: a test kit (the module's build and itself), and a package
// whose name hides that it imports testing.
func TestLinksFindsDevCode(t *testing.T) {
	for dir, want := range map[string][]string{
		"../../worker/wazero/wazerotest": {
			"/internal/buildcache: a build tool",
			"/worker/wasmbuild: a build tool",
			"/worker/wazero/wazerotest: a test kit",
		},
		"testdata/kit": {"/internal/deptest/testdata/kit: imports testing"},
	} {
		bad, err := Links(dir)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(bad, "\n")
		for _, w := range want {
			if !strings.Contains(all, w) {
				t.Errorf("Links(%s) does not report %q; it reports:\n%s", dir, w, all)
			}
		}
	}
}
