// Package cursor is the API's pagination cursor (spec: List envelope,
// nextCursor; States and transitions, "Pagination cursor"; Versioning,
// rule 3).
//
// A cursor is opaque to clients and URL-safe: unpadded base64url of
//
//	format (1 byte) | version hash (8 bytes) | grants hash (8 bytes) | offset (uvarint) | tag (16 bytes)
//
// where tag is HMAC-SHA256 under a server key, truncated to 128 bits, over
// a domain string, the payload and the cursor's Binding (route, canonical
// query, organisation). The binding is not stored: it is mixed into the MAC,
// so a cursor replayed on another route, query or organisation fails
// verification exactly as a forged one does. A cursor minted under another
// contentVersion, or under other grants of its organisation, answers 400
// CURSOR_EXPIRED, and only once its MAC has been verified, so that answer
// cannot be provoked with forged bytes. The grants are hashed into the
// payload rather than mixed into the MAC so that a change of grants can be
// told from a forgery, and said (docs/decisions/etags-and-cursors.md).
//
// Cursors are at most 51 characters. Open rejects anything longer than
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
// route table's number, the canonical query without the cursor itself, the
// organisation id, and its grants (etag.GrantsDigest).
type Binding struct {
	Route  int
	Query  string
	Org    string
	Grants string
}

// Refusal is why Open refused a cursor; the answer is Open's error, this
// is for the caller's billing.
type Refusal uint8

const (
	// Invalid: not a cursor this server minted for the binding but its
	// grants (BAD_REQUEST).
	Invalid Refusal = iota + 1
	// OtherVersion: authentic, minted under another contentVersion
	// (CURSOR_EXPIRED).
	OtherVersion
	// OtherGrants: authentic, minted before the organisation's grants
	// changed (CURSOR_EXPIRED).
	OtherGrants
)

// MaxLen bounds the text Open looks at. Cursors this package mints are at
// most 51 characters; the slack lets a later format grow.
const MaxLen = 256

// MaxOffset is the largest position a cursor carries; it fits an int on
// every target, TinyGo's 32-bit wasm included.
const MaxOffset = 1<<31 - 1

const (
	// format2 is the layout above; format 1 had no grants hash, the
	// grants being mixed into the MAC (its cursors are now Invalid).
	format2 = 2

	versionLen = 8
	grantsLen  = 8
	headLen    = 1 + versionLen + grantsLen
	tagLen     = 16
	minRaw     = headLen + 1 + tagLen
	maxRaw     = headLen + 5 + tagLen // MaxOffset needs 5 uvarint bytes

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
	raw := append(buf[:0], format2)
	raw = binary.BigEndian.AppendUint64(raw, versionHash(version))
	raw = binary.BigEndian.AppendUint64(raw, grantsHash(b.Grants))
	raw = binary.AppendUvarint(raw, uint64(offset))
	raw = append(raw, mac(key, raw, b)...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// Open verifies cursor s for the listing described by b and returns its
// offset, or why it refused it and the answer:
//
//   - 400 BAD_REQUEST with parameter "cursor" for anything this server did
//     not mint for this route, query and organisation: empty, too long,
//     not base64url, truncated, altered, or sealed under another key or
//     binding. The message does not say which (Invalid).
//   - 400 CURSOR_EXPIRED with parameter "cursor" and a hint to restart from
//     page 1 when the cursor is authentic but was minted under another
//     contentVersion than currentVersion (spec: States and transitions).
//     The message says "another", not "an earlier": while origins
//     converge on a reloaded corpus, one still on the older version sees
//     cursors of the newer, and the cursor holds only a hash of its
//     version, so which is unknown. It names currentVersion (OtherVersion).
//   - 400 CURSOR_EXPIRED with parameter "cursor", saying so, when the
//     cursor is authentic but was minted under other grants than
//     b.Grants: the organisation's grants changed, so the set walked is
//     another (OtherGrants). A cursor of another version and other grants
//     is OtherVersion.
func Open(key []byte, s string, currentVersion string, b Binding) (offset int, why Refusal, err *apierr.Error) {
	if s == "" || len(s) > MaxLen || base64.RawURLEncoding.DecodedLen(len(s)) > maxRaw {
		return 0, Invalid, invalid(s)
	}
	var buf [maxRaw]byte
	n, derr := base64.RawURLEncoding.Decode(buf[:], []byte(s))
	if derr != nil || n < minRaw || buf[0] != format2 {
		return 0, Invalid, invalid(s)
	}
	raw := buf[:n]
	payload, tag := raw[:n-tagLen], raw[n-tagLen:]
	if !hmac.Equal(tag, mac(key, payload, b)) {
		return 0, Invalid, invalid(s)
	}
	// Authentic from here on: what follows cannot fail for a cursor that
	// Seal minted, but is checked rather than trusted.
	off, m := binary.Uvarint(payload[headLen:])
	if m <= 0 || headLen+m != len(payload) || off > MaxOffset {
		return 0, Invalid, invalid(s)
	}
	if binary.BigEndian.Uint64(payload[1:1+versionLen]) != versionHash(currentVersion) {
		return 0, OtherVersion, &apierr.Error{
			Code:      apierr.CursorExpired,
			Message:   "cursor was issued for another contentVersion; this answer is from contentVersion " + currentVersion,
			Parameter: "cursor",
			Hint:      "restart the walk from page 1 without a cursor",
		}
	}
	if binary.BigEndian.Uint64(payload[1+versionLen:headLen]) != grantsHash(b.Grants) {
		return 0, OtherGrants, &apierr.Error{
			Code:      apierr.CursorExpired,
			Message:   "the organisation's content grants changed since this cursor was issued; restart from page 1",
			Parameter: "cursor",
			Hint:      "restart the walk from page 1 without a cursor",
		}
	}
	return int(off), 0, nil
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

// grantsHash stands for the grants in the cursor, as versionHash does
// for the version: a collision would let a walk go on over changed
// grants, each page still filtered to the grants of its request.
func grantsHash(g string) uint64 { return xxhash.Sum64String(g) }
