//go:build !stdhmac

package edgesig

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
)

// padded is HMAC-SHA-256 (RFC 2104 over FIPS 180-4's SHA-256) with the
// states after the key's inner and outer pad blocks computed once, so
// that a sum hashes only the message's blocks and one outer block, into
// memory of the caller's: it never allocates. The edge signs every
// request it passes on; under TinyGo, crypto/hmac allocated four times a
// sum (crypto/sha256's Sum copies its digest to the heap there) and
// hashed the inner pad again each time. Signer uses it; Verify, on the
// origin, keeps crypto/hmac, so every signature the edge makes is checked
// by the standard library's, and TestPaddedMatchesHMAC holds the two
// equal.
type padded struct {
	inner, outer [8]uint32
}

func newPadded(key []byte) padded {
	if len(key) > sha256.BlockSize {
		k := sha256.Sum256(key)
		key = k[:]
	}
	var pad [sha256.BlockSize]byte
	copy(pad[:], key)
	for i := range pad {
		pad[i] ^= 0x36
	}
	p := padded{inner: iv, outer: iv}
	blocks(&p.inner, pad[:])
	for i := range pad {
		pad[i] ^= 0x36 ^ 0x5c
	}
	blocks(&p.outer, pad[:])
	return p
}

// sum writes the HMAC of msg to out.
func (p *padded) sum(msg []byte, out *[sha256.Size]byte) {
	h := p.inner
	full := len(msg) &^ (sha256.BlockSize - 1)
	blocks(&h, msg[:full])
	var tail [2 * sha256.BlockSize]byte
	n := copy(tail[:], msg[full:])
	tail[n] = 0x80
	end := sha256.BlockSize
	if n >= sha256.BlockSize-8 {
		end = 2 * sha256.BlockSize
	}
	binary.BigEndian.PutUint64(tail[end-8:], uint64(sha256.BlockSize+len(msg))*8)
	blocks(&h, tail[:end])

	var outerBlock [sha256.BlockSize]byte
	for i, v := range h {
		binary.BigEndian.PutUint32(outerBlock[4*i:], v)
	}
	outerBlock[sha256.Size] = 0x80
	binary.BigEndian.PutUint64(outerBlock[sha256.BlockSize-8:], (sha256.BlockSize+sha256.Size)*8)
	o := p.outer
	blocks(&o, outerBlock[:])
	for i, v := range o {
		binary.BigEndian.PutUint32(out[4*i:], v)
	}
}

// iv is SHA-256's initial hash value.
var iv = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

var k = [64]uint32{
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

// blocks runs SHA-256's compression function over p, a whole number of
// blocks, from state h.
func blocks(h *[8]uint32, p []byte) {
	var w [64]uint32
	for ; len(p) >= sha256.BlockSize; p = p[sha256.BlockSize:] {
		for i := range 16 {
			w[i] = binary.BigEndian.Uint32(p[4*i:])
		}
		for i := 16; i < 64; i++ {
			v1, v2 := w[i-2], w[i-15]
			s1 := bits.RotateLeft32(v1, -17) ^ bits.RotateLeft32(v1, -19) ^ v1>>10
			s0 := bits.RotateLeft32(v2, -7) ^ bits.RotateLeft32(v2, -18) ^ v2>>3
			w[i] = s1 + w[i-7] + s0 + w[i-16]
		}
		a, b, c, d, e, f, g, hh := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
		for i := range 64 {
			t1 := hh + (bits.RotateLeft32(e, -6) ^ bits.RotateLeft32(e, -11) ^ bits.RotateLeft32(e, -25)) +
				(e&f ^ ^e&g) + k[i] + w[i]
			t2 := (bits.RotateLeft32(a, -2) ^ bits.RotateLeft32(a, -13) ^ bits.RotateLeft32(a, -22)) +
				(a&b ^ a&c ^ b&c)
			hh, g, f, e, d, c, b, a = g, f, e, d+t1, c, b, a, t1+t2
		}
		h[0] += a
		h[1] += b
		h[2] += c
		h[3] += d
		h[4] += e
		h[5] += f
		h[6] += g
		h[7] += hh
	}
}
