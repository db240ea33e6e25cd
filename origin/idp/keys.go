package idp

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/lectern-api/lectern/origin/store"
)

// algEdDSA is the JWS alg of every key (RFC 8037 §3.1).
const algEdDSA = "EdDSA"

// retireMargin keeps a retired key published a little past the expiry of
// the last token it can have signed: verifiers allow some clock leeway
// (30 s is usual) and clocks of hosts differ.
const retireMargin = 5 * time.Minute

// reloadEvery bounds how long the keys read from the store are trusted:
// identity providers sharing a store (several origins on PostgreSQL) see
// a key another one created within it, in their JWKS as in their choice
// of the signing key.
const reloadEvery = time.Minute

// jwksReloadEvery bounds the age of the keys a JWKS document lists: a
// verifier fetches it when a token names a kid it lacks, so it must see a
// key another provider on the store created moments ago. Once a second at
// most, however many fetch it.
const jwksReloadEvery = time.Second

// The key schedule (docs/decisions/signing-keys-and-the-jwks.md). A key is
// published as soon as it is created, and signs only once it has been
// published for PublishAhead, longer than a verifier may keep a JWKS
// (shared/token: DefaultMaxAge, an hour): a verifier meets a new kid only
// after its cached set is stale, and then refetches. The successor of the
// signing key is created when the newest key is RotateAfter-PublishAhead
// old, so that a key signs until about RotateAfter after its creation.
// The first key of an empty store signs at once: no verifier can hold a
// set without it. A key stays published until every token it signed has
// expired: TokenTTL (plus retireMargin) after its successor began to sign.

type signingKey struct {
	kid     string
	priv    ed25519.PrivateKey
	created time.Time
}

func (k signingKey) public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// keyID is base64url of the first 8 bytes of the public key's SHA-256.
func keyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return base64.RawURLEncoding.EncodeToString(sum[:8])
}

// signingKey returns the key to sign with now: the newest key published
// for PublishAhead. It brings the keys up to date first (sync).
func (p *IdP) signingKey(ctx context.Context) (signingKey, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if err := p.syncLocked(ctx, now, reloadEvery); err != nil {
		return signingKey{}, err
	}
	return p.keys[p.activeLocked(now)], nil
}

// syncLocked rereads the keys from the store when the copy is older than
// maxAge or when the newest key is due for a successor, and creates
// the successor when the store has none yet. Another instance sharing the
// store may have created it already, and then its key is adopted; the
// store adds a key only while none newer than the due date exists, in one
// transaction, so instances due at once (origins started together on an
// empty database) agree on one key.
func (p *IdP) syncLocked(ctx context.Context, now time.Time, maxAge time.Duration) error {
	if len(p.keys) > 0 && !p.dueLocked(now) && now.Sub(p.loadedAt) < maxAge && !now.Before(p.loadedAt) {
		return nil
	}
	if err := p.loadLocked(ctx, now); err != nil {
		return err
	}
	if !p.dueLocked(now) {
		return nil
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("generate signing key: %w", err)
	}
	kid := keyID(priv.Public().(ed25519.PublicKey))
	k := store.SigningKey{KID: kid, Alg: algEdDSA, Private: p.seal(kid, priv.Seed()), CreatedAt: now}
	// The due rule of dueLocked, checked again inside the store's
	// transaction: a key created after now-(RotateAfter-PublishAhead)
	// means another instance got there first.
	added, err := p.store.AddSigningKeyUnlessNewer(ctx, k, now.Add(p.publishAhead-p.rotateAfter))
	if err != nil {
		return fmt.Errorf("add signing key: %w", err)
	}
	if added {
		p.log.InfoContext(ctx, "idp: new signing key", "kid", k.KID, "signsFrom", p.activation(now, len(p.keys) == 0))
	}
	if err := p.loadLocked(ctx, now); err != nil {
		return err
	}
	if len(p.keys) == 0 {
		return errors.New("signing key not found after adding it")
	}
	return nil
}

// dueLocked reports whether the newest key needs a successor at now.
func (p *IdP) dueLocked(now time.Time) bool {
	return len(p.keys) == 0 || now.Sub(p.keys[0].created) >= p.rotateAfter-p.publishAhead
}

// activation is when a key created at created may sign; first says it is
// the store's first key.
func (p *IdP) activation(created time.Time, first bool) time.Time {
	if first {
		return created
	}
	return created.Add(p.publishAhead)
}

// activeLocked is the index of the signing key at now: the newest key
// published for PublishAhead, or else (a new store, all keys young) the
// oldest one.
func (p *IdP) activeLocked(now time.Time) int {
	for i, k := range p.keys {
		if now.Sub(k.created) >= p.publishAhead {
			return i
		}
	}
	return len(p.keys) - 1
}

func (p *IdP) loadLocked(ctx context.Context, now time.Time) error {
	stored, err := p.store.SigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("load signing keys: %w", err)
	}
	keys := make([]signingKey, 0, len(stored))
	for _, s := range stored {
		k, err := p.openKey(ctx, s)
		if err != nil {
			return err
		}
		keys = append(keys, k)
	}
	// The store lists newest first; sorting again makes the choice of
	// the signing key independent of the backend's tie-breaking.
	slices.SortStableFunc(keys, func(a, b signingKey) int { return b.created.Compare(a.created) })
	p.keys, p.loadedAt = keys, now
	return nil
}

// openKey unseals a stored key, once per kid. A key stored in the clear
// by an older version, or sealed under the accepted secret (a rotation of
// LECTERN_SECRET), is sealed with the SealKey in the store on the way.
func (p *IdP) openKey(ctx context.Context, s store.SigningKey) (signingKey, error) {
	if k, ok := p.opened[s.KID]; ok {
		return k, nil
	}
	if s.Alg != algEdDSA {
		return signingKey{}, fmt.Errorf("signing key %q: unsupported alg %q", s.KID, s.Alg)
	}
	seed, reseal, err := p.unseal(s.KID, s.Private)
	if err != nil {
		return signingKey{}, err
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if kid := keyID(priv.Public().(ed25519.PublicKey)); kid != s.KID {
		return signingKey{}, fmt.Errorf("signing key %q: kid does not match the key (%q)", s.KID, kid)
	}
	if reseal != "" {
		// ErrNotFound: another instance sealed it first.
		err := p.store.ResealSigningKey(ctx, s.KID, s.Private, p.seal(s.KID, seed))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return signingKey{}, fmt.Errorf("seal signing key %q: %w", s.KID, err)
		}
		p.log.WarnContext(ctx, "idp: a signing key "+reseal+" is now sealed under LECTERN_SECRET", "kid", s.KID)
	}
	k := signingKey{kid: s.KID, priv: priv, created: s.CreatedAt}
	p.opened[s.KID] = k
	return k, nil
}

// sealVersion is the first byte of a sealed key: what follows is the
// AES-GCM nonce, then the sealed Ed25519 seed with its tag.
const sealVersion = 1

// seal encrypts seed with the provider's SealKey (AES-256-GCM), the kid as
// associated data: a sealed seed moved to another kid's row does not open.
func (p *IdP) seal(kid string, seed []byte) []byte {
	out := make([]byte, 1+p.aead.NonceSize(), 1+p.aead.NonceSize()+len(seed)+p.aead.Overhead())
	out[0] = sealVersion
	rand.Read(out[1:])
	return p.aead.Seal(out, out[1:], seed, []byte(kid))
}

// unseal returns the seed in a stored key, and why it is to be sealed
// again ("" when it is not): a seed stored in the clear (exactly
// ed25519.SeedSize bytes, as versions before sealing wrote it), or one
// sealed under the accepted secret.
func (p *IdP) unseal(kid string, b []byte) (seed []byte, reseal string, err error) {
	if len(b) == ed25519.SeedSize {
		return b, "stored in the clear by an older version", nil
	}
	n := p.aead.NonceSize()
	if len(b) != 1+n+ed25519.SeedSize+p.aead.Overhead() || b[0] != sealVersion {
		return nil, "", fmt.Errorf("signing key %q: not a sealed key (%d bytes)", kid, len(b))
	}
	if seed, err = p.aead.Open(nil, b[1:1+n], b[1+n:], []byte(kid)); err == nil {
		return seed, "", nil
	}
	if p.accepted != nil {
		if seed, err = p.accepted.Open(nil, b[1:1+n], b[1+n:], []byte(kid)); err == nil {
			return seed, "sealed under LECTERN_SECRET_ACCEPT", nil
		}
	}
	return nil, "", fmt.Errorf("signing key %q does not open with this deployment secret (LECTERN_SECRET) "+
		"nor the one accepted beside it (LECTERN_SECRET_ACCEPT): it was sealed with another one", kid)
}

// published returns the keys the JWKS lists at now: the keys not yet
// signing, the signing key, and each earlier key until TokenTTL (plus
// retireMargin) after the key that replaced it began to sign.
func (p *IdP) published(now time.Time) []signingKey {
	active := p.activeLocked(now)
	var out []signingKey
	for i, k := range p.keys {
		if i <= active || now.Before(p.keys[i-1].created.Add(p.publishAhead+p.ttl+retireMargin)) {
			out = append(out, k)
		}
	}
	return out
}

type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

// JWKS returns the JSON Web Key Set document (RFC 7517 §5) of the
// published keys, as served at /.well-known/jwks.json.
func (p *IdP) JWKS(ctx context.Context) ([]byte, error) {
	p.mu.Lock()
	now := p.now()
	if err := p.syncLocked(ctx, now, jwksReloadEvery); err != nil {
		if len(p.keys) == 0 {
			p.mu.Unlock()
			return nil, err
		}
		// The keys known are still right to publish; the next call tries
		// the store again.
		p.log.WarnContext(ctx, "idp: keys not refreshed for the JWKS", "err", err)
	}
	keys := p.published(now)
	p.mu.Unlock()
	return jwksDocument(keys)
}

// jwksDocument is the JWKS document listing keys.
func jwksDocument(keys []signingKey) ([]byte, error) {
	set := struct {
		Keys []jwk `json:"keys"`
	}{Keys: make([]jwk, 0, len(keys))}
	for _, k := range keys {
		set.Keys = append(set.Keys, jwk{
			Kty: "OKP", // RFC 8037 §2
			Crv: "Ed25519",
			X:   base64.RawURLEncoding.EncodeToString(k.public()),
			Kid: k.kid,
			Alg: algEdDSA,
			Use: "sig",
		})
	}
	return json.Marshal(set)
}

// grant is what a token is issued for.
type grant struct {
	client  *store.Client
	scope   string // full names, space-separated
	learner string // empty for client_credentials
}

// sign issues an access token for g.
func (p *IdP) sign(ctx context.Context, g grant) (string, error) {
	k, err := p.signingKey(ctx)
	if err != nil {
		return "", err
	}
	var jti [16]byte
	rand.Read(jti[:])
	iat := p.now().Unix()
	sub := g.client.ID
	claims := jwt.MapClaims{
		"iss":       p.issuer,
		"aud":       p.audience, // a string, not an array
		"client_id": g.client.ID,
		"scope":     g.scope,
		"org":       g.client.OrgID,
		"org_gen":   g.client.OrgGeneration, // the licence gate refuses it once the org is re-created
		"iat":       iat,
		"nbf":       iat,
		"exp":       iat + int64(p.ttl/time.Second),
		"jti":       base64.RawURLEncoding.EncodeToString(jti[:]),
	}
	if g.learner != "" {
		sub = g.learner
		claims["learner"] = g.learner
	}
	claims["sub"] = sub
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["kid"] = k.kid // typ "JWT" is set by NewWithClaims
	s, err := t.SignedString(k.priv)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return s, nil
}
