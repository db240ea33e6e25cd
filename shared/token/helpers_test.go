package token

import (
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

// The fixed world every token test lives in. Keys are deterministic
// (Ed25519 from fixed seeds, RSA from testdata/testkeys.json) so that the
// tokens in the fuzz seed corpus stay valid.
var (
	testNow      = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	testNowS     = testNow.Unix()
	testIss      = "https://idp.lectern.test"
	testAud      = "https://api.lectern.test"
	testLeeway   = DefaultLeeway
	testVerifier = &Verifier{Issuer: testIss, Audience: testAud, Leeway: testLeeway}
)

type testKeys struct {
	ed, edOther   ed25519.PrivateKey
	rsa, rsaOther *rsa.PrivateKey
	rsaWeak       *rsa.PublicKey // 1024 bits, for ParseJWKS
	jwks          []byte
	set           *KeySet
}

var (
	keysOnce sync.Once
	keysVal  *testKeys
	keysErr  error
)

func loadKeys(tb testing.TB) *testKeys {
	tb.Helper()
	keysOnce.Do(func() { keysVal, keysErr = makeKeys() })
	if keysErr != nil {
		tb.Fatal(keysErr)
	}
	return keysVal
}

func makeKeys() (*testKeys, error) {
	k := &testKeys{ed: tokentest.Key("lectern test ed1"), edOther: tokentest.Key("lectern test attacker")}
	b, err := os.ReadFile("testdata/testkeys.json")
	if err != nil {
		return nil, err
	}
	var raw map[string]map[string]string
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	num := func(s string) *big.Int {
		v, _ := base64.RawURLEncoding.DecodeString(s)
		return new(big.Int).SetBytes(v)
	}
	priv := func(m map[string]string) (*rsa.PrivateKey, error) {
		p := &rsa.PrivateKey{
			PublicKey: rsa.PublicKey{N: num(m["n"]), E: int(num(m["e"]).Int64())},
			D:         num(m["d"]),
			Primes:    []*big.Int{num(m["p"]), num(m["q"])},
		}
		p.Precompute()
		return p, p.Validate()
	}
	if k.rsa, err = priv(raw["rsa2048"]); err != nil {
		return nil, err
	}
	if k.rsaOther, err = priv(raw["rsa2048b"]); err != nil {
		return nil, err
	}
	k.rsaWeak = &rsa.PublicKey{N: num(raw["rsa1024"]["n"]), E: int(num(raw["rsa1024"]["e"]).Int64())}
	k.jwks = []byte(`{"keys":[` + tokentest.EdJWK("ed1", k.ed.Public().(ed25519.PublicKey), `"use":"sig","alg":"EdDSA"`) + "," +
		tokentest.RSAJWK("rsa1", &k.rsa.PublicKey, `"alg":"RS256"`) + `]}`)
	if k.set, err = ParseJWKS(k.jwks); err != nil {
		return nil, err
	}
	return k, nil
}

func b64s(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// claimsJSON is the payload of a good machine token, with members
// replaced, added (value set) or removed (value "") by edits, each a
// name and its literal JSON.
func claimsJSON(edits ...string) string {
	type m struct{ k, v string }
	members := []m{
		{"iss", strconv.Quote(testIss)},
		{"aud", strconv.Quote(testAud)},
		{"sub", `"client-1"`},
		{"client_id", `"client-1"`},
		{"scope", `"service-api/content.read service-api/content.export"`},
		{"iat", strconv.FormatInt(testNowS-60, 10)},
		{"exp", strconv.FormatInt(testNowS+840, 10)},
		{"jti", `"jti-1"`},
	}
	for i := 0; i+1 < len(edits); i += 2 {
		found := false
		for j := range members {
			if members[j].k == edits[i] {
				members[j].v, found = edits[i+1], true
			}
		}
		if !found {
			members = append(members, m{edits[i], edits[i+1]})
		}
	}
	s := "{"
	for _, x := range members {
		if x.v == "" {
			continue
		}
		if len(s) > 1 {
			s += ","
		}
		if strings.Contains(x.k, `\`) {
			s += `"` + x.k + `":` + x.v // a name written with JSON escapes
		} else {
			s += strconv.Quote(x.k) + ":" + x.v
		}
	}
	return s + "}"
}

func ts(d time.Duration) string { return strconv.FormatInt(testNow.Add(d).Unix(), 10) }

// oracle verifies raw with golang-jwt under the same rules: the same
// algorithms, issuer, audience, leeway and clock, exp required, iat
// checked, strict base64, and keys looked up by kid in the same set.
func oracle(set *KeySet, raw string) (jwt.MapClaims, error) {
	p := jwt.NewParser(
		jwt.WithValidMethods([]string{"EdDSA", "RS256"}),
		jwt.WithIssuer(testIss),
		jwt.WithAudience(testAud),
		jwt.WithLeeway(testLeeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithStrictDecoding(),
		jwt.WithTimeFunc(func() time.Time { return testNow }),
	)
	tok, err := p.Parse(raw, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		k, ok := set.Lookup(kid)
		if !ok {
			return nil, errors.New("unknown kid")
		}
		return k.Public(), nil
	})
	if err != nil {
		return nil, err
	}
	return tok.Claims.(jwt.MapClaims), nil
}
