package idp

import (
	"context"
	"fmt"

	"github.com/lectern-api/lectern/shared/token"
)

// PublicKeys reads the provider's published keys from its store, for a
// verifier. Every origin on one database verifies the dev provider's
// tokens from there (issue #14, point 5): whether or not it serves a
// provider itself, and whether or not the origin whose provider signed a
// token is up. It never creates a key, and publishes what the JWKS of any
// provider on the store would at the same instant: the keys not yet
// signing, the signing key, and retired keys until their tokens expire.
// Safe for concurrent use.
type PublicKeys struct {
	p *IdP
}

// NewPublicKeys returns the reader of cfg.Store's keys. cfg is the
// providers' own: its SealKey opens the stored keys (the public key is
// derived from the sealed seed), and TokenTTL, RotateAfter and
// PublishAhead say which keys are published.
func NewPublicKeys(cfg Config) (*PublicKeys, error) {
	p, err := newIdP(cfg)
	if err != nil {
		return nil, err
	}
	return &PublicKeys{p: p}, nil
}

// KeySet reads the keys from the store and returns the published ones. A
// key that does not open with the SealKey is an error, as it is for the
// provider.
func (k *PublicKeys) KeySet(ctx context.Context) (*token.KeySet, error) {
	p := k.p
	p.mu.Lock()
	now := p.now()
	err := p.loadLocked(ctx, now)
	keys := p.published(now)
	p.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("idp: %w", err)
	}
	doc, err := jwksDocument(keys)
	if err != nil {
		return nil, fmt.Errorf("idp: %w", err)
	}
	return token.ParseJWKS(doc)
}
