package changes

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
)

// A since token is what a feed answer gives as its next "since": the
// version it reached and the organisation's grants then, sealed, so that
// the next call can answer a grant's change as additions and removals:
//
//	s1.<base64url: contentVersion NUL grants, comma-separated>.<base64url: HMAC-SHA-256, 16 bytes>
//
// keyed with subkey.Changes over the organisation's id, a NUL and the
// payload: a token is good for its organisation only, and cannot be made
// to claim grants it did not hold (which would show another subject's
// lesson ids as removed).
const tokenPrefix = "s1."

// macSize is the bytes of the MAC a token keeps.
const macSize = 16

// versionRE is a contentVersion's syntax (docs/corpus-format.md).
var versionRE = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])\+[0-9A-Za-z]{1,64}$`)

// Since is where a feed call starts: a version, and the grants the caller
// held there (Known false: a bare contentVersion, whose grants are taken
// as the organisation's now).
type Since struct {
	Version string
	Grants  []string
	Known   bool
}

// ErrSince is a since that is neither a contentVersion nor a token.
var ErrSince = errors.New("since is neither a contentVersion nor a token of the feed")

// ErrSinceSeal is a token of the feed's form whose seal does not open
// under the key given: sealed under a secret the deployment no longer
// holds (LECTERN_SECRET was rotated), or for another organisation.
var ErrSinceSeal = errors.New("since is a token of the feed this deployment no longer holds, or another organisation's")

// Seal is the token of version and grants for the organisation org.
func Seal(key []byte, org, version string, grants []string) string {
	payload := version + "\x00" + strings.Join(grants, ",")
	return tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(mac(key, org, payload))
}

// ParseSince reads a since parameter of the organisation org: a
// contentVersion, or a token Seal made for org.
func ParseSince(key []byte, org, s string) (Since, error) {
	if versionRE.MatchString(s) {
		return Since{Version: s}, nil
	}
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok || len(s) > 4096 {
		return Since{}, ErrSince
	}
	p64, m64, ok := strings.Cut(rest, ".")
	if !ok {
		return Since{}, ErrSince
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	got, err2 := base64.RawURLEncoding.DecodeString(m64)
	version, grants, _ := strings.Cut(string(payload), "\x00")
	if err1 != nil || err2 != nil || len(got) != macSize || !versionRE.MatchString(version) {
		return Since{}, ErrSince
	}
	if !hmac.Equal(got, mac(key, org, string(payload))) {
		return Since{}, ErrSinceSeal
	}
	sn := Since{Version: version, Known: true, Grants: []string{}}
	if grants != "" {
		sn.Grants = strings.Split(grants, ",")
	}
	return sn, nil
}

func mac(key []byte, org, payload string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(org))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return m.Sum(nil)[:macSize]
}
