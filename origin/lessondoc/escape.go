package lessondoc

import (
	"unicode/utf8"

	"github.com/lectern-api/lectern/shared/jsonenc"
)

// Texts are escaped per request (the package doc says why), so escaping
// is on the path of every document but the precompressed one. Nearly
// every byte of the corpus's texts is held as it is (ASCII that is not a
// control character, '"' or '\\'; the bodies' line breaks are the usual
// exception): appendInner finds such runs eight bytes at a time and
// copies them, and gives jsonenc.String only what lies between them, so
// that what it writes is jsonenc.String's (a JSON string is the
// concatenation of its escaped parts, cut between characters).

// appendString appends s as a JSON string, as jsonenc.String does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendInner(dst, s)
	return append(dst, '"')
}

// appendStrings appends ss as a JSON array of strings, as
// jsonenc.Strings does.
func appendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, s)
	}
	return append(dst, ']')
}

// appendInner appends s escaped as in a JSON string, without the quotes.
func appendInner(dst []byte, s string) []byte {
	for {
		k := plainPrefix(s)
		dst = append(dst, s[:k]...)
		if k == len(s) {
			return dst
		}
		// Escape up to the next ASCII byte: a character boundary.
		j := k + 1
		for j < len(s) && s[j] >= utf8.RuneSelf {
			j++
		}
		n := len(dst)
		dst = jsonenc.String(dst, s[k:j])
		copy(dst[n:], dst[n+1:len(dst)-1])
		dst = dst[:len(dst)-2]
		s = s[j:]
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainPrefix is jsonenc.Plain(s), the length of s's longest prefix that
// a JSON string holds as it is, with eight bytes tested at a time: a word
// holds a byte that is not plain if one has its high bit set, is below
// 0x20, or equals '"' or '\\' (each test exact for the word, not the
// byte).
func plainPrefix(s string) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		t := s[i : i+8] // one load, no bounds checks
		w := uint64(t[0]) | uint64(t[1])<<8 | uint64(t[2])<<16 | uint64(t[3])<<24 |
			uint64(t[4])<<32 | uint64(t[5])<<40 | uint64(t[6])<<48 | uint64(t[7])<<56
		q, b := w^('"'*ones), w^('\\'*ones)
		if (w|(w-0x20*ones)|(q-ones)&^q|(b-ones)&^b)&highs != 0 {
			break
		}
	}
	return i + jsonenc.Plain(s[i:])
}
