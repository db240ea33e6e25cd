// Package etag derives the API's entity tags and evaluates If-None-Match
// (spec: Conditional requests (ETag)).
//
// A tag is derived from the request's inputs, never from response bytes:
// contentVersion, route, the path values, the canonical query, the
// organisation and a digest of its grants (Derive). So the edge can decide a
// 304 without rendering anything, and every tag moves when contentVersion
// does. The one exception is route 1, the OpenAPI description, which is
// hashed from its own bytes (FromBytes).
//
// Tags are weak (W/"<16 hex>"): gzip, br and identity representations share
// one validator, because "a validator obtained uncompressed also revalidates
// compressed", and RFC 9110 §8.8.1 reserves strong tags for byte-identical
// representations. Match uses the weak comparison that If-None-Match
// requires anyway (RFC 9110 §13.1.2).
package etag

import (
	"encoding/binary"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Input is what an ETag is derived from (spec: Conditional requests (ETag),
// rule 1: "contentVersion, route, parameters, organization and grants").
type Input struct {
	Version string // contentVersion
	Route   int    // the route table's number
	Target  string // path values (lesson id, slug, test id), joined by the caller
	Params  string // the canonical query; callers canonicalise first (shared/param)
	Org     string // organisation id
	Grants  string // GrantsDigest of the organisation's content grants
}

// domain separates these hashes from any other xxhash use and versions the
// derivation: changing it moves every tag, as a corpus rebuild does.
const domain = "lectern/etag/v1"

const hexDigits = "0123456789abcdef"

// Derive returns the weak ETag of a response with inputs in. Each field is
// length-prefixed, so no two different inputs hash the same bytes.
func Derive(in Input) string {
	var b [20]byte
	return string(AppendDerive(b[:0], in))
}

// AppendDerive appends Derive's tag to dst.
func AppendDerive(dst []byte, in Input) []byte {
	var d xxhash.Digest
	d.Reset()
	d.WriteString(domain)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(int64(in.Route)))
	d.Write(n[:])
	for _, s := range [...]string{in.Version, in.Target, in.Params, in.Org, in.Grants} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		d.Write(n[:])
		d.WriteString(s)
	}
	return appendWeak(dst, d.Sum64())
}

// FromBytes returns the weak ETag of route 1 (GET /v1/openapi.json), which
// the spec hashes from its own bytes. It has Derive's shape.
func FromBytes(b []byte) string { return weak(xxhash.Sum64(b)) }

// GrantsDigest is a short hex digest of an organisation's content grants for
// Input.Grants. It ignores order and duplicates, so the same set of grants
// always yields the same tags; any other change to the set moves them.
func GrantsDigest(grants []string) string {
	gs := slices.Clone(grants)
	slices.Sort(gs)
	gs = slices.Compact(gs)
	var d xxhash.Digest
	d.Reset()
	d.WriteString("lectern/grants/v1")
	var n [8]byte
	for _, g := range gs {
		binary.BigEndian.PutUint64(n[:], uint64(len(g)))
		d.Write(n[:])
		d.WriteString(g)
	}
	var b [16]byte
	return string(appendHex(b[:0], d.Sum64()))
}

// weak formats h as W/"<16 lowercase hex>".
func weak(h uint64) string {
	var b [20]byte
	return string(appendWeak(b[:0], h))
}

func appendWeak(dst []byte, h uint64) []byte {
	dst = append(dst, 'W', '/', '"')
	dst = appendHex(dst, h)
	return append(dst, '"')
}

func appendHex(dst []byte, h uint64) []byte {
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(h>>uint(shift))&0xf])
	}
	return dst
}
