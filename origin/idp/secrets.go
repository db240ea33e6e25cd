package idp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"strings"

	"github.com/lectern-api/lectern/shared/subkey"
)

// Client secrets are 32 random bytes (256 bits), never chosen by a
// person, so a slow password hash buys nothing against a stolen
// database: nobody searches 2^256 secrets, at any cost per guess. The
// store keeps HMAC-SHA-256 of the secret instead, under a key derived
// from the deployment secret (so a copy of the database alone cannot
// even check a secret), bound to the client id; a check costs a
// microsecond. The stored form names itself, as bcrypt's "$2a$" does,
// and names its key, so that a hash made under a rotated secret is
// recognised (docs/decisions/identity-provider.md, "Client secrets"):
//
//	$lectern-hs256$<kid>$<base64 of HMAC-SHA-256(key, len id‖id‖secret)>
//
// kid is the first 4 bytes of HMAC-SHA-256(key, "kid"), in hex. Hashes
// that start with "$2" are bcrypt, as releases up to 0.4.0 stored them:
// they are still checked (with bcrypt, behind the gate), and replaced by
// the keyed form at the client's next successful check unless
// Config.BcryptSecrets.
const keyedPrefix = "$lectern-hs256$"

// secretKeyPurpose derives the client-secret key from Config.SealKey
// (itself subkey.IDPKeys of LECTERN_SECRET), as shared/edgesig derives
// its per-purpose keys from subkey.Edge's: the provider's keys stay one
// subtree of the deployment secret.
const secretKeyPurpose = "idp-keys/client-secrets"

// secretKey is one key of client-secret hashes and its id.
type secretKey struct {
	key []byte
	kid string
}

func newSecretKey(sealKey []byte) *secretKey {
	if len(sealKey) == 0 {
		return nil
	}
	k := subkey.Derive(sealKey, secretKeyPurpose)
	m := hmac.New(sha256.New, k)
	m.Write([]byte("kid"))
	return &secretKey{key: k, kid: hex.EncodeToString(m.Sum(nil)[:4])}
}

// mac is HMAC-SHA-256 of the client id and the secret, the id
// length-prefixed so that no (id, secret) pair reads as another.
func (k *secretKey) mac(clientID, secret string) []byte {
	m := hmac.New(sha256.New, k.key)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(clientID)))
	m.Write(n[:])
	m.Write([]byte(clientID))
	m.Write([]byte(secret))
	return m.Sum(nil)
}

// hash is the stored form of the client's secret under k.
func (k *secretKey) hash(clientID, secret string) []byte {
	return []byte(keyedPrefix + k.kid + "$" + base64.RawStdEncoding.EncodeToString(k.mac(clientID, secret)))
}

// parseKeyed splits a keyed hash into its kid and MAC; ok is false for
// any other form.
func parseKeyed(hash []byte) (kid string, mac []byte, ok bool) {
	rest, found := strings.CutPrefix(string(hash), keyedPrefix)
	if !found {
		return "", nil, false
	}
	kid, enc, found := strings.Cut(rest, "$")
	if !found {
		return "", nil, false
	}
	mac, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil || len(mac) != sha256.Size {
		return "", nil, false
	}
	return kid, mac, true
}

// isBcrypt reports whether hash is a bcrypt hash ("$2a$", "$2b$",
// "$2y$"), the form releases up to 0.4.0 stored.
func isBcrypt(hash []byte) bool { return len(hash) > 4 && hash[0] == '$' && hash[1] == '2' }

// secretCheck is the outcome of checking a secret.
type secretCheck int

const (
	secretWrong   secretCheck = iota
	secretRight               // under the current key: nothing to do
	secretUpgrade             // right, but stored in another form: store the current one
)

// checkKeyed checks secret against a keyed hash: under the current key,
// or under the accepted one (LECTERN_SECRET_ACCEPT, during a rotation),
// which asks for an upgrade. unknownKid is true when the hash names
// neither key (made under a secret no longer accepted). The work is one
// HMAC whichever way it goes.
func (p *IdP) checkKeyed(clientID string, hash []byte, secret string) (_ secretCheck, unknownKid bool) {
	kid, stored, ok := parseKeyed(hash)
	k, result := p.secretKey, secretRight
	if ok && p.acceptedSecretKey != nil && kid == p.acceptedSecretKey.kid {
		k, result = p.acceptedSecretKey, secretUpgrade
	}
	unknownKid = ok && kid != k.kid
	if !ok || unknownKid {
		stored = p.dummyMAC[:] // spend the HMAC all the same
	}
	if subtle.ConstantTimeCompare(k.mac(clientID, secret), stored) != 1 || !ok || unknownKid {
		return secretWrong, unknownKid
	}
	return result, false
}

// newDummyMAC is the MAC an unknown client id, or a hash of no known
// form, is compared against: random, so that nothing matches it.
func newDummyMAC() (m [sha256.Size]byte) {
	rand.Read(m[:])
	return m
}
