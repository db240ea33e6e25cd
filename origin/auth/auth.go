// Package auth authenticates API requests at the origin: it extracts the
// bearer token, verifies it with the shared verifier (the very code the
// edge runs) against the identity provider's JWKS, and answers the spec's
// 401 invalid_token with its RFC 9728 challenge. Any OAuth2 server with a
// JWKS endpoint can stand in for the dev identity provider: configure its
// issuer, JWKS URL and audience.
package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/token"
)

// maxJWKS bounds a fetched JWKS document.
const maxJWKS = 64 << 10

// Authenticator verifies bearer tokens. Safe for concurrent use.
type Authenticator struct {
	verifier token.Verifier
	jwksURL  string
	client   *http.Client
	now      func() time.Time

	mu    sync.Mutex
	cache token.Cache
	done  chan struct{} // closed when the fetch in flight ends

	// verified holds tokens already verified, until they expire: a token
	// is immutable, so its verdict does not change before exp, and an
	// EdDSA verification costs far more than the request it guards.
	vmu      sync.Mutex
	verified map[string]token.Claims
}

// maxVerified bounds the verified-token cache; when full it is emptied.
const maxVerified = 10000

// Config configures an Authenticator.
type Config struct {
	Issuer   string // the iss every token must carry
	Audience string // the aud every token must hold
	JWKSURL  string // where the issuer publishes its keys
	Client   *http.Client
	Now      func() time.Time
	Leeway   time.Duration // clock skew allowed on exp and nbf; 30 s when zero
}

// New returns an Authenticator. Keys are fetched on first use.
func New(cfg Config) *Authenticator {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = 30 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Authenticator{
		verifier: token.Verifier{Issuer: cfg.Issuer, Audience: cfg.Audience, Leeway: cfg.Leeway},
		jwksURL:  cfg.JWKSURL,
		client:   cfg.Client,
		now:      cfg.Now,
	}
}

// Authenticate verifies the request's Authorization header. A refusal is
// 401 invalid_token naming the reason.
func (a *Authenticator) Authenticate(ctx context.Context, authorization string) (token.Claims, *apierr.Error) {
	raw, reason, ok := token.BearerToken(authorization)
	if !ok {
		return token.Claims{}, token.Unauthorized(reason)
	}
	now := a.now()
	a.vmu.Lock()
	c, hit := a.verified[raw]
	a.vmu.Unlock()
	if hit && now.Before(c.Expiry.Add(a.verifier.Leeway)) {
		return c, nil
	}
	claims, f := a.verifier.Verify(raw, a.keys(ctx, false), now)
	if f != nil && f.UnknownKey {
		// A fresher JWKS may hold the kid: rotate-aware, single-flight and
		// rate-limited by the shared Cache policy.
		claims, f = a.verifier.Verify(raw, a.keys(ctx, true), a.now())
	}
	if f != nil {
		return token.Claims{}, token.Unauthorized(f.Reason)
	}
	a.vmu.Lock()
	if a.verified == nil || len(a.verified) >= maxVerified {
		a.verified = make(map[string]token.Claims)
	}
	a.verified[raw] = claims
	a.vmu.Unlock()
	return claims, nil
}

// keys returns the key set to verify with, fetching a new one first when
// the policy says so. A caller that has no set yet, or whose token names
// a kid the set lacks (unknownKid), waits for a fetch in flight instead
// of verifying against a set it already knows to be wanting.
func (a *Authenticator) keys(ctx context.Context, unknownKid bool) *token.KeySet {
	now := a.now()
	a.mu.Lock()
	if a.cache.InFlight(now) && (unknownKid || a.cache.Keys() == nil) {
		done := a.done
		a.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.cache.Keys()
	}
	if !a.cache.NeedsRefresh(now, unknownKid) || !a.cache.BeginRefresh(now) {
		defer a.mu.Unlock()
		return a.cache.Keys()
	}
	done := make(chan struct{})
	a.done = done
	a.mu.Unlock()

	set, err := a.fetch(ctx)

	a.mu.Lock()
	defer a.mu.Unlock()
	a.cache.EndRefresh(a.now(), set, err)
	close(done)
	return a.cache.Keys()
}

func (a *Authenticator) fetch(ctx context.Context) (*token.KeySet, error) {
	if a.jwksURL == "" {
		return nil, errors.New("no JWKS URL configured")
	}
	// The fetch outlives a cancelled request: others may be waiting on it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", a.jwksURL, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch JWKS: %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKS+1))
	if err != nil {
		return nil, fmt.Errorf("fetch JWKS: %w", err)
	}
	if len(b) > maxJWKS {
		return nil, errors.New("fetch JWKS: document too large")
	}
	return token.ParseJWKS(b)
}
