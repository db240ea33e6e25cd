// Package forensic makes the licence envelope's tag (spec: What the
// service does §4): a short keyed marker on every content response from
// which the operator, holding the key, recovers the organisation and the
// token scope that fetched it, and which nobody without the key can forge
// or link to an organisation.
//
// A tag is "t1" followed by 16 base64url characters: the first 96 bits of
// HMAC-SHA256(key, orgID, scopes). Recovery is by search: the operator
// tries each known organisation with each of the 64 scope sets (Decode),
// which for thousands of organisations takes milliseconds.
//
// Beside the tag: the envelope itself (Envelope), the export bundles'
// canaries (canary.go: whitespace marks keyed by organisation and lesson,
// which survive the tag's removal) and detection (detect.go: a leak's
// organisation from its tag or else its canaries).
package forensic

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"

	"github.com/lectern-api/lectern/shared/jsonenc"
	"github.com/lectern-api/lectern/shared/scope"
)

const prefix = "t1"

// Tag is the tag for org and the token's scopes under key.
func Tag(key []byte, org string, scopes scope.Set) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte{1, byte(scopes)})
	m.Write([]byte(org))
	sum := m.Sum(nil)
	return prefix + base64.RawURLEncoding.EncodeToString(sum[:12])
}

// Decode finds which of orgs and which scope set made tag under key.
func Decode(key []byte, tag string, orgs []string) (org string, scopes scope.Set, ok bool) {
	for _, o := range orgs {
		for s := 0; s < 1<<len(scope.All); s++ {
			if hmac.Equal([]byte(Tag(key, o, scope.Set(s))), []byte(tag)) {
				return o, scope.Set(s), true
			}
		}
	}
	return "", 0, false
}

// Licence is the envelope's lic: the licence the content was served
// under, the organisation's agreement and the version it accepted.
func Licence(org string, eclaVersion int) string {
	return "lic_" + org + "_ecla" + strconv.Itoa(eclaVersion)
}

// Envelope is the licence envelope every content response carries (spec:
// What the service does §4), and an export bundle's manifest repeats.
type Envelope struct {
	Lic string `json:"lic"`
	Tag string `json:"tag"`
}

// AppendMember appends `,"_license":{"lic":…,"tag":…}}`: the envelope as
// the last member of a document, and the document's closing brace.
func (e Envelope) AppendMember(dst []byte) []byte {
	dst = append(dst, `,"_license":{"lic":`...)
	dst = jsonenc.String(dst, e.Lic)
	dst = append(dst, `,"tag":`...)
	dst = jsonenc.String(dst, e.Tag)
	return append(dst, "}}"...)
}
