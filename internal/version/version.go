// Package version is Lectern's release: the product's semantic version
// (CHANGELOG.md; docs/decisions/releases.md) and the commit a binary was
// built from, read from its build information. Every command's -version
// prints them (String), and the origin's and the edge's GET /healthz
// answer them (internal/telemetry).
//
// The release is a constant of the source, moved by the commit that cuts
// a release (with its CHANGELOG.md section): between releases it is the
// next one with "-dev", and the commit tells builds apart. There is no
// -ldflags override, so a binary, the Cloudflare worker (worker.mjs
// states the same string; TestWorkerStatesTheRelease) and the changelog
// cannot disagree.
package version

import (
	"runtime/debug"
	"strings"
)

// Release is this source's semantic version (semver.org): 0.4.0 was
// commit 46538ac, the first release an upgrade is supported from.
const Release = "0.5.0-dev"

// Build is what a binary's build information says of it.
type Build struct {
	// Commit is the first 12 hex digits of the commit it was built from
	// (vcs.revision), with "+modified" when the tree held uncommitted
	// changes (vcs.modified); empty when none was recorded (go test,
	// -buildvcs=false, a build outside a git checkout).
	Commit string
	// Go is the Go version that built it; empty without build
	// information.
	Go string
}

// Read returns the running binary's Build.
func Read() Build {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Build{}
	}
	return FromInfo(bi)
}

// FromInfo returns the Build that bi describes.
func FromInfo(bi *debug.BuildInfo) Build {
	b := Build{Go: bi.GoVersion}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value[:min(len(s.Value), 12)]
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if b.Commit != "" && modified {
		b.Commit += "+modified"
	}
	return b
}

// String is the line -version prints for command name:
// "origin 0.5.0 (commit 1a2b3c4d5e6f, go1.26.0)", without what the build
// did not record.
func (b Build) String(name string) string {
	var in []string
	if b.Commit != "" {
		in = append(in, "commit "+b.Commit)
	}
	if b.Go != "" {
		in = append(in, b.Go)
	}
	s := name + " " + Release
	if len(in) > 0 {
		s += " (" + strings.Join(in, ", ") + ")"
	}
	return s
}
