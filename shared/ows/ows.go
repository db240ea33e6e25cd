// Package ows trims the optional whitespace around HTTP field values and
// their list elements (RFC 9110 §5.6.3: OWS is spaces and horizontal tabs),
// one rule for every field both tiers parse.
package ows

// Trim returns s without its leading and trailing spaces and tabs.
func Trim(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
