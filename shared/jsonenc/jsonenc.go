// Package jsonenc appends JSON values to byte slices without reflection, so
// that code shared with the TinyGo edge can write JSON (encoding/json is not
// TinyGo-safe and is banned from shared/).
package jsonenc

import (
	"strconv"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// String appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, control
// characters are escaped, and so are U+2028 and U+2029 so the output is also
// safe to embed in JavaScript.
func String(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			if i += Plain(s[i:]); i == len(s) {
				break
			}
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Strings appends ss as a JSON array of strings; nil appends [].
func Strings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = String(dst, s)
	}
	return append(dst, ']')
}

// Pairs appends the array of string pairs [[a,b],...] that kv reads from
// items (the header lists of the edge's messages).
func Pairs[T any](dst []byte, items []T, kv func(T) (string, string)) []byte {
	dst = append(dst, '[')
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		a, b := kv(it)
		dst = append(dst, '[')
		dst = String(dst, a)
		dst = append(dst, ',')
		dst = String(dst, b)
		dst = append(dst, ']')
	}
	return append(dst, ']')
}

// Int appends n as a JSON number.
func Int(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }

// Bool appends b as a JSON boolean.
func Bool(dst []byte, b bool) []byte { return strconv.AppendBool(dst, b) }

// Key appends a member name and its colon, preceded by a comma unless dst
// ends with '{'.
func Key(dst []byte, name string) []byte {
	if n := len(dst); n > 0 && dst[n-1] != '{' {
		dst = append(dst, ',')
	}
	dst = String(dst, name)
	return append(dst, ':')
}

// Plain returns the length of s's longest prefix of bytes that a JSON
// string holds as they are: ASCII, not a control character, '"' or '\\'.
// String and the edge module's message scanner skip such runs with it.
func Plain(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return i
		}
	}
	return len(s)
}
