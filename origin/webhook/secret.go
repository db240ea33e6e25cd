package webhook

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// secretPrefix starts every endpoint secret (Standard Webhooks: "whsec_"
// and the base64 of the key).
const secretPrefix = "whsec_"

// secretBytes is the size of an endpoint's signing key.
const secretBytes = 32

// newSecret returns a new signing key and its text, shown once.
func newSecret() ([]byte, string) {
	k := make([]byte, secretBytes)
	rand.Read(k)
	return k, secretPrefix + base64.StdEncoding.EncodeToString(k)
}

// ParseSecret is the signing key of a secret's text: the base64 after
// "whsec_".
func ParseSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, errors.New("webhook secret: no " + secretPrefix + " prefix")
	}
	k, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(k) == 0 {
		return nil, errors.New("webhook secret: not base64 after " + secretPrefix)
	}
	return k, nil
}

// Sealing. The origin signs with the secrets, so they cannot be hashed
// as client secrets are: they are sealed with AES-256-GCM under the
// deployment's webhook key (shared/subkey.Webhooks of LECTERN_SECRET),
// the endpoint's id as associated data, so a sealed secret copied onto
// another endpoint's row does not open. A sealed secret is sealVersion,
// the 12-byte nonce, then the ciphertext and its tag.

const sealVersion = 1

// errOpen is a sealed secret that no key opens: sealed under another
// deployment secret, or altered.
var errOpen = errors.New("webhook secret: cannot be opened with the deployment secret (was LECTERN_SECRET changed without LECTERN_SECRET_ACCEPT?)")

// seal seals key for endpoint id under k.
func seal(k []byte, id string, key []byte) ([]byte, error) {
	g, err := gcm(k)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 1+g.NonceSize(), 1+g.NonceSize()+len(key)+g.Overhead())
	out[0] = sealVersion
	rand.Read(out[1:])
	return g.Seal(out, out[1:], key, aad(id)), nil
}

// open opens a secret sealed for endpoint id under one of keys, and
// returns which of them opened it (0: the deployment's own key).
func open(keys [][]byte, id string, sealed []byte) ([]byte, int, error) {
	for i, k := range keys {
		g, err := gcm(k)
		if err != nil {
			return nil, 0, err
		}
		if len(sealed) < 1+g.NonceSize() || sealed[0] != sealVersion {
			return nil, 0, errOpen
		}
		n := sealed[1 : 1+g.NonceSize()]
		if key, err := g.Open(nil, n, sealed[1+g.NonceSize():], aad(id)); err == nil {
			return key, i, nil
		}
	}
	return nil, 0, errOpen
}

func aad(id string) []byte { return []byte("lectern/webhook-secret/" + id) }

func gcm(k []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("webhook seal key: %w", err)
	}
	return cipher.NewGCM(b)
}
