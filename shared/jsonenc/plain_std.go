//go:build stdjsonenc

package jsonenc

// Plain returns the length of s's longest prefix of bytes that a JSON
// string holds as they are: ASCII, not a control character, '"' or '\\'.
// This is the byte-at-a-time loop that `-tags stdjsonenc` measures
// against the SWAR scan of plain.go (tools/bench -variants).
func Plain(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return i
		}
	}
	return len(s)
}
