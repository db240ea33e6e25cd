//go:build stdhmac

package edgesig

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
)

// padded is crypto/hmac's HMAC-SHA-256, which `-tags stdhmac` measures
// against the precomputed pads of sha256.go (tools/bench -variants).
type padded struct{ h hash.Hash }

func newPadded(key []byte) padded { return padded{hmac.New(sha256.New, key)} }

// sum writes the HMAC of msg to out.
func (p *padded) sum(msg []byte, out *[sha256.Size]byte) {
	p.h.Reset()
	p.h.Write(msg)
	p.h.Sum(out[:0])
}
