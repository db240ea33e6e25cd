// Package subkey derives the deployment's keys from its one secret,
// LECTERN_SECRET: for each purpose, HMAC-SHA-256 keyed with the secret
// over "lectern/" and the purpose, so that no two uses share a key and
// none reveals the secret. The origin and the edge both derive the edge's
// key here, so they agree on it by construction.
package subkey

import (
	"crypto/hmac"
	"crypto/sha256"
)

// The purposes, each with a key of its own.
const (
	Tag     = "tag"      // the licence envelope's forensic tag (origin/server)
	Cursor  = "cursor"   // sealing pagination cursors (shared/cursor)
	IDPKeys = "idp-keys" // sealing the identity provider's signing seeds (origin/idp)
	Edge    = "gate"     // the root of the internal calls' per-purpose keys, "gate/<purpose>" (shared/edgesig)
	Canary  = "canary"   // the export bundles' whitespace canaries (origin/forensic)
	Links   = "links"    // signed download links when LECTERN_URL_KEYS is unset (shared/link)
	// Webhooks seals the webhook endpoints' signing secrets at rest
	// (origin/webhook): the origin must sign with them, so they are
	// encrypted, not hashed.
	Webhooks = "webhooks"
	Changes  = "changes" // the change feed's since tokens (origin/changes)
)

// Derive returns the 32-byte key for purpose.
func Derive(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("lectern/" + purpose))
	return m.Sum(nil)
}
