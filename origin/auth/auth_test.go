package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/scope"
	"github.com/lectern-api/lectern/shared/token/tokentest"
)

// keyring is the kids an identity provider publishes, in order; a kid's
// key is tokentest.Key(kid).
type keyring struct {
	mu    sync.Mutex
	order []string
}

func (k *keyring) add(t *testing.T, kid string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.order = append(k.order, kid)
}

func (k *keyring) jwks() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return string(tokentest.JWKS(k.order...))
}

// sign mints a token of kid, which need not be published.
func (k *keyring) sign(t *testing.T, kid string, now time.Time, scopes string) string {
	return tokentest.Mint(kid, tokentest.Claims{
		"iss": "https://idp.test", "aud": "lectern-api", "sub": "c1", "client_id": "c1", "org": "acme",
		"scope": scopes, "iat": now.Unix(), "exp": now.Add(900 * time.Second).Unix(),
	})
}

func setup(t *testing.T) (*Authenticator, *keyring, *atomic.Int32, *time.Time) {
	ring := &keyring{}
	ring.add(t, "k1")
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		time.Sleep(20 * time.Millisecond) // let concurrent requests pile up behind the fetch
		fmt.Fprint(w, ring.jwks())
	}))
	t.Cleanup(srv.Close)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	a := New(Config{Issuer: "https://idp.test", Audience: "lectern-api", JWKSURL: srv.URL,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	return a, ring, &fetches, &now
}

func TestAuthenticate(t *testing.T) {
	a, ring, fetches, now := setup(t)
	ctx := context.Background()
	tok := ring.sign(t, "k1", *now, "service-api/content.read")
	c, err := a.Authenticate(ctx, "Bearer "+tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.Org != "acme" || !c.Scope.Has(scope.ContentRead) {
		t.Errorf("claims %+v", c)
	}
	for _, bad := range []string{"", "Basic x", "Bearer " + tok + "x"} {
		if _, err := a.Authenticate(ctx, bad); err == nil || err.Code != apierr.InvalidToken {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d JWKS fetches, want 1", n)
	}
}

// A burst of tokens naming an unknown kid costs one JWKS fetch: the refresh
// is single-flight and rate-limited.
func TestUnknownKidBurst(t *testing.T) {
	a, ring, fetches, now := setup(t)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, "k1", *now, "")); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(time.Minute) // past the minimum refresh interval
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, "forged", *now, "")); err == nil {
				t.Error("a token of an unknown key was accepted")
			}
		}()
	}
	wg.Wait()
	if n := fetches.Load(); n != 2 {
		t.Errorf("%d JWKS fetches after the burst, want 2", n)
	}
}

// After the identity provider rotates, a token of the new key is accepted:
// the unknown kid triggers a refresh.
func TestRotation(t *testing.T) {
	a, ring, _, now := setup(t)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, "k1", *now, "")); err != nil {
		t.Fatal(err)
	}
	ring.add(t, "k2")
	*now = now.Add(time.Minute)
	if _, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, "k2", *now, "")); err != nil {
		t.Fatalf("token of the rotated key: %v", err)
	}
}

// Concurrent first requests all wait for the one JWKS fetch in flight and
// are accepted: none verifies against the empty set and fails.
func TestFirstBurst(t *testing.T) {
	a, ring, fetches, now := setup(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, "k1", *now, "")); err != nil {
				t.Errorf("a valid token in the first burst: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d JWKS fetches, want 1", n)
	}
}

// A token of a key rotated in while a fetch is in flight waits for that
// fetch rather than failing against the set it already knows lacks it.
func TestRotationDuringFetch(t *testing.T) {
	a, ring, fetches, now := setup(t)
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, "k1", *now, "")); err != nil {
		t.Fatal(err)
	}
	ring.add(t, "k2")
	*now = now.Add(2 * time.Hour) // the set is stale: the next request refreshes it
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, "k2", *now, "")); err != nil {
				t.Errorf("a token of the rotated key: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := fetches.Load(); n != 2 {
		t.Errorf("%d JWKS fetches, want 2", n)
	}
}

// TestStaleSetWhileHung (issue #13, point 5): once a set is cached, a hung
// identity provider never makes a request wait. A stale set keeps
// verifying the kids it holds while its refresh hangs in the background;
// only a token of a kid the set lacks waits, for that same fetch, and is
// accepted when it ends.
func TestStaleSetWhileHung(t *testing.T) {
	ring := &keyring{}
	ring.add(t, "k1")
	var (
		hang      atomic.Bool
		fetches   atomic.Int32
		abandoned atomic.Bool // the hung fetch was given up by the client
		arrived   = make(chan struct{}, 1)
		release   = make(chan struct{})
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		if hang.Load() {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				abandoned.Store(true)
				return
			}
		}
		fmt.Fprint(w, ring.jwks())
	}))
	t.Cleanup(srv.Close)
	var once sync.Once
	unhang := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unhang) // before srv.Close, which waits for the handler

	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	a := New(Config{Issuer: "https://idp.test", Audience: "lectern-api", JWKSURL: srv.URL, Now: now,
		FetchTimeout: 5 * time.Minute}) // never reached here: the test releases the fetch
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, "k1", now(), "")); err != nil {
		t.Fatal(err)
	}

	hang.Store(true)
	ring.add(t, "k2")
	clock.Add(int64(2 * time.Hour)) // the set is stale: the next request refreshes it
	if _, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, "k1", now(), "")); err != nil {
		t.Fatalf("a token of a cached key while the JWKS hangs: %v", err)
	}
	<-arrived // the refresh did start
	if abandoned.Load() {
		t.Fatal("the request waited for the hung JWKS fetch until it timed out")
	}

	// A kid the stale set lacks waits for the fetch in flight, not for a
	// new one, and is accepted when it ends.
	errs := make(chan *apierr.Error, 1)
	go func() {
		_, err := a.Authenticate(ctx, "Bearer "+ring.sign(t, "k2", now(), ""))
		errs <- err
	}()
	unhang()
	if err := <-errs; err != nil {
		t.Errorf("a token of the new key after the refresh: %v", err)
	}
	if n := fetches.Load(); n != 2 {
		t.Errorf("%d JWKS fetches, want 2", n)
	}
}
