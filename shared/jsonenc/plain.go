//go:build !stdjsonenc

package jsonenc

import "unsafe"

// SWAR constants: a byte repeated in every lane of a uint64.
const (
	lanes = 0x0101010101010101
	highs = 0x8080808080808080
)

// Plain returns the length of s's longest prefix of bytes that a JSON
// string holds as they are: ASCII, not a control character, '"' or '\\'.
// It tests eight bytes at a time (SWAR), which under TinyGo in wazero is
// several times faster than a loop over bytes; the string codecs of the
// edge module run every header through it.
func Plain(s string) int {
	i := 0
	if len(s) >= 8 {
		p := unsafe.Pointer(unsafe.StringData(s))
		for ; i+8 <= len(s); i += 8 {
			// One unaligned load (wasm, amd64 and arm64 allow it); the
			// test below is the same in either byte order.
			x := *(*uint64)(unsafe.Add(p, i))
			if (x|(x-0x20*lanes)|zeroLane(x^'"'*lanes)|zeroLane(x^'\\'*lanes))&highs != 0 {
				break
			}
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			break
		}
	}
	return i
}

// zeroLane has the high bit of some lane set if a lane of x is zero, and
// of none if none is (its high bits are exact as a whole, not per lane).
func zeroLane(x uint64) uint64 { return (x - lanes) &^ x }
