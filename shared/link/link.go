// Package link signs and checks the signed download links: a minted
// media URL (spec: Route rules §4) and a zip export's URL (§5). Both tiers
// check a link with the same code: the edge refuses an expired or altered
// one itself, and the origin serves the rest.
//
// A link is a path under Prefix, never under /v1, and a query:
//
//	/files/m/<name>?k=<kid>&x=<expires>&r=<row>&o=<org>&g=<generation>&m=<mediaId>&s=<sig>
//	/files/e/<name>?k=<kid>&x=<expires>&r=<row>&o=<org>&g=<generation>&sc=<scopes>&v=<contentVersion>&t=<tier>&sl=<slug>[&c=<classNum>]&s=<sig>
//
// <name> is the download's file name; <expires> unix seconds, the link
// being valid while now < expires; <row> the ledger row the link was
// minted as, so that two mints of one target are two links; <org> and
// <generation> the organisation the link was made for (its id and its
// generation, which may be empty for an organisation older than
// generations), which the origin checks at every download so that a link
// ends with its organisation (suspended, expired, no longer granted,
// deleted or created again); <sig> the
// unpadded base64url HMAC-SHA-256, keyed with the key <kid> names, over
// every other field, length-prefixed in a fixed order (signed). What is
// signed is the fields' values, not the URL's bytes: the query's order
// and its percent-encoding are not part of a link.
package link

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/param"
)

// Prefix is the path every link is under.
const Prefix = "/files/"

// MaxQuery bounds a link's query, in bytes; a longer one is malformed
// before it is read. A real one is under 400.
const MaxQuery = 2048

// Kind is what a link downloads.
type Kind uint8

const (
	Media  Kind = iota + 1 // an asset: Link.Media
	Export                 // an export bundle: Link.Export
)

// Link is a signed link's fields.
type Link struct {
	Kind    Kind
	KeyID   string // the key that signs it: Keys.Sign sets it, Parse reads it
	Expires int64  // unix seconds; the link is valid while now < Expires
	Row     int64  // its ledger row: two mints of one target are two links
	// Name is the download's file name, the path's last segment: 1 to
	// MaxName bytes of A-Z, a-z, 0-9, '.', '_' and '-', not starting with
	// '.'. Sign cleans it (CleanName).
	Name string
	// Org and Gen are the organisation the link was made for: its id and
	// its generation (store.Org.Generation).
	Org, Gen string
	Media    string // Kind Media: the mediaId
	Export   Bundle // Kind Export: the bundle

	sig [sha256.Size]byte // read by Parse
}

// Bundle is an export link's target: the scope set it was made for, the
// corpus version, and a subject (Class 0) or one class.
type Bundle struct {
	Scopes         string // the token's scope set, as the scope claim writes it
	ContentVersion string
	Tier, Slug     string
	Class          int // 0: the whole subject
}

// Why a link is refused (Parse, Verify).
var (
	ErrMalformed  = errors.New("link: malformed")
	ErrUnknownKey = errors.New("link: unknown key id")
	ErrAltered    = errors.New("link: altered (bad signature)")
	ErrExpired    = errors.New("link: expired")
)

// MaxName bounds a link's file name, in bytes.
const MaxName = 100

// CleanName is name as a link carries it: every byte outside A-Z, a-z,
// 0-9, '.', '_' and '-' replaced by '_', a leading '.' too, cut to
// MaxName bytes; "download" when empty.
func CleanName(name string) string {
	if name == "" {
		return "download"
	}
	if len(name) > MaxName {
		name = name[:MaxName]
	}
	if validName(name) {
		return name
	}
	b := []byte(name)
	for i, c := range b {
		if !nameByte(c) || i == 0 && c == '.' {
			b[i] = '_'
		}
	}
	return string(b)
}

func validName(s string) bool {
	if s == "" || len(s) > MaxName || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// signed appends to b what a link's signature covers: a version, then
// every field but the signature, each length-prefixed ("<len>:<bytes>"),
// so that no two links sign the same bytes.
func (l *Link) signed(b []byte) []byte {
	b = field(b, "lectern-link-v2")
	b = field(b, l.Kind.letter())
	b = field(b, l.KeyID)
	b = field(b, strconv.FormatInt(l.Expires, 10))
	b = field(b, strconv.FormatInt(l.Row, 10))
	b = field(b, l.Name)
	b = field(b, l.Org)
	b = field(b, l.Gen)
	switch l.Kind {
	case Media:
		b = field(b, l.Media)
	case Export:
		x := &l.Export
		for _, f := range [...]string{x.Scopes, x.ContentVersion, x.Tier, x.Slug, strconv.Itoa(x.Class)} {
			b = field(b, f)
		}
	}
	return b
}

func field(b []byte, f string) []byte {
	b = strconv.AppendInt(b, int64(len(f)), 10)
	b = append(b, ':')
	return append(b, f...)
}

// letter is the kind's path segment.
func (k Kind) letter() string {
	switch k {
	case Media:
		return "m"
	case Export:
		return "e"
	}
	return ""
}

// mac is the HMAC-SHA-256 links are signed with: crypto/hmac, as
// shared/edgesig's signatures are; the one place that chooses an
// implementation (a link is never on the edge's 304 path).
func mac(key, msg []byte) (sum [sha256.Size]byte) {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	m.Sum(sum[:0])
	return sum
}

// Parse reads a link from a request's escaped path and raw query. Any
// deviation from the form Sign writes — another path, an unknown, missing
// or repeated parameter, a number or signature that does not read — is
// ErrMalformed; it checks no signature (Verify does).
func Parse(path, rawQuery string) (Link, error) {
	var l Link
	rest, ok := strings.CutPrefix(path, Prefix)
	if !ok || len(rawQuery) > MaxQuery || strings.HasSuffix(rawQuery, "&") {
		return l, ErrMalformed
	}
	kind, name, ok := strings.Cut(rest, "/")
	switch {
	case !ok || !validName(name):
		return l, ErrMalformed
	case kind == "m":
		l.Kind = Media
	case kind == "e":
		l.Kind = Export
	default:
		return l, ErrMalformed
	}
	l.Name = name
	var seen uint16
	var sig, expires, row, class string
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		rawKey, rawVal, _ := strings.Cut(pair, "=")
		v, ok := param.Unescape(rawVal)
		if !ok {
			return l, ErrMalformed
		}
		var dst *string
		var bit uint16
		switch rawKey {
		case "k":
			dst, bit = &l.KeyID, 1<<0
		case "x":
			dst, bit = &expires, 1<<1
		case "r":
			dst, bit = &row, 1<<2
		case "s":
			dst, bit = &sig, 1<<3
		case "m":
			dst, bit = &l.Media, 1<<4
		case "o":
			dst, bit = &l.Org, 1<<5
		case "g":
			dst, bit = &l.Gen, 1<<11
		case "sc":
			dst, bit = &l.Export.Scopes, 1<<6
		case "v":
			dst, bit = &l.Export.ContentVersion, 1<<7
		case "t":
			dst, bit = &l.Export.Tier, 1<<8
		case "sl":
			dst, bit = &l.Export.Slug, 1<<9
		case "c":
			dst, bit = &class, 1<<10
		default:
			return l, ErrMalformed
		}
		if seen&bit != 0 {
			return l, ErrMalformed
		}
		seen |= bit
		*dst = v
	}
	const common, media, export, exportClass = 0b1000_0010_1111, 0b1_0000, 0b11_1100_0000, 0b100_0000_0000
	want := uint16(common | media)
	if l.Kind == Export {
		want = common | export | seen&exportClass
	}
	if seen != want || l.Org == "" || len(l.KeyID) > MaxKeyID || !validName(l.KeyID) {
		return l, ErrMalformed
	}
	var err1, err2 error
	l.Expires, err1 = strconv.ParseInt(expires, 10, 64)
	l.Row, err2 = strconv.ParseInt(row, 10, 64)
	if err1 != nil || err2 != nil || !canonicalInt(expires) || !canonicalInt(row) {
		return l, ErrMalformed
	}
	if class != "" {
		n, err := strconv.Atoi(class)
		if err != nil || n <= 0 || !canonicalInt(class) {
			return l, ErrMalformed
		}
		l.Export.Class = n
	}
	if base64.RawURLEncoding.DecodedLen(len(sig)) != len(l.sig) {
		return l, ErrMalformed
	}
	if n, err := base64.RawURLEncoding.Strict().Decode(l.sig[:], []byte(sig)); err != nil || n != len(l.sig) {
		return l, ErrMalformed
	}
	return l, nil
}

// canonicalInt reports whether s is an integer as strconv writes it (no
// sign but '-', no leading zero), so that one link has one spelling of
// its numbers.
func canonicalInt(s string) bool {
	d := strings.TrimPrefix(s, "-")
	return d != "" && (d == "0" && d == s || d[0] != '0')
}

// appendQuery appends the query component v, percent-encoding every byte
// but the unreserved ones (RFC 3986 §2.3) and '/'.
func appendQuery(b []byte, v string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' || c == '/' {
			b = append(b, c)
		} else {
			b = append(b, '%', hex[c>>4], hex[c&15])
		}
	}
	return b
}

// Refusal is the answer both tiers give a link that Parse or Verify
// refused: 404 NOT_FOUND in the API's error body, saying to mint or
// export again (the link's kind is not known to a malformed one, so the
// message names both).
func Refusal(err error) *apierr.Error {
	why := "This link is not valid"
	if errors.Is(err, ErrExpired) {
		why = "This link has expired"
	}
	return apierr.New(apierr.NotFound, why+": mint the media URL again (POST /v1/media/urls) or export again for a new link.")
}

// Methods are the methods a link is served with.
var Methods = []string{"GET", "HEAD"}

// Check is what both tiers run on a request under Prefix: GET or HEAD
// (else 405 METHOD_NOT_ALLOWED with Allow), a link that parses and
// verifies at now (else Refusal). An export link is checked like any
// other; whether its bundle is served is the origin's.
func (k Keys) Check(method, path, rawQuery string, now time.Time) (Link, *apierr.Error) {
	if method != "GET" && method != "HEAD" {
		return Link{}, &apierr.Error{Code: apierr.MethodNotAllowed,
			Message: method + " is not served on a download link; use GET or HEAD.", Allow: Methods}
	}
	l, err := Parse(path, rawQuery)
	if err == nil {
		err = k.Verify(l, now)
	}
	if err != nil {
		return Link{}, Refusal(err)
	}
	return l, nil
}
