// Package tokentest is for tests: it mints the keys, JWK Sets and signed
// tokens that tests of either tier hand to a verifier (shared/token, the
// origin's auth, the edge's pipeline and module). Keys are deterministic,
// derived from a name, so that a test, its fuzz seeds and a rerun see the
// same tokens.
//
// It imports nothing of shared/token, so that package's own tests can use
// it, and, living in shared/, it keeps shared/'s rules: no encoding/json
// and no reflection (JSON is written with shared/jsonenc).
package tokentest

import (
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"math/big"
	"slices"
	"strconv"

	"github.com/lectern-api/lectern/shared/jsonenc"
)

// Key is the Ed25519 key whose seed is the SHA-256 of name. JWKS and Mint
// name a key by its kid and use Key(kid).
func Key(name string) ed25519.PrivateKey {
	h := sha256.Sum256([]byte(name))
	return ed25519.NewKeyFromSeed(h[:])
}

// EdJWK is the public JWK of an Ed25519 key, {"kty":"OKP","crv":"Ed25519",
// "kid":kid,"x":...}, with extra appended to its members when not empty
// (literal JSON members, such as `"alg":"EdDSA"`).
func EdJWK(kid string, pub ed25519.PublicKey, extra string) string {
	return jwk(`{"kty":"OKP","crv":"Ed25519","kid":`+strconv.Quote(kid)+`,"x":"`+b64(pub)+`"`, extra)
}

// RSAJWK is the public JWK of an RSA key, {"kty":"RSA","kid":kid,"n":...,
// "e":...}, with extra appended as EdJWK does.
func RSAJWK(kid string, pub *rsa.PublicKey, extra string) string {
	return jwk(`{"kty":"RSA","kid":`+strconv.Quote(kid)+`,"n":"`+b64(pub.N.Bytes())+
		`","e":"`+b64(big.NewInt(int64(pub.E)).Bytes())+`"`, extra)
}

func jwk(members, extra string) string {
	if extra != "" {
		members += "," + extra
	}
	return members + "}"
}

// JWKS is the JWK Set of the Ed25519 keys Key(kid) for each kid, each
// with alg EdDSA and use sig, as an identity provider publishes them.
func JWKS(kids ...string) []byte {
	b := []byte(`{"keys":[`)
	for i, kid := range kids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, EdJWK(kid, Key(kid).Public().(ed25519.PublicKey), `"alg":"EdDSA","use":"sig"`)...)
	}
	return append(b, "]}"...)
}

// Claims is a token's payload, written with its names sorted. A value is
// a string, an int, an int64, a bool or a []string; a nil value leaves
// its name out.
type Claims map[string]any

// Mint is an EdDSA JWT signed with Key(kid), its header
// {"alg":"EdDSA","kid":kid,"typ":"JWT"} and its payload c.
func Mint(kid string, c Claims) string {
	header := jsonenc.String([]byte(`{"alg":"EdDSA","kid":`), kid)
	header = append(header, `,"typ":"JWT"}`...)
	return Sign(Key(kid), string(header), string(c.JSON()))
}

// JSON is c as a JSON object, its names sorted.
func (c Claims) JSON() []byte {
	names := make([]string, 0, len(c))
	for k, v := range c {
		if v != nil {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	b := []byte{'{'}
	for _, k := range names {
		b = jsonenc.Key(b, k)
		switch v := c[k].(type) {
		case string:
			b = jsonenc.String(b, v)
		case int:
			b = jsonenc.Int(b, int64(v))
		case int64:
			b = jsonenc.Int(b, v)
		case bool:
			b = jsonenc.Bool(b, v)
		case []string:
			b = jsonenc.Strings(b, v)
		default:
			panic("tokentest: claim " + k + " of an unsupported type; want string, int, int64, bool or []string") // a test's mistake
		}
	}
	return append(b, '}')
}

// Sign is the compact JWS of literal header and payload JSON, so that a
// test can sign anything, malformed or hostile. key is an
// ed25519.PrivateKey (EdDSA), an *rsa.PrivateKey (RS256), a []byte
// (HS256) or nil (an empty signature).
func Sign(key any, header, payload string) string {
	in := b64([]byte(header)) + "." + b64([]byte(payload))
	var sig []byte
	switch k := key.(type) {
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, []byte(in))
	case *rsa.PrivateKey:
		d := sha256.Sum256([]byte(in))
		var err error
		if sig, err = rsa.SignPKCS1v15(nil, k, crypto.SHA256, d[:]); err != nil {
			panic(err)
		}
	case []byte:
		m := hmac.New(sha256.New, k)
		m.Write([]byte(in))
		sig = m.Sum(nil)
	case nil:
	default:
		panic("tokentest: Sign: a key of an unsupported type; want ed25519.PrivateKey, *rsa.PrivateKey, []byte or nil") // a test's mistake
	}
	return in + "." + b64(sig)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
