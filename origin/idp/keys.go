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

// signingKey returns the key to sign with now, rotating first when the
// newest key is older than rotateAfter. The store is read only when the
// cached newest key is too old: another instance sharing the store may
// have rotated already, and then its key is adopted.
func (p *IdP) signingKey(ctx context.Context) (signingKey, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.fresh(now) {
		return p.keys[0], nil
	}
	if err := p.loadLocked(ctx); err != nil {
		return signingKey{}, err
	}
	if p.fresh(now) {
		return p.keys[0], nil
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return signingKey{}, fmt.Errorf("generate signing key: %w", err)
	}
	k := store.SigningKey{
		KID:       keyID(priv.Public().(ed25519.PublicKey)),
		Alg:       algEdDSA,
		Private:   priv.Seed(),
		CreatedAt: now,
	}
	if err := p.store.AddSigningKey(ctx, k); err != nil {
		return signingKey{}, fmt.Errorf("add signing key: %w", err)
	}
	p.log.InfoContext(ctx, "idp: new signing key", "kid", k.KID)
	if err := p.loadLocked(ctx); err != nil {
		return signingKey{}, err
	}
	if len(p.keys) == 0 {
		return signingKey{}, errors.New("signing key not found after adding it")
	}
	return p.keys[0], nil
}

// fresh reports whether the newest cached key may sign at now.
func (p *IdP) fresh(now time.Time) bool {
	return len(p.keys) > 0 && now.Sub(p.keys[0].created) < p.rotateAfter
}

func (p *IdP) loadLocked(ctx context.Context) error {
	stored, err := p.store.SigningKeys(ctx)
	if err != nil {
		return fmt.Errorf("load signing keys: %w", err)
	}
	keys := make([]signingKey, 0, len(stored))
	for _, s := range stored {
		if s.Alg != algEdDSA || len(s.Private) != ed25519.SeedSize {
			return fmt.Errorf("signing key %q: unsupported (alg %q, %d bytes)", s.KID, s.Alg, len(s.Private))
		}
		priv := ed25519.NewKeyFromSeed(s.Private)
		if kid := keyID(priv.Public().(ed25519.PublicKey)); kid != s.KID {
			return fmt.Errorf("signing key %q: kid does not match the key (%q)", s.KID, kid)
		}
		keys = append(keys, signingKey{kid: s.KID, priv: priv, created: s.CreatedAt})
	}
	// The store lists newest first; sorting again makes the choice of
	// the signing key independent of the backend's tie-breaking.
	slices.SortStableFunc(keys, func(a, b signingKey) int { return b.created.Compare(a.created) })
	p.keys = keys
	return nil
}

// published returns the keys the JWKS lists at now: the newest, and every
// key young enough that a token it signed may still be valid. A key signs
// only while younger than rotateAfter, so its last token expires before
// created + rotateAfter + ttl.
func (p *IdP) published(now time.Time) []signingKey {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []signingKey
	for i, k := range p.keys {
		if i == 0 || now.Sub(k.created) < p.rotateAfter+p.ttl+retireMargin {
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
	keys := p.published(p.now())
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
