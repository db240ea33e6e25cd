// Package reqid is the request id rule both tiers follow (X-Request-Id):
// an incoming id of 8 to 64 characters of [A-Za-z0-9._-] is kept, so that
// the edge and the origin log one id for a request, and any other is
// replaced by a new one, "req_" and 24 lowercase hex digits. It is the one
// place ids are made: the API's (New, Keep, Append), and the few of
// another shape (NewOf).
package reqid

import "crypto/rand"

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

// Keep is in when it may be kept as the request's id (Valid), and
// otherwise a new id (New).
func Keep(in string) string {
	if Valid(in) {
		return in
	}
	return New()
}

// New is a new id: Prefix and RandomBytes bytes from crypto/rand in
// lowercase hex.
func New() string {
	var b [RandomBytes]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return string(Append(nil, &b))
}

// Append appends to dst the new id made of random, Prefix and the bytes
// in lowercase hex (for a caller with a random source of its own).
func Append(dst []byte, random *[RandomBytes]byte) []byte {
	return appendHex(append(dst, Prefix...), random[:])
}

// NewOf is a new id of another shape than the API's: prefix and n bytes
// from crypto/rand in lowercase hex. The admin API's are ("", 8), 16
// digits; the edge host's own failures' ("edge_", RandomBytes).
func NewOf(prefix string, n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return string(appendHex(append(make([]byte, 0, len(prefix)+2*n), prefix...), b))
}

func appendHex(dst, b []byte) []byte {
	const hex = "0123456789abcdef"
	for _, c := range b {
		dst = append(dst, hex[c>>4], hex[c&0xf])
	}
	return dst
}
