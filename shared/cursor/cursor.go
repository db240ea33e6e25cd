// Package cursor is the API's pagination cursor (spec: List envelope,
// nextCursor; States and transitions, "Pagination cursor"; Versioning,
// rule 3).
//
// A cursor is opaque to clients and URL-safe: unpadded base64url of
//
//	format (1 byte) | version hash (8 bytes) | offset (uvarint) | tag (16 bytes)
//
// where tag is HMAC-SHA256 under a server key, truncated to 128 bits, over
// a domain string, the payload and the cursor's Binding (route, canonical
// query, organisation). The binding is not stored: it is mixed into the MAC,
// so a cursor replayed on another route, query or organisation fails
// verification exactly as a forged one does. A cursor minted under another
// contentVersion answers 400 CURSOR_EXPIRED, and only once its MAC has been
// verified, so that answer cannot be provoked with forged bytes.
//
// Cursors are at most 40 characters. Open rejects anything longer than
// MaxLen before decoding it.
package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
	"github.com/lectern-api/lectern/shared/apierr"
)

// Binding is what a cursor is valid for besides its contentVersion: the
// route table's number, the canonical query without the cursor itself, and
// the organisation id.
type Binding struct {
	Route int
	Query string
	Org   string
}

// MaxLen bounds the text Open looks at. Cursors this package mints are at
// most 40 characters; the slack lets a later format grow.
const MaxLen = 256

// MaxOffset is the largest position a cursor carries; it fits an int on
// every target, TinyGo's 32-bit wasm included.
const MaxOffset = 1<<31 - 1

const (
	format1 = 1 // the layout above

	versionLen = 8
	tagLen     = 16
	minRaw     = 1 + versionLen + 1 + tagLen
	maxRaw     = 1 + versionLen + 5 + tagLen // MaxOffset needs 5 uvarint bytes

	domain = "lectern/cursor/v1"
)

// Seal mints the cursor for position offset (0 <= offset <= MaxOffset) of
// the listing described by b under contentVersion version. key is the
// server's cursor key (32 random bytes or more); both tiers must share it.
// An offset out of range is a bug in the caller and panics.
func Seal(key []byte, version string, offset int, b Binding) string {
	if offset < 0 || offset > MaxOffset {
		panic("cursor: Seal: offset out of range")
	}
	var buf [maxRaw]byte
	raw := append(buf[:0], format1)
	raw = binary.BigEndian.AppendUint64(raw, versionHash(version))
	raw = binary.AppendUvarint(raw, uint64(offset))
	raw = append(raw, mac(key, raw, b)...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// Open verifies cursor s for the listing described by b and returns its
// offset. It answers:
//
//   - 400 BAD_REQUEST with parameter "cursor" for anything this server did
//     not mint for this route, query and organisation: empty, too long,
//     not base64url, truncated, altered, or sealed under another key or
//     binding. The message does not say which.
//   - 400 CURSOR_EXPIRED with parameter "cursor" and a hint to restart from
//     page 1 when the cursor is authentic but was minted under another
//     contentVersion than currentVersion (spec: States and transitions).
//     The message says "another", not "an earlier": while origins
//     converge on a reloaded corpus, one still on the older version sees
//     cursors of the newer, and the cursor holds only a hash of its
//     version, so which is unknown. It names currentVersion.
func Open(key []byte, s string, currentVersion string, b Binding) (offset int, err *apierr.Error) {
	if s == "" || len(s) > MaxLen || base64.RawURLEncoding.DecodedLen(len(s)) > maxRaw {
		return 0, invalid(s)
	}
	var buf [maxRaw]byte
	n, derr := base64.RawURLEncoding.Decode(buf[:], []byte(s))
	if derr != nil || n < minRaw || buf[0] != format1 {
		return 0, invalid(s)
	}
	raw := buf[:n]
	payload, tag := raw[:n-tagLen], raw[n-tagLen:]
	if !hmac.Equal(tag, mac(key, payload, b)) {
		return 0, invalid(s)
	}
	// Authentic from here on: what follows cannot fail for a cursor that
	// Seal minted, but is checked rather than trusted.
	off, m := binary.Uvarint(payload[1+versionLen:])
	if m <= 0 || 1+versionLen+m != len(payload) || off > MaxOffset {
		return 0, invalid(s)
	}
	if binary.BigEndian.Uint64(payload[1:1+versionLen]) != versionHash(currentVersion) {
		return 0, &apierr.Error{
			Code:      apierr.CursorExpired,
			Message:   "cursor was issued for another contentVersion; this answer is from contentVersion " + currentVersion,
			Parameter: "cursor",
			Hint:      "restart the walk from page 1 without a cursor",
		}
	}
	return int(off), nil
}

// invalid is the one answer for every cursor that does not verify, so the
// message reveals nothing about which check failed.
func invalid(s string) *apierr.Error {
	e := &apierr.Error{
		Code:      apierr.BadRequest,
		Message:   "cursor is not valid for this request",
		Parameter: "cursor",
		Hint:      "pass nextCursor back verbatim, with the same route and query parameters that returned it",
	}
	if len(s) <= MaxLen {
		e.Received = s
	}
	return e
}

// mac is the truncated HMAC-SHA256 tag over the payload and the binding.
// Every variable-length field is length-prefixed, so no two bindings feed
// the MAC the same bytes.
func mac(key, payload []byte, b Binding) []byte {
	h := hmac.New(sha256.New, key)
	var n [8]byte
	writeField := func(p []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	writeField([]byte(domain))
	writeField(payload)
	binary.BigEndian.PutUint64(n[:], uint64(int64(b.Route)))
	h.Write(n[:])
	writeField([]byte(b.Query))
	writeField([]byte(b.Org))
	var sum [sha256.Size]byte
	return h.Sum(sum[:0])[:tagLen]
}

// versionHash stands for contentVersion in the cursor: the cursor stays
// short whatever the version string's length, and authenticity comes from
// the MAC, not from this hash.
func versionHash(v string) uint64 { return xxhash.Sum64String(v) }
