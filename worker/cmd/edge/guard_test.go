package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/internal/deptest"
)

// TestLinksNothingOfTheOrigin: the edge is a product binary of its own.
// It shares the commands' settings, listeners and telemetry with the
// origin (internal/...), and links no package of the origin's domain
// (meters, stores, licences) nor any tool.
func TestLinksNothingOfTheOrigin(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test=false", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const mod = "github.com/lectern-api/lectern/"
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, dep := range deps {
		if p, ok := strings.CutPrefix(dep, mod); ok && (strings.HasPrefix(p, "origin/") || strings.HasPrefix(p, "tools/")) {
			t.Errorf("the edge command links %s", dep)
		}
	}
}

// TestShipsNoDevCode: the edge command ships (README, Layout), so it links
// no test kit, build tool or tools/internal package (deptest.Dev): the
// module's build is worker/wasmbuild's, not its host's.
func TestShipsNoDevCode(t *testing.T) { deptest.ShipsNoDevCode(t) }
