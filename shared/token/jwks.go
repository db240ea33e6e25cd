package token

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"math/big"
	"strconv"

	"github.com/valyala/fastjson"
)

// The algorithms a key can verify: the JWS "alg" values (RFC 7518 §3.1,
// RFC 8037 §3.1) and nothing else.
const (
	EdDSA = "EdDSA" // Ed25519 keys (kty OKP, crv Ed25519)
	RS256 = "RS256" // RSA keys of at least 2048 bits
)

// Bounds on a JWKS document. Identity providers publish a handful of keys;
// the bounds keep a hostile or broken endpoint from costing more than a
// small, fixed amount of work.
const (
	MaxJWKSBytes = 64 << 10
	MaxKeys      = 32
	MaxKeyIDLen  = 256

	minRSABits = 2048
	maxRSABits = 8192 // verification cost grows with the modulus
	maxRSAExp  = 1<<31 - 1
)

// Key is one verification key of a KeySet.
type Key struct {
	id  string
	alg string
	ed  ed25519.PublicKey
	rsa *rsa.PublicKey
}

// ID is the key's kid.
func (k Key) ID() string { return k.id }

// Algorithm is the one JWS alg the key verifies: EdDSA or RS256.
func (k Key) Algorithm() string { return k.alg }

// Public is the key itself: an ed25519.PublicKey or an *rsa.PublicKey.
func (k Key) Public() crypto.PublicKey {
	if k.ed != nil {
		return k.ed
	}
	return k.rsa
}

// KeySet is a parsed JWKS: the keys tokens may be verified with, each
// found by its kid. A KeySet is immutable, so one set can be shared by
// concurrent verifications.
type KeySet struct {
	keys []Key
}

// Len is the number of keys in the set.
func (s *KeySet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// Lookup returns the key whose kid is exactly kid.
func (s *KeySet) Lookup(kid string) (Key, bool) {
	if s == nil {
		return Key{}, false
	}
	for _, k := range s.keys {
		if k.id == kid {
			return k, true
		}
	}
	return Key{}, false
}

// ParseJWKS reads a JWK Set document (RFC 7517 §5).
//
// It keeps the signature keys it can use: kty OKP with crv Ed25519 (member
// x, RFC 8037 §2) and kty RSA (members n and e, RFC 7518 §6.3.1) with a
// modulus of 2048 to 8192 bits and an odd public exponent from 3 to
// 2^31-1. It skips, without error, keys meant for something else: use
// other than "sig", key_ops without "verify", an alg other than the key
// type's (EdDSA, RS256), another kty or curve. Private members (d, p, q,
// ...) are never read.
//
// It fails on a document over MaxJWKSBytes, that is not a JSON object with
// a "keys" array of at most MaxKeys objects, that repeats a member name,
// or that holds a usable-looking key that is broken: no kid, a kid longer
// than MaxKeyIDLen, a kid used twice, bad base64url, a wrong length, a weak
// RSA key. Failing loudly surfaces a misconfigured identity provider; the
// Cache keeps serving the previous set meanwhile.
func ParseJWKS(b []byte) (*KeySet, error) {
	if len(b) > MaxJWKSBytes {
		return nil, errors.New("token: JWKS larger than " + strconv.Itoa(MaxJWKSBytes) + " bytes")
	}
	var p fastjson.Parser
	doc, ok := parseObject(&p, b)
	if !ok {
		return nil, errors.New("token: JWKS is not a JSON object with unique member names")
	}
	kv := doc.Get("keys")
	if kv == nil {
		return nil, errors.New(`token: JWKS has no "keys" member`)
	}
	arr, err := kv.Array()
	if err != nil {
		return nil, errors.New(`token: JWKS "keys" is not an array`)
	}
	if len(arr) > MaxKeys {
		return nil, errors.New("token: JWKS holds more than " + strconv.Itoa(MaxKeys) + " keys")
	}
	set := &KeySet{keys: make([]Key, 0, len(arr))}
	for i, v := range arr {
		o, err := v.Object()
		if err != nil || !uniqueNames(o) {
			return nil, keyError(i, "", "not a JSON object with unique member names")
		}
		k, use, err := parseJWK(i, o)
		if err != nil {
			return nil, err
		}
		if !use {
			continue
		}
		if _, dup := set.Lookup(k.id); dup {
			return nil, keyError(i, k.id, "kid used by an earlier key")
		}
		set.keys = append(set.keys, k)
	}
	return set, nil
}

// parseJWK reads key i. use is false for a key this package skips.
func parseJWK(i int, o *fastjson.Object) (k Key, use bool, err error) {
	kty, present, ok := str(o, "kty")
	if !present || !ok {
		return Key{}, false, keyError(i, "", "kty missing or not a string")
	}
	var alg string
	switch kty {
	case "OKP":
		alg = EdDSA
	case "RSA":
		alg = RS256
	default:
		return Key{}, false, nil
	}
	for _, m := range [...]struct{ name, want string }{{"use", "sig"}, {"alg", alg}} {
		s, present, ok := str(o, m.name)
		if !ok {
			return Key{}, false, keyError(i, "", m.name+" is not a string")
		}
		if present && s != m.want {
			return Key{}, false, nil
		}
	}
	if ops := o.Get("key_ops"); ops != nil {
		arr, err := ops.Array()
		if err != nil {
			return Key{}, false, keyError(i, "", "key_ops is not an array")
		}
		verify := false
		for _, op := range arr {
			if b, err := op.StringBytes(); err == nil && string(b) == "verify" {
				verify = true
			}
		}
		if !verify {
			return Key{}, false, nil
		}
	}
	if kty == "OKP" {
		crv, _, ok := str(o, "crv")
		if !ok {
			return Key{}, false, keyError(i, "", "crv is not a string")
		}
		if crv != "Ed25519" {
			return Key{}, false, nil // X25519, Ed448: not ours
		}
	}

	kid, present, ok := str(o, "kid")
	switch {
	case !present || !ok || kid == "":
		return Key{}, false, keyError(i, "", "kid missing or not a string")
	case len(kid) > MaxKeyIDLen:
		return Key{}, false, keyError(i, "", "kid longer than "+strconv.Itoa(MaxKeyIDLen)+" bytes")
	}
	k = Key{id: kid, alg: alg}

	if kty == "OKP" {
		x, msg := member(o, "x")
		if msg != "" {
			return Key{}, false, keyError(i, kid, msg)
		}
		if len(x) != ed25519.PublicKeySize {
			return Key{}, false, keyError(i, kid, "x is not 32 bytes")
		}
		k.ed = ed25519.PublicKey(x)
		return k, true, nil
	}

	n, msg := member(o, "n")
	if msg != "" {
		return Key{}, false, keyError(i, kid, msg)
	}
	e, msg := member(o, "e")
	if msg != "" {
		return Key{}, false, keyError(i, kid, msg)
	}
	mod := new(big.Int).SetBytes(n)
	if bits := mod.BitLen(); bits < minRSABits || bits > maxRSABits {
		return Key{}, false, keyError(i, kid, "modulus of "+strconv.Itoa(bits)+" bits; want 2048 to 8192")
	}
	if mod.Bit(0) == 0 {
		return Key{}, false, keyError(i, kid, "modulus is even")
	}
	exp := new(big.Int).SetBytes(e)
	if !exp.IsInt64() || exp.Int64() < 3 || exp.Int64() > maxRSAExp || exp.Bit(0) == 0 {
		return Key{}, false, keyError(i, kid, "exponent is not an odd number from 3 to 2^31-1")
	}
	k.rsa = &rsa.PublicKey{N: mod, E: int(exp.Int64())}
	return k, true, nil
}

// member decodes the base64url member name of o, or says what is wrong.
func member(o *fastjson.Object, name string) ([]byte, string) {
	s, present, ok := str(o, name)
	if !present || !ok || s == "" {
		return nil, name + " missing or not a string"
	}
	b, ok := decodeB64(s)
	if !ok {
		return nil, name + " is not unpadded base64url"
	}
	return b, ""
}

func keyError(i int, kid, msg string) error {
	s := "token: JWKS key " + strconv.Itoa(i)
	if kid != "" {
		s += " (kid " + strconv.Quote(kid) + ")"
	}
	return errors.New(s + ": " + msg)
}
