package token

import (
	"encoding/base64"

	"github.com/lectern-api/lectern/shared/jsoncheck"
	"github.com/valyala/fastjson"
)

// maxDepth bounds the nesting of every JSON document this package reads.
// Tokens and key sets are flat; the bound keeps fastjson's recursive
// descent shallow on TinyGo's fixed stack.
const maxDepth = 16

// b64 decodes unpadded base64url and refuses non-canonical trailing bits.
// encoding/base64 skips CR and LF even in strict mode, so callers check
// the alphabet first with isB64URL.
var b64 = base64.RawURLEncoding.Strict()

// isB64URL reports whether s holds only the base64url alphabet (RFC 4648
// §5), with no padding, whitespace or line breaks.
func isB64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// decodeB64 decodes one canonical unpadded base64url string.
func decodeB64(s string) ([]byte, bool) {
	if !isB64URL(s) {
		return nil, false
	}
	b, err := b64.DecodeString(s)
	return b, err == nil
}

// parsers are reused across verifications: a fresh fastjson.Parser costs
// a dozen allocations as its caches grow. Nothing parsed is kept after a
// parser goes back to the pool; strings are copied out.
var parsers fastjson.ParserPool

// parseObject parses b as one strict JSON object (RFC 8259) whose member
// names are unique and whose nesting is at most maxDepth. fastjson's
// parser alone accepts more than JSON (NaN, bare control characters,
// unknown escapes) and keeps the first of duplicate names where
// encoding/json keeps the last, so a document is validated first and
// duplicates are refused (RFC 7515 §5.2 allows either answer).
func parseObject(p *fastjson.Parser, b []byte) (*fastjson.Object, bool) {
	if !jsoncheck.Shallow(b, maxDepth) || fastjson.ValidateBytes(b) != nil {
		return nil, false
	}
	v, err := p.ParseBytes(b)
	if err != nil {
		return nil, false
	}
	o, err := v.Object()
	if err != nil || !uniqueNames(o) {
		return nil, false
	}
	return o, true
}

// uniqueNames reports whether no member name of o repeats, comparing names
// after unescaping, as encoding/json does.
func uniqueNames(o *fastjson.Object) bool {
	n := o.Len()
	if n < 2 {
		return true
	}
	// The names point into the parser's buffer, which stays put for the
	// whole Visit; they are not kept past it.
	var buf [32][]byte
	names := buf[:0]
	unique := true
	o.Visit(func(k []byte, _ *fastjson.Value) {
		for _, seen := range names {
			if string(seen) == string(k) {
				unique = false
				return
			}
		}
		names = append(names, k)
	})
	return unique
}

// str returns member name of o when it is a JSON string. present is false
// when the member is absent; ok is false when it is present but not a
// string.
func str(o *fastjson.Object, name string) (s string, present, ok bool) {
	v := o.Get(name)
	if v == nil {
		return "", false, true
	}
	b, err := v.StringBytes()
	if err != nil {
		return "", true, false
	}
	return string(b), true, true
}
