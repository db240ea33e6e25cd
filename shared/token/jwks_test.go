package token

import (
	"crypto/ed25519"
	"crypto/rsa"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/token/tokentest"
)

func TestParseJWKS(t *testing.T) {
	k := loadKeys(t)
	edPub := k.ed.Public().(ed25519.PublicKey)
	ed := func(kid, extra string) string { return tokentest.EdJWK(kid, edPub, extra) }
	rs := func(kid, extra string) string { return tokentest.RSAJWK(kid, &k.rsa.PublicKey, extra) }
	withE := func(e int) string {
		return tokentest.RSAJWK("r", &rsa.PublicKey{N: k.rsa.N, E: e}, "")
	}
	set := func(keys ...string) string { return `{"keys":[` + strings.Join(keys, ",") + `]}` }
	many := make([]string, MaxKeys+1)
	for i := range many {
		many[i] = ed("k"+strconv.Itoa(i), "")
	}

	for _, tc := range []struct {
		name string
		doc  string
		kids []string // the usable keys, in order; nil with err
		err  string   // substring of the error; "" = no error
	}{
		{name: "ours", doc: string(k.jwks), kids: []string{"ed1", "rsa1"}},
		{name: "empty set", doc: `{"keys":[]}`, kids: []string{}},
		{name: "private members ignored", doc: set(ed("a", `"d":"secret"`), rs("b", `"d":"x","p":"y","q":"z"`)), kids: []string{"a", "b"}},
		{name: "other members ignored", doc: set(ed("a", `"x5c":["MIIB"],"ext":true`)) + ``, kids: []string{"a"}},
		{name: "use enc skipped", doc: set(ed("a", `"use":"enc"`), ed("b", `"use":"sig"`)), kids: []string{"b"}},
		{name: "key_ops without verify skipped", doc: set(ed("a", `"key_ops":["sign"]`), ed("b", `"key_ops":["verify"]`)), kids: []string{"b"}},
		{name: "foreign alg skipped", doc: set(ed("a", `"alg":"Ed25519"`), rs("b", `"alg":"PS256"`), rs("c", `"alg":"HS256"`), rs("d", `"alg":"RS256"`)), kids: []string{"d"}},
		{name: "other kty skipped", doc: set(`{"kty":"EC","crv":"P-256","kid":"e","x":"AA","y":"AA"}`, `{"kty":"oct","kid":"h","k":"c2VjcmV0"}`, ed("a", "")), kids: []string{"a"}},
		{name: "other curve skipped", doc: set(`{"kty":"OKP","crv":"X25519","kid":"x","x":"AA"}`, `{"kty":"OKP","crv":"Ed448","kid":"y","x":"AA"}`), kids: []string{}},
		{name: "skipped keys may share a kid", doc: set(ed("a", `"use":"enc"`), ed("a", "")), kids: []string{"a"}},
		{name: "exponent 3", doc: set(withE(3)), kids: []string{"r"}},

		{name: "too large", doc: set(ed("a", `"pad":"`+strings.Repeat("x", MaxJWKSBytes)+`"`)), err: "larger than"},
		{name: "not JSON", doc: `keys`, err: "not a JSON object"},
		{name: "empty", doc: ``, err: "not a JSON object"},
		{name: "an array", doc: `[]`, err: "not a JSON object"},
		{name: "trailing data", doc: `{"keys":[]}{}`, err: "not a JSON object"},
		{name: "duplicate keys member", doc: `{"keys":[],"keys":[]}`, err: "unique member"},
		{name: "no keys", doc: `{}`, err: `no "keys"`},
		{name: "keys not an array", doc: `{"keys":{}}`, err: "not an array"},
		{name: "too many keys", doc: set(many...), err: "more than"},
		{name: "too deep", doc: `{"keys":[],"x":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`, err: "not a JSON object"},
		{name: "key not an object", doc: set(`"a"`), err: "key 0"},
		{name: "key with duplicate member", doc: set(`{"kty":"OKP","crv":"Ed25519","kid":"a","x":"` + b64s(edPub) + `","x":"AA"}`), err: "unique member"},
		{name: "kty missing", doc: set(`{"kid":"a"}`), err: "kty missing"},
		{name: "use not a string", doc: set(ed("a", `"use":1`)), err: "use is not a string"},
		{name: "kid missing", doc: set(`{"kty":"OKP","crv":"Ed25519","x":"` + b64s(edPub) + `"}`), err: "kid missing"},
		{name: "kid empty", doc: set(ed("", "")), err: "kid missing"},
		{name: "kid too long", doc: set(ed(strings.Repeat("k", MaxKeyIDLen+1), "")), err: "kid longer"},
		{name: "kid used twice", doc: set(ed("a", ""), rs("a", "")), err: "kid used by an earlier key"},
		{name: "x missing", doc: set(`{"kty":"OKP","crv":"Ed25519","kid":"a"}`), err: "x missing"},
		{name: "x short", doc: set(`{"kty":"OKP","crv":"Ed25519","kid":"a","x":"` + b64s(edPub[:31]) + `"}`), err: "not 32 bytes"},
		{name: "x padded", doc: set(`{"kty":"OKP","crv":"Ed25519","kid":"a","x":"` + b64s(edPub) + `="}`), err: "base64url"},
		{name: "x standard alphabet", doc: set(`{"kty":"OKP","crv":"Ed25519","kid":"a","x":"` + strings.Repeat("+", 43) + `"}`), err: "base64url"},
		{name: "RSA 1024 bits", doc: set(tokentest.RSAJWK("w", k.rsaWeak, "")), err: "1024 bits"},
		{name: "RSA modulus even", doc: set(tokentest.RSAJWK("w", &rsa.PublicKey{N: new(big.Int).Lsh(big.NewInt(1), 2047), E: 65537}, "")), err: "even"},
		{name: "RSA e missing", doc: set(`{"kty":"RSA","kid":"r","n":"` + b64s(k.rsa.N.Bytes()) + `"}`), err: "e missing"},
		{name: "RSA e even", doc: set(withE(65536)), err: "exponent"},
		{name: "RSA e one", doc: set(withE(1)), err: "exponent"},
		{name: "RSA e over 2^31", doc: set(`{"kty":"RSA","kid":"r","n":"` + b64s(k.rsa.N.Bytes()) + `","e":"AQAAAAE"}`), err: "exponent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseJWKS([]byte(tc.doc))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseJWKS: %v", err)
			}
			if got.Len() != len(tc.kids) {
				t.Fatalf("got %d keys, want %v", got.Len(), tc.kids)
			}
			for _, kid := range tc.kids {
				key, ok := got.Lookup(kid)
				if !ok || key.ID() != kid {
					t.Errorf("kid %q missing", kid)
				}
			}
		})
	}
}

func TestKeyAccessors(t *testing.T) {
	k := loadKeys(t)
	ed, ok := k.set.Lookup("ed1")
	if !ok || ed.Algorithm() != EdDSA || !ed.Public().(ed25519.PublicKey).Equal(k.ed.Public()) {
		t.Errorf("ed1: %v %v", ok, ed.Algorithm())
	}
	rs, ok := k.set.Lookup("rsa1")
	if !ok || rs.Algorithm() != RS256 || !rs.Public().(*rsa.PublicKey).Equal(&k.rsa.PublicKey) {
		t.Errorf("rsa1: %v %v", ok, rs.Algorithm())
	}
	var nilSet *KeySet
	if _, ok := nilSet.Lookup("ed1"); ok || nilSet.Len() != 0 {
		t.Error("a nil KeySet holds keys")
	}
}

func FuzzParseJWKS(f *testing.F) {
	k := loadKeys(f)
	f.Add(k.jwks)
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"r","n":"AQAB","e":"AQAB"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := ParseJWKS(b)
		if err != nil {
			return
		}
		for _, key := range set.keys {
			if key.id == "" || (key.ed == nil) == (key.rsa == nil) {
				t.Fatalf("bad key %+v", key)
			}
		}
	})
}
