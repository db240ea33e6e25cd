package link

import (
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/shared/subkey"
)

// Key is one signing key: its id, carried by every link it signs, and
// its secret.
type Key struct {
	ID     string
	Secret []byte
}

// Keys are the deployment's link keys: the first signs, every one
// verifies, so a new key is rolled out by putting it first and the old
// one is dropped once its links have expired (at most an hour). The zero
// Keys signs nothing and verifies nothing.
//
// Several keys may share the id DerivedID: the keys derived from the
// deployment secret and from the secret accepted beside it while it is
// rotated (WithSecrets). A link of that id verifies under either.
type Keys struct {
	list []Key
}

// DerivedID is the id of the key derived from the deployment secret:
// the one key when LECTERN_URL_KEYS is unset, and the entry DerivedEntry
// of the list.
const DerivedID = "s"

// DerivedEntry is the entry of LECTERN_URL_KEYS that names the key
// derived from the deployment secret, id DerivedID, so that a deployment
// moving from no list to one keeps its links: "derived,new=…", then
// "new=…,derived", then "new=…".
const DerivedEntry = "derived"

// MinSecret is the shortest secret LECTERN_URL_KEYS accepts, in bytes
// (as LECTERN_SECRET).
const MinSecret = 32

// MaxKeyID bounds a key id, in bytes.
const MaxKeyID = 32

// Derived returns the keys derived from the deployment secrets
// (shared/subkey, Links), each with id DerivedID: the first, the
// deployment's secret, signs; the others (the secret accepted beside it
// during a rotation) verify. Empty secrets are skipped.
func Derived(secrets ...[]byte) Keys {
	var k Keys
	for _, s := range secrets {
		if len(s) > 0 {
			k.list = append(k.list, Key{ID: DerivedID, Secret: subkey.Derive(s, subkey.Links)})
		}
	}
	return k
}

// Configured returns the keys of LECTERN_URL_KEYS, or when it is empty
// the key derived from the secrets (Derived), its entry DerivedEntry
// standing for those keys (WithSecrets).
func Configured(urlKeys string, secrets ...[]byte) (Keys, error) {
	if strings.TrimSpace(urlKeys) == "" {
		return Derived(secrets...), nil
	}
	k, err := ParseKeys(urlKeys)
	if err != nil {
		return Keys{}, err
	}
	return k.WithSecrets(secrets...), nil
}

// WithSecrets returns k with its entry DerivedEntry, if it has one, in
// place as the keys derived from secrets (Derived): the first secret's
// signs when the entry is first. A k without the entry is returned as
// it is. Until then, the entry's key signs and verifies nothing.
func (k Keys) WithSecrets(secrets ...[]byte) Keys {
	var out Keys
	for _, key := range k.list {
		if key.ID == DerivedID && key.Secret == nil {
			out.list = append(out.list, Derived(secrets...).list...)
			continue
		}
		out.list = append(out.list, key)
	}
	return out
}

// ParseKeys reads LECTERN_URL_KEYS: "kid=secret,kid=secret,…", the first
// signing. A kid is 1 to MaxKeyID bytes of A-Z, a-z, 0-9, '.', '_' and
// '-', none twice; a secret is at least MinSecret bytes and holds no ','.
// The entry DerivedEntry ("derived", no secret) is the key derived from
// the deployment secret, id DerivedID, which WithSecrets puts in place
// (a list naming DerivedID itself cannot also hold it). Spaces around an
// entry are ignored. The error never quotes a secret.
func ParseKeys(s string) (Keys, error) {
	var k Keys
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		n := "entry " + strconv.Itoa(i+1)
		if entry == DerivedEntry {
			if k.key(DerivedID) != nil {
				return Keys{}, errors.New("LECTERN_URL_KEYS: " + n + ": the key id " + strconv.Quote(DerivedID) +
					" of the derived key is given twice")
			}
			k.list = append(k.list, Key{ID: DerivedID})
			continue
		}
		id, secret, ok := strings.Cut(entry, "=")
		switch {
		case !ok:
			return Keys{}, errors.New("LECTERN_URL_KEYS: " + n + " is neither kid=secret nor " + DerivedEntry)
		case id == "" || len(id) > MaxKeyID || !validName(id):
			return Keys{}, errors.New("LECTERN_URL_KEYS: " + n + " has a key id that is not 1 to " +
				strconv.Itoa(MaxKeyID) + " characters of A-Z, a-z, 0-9, '.', '_' and '-'")
		case len(secret) < MinSecret:
			return Keys{}, errors.New("LECTERN_URL_KEYS: key " + strconv.Quote(id) + " has a secret shorter than " +
				strconv.Itoa(MinSecret) + " characters")
		case id == DerivedEntry:
			return Keys{}, errors.New("LECTERN_URL_KEYS: " + n + ": " + DerivedEntry + " takes no secret: it is the key derived from LECTERN_SECRET")
		case k.key(id) != nil && id == DerivedID:
			return Keys{}, errors.New("LECTERN_URL_KEYS: key id " + strconv.Quote(id) + " is given twice (" +
				DerivedEntry + " is the key " + strconv.Quote(DerivedID) + ")")
		case k.key(id) != nil:
			return Keys{}, errors.New("LECTERN_URL_KEYS: key id " + strconv.Quote(id) + " is given twice")
		}
		k.list = append(k.list, Key{ID: id, Secret: []byte(secret)})
	}
	return k, nil
}

// IsZero reports whether k has no key.
func (k Keys) IsZero() bool { return len(k.list) == 0 }

// SigningID is the id of the key that signs, "" for the zero Keys.
func (k Keys) SigningID() string {
	if k.IsZero() {
		return ""
	}
	return k.list[0].ID
}

func (k Keys) key(id string) *Key {
	for i := range k.list {
		if k.list[i].ID == id {
			return &k.list[i]
		}
	}
	return nil
}

// Sign returns l as a link signed with the first key: its path and
// query, which the caller puts on the public URL. It sets l's KeyID to
// that key's and cleans its Name (CleanName); a Class below 0 is taken as
// 0. The zero Keys signs nothing and returns "".
func (k Keys) Sign(l Link) string {
	if k.IsZero() || (l.Kind != Media && l.Kind != Export) || k.list[0].Secret == nil {
		return ""
	}
	key := &k.list[0]
	l.KeyID, l.Name = key.ID, CleanName(l.Name)
	if l.Export.Class < 0 {
		l.Export.Class = 0
	}
	sum := mac(key.Secret, l.signed(nil))
	b := make([]byte, 0, 256)
	b = append(b, Prefix...)
	b = append(b, l.Kind.letter()...)
	b = append(b, '/')
	b = append(b, l.Name...)
	b = append(b, "?k="...)
	b = appendQuery(b, l.KeyID)
	b = append(b, "&x="...)
	b = strconv.AppendInt(b, l.Expires, 10)
	b = append(b, "&r="...)
	b = strconv.AppendInt(b, l.Row, 10)
	b = append(b, "&o="...)
	b = appendQuery(b, l.Org)
	b = append(b, "&g="...)
	b = appendQuery(b, l.Gen)
	if l.Kind == Media {
		b = append(b, "&m="...)
		b = appendQuery(b, l.Media)
	} else {
		x := &l.Export
		for _, f := range [...]struct{ name, v string }{{"sc", x.Scopes}, {"v", x.ContentVersion}, {"t", x.Tier}, {"sl", x.Slug}} {
			b = append(b, '&')
			b = append(b, f.name...)
			b = append(b, '=')
			b = appendQuery(b, f.v)
		}
		if x.Class > 0 {
			b = append(b, "&c="...)
			b = strconv.AppendInt(b, int64(x.Class), 10)
		}
	}
	b = append(b, "&s="...)
	b = base64.RawURLEncoding.AppendEncode(b, sum[:])
	return string(b)
}

// Verify checks a parsed link at now: ErrUnknownKey when no key has its
// id, ErrAltered when its signature is not that key's over its fields
// (compared in constant time; with several keys of its id, not any of
// theirs), ErrExpired when it is authentic but now is not before its
// expiry. A link that did not come from Parse carries no signature and
// is ErrAltered.
func (k Keys) Verify(l Link, now time.Time) error {
	err := ErrUnknownKey
	for i := range k.list {
		key := &k.list[i]
		if key.ID != l.KeyID {
			continue
		}
		err = ErrAltered
		if key.Secret == nil {
			continue
		}
		want := mac(key.Secret, l.signed(nil))
		if subtle.ConstantTimeCompare(want[:], l.sig[:]) == 1 {
			err = nil
			break
		}
	}
	if err != nil {
		return err
	}
	if !now.Before(time.Unix(l.Expires, 0)) {
		return ErrExpired
	}
	return nil
}
