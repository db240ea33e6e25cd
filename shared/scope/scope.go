// Package scope names the API's OAuth scopes (spec: Authentication §5) and
// holds a token's granted scopes as a small set.
package scope

import "strings"

// Prefix is prepended to every suffix to form the full scope name.
const Prefix = "service-api/"

// The scope suffixes of the spec.
const (
	ContentRead   = "content.read"
	ContentExport = "content.export"
	MediaDownload = "media.download"
	TestprepRead  = "testprep.read"
	ProgressRead  = "progress.read"
	ProgressWrite = "progress.write"
)

// All lists the suffixes in the spec's order.
var All = []string{ContentRead, ContentExport, MediaDownload, TestprepRead, ProgressRead, ProgressWrite}

// Full returns the full scope name of suffix: "service-api/<suffix>".
func Full(suffix string) string { return Prefix + suffix }

// Suffix returns the suffix of a scope given either as a suffix or as a
// full name, and whether it is one of the spec's scopes.
func Suffix(s string) (string, bool) {
	s = strings.TrimPrefix(s, Prefix)
	for _, a := range All {
		if a == s {
			return a, true
		}
	}
	return "", false
}

// Set is a set of the spec's scopes.
type Set uint8

func bit(suffix string) Set {
	for i, a := range All {
		if a == suffix {
			return 1 << i
		}
	}
	return 0
}

// Parse reads a space-separated scope claim (RFC 6749 §3.3). Full names
// count; unknown names and bare suffixes are ignored, because tokens carry
// full names only.
func Parse(claim string) Set {
	var s Set
	for _, f := range strings.Fields(claim) {
		if strings.HasPrefix(f, Prefix) {
			s |= bit(f[len(Prefix):])
		}
	}
	return s
}

// Of returns the set holding the given suffixes.
func Of(suffixes ...string) Set {
	var s Set
	for _, x := range suffixes {
		s |= bit(x)
	}
	return s
}

// Has reports whether the set holds suffix.
func (s Set) Has(suffix string) bool {
	b := bit(suffix)
	return b != 0 && s&b != 0
}

// String is the set as a space-separated claim of full names, in the
// spec's order.
func (s Set) String() string {
	var b strings.Builder
	for i, a := range All {
		if s&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(Prefix)
			b.WriteString(a)
		}
	}
	return b.String()
}
