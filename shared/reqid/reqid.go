// Package reqid is the request id rule both tiers follow (X-Request-Id):
// an incoming id of 8 to 64 characters of [A-Za-z0-9._-] is kept, so that
// the edge and the origin log one id for a request, and any other is
// replaced by a new one, "req_" and 24 lowercase hex digits.
package reqid

// Prefix begins every id this package makes.
const Prefix = "req_"

// RandomBytes is how many random bytes a new id holds.
const RandomBytes = 12

// Valid reports whether in may be kept as the request's id.
func Valid(in string) bool {
	n := len(in)
	if n < 8 || n > 64 {
		return false
	}
	for i := 0; i < n; i++ {
		c := in[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Append appends to dst the new id made of random, Prefix and the bytes
// in lowercase hex.
func Append(dst []byte, random *[RandomBytes]byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, Prefix...)
	for _, c := range random {
		dst = append(dst, hex[c>>4], hex[c&0xf])
	}
	return dst
}
