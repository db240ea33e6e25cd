// Package auth authenticates API requests at the origin: it extracts the
// bearer token, verifies it with the shared verifier (the very code the
// edge runs) against the identity provider's keys, and answers the spec's
// 401 invalid_token with its RFC 9728 challenge. Any OAuth2 server with a
// JWKS endpoint can stand in for the dev identity provider: configure its
// issuer, JWKS URL and audience. The dev provider's keys are read from
// the database instead (Config.Keys), so that an origin does not depend
// on another one being up to verify its provider's tokens.
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
	source   func(context.Context) (*token.KeySet, error) // Config.Keys
	client   *http.Client
	now      func() time.Time

	fetchTimeout time.Duration

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
	// Keys, when set, is where the keys come from instead of JWKSURL:
	// the dev identity provider's, read from the database the origins
	// share (idp.PublicKeys). A read is a fetch to the refresh policy.
	Keys   func(context.Context) (*token.KeySet, error)
	Client *http.Client
	Now    func() time.Time
	Leeway time.Duration // clock skew allowed on exp and nbf; token.DefaultLeeway when zero
	// FetchTimeout bounds one JWKS fetch; DefaultFetchTimeout when zero.
	// Only requests without a usable key wait for a fetch.
	FetchTimeout time.Duration
	// MaxAge and MinInterval are the refresh policy's (token.Cache): the
	// age past which a set is refreshed, and the least time between two
	// fetches, whatever their cause (an unknown kid, a flood of made-up
	// ones). Zero takes token.Cache's defaults, made for a fetch over
	// HTTP: an hour and 30 s.
	MaxAge, MinInterval time.Duration
}

// DefaultFetchTimeout bounds a JWKS fetch; shorter than the Cache's
// InFlightTimeout, so a fetch always ends before it is presumed lost.
const DefaultFetchTimeout = 10 * time.Second

// New returns an Authenticator. Keys are fetched on first use.
func New(cfg Config) *Authenticator {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = token.DefaultLeeway
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = DefaultFetchTimeout
	}
	return &Authenticator{
		fetchTimeout: cfg.FetchTimeout,
		verifier:     token.Verifier{Issuer: cfg.Issuer, Audience: cfg.Audience, Leeway: cfg.Leeway},
		jwksURL:      cfg.JWKSURL,
		source:       cfg.Keys,
		cache:        token.Cache{MaxAge: cfg.MaxAge, MinInterval: cfg.MinInterval},
		client:       cfg.Client,
		now:          cfg.Now,
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

// keys returns the key set to verify with, starting a fetch in the
// background when the shared Cache policy says so (single-flight and
// rate-limited). A stale set is served while it is refreshed: a request
// whose token names a kid the set holds never waits for the identity
// provider, even a hung one. A caller that has no set yet, or whose token
// names a kid the set lacks (unknownKid), waits for the fetch in flight
// instead of verifying against a set it already knows to be wanting.
func (a *Authenticator) keys(ctx context.Context, unknownKid bool) *token.KeySet {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cache.NeedsRefresh(now, unknownKid) && a.cache.BeginRefresh(now) {
		done := make(chan struct{})
		a.done = done
		// The fetch outlives the request that started it: others may be
		// waiting on it, and a stale set's refresh is nobody's to wait for.
		go a.refresh(context.WithoutCancel(ctx), done)
	}
	if (a.cache.Keys() != nil && !unknownKid) || !a.cache.InFlight(now) {
		return a.cache.Keys()
	}
	done := a.done
	a.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
	a.mu.Lock()
	return a.cache.Keys()
}

// refresh fetches the keys and ends the refresh begun with done, unless
// the Cache presumed it lost and another fetch has replaced it since.
func (a *Authenticator) refresh(ctx context.Context, done chan struct{}) {
	set, err := a.fetch(ctx)
	a.mu.Lock()
	if a.done == done {
		a.cache.EndRefresh(a.now(), set, err)
	}
	a.mu.Unlock()
	close(done)
}

func (a *Authenticator) fetch(ctx context.Context) (*token.KeySet, error) {
	ctx, cancel := context.WithTimeout(ctx, a.fetchTimeout)
	defer cancel()
	if a.source != nil {
		return a.source(ctx)
	}
	if a.jwksURL == "" {
		return nil, errors.New("no JWKS URL configured")
	}
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
