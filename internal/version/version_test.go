package version

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// semver is a semantic version (semver.org, 2.0.0) without build
// metadata: MAJOR.MINOR.PATCH and an optional pre-release.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func TestReleaseIsSemver(t *testing.T) {
	if !semver.MatchString(Release) {
		t.Errorf("Release %q is not a semantic version", Release)
	}
}

func TestFromInfoAndString(t *testing.T) {
	rev := "46538ac0123456789abcdef0123456789abcdef0"
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{nil, "origin " + Release + " (go1.26.0)"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}, "origin " + Release + " (commit 46538ac01234, go1.26.0)"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: rev}}, "origin " + Release + " (commit 46538ac01234+modified, go1.26.0)"},
		{[]debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, "origin " + Release + " (go1.26.0)"}, // no commit: nothing to call modified
	} {
		b := FromInfo(&debug.BuildInfo{GoVersion: "go1.26.0", Settings: tc.settings})
		if got := b.String("origin"); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.settings, got, tc.want)
		}
	}
	if got := (Build{}).String("edge"); got != "edge "+Release {
		t.Errorf("no build information: %q", got)
	}
	if got := Read().String("adminctl"); !strings.HasPrefix(got, "adminctl "+Release+" (go") {
		t.Errorf("the test binary: %q", got) // a test binary records no commit
	}
}

// The Cloudflare host cannot read this package: worker.mjs states the
// release itself, and this holds it to Release.
func TestWorkerStatesTheRelease(t *testing.T) {
	b, err := os.ReadFile("../../worker/cloudflare/worker.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if want := `const RELEASE = "` + Release + `";`; !strings.Contains(string(b), want) {
		t.Errorf("worker.mjs does not state %s", want)
	}
}

// CHANGELOG.md has the release's section: "Unreleased" while Release is
// a -dev pre-release (the next release's changes), else its own.
func TestChangelogHasTheRelease(t *testing.T) {
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	want := "## [" + Release + "]"
	if strings.HasSuffix(Release, "-dev") {
		want = "## [Unreleased]"
	}
	if !strings.Contains(string(b), "\n"+want) {
		t.Errorf("CHANGELOG.md has no section %q", want)
	}
	if !strings.Contains(string(b), "\n## [0.4.0]") {
		t.Error("CHANGELOG.md has no section of 0.4.0, the first release upgrades are supported from")
	}
}

// A binary built in the checkout names its commit: go build records it
// (-buildvcs=true here, since GOFLAGS may say false), and -version and
// /healthz read it. Skipped outside a git checkout.
func TestBuiltBinaryNamesItsCommit(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout (git rev-parse HEAD: %v)", err)
	}
	bin := filepath.Join(t.TempDir(), "printversion")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./testdata/printversion").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "printversion " + Release + " (commit " + string(head[:12])
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("%q, want it to start %q", out, want)
	}
}
