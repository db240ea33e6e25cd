package idp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"
)

// counter is a Config.compare that counts the comparisons and can hold
// those of one secret until released.
type counter struct {
	calls   atomic.Int64
	hold    string        // a secret whose comparison waits for release
	entered chan struct{} // receives when a held comparison starts
	release chan struct{}
}

func newCounter(hold string) *counter {
	return &counter{hold: hold, entered: make(chan struct{}, 8), release: make(chan struct{})}
}

func (c *counter) compare(hash, secret []byte) error {
	c.calls.Add(1)
	if c.hold != "" && string(secret) == c.hold {
		c.entered <- struct{}{}
		<-c.release
	}
	return bcrypt.CompareHashAndPassword(hash, secret)
}

// from returns a client whose connections come from the loopback
// address ip, so that tests can play several remote addresses.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

type tokenAnswer struct {
	status     int
	code       string
	retryAfter string
}

// token asks for a client_credentials token over client hc.
func (e *env) token(hc *http.Client, id, secret string) tokenAnswer {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.tokenURL(), strings.NewReader("grant_type=client_credentials"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	body := readAll(e.t, resp)
	a := tokenAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.StatusCode != 200 {
		var desc string
		a.code, desc = oauthErr(e.t, body)
		if desc == "" {
			e.t.Errorf("error %s without a description", a.code)
		}
	}
	return a
}

func (a tokenAnswer) want(t *testing.T, what string, status int, code string) {
	t.Helper()
	if a.status != status || a.code != code {
		t.Errorf("%s: got %d %q, want %d %q", what, a.status, a.code, status, code)
	}
}

func (a tokenAnswer) wantRetryAfter(t *testing.T, what string, lo, hi int) {
	t.Helper()
	n, err := strconv.Atoi(a.retryAfter)
	if err != nil || n < lo || n > hi {
		t.Errorf("%s: Retry-After %q, want %d to %d", what, a.retryAfter, lo, hi)
	}
}

// TestFailedAttemptsLimited: after MaxFailures failures a client id, and
// an address, get 429 with Retry-After, without a bcrypt comparison,
// until the window ends; a secret verified before still passes.
func TestFailedAttemptsLimited(t *testing.T) {
	t.Parallel()
	cnt := newCounter("")
	e := newEnv(t, func(c *Config) {
		c.Limits = Limits{MaxFailures: 3, FailureWindow: time.Minute}
		c.compare = cnt.compare
	})
	one, two, three := from("127.0.0.1"), from("127.0.0.2"), from("127.0.0.3")
	// The machine client's secret is verified, and remembered.
	e.token(one, e.machine.id, e.machine.secret).want(t, "machine, right secret", 200, "")

	// Per client id: three failures of the app, each from its own address.
	for i, hc := range []*http.Client{one, two, three} {
		e.token(hc, e.app.id, "wrong").want(t, fmt.Sprintf("app, failure %d", i+1), 401, "invalid_client")
	}
	before := cnt.calls.Load()
	four := from("127.0.0.4")
	a := e.token(four, e.app.id, e.app.secret)
	a.want(t, "app blocked, right secret from a fresh address", 429, "temporarily_unavailable")
	a.wantRetryAfter(t, "app blocked", 1, 60)
	e.token(four, e.app.id, "wrong").want(t, "app blocked, wrong secret", 429, "temporarily_unavailable")
	if got := cnt.calls.Load() - before; got != 0 {
		t.Errorf("blocked requests ran %d bcrypt comparisons, want none", got)
	}
	// The block is the app's, not the address's.
	e.token(four, "lc_nobody", "x").want(t, "another id from the app's address", 401, "invalid_client")

	// Per address: failures of three unknown ids from 127.0.0.5.
	five := from("127.0.0.5")
	for i := range 3 {
		e.token(five, fmt.Sprintf("lc_nobody%d", i), "x").want(t, "unknown id", 401, "invalid_client")
	}
	e.token(five, "lc_another", "x").want(t, "address blocked, another id", 429, "temporarily_unavailable")
	// A secret verified before is known right without bcrypt: it passes.
	e.token(five, e.machine.id, e.machine.secret).want(t, "address blocked, verified secret", 200, "")
	e.token(from("127.0.0.6"), "lc_another", "x").want(t, "another address", 401, "invalid_client")

	// The window ends.
	e.clock.Advance(61 * time.Second)
	e.token(five, e.app.id, e.app.secret).want(t, "after the window", 200, "")
}

// TestSecretChecksBounded: with one slot and no waiters, a check arriving
// while another holds the slot answers 503 at once, without bcrypt; a
// waiter waits at most SecretWait; a verified secret needs no slot.
func TestSecretChecksBounded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		limits Limits
	}{
		{"no waiters", Limits{SecretChecks: 1, SecretWaiters: -1, SecretWait: time.Hour}},
		{"one waiter, bounded wait", Limits{SecretChecks: 1, SecretWaiters: 1, SecretWait: 10 * time.Millisecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cnt := newCounter("held")
			e := newEnv(t, func(c *Config) { c.Limits = tt.limits; c.compare = cnt.compare })
			e.token(http.DefaultClient, e.machine.id, e.machine.secret).want(t, "verify the machine's secret", 200, "")

			held := make(chan tokenAnswer, 1)
			go func() { held <- e.token(http.DefaultClient, e.app.id, "held") }()
			<-cnt.entered // the held check has the only slot
			before := cnt.calls.Load()
			a := e.token(http.DefaultClient, e.app.id, e.app.secret)
			a.want(t, "while the slot is held", 503, "temporarily_unavailable")
			a.wantRetryAfter(t, "while the slot is held", 1, 1)
			if got := cnt.calls.Load() - before; got != 0 {
				t.Errorf("the refused check ran %d comparisons", got)
			}
			// A verified secret takes no slot: API clients are not starved.
			e.token(http.DefaultClient, e.machine.id, e.machine.secret).want(t, "verified secret while held", 200, "")

			close(cnt.release)
			(<-held).want(t, "the held check", 401, "invalid_client")
			e.token(http.DefaultClient, e.app.id, e.app.secret).want(t, "after the release", 200, "")
		})
	}
}

// TestGateWaiters: a check waits for a slot while fewer than
// SecretWaiters wait, and gets it when the slot is released.
func TestGateWaiters(t *testing.T) {
	t.Parallel()
	g := newGate(1, 1, time.Hour)
	if !g.acquire(t.Context()) {
		t.Fatal("first acquire failed")
	}
	got := make(chan bool)
	go func() { got <- g.acquire(context.Background()) }()
	for g.waiting.Load() != 1 { // the waiter is queued
		time.Sleep(time.Millisecond)
	}
	if g.acquire(t.Context()) {
		t.Fatal("acquire past the waiters succeeded")
	}
	g.release()
	if !<-got {
		t.Fatal("the waiter did not get the released slot")
	}
	g.release()
}

// TestVerifiedSecretCache: a verified secret is not compared again until
// VerifiedTTL passes; a deleted client does not pass from the cache.
func TestVerifiedSecretCache(t *testing.T) {
	t.Parallel()
	cnt := newCounter("")
	e := newEnv(t, func(c *Config) {
		c.Limits = Limits{VerifiedTTL: 10 * time.Minute}
		c.compare = cnt.compare
	})
	for i := range 4 {
		e.token(http.DefaultClient, e.machine.id, e.machine.secret).want(t, "right secret", 200, "")
		if got := cnt.calls.Load(); got != 1 {
			t.Fatalf("after %d tokens: %d comparisons, want 1", i+1, got)
		}
	}
	e.token(http.DefaultClient, e.machine.id, "wrong").want(t, "wrong secret", 401, "invalid_client")
	e.token(http.DefaultClient, e.machine.id, e.machine.secret+"x").want(t, "longer secret", 401, "invalid_client")
	if got := cnt.calls.Load(); got != 3 {
		t.Errorf("wrong secrets: %d comparisons in all, want 3 (not remembered)", got)
	}
	e.clock.Advance(10 * time.Minute)
	e.token(http.DefaultClient, e.machine.id, e.machine.secret).want(t, "after the TTL", 200, "")
	if got := cnt.calls.Load(); got != 4 {
		t.Errorf("after the TTL: %d comparisons in all, want 4", got)
	}
	// Deleting the organisation deletes its clients.
	if err := e.store.DeleteOrg(t.Context(), testOrg); err != nil {
		t.Fatal(err)
	}
	e.token(http.DefaultClient, e.machine.id, e.machine.secret).want(t, "deleted client", 401, "invalid_client")
}

// TestTablesBounded: the failure and verified tables stay within their
// bounds however many ids and addresses fail.
func TestTablesBounded(t *testing.T) {
	t.Parallel()
	l := Limits{FailureKeys: 64, VerifiedEntries: 16}.withDefaults()
	f, v := newFailures(l), newVerified(l)
	now := time.Now()
	for i := range 10_000 {
		f.fail(now, fmt.Sprintf("id:%d", i), addrKey(fmt.Sprintf("[2001:db8:%x::1]:443", i)))
		v.add(now, fmt.Sprint(i), []byte("hash"), "secret")
	}
	if n := f.len(); n > 64 {
		t.Errorf("failure table: %d keys, want at most 64", n)
	}
	if n := len(v.m); n > 16 {
		t.Errorf("verified table: %d entries, want at most 16", n)
	}
	// One IPv6 host's /64 is one key.
	if a, b := addrKey("[2001:db8:1:2:aaaa::1]:1"), addrKey("[2001:db8:1:2:bbbb::9]:2"); a != b {
		t.Errorf("addresses of one /64: keys %q and %q, want equal", a, b)
	}
	if a := addrKey("[::ffff:10.0.0.1]:1"); a != "addr:10.0.0.1" {
		t.Errorf("IPv4-mapped address: key %q", a)
	}
}

// TestAuthorizeCodesBounded: a client keeps at most PendingCodes
// unredeemed codes, the oldest dropped first, and expired codes are swept
// by the next authorization.
func TestAuthorizeCodesBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.Limits = Limits{PendingCodes: 3} })
	verifier := oauth2.GenerateVerifier()
	var codes []string
	for range 5 {
		codes = append(codes, e.authorize(verifier, "learner-1"))
		e.clock.Advance(time.Millisecond) // a strict order of expiry
	}
	cfg := e.appConfig(testRedirect)
	for i, code := range codes {
		_, err := cfg.Exchange(t.Context(), code, oauth2.VerifierOption(verifier))
		if i < 2 {
			wantGrantError(t, err) // dropped, oldest first
		} else if err != nil {
			t.Errorf("code %d of 5: %v, want a token", i+1, err)
		}
	}

	// An expired code is swept by the next authorization of any client.
	stale := e.authorize(verifier, "learner-2")
	e.clock.Advance(codeTTL + time.Second)
	e.authorize(verifier, "learner-3")
	early := e.clock.Now().Add(-time.Hour) // TakeAuthCode would return a row still there
	if _, err := e.store.TakeAuthCode(t.Context(), hashCode(stale), early); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the expired code's row: TakeAuthCode = %v, want it swept (ErrNotFound)", err)
	}
}

// TestConcurrentFailuresAndChecks runs failing and passing clients at once
// under the race detector.
func TestConcurrentFailuresAndChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.Limits = Limits{SecretChecks: 1, MaxFailures: 1000} })
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				a := e.token(http.DefaultClient, e.machine.id, "wrong")
				if a.status != 401 && a.status != 503 {
					t.Errorf("wrong secret: %d %s", a.status, a.code)
				}
				return
			}
			a := e.token(http.DefaultClient, e.machine.id, e.machine.secret)
			if a.status != 200 && a.status != 503 {
				t.Errorf("right secret: %d %s", a.status, a.code)
			}
		}()
	}
	wg.Wait()
}

// TestBurstOfOneClientCostsOneCheck: the first requests of one client,
// arriving together, wait behind one comparison and then pass from the
// verified secret without one of their own.
func TestBurstOfOneClientCostsOneCheck(t *testing.T) {
	t.Parallel()
	var cp atomic.Pointer[counter] // set once the secret to hold is known
	e := newEnv(t, func(c *Config) {
		c.Limits = Limits{SecretChecks: 1, SecretWait: time.Hour}
		c.compare = func(hash, secret []byte) error { return cp.Load().compare(hash, secret) }
	})
	cnt := newCounter(e.machine.secret)
	cp.Store(cnt)
	first := make(chan tokenAnswer, 1)
	go func() { first <- e.token(http.DefaultClient, e.machine.id, e.machine.secret) }()
	<-cnt.entered // the first holds the slot, inside its comparison
	const n = 4
	rest := make(chan tokenAnswer, n)
	for range n {
		go func() { rest <- e.token(http.DefaultClient, e.machine.id, e.machine.secret) }()
	}
	for e.idp.gate.waiting.Load() != n { // all queued behind the first
		time.Sleep(time.Millisecond)
	}
	close(cnt.release)
	(<-first).want(t, "first", 200, "")
	for range n {
		(<-rest).want(t, "queued", 200, "")
	}
	if got := cnt.calls.Load(); got != 1 {
		t.Errorf("%d comparisons for one client's burst, want 1", got)
	}
}
