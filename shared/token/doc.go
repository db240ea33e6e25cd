// Package token verifies the API's bearer tokens and writes the answers
// to a token that fails (spec: Authentication §3-7; Errors, 401
// invalid_token and 403 insufficient_scope). The origin and the edge run
// this very code, so a token gets the same verdict and the same 401 or 403
// from both tiers.
//
// # Tokens
//
// Access tokens are JWTs (RFC 7519) in JWS compact form (RFC 7515), signed
// with EdDSA over Ed25519 (RFC 8037) or with RS256 (RSASSA-PKCS1-v1_5 with
// SHA-256, RFC 7518 §3.3). [Verifier.Verify] checks, in this order:
//
//  1. the token's length, before decoding anything (MaxTokenBytes);
//  2. exactly three dot-separated parts of unpadded base64url, canonical
//     encoding only (no padding, no line breaks, no stray bits);
//  3. the header: alg is EdDSA or RS256 (never none or HS*), no crit, typ
//     absent or JWT / at+jwt, kid present and found by exact match in the
//     key set, and alg equal to that key's algorithm;
//  4. the signature over the ASCII text header.payload;
//  5. only then the claims: exp required, nbf and iat honoured with the
//     same leeway, iss equal to the verifier's issuer, aud holding its
//     audience.
//
// Header members that point at other keys (jwk, jku, x5u, x5c) are
// ignored: keys come only from the JWKS the caller fetched from the
// configured identity provider.
//
// The verifier is held to github.com/golang-jwt/jwt/v5 as an oracle
// (verify_test.go): every token it accepts is accepted by golang-jwt with
// the same options, and the few tokens it rejects that golang-jwt accepts
// are listed there with their reason. golang-jwt itself cannot be used
// here: it imports crypto/x509, and Go 1.26's signing code starts a
// goroutine, which TinyGo's -scheduler=none refuses.
//
// # Keys
//
// [ParseJWKS] reads a JWK Set (RFC 7517) into a [KeySet]: Ed25519 keys (kty
// OKP) and RSA keys of 2048 bits or more, each with a kid. [Cache] is the
// refresh policy for that set, without I/O, goroutines or locks, so that
// the origin (mutex and waiters) and the edge (a subrequest) drive the
// same rules; see its documentation.
//
// # Answers
//
// [BearerToken] reads the Authorization header (RFC 6750 §2.1);
// [Unauthorized] and [InsufficientScope] are the error bodies, and
// [Challenge] and [ScopeChallenge] the matching WWW-Authenticate values
// (RFC 6750 §3, RFC 9728 §5.1).
//
// Like the rest of shared/, the package builds with TinyGo for wasip1 with
// -scheduler=none: JSON is read with fastjson, time is passed in, and
// nothing starts a goroutine.
package token
