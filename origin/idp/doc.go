// Package idp is Lectern's development identity provider, the {auth_url}
// of the spec (spec: Authentication). It serves four endpoints on its own
// listener:
//
//	POST /oauth2/token                           RFC 6749 §3.2, §4.1.3, §4.4
//	GET  /oauth2/authorize                       RFC 6749 §4.1.1, PKCE S256 (RFC 7636)
//	GET  /.well-known/oauth-authorization-server RFC 8414 metadata
//	GET  /.well-known/jwks.json                  RFC 7517 key set, OKP keys (RFC 8037)
//
// # Grants
//
// Machine clients use client_credentials, authenticated with HTTP Basic
// (client_secret_basic, RFC 6749 §2.3.1) or with form fields
// (client_secret_post), never both. Learner apps use authorization_code
// with PKCE S256: the dev provider approves every request at once and
// takes the learner id from login_hint. Codes live 60 seconds, are stored
// only as a SHA-256 hash and are redeemed at most once.
//
// # Tokens
//
// Access tokens are JWTs signed with EdDSA (Ed25519). The header carries
// kid and typ "JWT"; the claims are exactly iss, aud (a string), sub,
// client_id, scope (full names, space-separated), org, learner (learner
// tokens only), iat, nbf (= iat), exp (iat + TokenTTL) and jti.
// shared/token verifies them.
//
// # Keys
//
// Signing keys persist in the store, so tokens survive a restart, sealed
// with AES-256-GCM under Config.SealKey (derived from LECTERN_SECRET) with
// the kid as associated data: a copy of the database alone cannot mint
// tokens. A seed an older version stored in the clear is sealed at start;
// so is one that opens only with Config.AcceptedSealKey (the secret
// accepted while LECTERN_SECRET is rotated). A key that opens with
// neither (another secret) stops the start.
//
// Keys rotate by kid on a schedule (keys.go): a new key is published in
// the JWKS PublishAhead (2 h) before it signs, longer than a verifier
// keeps a JWKS (shared/token, an hour), and a retired key stays published
// until every token it signed has expired.
//
// Providers sharing a store (origins on one PostgreSQL database) share
// the keys: the store adds a key only while none newer than the due date
// exists, in one transaction, so providers due at once (started together
// on an empty database, or at a rotation) create one key between them. A
// provider rereads the keys every minute to sign, every second at most
// for its JWKS, so the document lists a key another provider made
// moments ago. [PublicKeys] reads the published keys from the store for a
// verifier: every origin checks the dev provider's tokens from the
// database, not from some origin's JWKS URL, and needs no provider of its
// own to do so.
//
// # Clients
//
// [Config.CreateClient] registers a client for the admin API, after
// [ValidateClient], the one validator of registrations, whose errors are
// the API's 400 body; the secret is returned once and stored as an
// HMAC-SHA-256 under a key derived from the deployment secret
// (secrets.go): the secrets are 256 random bits, so a slow hash buys
// nothing, and a check costs a microsecond. An unknown client id costs
// the same HMAC, so response time does not tell which ids exist. Hashes
// in bcrypt (release 0.4.0's form, and [CreateClient]'s, for callers
// without the keys) still check, and are replaced by the keyed form at
// the next successful check unless [Config.BcryptSecrets] (a rolling
// upgrade beside 0.4.0 origins).
//
// # Limits
//
// [Limits] bounds what callers without a valid secret can cost: failed
// authentications block a remote address, or a client id from that
// address, for a window, never a client id everywhere; a blocked address's
// wrong secrets answer 429, and so do its bcrypt checks, before they run,
// but a keyed client's right secret always passes (behind a balancer
// every client shares one address); bcrypt comparisons of old hashes run
// behind a small gate (503 when it is full); and each client keeps a
// bounded number of pending authorization codes.
package idp
