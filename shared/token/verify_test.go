package token

import (
	"crypto/ed25519"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/lectern-api/lectern/shared/scope"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

var update = flag.Bool("update", false, "rewrite testdata/fuzz/FuzzVerify from the oracle table")

const (
	edHeader  = `{"alg":"EdDSA","kid":"ed1","typ":"JWT"}`
	rsaHeader = `{"alg":"RS256","kid":"rsa1","typ":"JWT"}`
)

// verdictCase is one token of the oracle table. reason is our expected
// Failure.Reason ("" = accepted). golang-jwt must give the same verdict,
// except where stricter says why we refuse a token golang-jwt accepts.
type verdictCase struct {
	name     string
	token    func(k *testKeys) string
	reason   string
	stricter string
}

// jwtSigned signs claims with golang-jwt itself, as the identity provider
// will.
func jwtSigned(method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t := jwt.NewWithClaims(method, claims)
	t.Header["kid"] = kid
	s, err := t.SignedString(key)
	if err != nil {
		panic(err)
	}
	return s
}

func goodClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss": testIss, "aud": testAud, "sub": "client-1", "client_id": "client-1",
		"scope": "service-api/content.read service-api/content.export",
		"iat":   testNowS - 60, "exp": testNowS + 840, "jti": "jti-1",
	}
}

func edToken(edits ...string) func(k *testKeys) string {
	return func(k *testKeys) string { return tokentest.Sign(k.ed, edHeader, claimsJSON(edits...)) }
}

func edHeaderToken(header string) func(k *testKeys) string {
	return func(k *testKeys) string { return tokentest.Sign(k.ed, header, claimsJSON()) }
}

// part replaces part i (0 header, 1 payload, 2 signature) of tok by f of it.
func part(tok string, i int, f func(string) string) string {
	p := strings.Split(tok, ".")
	p[i] = f(p[i])
	return strings.Join(p, ".")
}

func goodRS(k *testKeys) string {
	return jwtSigned(jwt.SigningMethodRS256, "rsa1", k.rsa, goodClaims())
}

func goodEd(k *testKeys) string {
	return jwtSigned(jwt.SigningMethodEdDSA, "ed1", k.ed, goodClaims())
}

func verdictCases() []verdictCase {
	edX := func(k *testKeys) string { return b64s(k.ed.Public().(ed25519.PublicKey)) }
	return []verdictCase{
		// Accepted.
		{name: "EdDSA signed by golang-jwt", token: goodEd},
		{name: "RS256 signed by golang-jwt", token: goodRS},
		{name: "learner token", token: edToken("sub", `"learner-7"`, "learner", `"learner-7"`, "org", `"org-1"`,
			"scope", `"service-api/progress.read service-api/progress.write"`)},
		{name: "audience array containing ours", token: edToken("aud", `["https://other.test",`+strconv.Quote(testAud)+`]`)},
		{name: "exp with a fraction", token: edToken("exp", ts(100*time.Second)+".5")},
		{name: "exp as exponent notation", token: edToken("exp", "1.8e9")},
		{name: "expired within leeway", token: edToken("exp", ts(-29*time.Second))},
		{name: "nbf within leeway", token: edToken("nbf", ts(30*time.Second))},
		{name: "nbf zero", token: edToken("nbf", "0")},
		{name: "iat within leeway", token: edToken("iat", ts(30*time.Second))},
		{name: "no typ", token: edHeaderToken(`{"alg":"EdDSA","kid":"ed1"}`)},
		{name: "typ at+jwt", token: edHeaderToken(`{"alg":"EdDSA","kid":"ed1","typ":"at+jwt"}`)},
		{name: "typ application/at+JWT", token: edHeaderToken(`{"alg":"EdDSA","kid":"ed1","typ":"application/at+JWT"}`)},
		{name: "escaped member names", token: edToken("exp", "", `\u0065xp`, ts(time.Minute))},
		{name: "unknown claims ignored", token: edToken("cnf", `{"jkt":"x"}`, "extra", `[1,2,{"a":null}]`)},

		// Algorithm attacks.
		{name: "alg none, no signature", reason: ReasonAlgorithm, token: func(k *testKeys) string {
			return tokentest.Sign(nil, `{"alg":"none","kid":"ed1"}`, claimsJSON())
		}},
		{name: "alg None with an EdDSA signature", reason: ReasonAlgorithm, token: func(k *testKeys) string {
			return tokentest.Sign(k.ed, `{"alg":"None","kid":"ed1"}`, claimsJSON())
		}},
		{name: "alg missing", reason: ReasonAlgorithm, token: edHeaderToken(`{"kid":"ed1"}`)},
		{name: "alg not a string", reason: ReasonAlgorithm, token: edHeaderToken(`{"alg":["EdDSA"],"kid":"ed1"}`)},
		{name: "alg ES256", reason: ReasonAlgorithm, token: edHeaderToken(`{"alg":"ES256","kid":"ed1"}`)},
		{name: "HS256 keyed with the Ed25519 public key", reason: ReasonAlgorithm, token: func(k *testKeys) string {
			return tokentest.Sign([]byte(k.ed.Public().(ed25519.PublicKey)), `{"alg":"HS256","kid":"ed1"}`, claimsJSON())
		}},
		{name: "HS256 keyed with the JWK x", reason: ReasonAlgorithm, token: func(k *testKeys) string {
			return tokentest.Sign([]byte(edX(k)), `{"alg":"HS256","kid":"ed1"}`, claimsJSON())
		}},
		{name: "HS256 keyed with the RSA modulus", reason: ReasonAlgorithm, token: func(k *testKeys) string {
			return tokentest.Sign(k.rsa.N.Bytes(), `{"alg":"HS256","kid":"rsa1"}`, claimsJSON())
		}},
		{name: "alg RS256 on the Ed25519 kid", reason: ReasonAlgorithm, token: func(k *testKeys) string {
			return tokentest.Sign(k.rsa, `{"alg":"RS256","kid":"ed1"}`, claimsJSON())
		}},
		{name: "alg EdDSA on the RSA kid", reason: ReasonAlgorithm, token: func(k *testKeys) string {
			return tokentest.Sign(k.ed, `{"alg":"EdDSA","kid":"rsa1"}`, claimsJSON())
		}},
		{name: "embedded jwk of the attacker", reason: ReasonSignature, token: func(k *testKeys) string {
			return tokentest.Sign(k.edOther, `{"alg":"EdDSA","kid":"ed1","jwk":`+
				tokentest.EdJWK("ed1", k.edOther.Public().(ed25519.PublicKey), "")+`}`, claimsJSON())
		}},
		{name: "jku to the attacker", reason: ReasonSignature, token: func(k *testKeys) string {
			return tokentest.Sign(k.edOther, `{"alg":"EdDSA","kid":"ed1","jku":"https://evil.test/jwks"}`, claimsJSON())
		}},

		// Key ids.
		{name: "unknown kid", reason: ReasonUnknownKey, token: edHeaderToken(`{"alg":"EdDSA","kid":"ed2"}`)},
		{name: "kid of another case", reason: ReasonUnknownKey, token: edHeaderToken(`{"alg":"EdDSA","kid":"ED1"}`)},
		{name: "kid path traversal", reason: ReasonUnknownKey, token: edHeaderToken(`{"alg":"EdDSA","kid":"../../etc/passwd"}`)},
		{name: "kid SQL injection", reason: ReasonUnknownKey, token: edHeaderToken(`{"alg":"EdDSA","kid":"' OR 1=1 --"}`)},
		{name: "kid with NUL", reason: ReasonUnknownKey, token: edHeaderToken(`{"alg":"EdDSA","kid":"ed1\u0000"}`)},
		{name: "kid key1 with NUL", reason: ReasonUnknownKey, token: edHeaderToken(`{"alg":"EdDSA","kid":"key1\u0000"}`)},
		{name: "kid 600 bytes", reason: ReasonUnknownKey, token: edHeaderToken(`{"alg":"EdDSA","kid":"` + strings.Repeat("k", 600) + `"}`)},
		{name: "kid 900 bytes, header over bound", reason: ReasonMalformed, token: edHeaderToken(`{"alg":"EdDSA","kid":"` + strings.Repeat("k", 900) + `"}`)},
		{name: "kid 3000 bytes", reason: ReasonTooLarge, token: edHeaderToken(`{"alg":"EdDSA","kid":"` + strings.Repeat("k", 3000) + `"}`)},
		{name: "kid missing", reason: ReasonKeyIDMissing, token: edHeaderToken(`{"alg":"EdDSA"}`)},
		{name: "kid empty", reason: ReasonKeyIDMissing, token: edHeaderToken(`{"alg":"EdDSA","kid":""}`)},
		{name: "kid a number", reason: ReasonKeyIDMissing, token: edHeaderToken(`{"alg":"EdDSA","kid":1}`)},

		// Signatures.
		{name: "tampered payload", reason: ReasonSignature, token: func(k *testKeys) string {
			return part(goodEd(k), 1, func(string) string {
				return b64s([]byte(strings.Replace(claimsJSON(), "content.read", "content.export", 1)))
			})
		}},
		{name: "payload of another token", reason: ReasonSignature, token: func(k *testKeys) string {
			other := tokentest.Sign(k.ed, edHeader, claimsJSON("sub", `"client-2"`))
			return part(goodEd(k), 1, func(string) string { return strings.Split(other, ".")[1] })
		}},
		{name: "tampered signature", reason: ReasonSignature, token: func(k *testKeys) string {
			return part(goodEd(k), 2, func(s string) string { return flip(s, len(s)/2) })
		}},
		{name: "tampered RS256 signature", reason: ReasonSignature, token: func(k *testKeys) string {
			return part(goodRS(k), 2, func(s string) string { return flip(s, 10) })
		}},
		{name: "truncated signature", reason: ReasonSignature, token: func(k *testKeys) string {
			t := goodEd(k)
			return t[:len(t)-4]
		}},
		{name: "signature emptied", reason: ReasonSignature, token: func(k *testKeys) string {
			t := goodRS(k)
			return t[:strings.LastIndexByte(t, '.')+1]
		}},
		{name: "signature by another Ed25519 key", reason: ReasonSignature, token: func(k *testKeys) string {
			return tokentest.Sign(k.edOther, edHeader, claimsJSON())
		}},
		{name: "signature by another RSA key", reason: ReasonSignature, token: func(k *testKeys) string {
			return tokentest.Sign(k.rsaOther, rsaHeader, claimsJSON())
		}},
		{name: "signature with non-canonical trailing bits", reason: ReasonSignature, token: func(k *testKeys) string {
			return part(goodEd(k), 2, func(s string) string {
				const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
				i := strings.IndexByte(alpha, s[len(s)-1])
				return s[:len(s)-1] + string(alpha[i|1])
			})
		}},

		// Header rules.
		{name: "header not JSON", reason: ReasonMalformed, token: edHeaderToken(`not json`)},
		{name: "header null", reason: ReasonMalformed, token: edHeaderToken(`null`)},
		{name: "header an array", reason: ReasonMalformed, token: edHeaderToken(`["EdDSA"]`)},
		{name: "header with trailing data", reason: ReasonMalformed, token: edHeaderToken(edHeader + `x`)},
		{name: "crit header", reason: ReasonCritical, token: edHeaderToken(`{"alg":"EdDSA","kid":"ed1","crit":["exp"],"exp":1}`),
			stricter: "RFC 7515 §4.1.11: a recipient must refuse crit extensions it does not understand; golang-jwt ignores crit"},
		{name: "typ JOSE+JSON", reason: ReasonType, token: edHeaderToken(`{"alg":"EdDSA","kid":"ed1","typ":"JOSE+JSON"}`),
			stricter: "RFC 8725 §3.11 explicit typing: only JWT and at+jwt are our tokens; golang-jwt does not read typ"},
		{name: "duplicate alg in header", reason: ReasonMalformed, token: edHeaderToken(`{"alg":"none","alg":"EdDSA","kid":"ed1"}`),
			stricter: "RFC 7515 §5.2 lets us refuse duplicate members; encoding/json keeps the last one, fastjson the first"},

		// Claims.
		{name: "expired", reason: ReasonExpired, token: edToken("exp", ts(-31*time.Second))},
		{name: "expired exactly at leeway", reason: ReasonExpired, token: edToken("exp", ts(-30*time.Second))},
		{name: "expired, fraction dropped", reason: ReasonExpired, token: edToken("exp", ts(-30*time.Second)+".9")},
		{name: "expired long ago", reason: ReasonExpired, token: edToken("exp", "1000000000")},
		{name: "exp zero", reason: ReasonExpired, token: edToken("exp", "0")},
		{name: "exp negative", reason: ReasonClaims, token: edToken("exp", "-1")},
		{name: "exp huge", reason: ReasonClaims, token: edToken("exp", "1e300")},
		{name: "exp missing", reason: ReasonExpiryMissing, token: edToken("exp", "")},
		{name: "exp as string", reason: ReasonClaims, token: edToken("exp", strconv.Quote(ts(time.Minute)))},
		{name: "exp null", reason: ReasonClaims, token: edToken("exp", "null")},
		{name: "not yet valid", reason: ReasonNotYetValid, token: edToken("nbf", ts(31*time.Second))},
		{name: "nbf as string", reason: ReasonClaims, token: edToken("nbf", `"0"`)},
		{name: "issued in the future", reason: ReasonIssuedInFuture, token: edToken("iat", ts(31*time.Second))},
		{name: "iat as string", reason: ReasonClaims, token: edToken("iat", `"1"`)},
		{name: "wrong issuer", reason: ReasonIssuer, token: edToken("iss", `"https://evil.test"`)},
		{name: "issuer with trailing slash", reason: ReasonIssuer, token: edToken("iss", strconv.Quote(testIss+"/"))},
		{name: "issuer missing", reason: ReasonIssuer, token: edToken("iss", "")},
		{name: "issuer a number", reason: ReasonClaims, token: edToken("iss", "1")},
		{name: "wrong audience", reason: ReasonAudience, token: edToken("aud", `"https://other.test"`)},
		{name: "audience array without ours", reason: ReasonAudience, token: edToken("aud", `["a","b"]`)},
		{name: "audience missing", reason: ReasonAudience, token: edToken("aud", "")},
		{name: "audience empty", reason: ReasonAudience, token: edToken("aud", `""`)},
		{name: "audience array with a number", reason: ReasonClaims, token: edToken("aud", `[`+strconv.Quote(testAud)+`,1]`)},
		{name: "claims not JSON", reason: ReasonMalformed, token: func(k *testKeys) string { return tokentest.Sign(k.ed, edHeader, `exp=1`) }},
		{name: "claims an array", reason: ReasonMalformed, token: func(k *testKeys) string { return tokentest.Sign(k.ed, edHeader, `[]`) }},
		{name: "claims with trailing data", reason: ReasonMalformed, token: func(k *testKeys) string {
			return tokentest.Sign(k.ed, edHeader, claimsJSON()+"{}")
		}},
		{name: "claims with a bare control character", reason: ReasonMalformed, token: edToken("jti", "\"a\x01b\"")},
		{name: "duplicate exp in claims", reason: ReasonMalformed, token: edToken("exp", ts(-time.Hour)+`,"exp":`+ts(time.Minute)),
			stricter: "RFC 7515 §5.2 / RFC 7519 §4: duplicate claim names are refused; encoding/json keeps the last"},
		{name: "sub a number", reason: ReasonClaims, token: edToken("sub", "42"),
			stricter: "claims we read (sub, client_id, scope, org, learner, jti) must be strings; golang-jwt reads sub only when asked to match it"},
		{name: "org_gen a number", reason: ReasonClaims, token: edToken("org_gen", "7"),
			stricter: "org_gen, read by the licence gate, must be a string; golang-jwt does not read it"},

		// Shape and size.
		{name: "empty", reason: ReasonMalformed, token: func(*testKeys) string { return "" }},
		{name: "whitespace", reason: ReasonMalformed, token: func(*testKeys) string { return " \t\n" }},
		{name: "one part", reason: ReasonMalformed, token: func(*testKeys) string { return "abc" }},
		{name: "two parts", reason: ReasonMalformed, token: func(k *testKeys) string {
			t := goodEd(k)
			return t[:strings.LastIndexByte(t, '.')]
		}},
		{name: "four parts", reason: ReasonMalformed, token: func(k *testKeys) string { return goodEd(k) + ".e30" }},
		{name: "trailing dot", reason: ReasonMalformed, token: func(k *testKeys) string { return goodEd(k) + "." }},
		{name: "10,000 dots", reason: ReasonTooLarge, token: func(*testKeys) string { return strings.Repeat(".", 10000) }},
		{name: "4,000 dots", reason: ReasonMalformed, token: func(*testKeys) string { return strings.Repeat(".", 4000) }},
		{name: "empty header", reason: ReasonMalformed, token: func(k *testKeys) string {
			return part(goodEd(k), 0, func(string) string { return "" })
		}},
		{name: "leading space", reason: ReasonMalformed, token: func(k *testKeys) string { return " " + goodEd(k) }},
		{name: "Bearer prefix left on", reason: ReasonMalformed, token: func(k *testKeys) string { return "Bearer " + goodEd(k) }},
		{name: "base64 with padding", reason: ReasonMalformed, token: func(k *testKeys) string {
			t := goodEd(k) // the 86-character signature needs "=="
			return t + "=="
		}},
		{name: "base64 standard alphabet", reason: ReasonMalformed, token: func(k *testKeys) string {
			t := goodRS(k)
			s := strings.NewReplacer("-", "+", "_", "/").Replace(t)
			if s == t {
				panic("RS256 token has no - or _")
			}
			return s
		}},
		{name: "line break in the signature", reason: ReasonMalformed, token: func(k *testKeys) string {
			return part(goodEd(k), 2, func(s string) string { return s[:40] + "\r\n" + s[40:] })
		}, stricter: "encoding/base64 skips CR and LF even in strict mode, so golang-jwt accepts a token that is not the one signed"},
		{name: "oversized but validly signed", reason: ReasonTooLarge, token: edToken("pad", strconv.Quote(strings.Repeat("p", 3500))),
			stricter: "tokens are bounded at 4096 bytes before decoding; golang-jwt has no size bound"},
	}
}

// flip changes character i of a base64url string to another one.
func flip(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

// TestOracle holds the verifier to golang-jwt: same verdict on every
// token of the table, except the listed stricter cases.
func TestOracle(t *testing.T) {
	k := loadKeys(t)
	for _, tc := range verdictCases() {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.token(k)
			_, f := testVerifier.Verify(raw, k.set, testNow)
			got := ""
			if f != nil {
				got = f.Reason
				if f.UnknownKey != (got == ReasonUnknownKey) {
					t.Errorf("UnknownKey = %v with reason %q", f.UnknownKey, got)
				}
			}
			if got != tc.reason {
				t.Errorf("Verify: got reason %q, want %q", got, tc.reason)
			}
			_, oerr := oracle(k.set, raw)
			switch {
			case tc.stricter != "":
				if oerr != nil || tc.reason == "" {
					t.Errorf("stricter case: golang-jwt error %v (want it to accept), our reason %q (want a refusal)", oerr, tc.reason)
				}
			case (oerr == nil) != (tc.reason == ""):
				t.Errorf("verdicts differ: ours %q, golang-jwt %v", got, oerr)
			}
		})
	}
}

func TestVerifyClaims(t *testing.T) {
	k := loadKeys(t)
	raw := edToken("sub", `"learner-7"`, "learner", `"learner-7"`, "org", `"org-1"`, "org_gen", `"g-1"`,
		"aud", `["x",`+strconv.Quote(testAud)+`]`, "nbf", ts(-time.Minute), "exp", ts(10*time.Minute)+".75",
		"scope", `"service-api/progress.read service-api/progress.write other"`)(k)
	c, f := testVerifier.Verify(raw, k.set, testNow)
	if f != nil {
		t.Fatalf("Verify: %v", f)
	}
	want := Claims{
		Issuer: testIss, Subject: "learner-7", Audience: []string{"x", testAud}, ClientID: "client-1",
		Scope:    scope.Of(scope.ProgressRead, scope.ProgressWrite),
		RawScope: "service-api/progress.read service-api/progress.write other",
		Org:      "org-1", OrgGen: "g-1", Learner: "learner-7", ID: "jti-1",
		IssuedAt: testNow.Add(-time.Minute), NotBefore: testNow.Add(-time.Minute), Expiry: testNow.Add(10 * time.Minute),
	}
	if c.Issuer != want.Issuer || c.Subject != want.Subject || !slices.Equal(c.Audience, want.Audience) ||
		c.ClientID != want.ClientID || c.Scope != want.Scope || c.RawScope != want.RawScope ||
		c.Org != want.Org || c.OrgGen != want.OrgGen || c.Learner != want.Learner || c.ID != want.ID ||
		!c.IssuedAt.Equal(want.IssuedAt) || !c.NotBefore.Equal(want.NotBefore) || !c.Expiry.Equal(want.Expiry) {
		t.Errorf("Claims:\n got %+v\nwant %+v", c, want)
	}
}

func TestVerifyConfigAndKeys(t *testing.T) {
	k := loadKeys(t)
	raw := goodEd(k)
	for _, tc := range []struct {
		name   string
		v      Verifier
		keys   *KeySet
		reason string
	}{
		{"no issuer", Verifier{Audience: testAud}, k.set, ReasonNotConfigured},
		{"no audience", Verifier{Issuer: testIss}, k.set, ReasonNotConfigured},
		{"nil key set", *testVerifier, nil, ReasonUnknownKey},
		{"small MaxTokenBytes", Verifier{Issuer: testIss, Audience: testAud, MaxTokenBytes: 100}, k.set, ReasonTooLarge},
		{"other audience", Verifier{Issuer: testIss, Audience: "https://x.test"}, k.set, ReasonAudience},
		{"no leeway", Verifier{Issuer: testIss, Audience: testAud, Leeway: -time.Second}, k.set, ""},
	} {
		_, f := tc.v.Verify(raw, tc.keys, testNow)
		got := ""
		if f != nil {
			got = f.Reason
		}
		if got != tc.reason {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.reason)
		}
	}
	// Leeway applies at both ends and nowhere else.
	v := Verifier{Issuer: testIss, Audience: testAud}
	if _, f := v.Verify(edToken("exp", ts(-time.Second))(k), k.set, testNow); f == nil || f.Reason != ReasonExpired {
		t.Errorf("without leeway, a token expired a second ago: %v", f)
	}
}

// TestLinearSplit: a token of dots costs no more than its length.
func TestLinearSplit(t *testing.T) {
	k := loadKeys(t)
	v := Verifier{Issuer: testIss, Audience: testAud, MaxTokenBytes: 1 << 20}
	raw := strings.Repeat(".", 1<<20)
	if n := testing.AllocsPerRun(10, func() { v.Verify(raw, k.set, testNow) }); n > 1 {
		t.Errorf("a 1 MiB token of dots allocates %v times", n)
	}
}

// validTokens are the tokens of the table that verify: the only strings a
// fuzzer may see accepted, since it cannot sign.
func validTokens(k *testKeys) map[string]bool {
	m := map[string]bool{}
	for _, tc := range verdictCases() {
		if tc.reason == "" {
			m[tc.token(k)] = true
		}
	}
	return m
}

func FuzzVerify(f *testing.F) {
	k := loadKeys(f)
	for _, tc := range verdictCases() {
		f.Add(tc.token(k))
	}
	valid := validTokens(k)
	f.Fuzz(func(t *testing.T, raw string) {
		c, fail := testVerifier.Verify(raw, k.set, testNow)
		if fail != nil {
			if fail.Reason == "" || fail.UnknownKey != (fail.Reason == ReasonUnknownKey) {
				t.Fatalf("bad failure %+v", fail)
			}
			return
		}
		if !valid[raw] {
			t.Fatalf("accepted a token that was never signed: %q", raw)
		}
		if _, err := oracle(k.set, raw); err != nil {
			t.Fatalf("accepted a token golang-jwt refuses (%v): %q", err, raw)
		}
		if c.Issuer != testIss {
			t.Fatalf("accepted with iss %q", c.Issuer)
		}
	})
}

// FuzzSigned signs arbitrary headers and claims with the real key, so
// that claim parsing is fuzzed past the signature: whatever we accept,
// golang-jwt accepts with the same claims.
func FuzzSigned(f *testing.F) {
	k := loadKeys(f)
	f.Add(edHeader, claimsJSON())
	f.Add(edHeader, claimsJSON("exp", ts(time.Minute)+".999", "nbf", "0.5", "aud", `[""]`))
	f.Add(`{"alg":"EdDSA","kid":"ed1","typ":"jwt"}`, claimsJSON("exp", "1e10", "iat", "-0"))
	f.Add(`{"kid":"ed1","alg":"EdDSA"}`, claimsJSON("iss", `"https:\/\/idp.lectern.test"`, "sub", `"\ud800"`))
	f.Fuzz(func(t *testing.T, header, payload string) {
		raw := tokentest.Sign(k.ed, header, payload)
		c, fail := testVerifier.Verify(raw, k.set, testNow)
		if fail != nil {
			return
		}
		mc, err := oracle(k.set, raw)
		if err != nil {
			t.Fatalf("accepted a token golang-jwt refuses (%v):\nheader %q\nclaims %q", err, header, payload)
		}
		exp, _ := mc.GetExpirationTime()
		iss, _ := mc.GetIssuer()
		aud, _ := mc.GetAudience()
		if !exp.Time.Equal(c.Expiry) || iss != c.Issuer || !slices.Equal(aud, c.Audience) {
			t.Fatalf("claims differ: ours exp %v iss %q aud %q, golang-jwt exp %v iss %q aud %q",
				c.Expiry, c.Issuer, c.Audience, exp.Time, iss, aud)
		}
	})
}

// TestFuzzSeeds keeps testdata/fuzz/FuzzVerify equal to the table;
// go test -run TestFuzzSeeds -update rewrites it.
func TestFuzzSeeds(t *testing.T) {
	k := loadKeys(t)
	dir := filepath.Join("testdata", "fuzz", "FuzzVerify")
	nonWord := regexp.MustCompile(`[^a-z0-9]+`)
	for _, tc := range verdictCases() {
		name := strings.Trim(nonWord.ReplaceAllString(strings.ToLower(tc.name), "-"), "-")
		path := filepath.Join(dir, name)
		want := "go test fuzz v1\nstring(" + strconv.Quote(tc.token(k)) + ")\n"
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is stale or missing; run go test ./shared/token -run TestFuzzSeeds -update", path)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	k := loadKeys(b)
	for _, bc := range []struct {
		name string
		raw  string
	}{{"EdDSA", goodEd(k)}, {"RS256", goodRS(k)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, f := testVerifier.Verify(bc.raw, k.set, testNow); f != nil {
					b.Fatal(f)
				}
			}
		})
	}
}

// BenchmarkOracle is golang-jwt on the same tokens, for comparison.
func BenchmarkOracle(b *testing.B) {
	k := loadKeys(b)
	for _, bc := range []struct {
		name string
		raw  string
	}{{"EdDSA", goodEd(k)}, {"RS256", goodRS(k)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := oracle(k.set, bc.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
