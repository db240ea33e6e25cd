// Package edgesig authenticates the edge to the origin: every request the
// edge forwards, and its gate calls, carry
//
//	X-Lectern-Edge: v1=<unix seconds>.<hex HMAC-SHA256>
//
// over the purpose, the method, the request target (path and query), the
// request id and the time, keyed with a key both tiers derive from the
// deployment secret. The origin never trusts the edge beyond this: it
// re-verifies tokens and re-reads entitlements itself.
package edgesig

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
)

// The edge protocol's header fields (docs/edge.md). Every one begins with
// HeaderPrefix: the edge never takes such a field from a client nor shows
// one to it.
const (
	HeaderPrefix = "X-Lectern-"
	Header       = "X-Lectern-Edge"   // the signature
	TargetHeader = "X-Lectern-Target" // a gate call's: the conditional GET's request target
	OrgHeader    = "X-Lectern-Org"    // on answers to the edge: the organisation
	GrantsHeader = "X-Lectern-Grants" // on answers to the edge: its grants digest (etag.GrantsDigest)
)

// MaxSkew bounds the difference between the signing and checking clocks.
const MaxSkew = 300 // seconds

// GatePath is the origin's gate endpoint, outside /v1: the edge asks it
// whether a conditional request is a 304 (docs/edge.md, Origin protocol).
const GatePath = "/internal/gate"

// The purposes a signature is made for.
const (
	Forward = "forward" // a client request forwarded unchanged
	Gate    = "gate"    // POST /internal/gate: may this conditional request be a 304?
	Lease   = "lease"   // POST /internal/lease: a lease, with usage reports (shared/lease)
	Usage   = "usage"   // POST /internal/usage: usage reports only
	Revoke  = "revoke"  // POST /internal/revoke, origin to edge host: drop or settle leases
)

// mac is what Verify checks.
func mac(key []byte, purpose, method, target, requestID string, unix int64) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(signed(nil, purpose, method, target, requestID, unix))
	return m.Sum(nil)
}

// Sign returns the header value for a request at unix seconds.
func Sign(key []byte, purpose, method, target, requestID string, unix int64) string {
	return NewSigner(key).Sign(purpose, method, target, requestID, unix)
}

// Signer signs with one key and reuses its HMAC state and buffers, so a
// signature costs no allocation but its string (under TinyGo too:
// TestGate304Allocations). It is not safe for concurrent use: the edge's
// pipeline, which signs every request it passes on, is single-threaded.
type Signer struct {
	mac hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

// NewSigner returns a Signer of key (subkey.Derive(secret, subkey.Edge)).
func NewSigner(key []byte) *Signer {
	return &Signer{mac: hmac.New(sha256.New, key)}
}

// Sign returns the header value for a request at unix seconds.
func (s *Signer) Sign(purpose, method, target, requestID string, unix int64) string {
	b := s.Append(s.buf[:0], purpose, method, target, requestID, unix)
	s.buf = b
	return string(b)
}

// Append appends Sign's header value to dst.
func (s *Signer) Append(dst []byte, purpose, method, target, requestID string, unix int64) []byte {
	s.buf = signed(s.buf[:0], purpose, method, target, requestID, unix)
	s.mac.Reset()
	s.mac.Write(s.buf)
	dst = append(dst, "v1="...)
	dst = strconv.AppendInt(dst, unix, 10)
	dst = append(dst, '.')
	return hex.AppendEncode(dst, s.mac.Sum(s.sum[:0]))
}

// signed appends to b what is signed: the length-prefixed fields.
func signed(b []byte, purpose, method, target, requestID string, unix int64) []byte {
	for _, f := range [...]string{"v1", purpose, method, target, requestID} {
		b = field(b, f)
	}
	b = strconv.AppendInt(b, int64(digits(unix)), 10)
	b = append(b, ':')
	return strconv.AppendInt(b, unix, 10)
}

// digits is the length of n in decimal.
func digits(n int64) int {
	d, u := 1, uint64(n)
	if n < 0 {
		d, u = 2, uint64(-(n+1))+1
	}
	for ; u >= 10; u /= 10 {
		d++
	}
	return d
}

// field appends f length-prefixed: "<len>:<f>".
func field(b []byte, f string) []byte {
	b = strconv.AppendInt(b, int64(len(f)), 10)
	b = append(b, ':')
	return append(b, f...)
}

// Verify checks a header value made by Sign at most MaxSkew seconds from
// now. An empty key never verifies.
func Verify(key []byte, value, purpose, method, target, requestID string, now int64) bool {
	if len(key) == 0 {
		return false
	}
	rest, ok := strings.CutPrefix(value, "v1=")
	if !ok {
		return false
	}
	ts, sig, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || unix < now-MaxSkew || unix > now+MaxSkew {
		return false
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	return hmac.Equal(got, mac(key, purpose, method, target, requestID, unix))
}
