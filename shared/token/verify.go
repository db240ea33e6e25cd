package token

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/shared/scope"
	"github.com/valyala/fastjson"
)

// DefaultMaxTokenBytes bounds a token when Verifier.MaxTokenBytes is zero.
// Our tokens are about 500 bytes (EdDSA) to 700 bytes (RS256).
const DefaultMaxTokenBytes = 4096

// maxHeaderChars bounds the encoded JOSE header, which is read before the
// signature is checked. Ours is under 100 characters.
const maxHeaderChars = 1024

// maxDate is the largest NumericDate accepted, 9999-12-31T23:59:59Z.
// Dates outside [0, maxDate] are refused as invalid claims, which keeps
// the conversion to time.Time exact on every target.
const maxDate = 253402300799

// The reasons a token fails: short, stable, safe to show the client, and
// written as both the error message's tail and the challenge's
// error_description.
const (
	ReasonNotConfigured  = "verifier not configured"
	ReasonTooLarge       = "token too large"
	ReasonMalformed      = "malformed token"
	ReasonAlgorithm      = "algorithm not allowed"
	ReasonCritical       = "critical header not supported"
	ReasonType           = "token type not allowed"
	ReasonKeyIDMissing   = "key id missing"
	ReasonUnknownKey     = "unknown key id"
	ReasonSignature      = "signature invalid"
	ReasonClaims         = "invalid claims"
	ReasonExpiryMissing  = "expiry missing"
	ReasonExpired        = "token expired"
	ReasonNotYetValid    = "token not yet valid"
	ReasonIssuedInFuture = "token issued in the future"
	ReasonIssuer         = "issuer mismatch"
	ReasonAudience       = "audience mismatch"
)

// Failure is why a token was refused.
type Failure struct {
	// Reason is one of the Reason constants.
	Reason string
	// UnknownKey is set when the token names a kid the key set lacks: a
	// fresher JWKS may hold it (see Cache.NeedsRefresh). It is never set
	// for any other failure.
	UnknownKey bool
}

// Error returns "token: " + Reason. A nil *Failure means success; do not
// store one in an error variable.
func (f *Failure) Error() string { return "token: " + f.Reason }

// Claims are the verified claims of a token.
type Claims struct {
	Issuer   string   // iss
	Subject  string   // sub: the client id, or the learner id on learner tokens
	Audience []string // aud, always as a list
	ClientID string   // client_id
	Scope    scope.Set
	RawScope string // the scope claim as sent: space-separated full names
	Org      string // org: the organisation id, when the token carries one
	Learner  string // learner: the learner id, on learner tokens only
	ID       string // jti

	// OrgGen is org_gen, the generation of that organisation when the
	// token was issued (the dev identity provider's tokens carry it): an
	// organisation deleted and created again under the same id has
	// another, and the origin's licence gate refuses the old tokens.
	OrgGen string

	// The NumericDates, whole seconds in UTC; IssuedAt and NotBefore are
	// zero when absent.
	IssuedAt  time.Time
	NotBefore time.Time
	Expiry    time.Time
}

// DefaultLeeway is the clock skew both tiers allow on exp, nbf and iat, so
// that a token near its ends gets the same verdict from either.
const DefaultLeeway = 30 * time.Second

// Verifier checks tokens against one issuer and audience. Its zero
// MaxTokenBytes means DefaultMaxTokenBytes. A Verifier is read-only once
// set up and may be shared.
type Verifier struct {
	Issuer   string // iss must equal it; required
	Audience string // aud must hold it; required
	// Leeway widens exp, nbf and iat by this much for clock skew (both
	// tiers use DefaultLeeway). A negative Leeway counts as zero.
	Leeway        time.Duration
	MaxTokenBytes int
}

// Verify checks raw, a compact JWS, against keys at instant now, and
// returns its claims, or why it was refused. A nil keys is an empty set:
// every token then fails with UnknownKey set.
//
// The steps and their order are in the package documentation; the claims
// are parsed only after the signature has been verified.
func (v *Verifier) Verify(raw string, keys *KeySet, now time.Time) (Claims, *Failure) {
	if v.Issuer == "" || v.Audience == "" {
		return Claims{}, &Failure{Reason: ReasonNotConfigured}
	}
	limit := v.MaxTokenBytes
	if limit <= 0 {
		limit = DefaultMaxTokenBytes
	}
	if len(raw) > limit {
		return Claims{}, &Failure{Reason: ReasonTooLarge}
	}

	// header.payload.signature: two Cuts and one IndexByte, so linear in
	// len(raw) whatever the number of dots.
	h, rest, ok1 := strings.Cut(raw, ".")
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.IndexByte(sig, '.') >= 0 ||
		len(h) == 0 || len(h) > maxHeaderChars || len(p) == 0 ||
		!isB64URL(h) || !isB64URL(p) || !isB64URL(sig) {
		return Claims{}, &Failure{Reason: ReasonMalformed}
	}
	signed := raw[:len(h)+1+len(p)]

	hb, ok := decodeB64(h)
	if !ok {
		return Claims{}, &Failure{Reason: ReasonMalformed}
	}
	parser := parsers.Get()
	defer parsers.Put(parser)
	key, f := header(parser, hb, keys)
	if f != nil {
		return Claims{}, f
	}

	if !verifySignature(key, signed, sig) {
		return Claims{}, &Failure{Reason: ReasonSignature}
	}

	pb, ok := decodeB64(p)
	if !ok {
		return Claims{}, &Failure{Reason: ReasonMalformed}
	}
	return v.claims(parser, pb, now)
}

// header checks the JOSE header and returns the key to verify with.
func header(parser *fastjson.Parser, b []byte, keys *KeySet) (Key, *Failure) {
	o, ok := parseObject(parser, b)
	if !ok {
		return Key{}, &Failure{Reason: ReasonMalformed}
	}
	// alg is pinned: only the two algorithms our keys use, never none,
	// HS* (whose key would be our public key) or anything negotiable.
	alg, _, _ := str(o, "alg")
	if alg != EdDSA && alg != RS256 {
		return Key{}, &Failure{Reason: ReasonAlgorithm}
	}
	// RFC 7515 §4.1.11: extensions listed in crit must be understood; we
	// understand none, so any crit is refused.
	if o.Get("crit") != nil {
		return Key{}, &Failure{Reason: ReasonCritical}
	}
	if typ, present, ok := str(o, "typ"); present && (!ok || !allowedType(typ)) {
		return Key{}, &Failure{Reason: ReasonType}
	}
	kid, present, ok := str(o, "kid")
	if !present || !ok || kid == "" {
		return Key{}, &Failure{Reason: ReasonKeyIDMissing}
	}
	key, found := keys.Lookup(kid)
	if !found {
		return Key{}, &Failure{Reason: ReasonUnknownKey, UnknownKey: true}
	}
	if key.alg != alg {
		return Key{}, &Failure{Reason: ReasonAlgorithm}
	}
	return key, nil
}

// allowedType reports whether typ names a JWT or an OAuth access token JWT
// (RFC 7519 §5.1, RFC 9068 §2.1). Media types are case-insensitive, and
// "application/" may be left out (RFC 7515 §4.1.9).
func allowedType(typ string) bool {
	if len(typ) > len("application/") && strings.EqualFold(typ[:len("application/")], "application/") {
		typ = typ[len("application/"):]
	}
	return strings.EqualFold(typ, "JWT") || strings.EqualFold(typ, "at+jwt")
}

// verifySignature checks the encoded signature sig over signed with key.
// The signature's length must be exactly the key's, checked before
// decoding.
func verifySignature(key Key, signed, sig string) bool {
	var buf [maxRSABits / 8]byte
	size := ed25519.SignatureSize
	if key.rsa != nil {
		size = key.rsa.Size()
	}
	if len(sig) != b64.EncodedLen(size) || !isB64URL(sig) {
		return false
	}
	n, err := b64.Decode(buf[:], []byte(sig))
	if err != nil || n != size {
		return false
	}
	if key.ed != nil {
		return ed25519.Verify(key.ed, []byte(signed), buf[:n])
	}
	digest := sha256.Sum256([]byte(signed))
	return rsa.VerifyPKCS1v15(key.rsa, crypto.SHA256, digest[:], buf[:n]) == nil
}

// claims reads and checks the claims of a verified token.
func (v *Verifier) claims(parser *fastjson.Parser, b []byte, now time.Time) (Claims, *Failure) {
	o, ok := parseObject(parser, b)
	if !ok {
		return Claims{}, &Failure{Reason: ReasonMalformed}
	}
	var c Claims
	// Every claim we read must have its registered type when present.
	for _, m := range [...]struct {
		name string
		dst  *string
	}{
		{"iss", &c.Issuer}, {"sub", &c.Subject}, {"client_id", &c.ClientID},
		{"scope", &c.RawScope}, {"org", &c.Org}, {"org_gen", &c.OrgGen}, {"learner", &c.Learner}, {"jti", &c.ID},
	} {
		s, _, ok := str(o, m.name)
		if !ok {
			return Claims{}, &Failure{Reason: ReasonClaims}
		}
		*m.dst = s
	}
	aud, ok := audience(o.Get("aud"))
	if !ok {
		return Claims{}, &Failure{Reason: ReasonClaims}
	}
	c.Audience = aud
	var present bool
	for _, m := range [...]struct {
		name    string
		dst     *time.Time
		present *bool
	}{
		{"exp", &c.Expiry, &present}, {"nbf", &c.NotBefore, nil}, {"iat", &c.IssuedAt, nil},
	} {
		t, p, ok := numericDate(o.Get(m.name))
		if !ok {
			return Claims{}, &Failure{Reason: ReasonClaims}
		}
		*m.dst = t
		if m.present != nil {
			*m.present = p
		}
	}
	c.Scope = scope.Parse(c.RawScope)

	// The comparisons are golang-jwt's (validator.go), so that both agree
	// to the second: valid while now < exp+leeway, and from nbf-leeway and
	// iat-leeway on.
	leeway := max(v.Leeway, 0)
	switch {
	case !present:
		return Claims{}, &Failure{Reason: ReasonExpiryMissing}
	case !now.Before(c.Expiry.Add(leeway)):
		return Claims{}, &Failure{Reason: ReasonExpired}
	case !c.NotBefore.IsZero() && now.Before(c.NotBefore.Add(-leeway)):
		return Claims{}, &Failure{Reason: ReasonNotYetValid}
	case !c.IssuedAt.IsZero() && now.Before(c.IssuedAt.Add(-leeway)):
		return Claims{}, &Failure{Reason: ReasonIssuedInFuture}
	case c.Issuer != v.Issuer:
		return Claims{}, &Failure{Reason: ReasonIssuer}
	case !contains(c.Audience, v.Audience):
		return Claims{}, &Failure{Reason: ReasonAudience}
	}
	return c, nil
}

// audience reads aud, a string or an array of strings (RFC 7519 §4.1.3).
// An absent aud is an empty list; any other type is not ok.
func audience(v *fastjson.Value) ([]string, bool) {
	if v == nil {
		return nil, true
	}
	if b, err := v.StringBytes(); err == nil {
		return []string{string(b)}, true
	}
	arr, err := v.Array()
	if err != nil {
		return nil, false
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		b, err := e.StringBytes()
		if err != nil {
			return nil, false
		}
		out = append(out, string(b))
	}
	return out, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// numericDate reads a NumericDate (RFC 7519 §2): a JSON number of seconds
// since the epoch, possibly with a fraction, which is dropped as
// golang-jwt drops it (TimePrecision is one second). The number's text is
// converted with strconv.ParseFloat, as encoding/json converts it, so both
// see the same value. An absent member is the zero time and not present;
// a number outside [0, maxDate] or another type is not ok.
func numericDate(v *fastjson.Value) (t time.Time, present, ok bool) {
	if v == nil {
		return time.Time{}, false, true
	}
	if v.Type() != fastjson.TypeNumber {
		return time.Time{}, true, false
	}
	var buf [32]byte
	f, err := strconv.ParseFloat(string(v.MarshalTo(buf[:0])), 64)
	if err != nil || !(f >= 0 && f <= maxDate) {
		return time.Time{}, true, false
	}
	return time.Unix(int64(f), 0).UTC(), true, true
}
