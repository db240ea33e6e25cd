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

// legacyClient registers a client of testOrg whose secret is stored in
// bcrypt, as release 0.4.0 stored every secret.
func (e *env) legacyClient(t *testing.T) (id, secret string) {
	t.Helper()
	id, secret, err := CreateClient(t.Context(), e.store, e.clock.Now(), testOrg, []string{"content.read"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id, secret
}

// TestFailedAttemptsLimited: after MaxFailures failures from an address,
// or of one client id from an address, that address (or that id from it)
// is blocked until the window ends: a wrong secret answers 429 with
// Retry-After, a check that would cost bcrypt is refused so before it
// runs, and the right secret of a keyed client still passes. A client id
// is never blocked for other addresses.
func TestFailedAttemptsLimited(t *testing.T) {
	t.Parallel()
	cnt := newCounter("")
	e := newEnv(t, func(c *Config) {
		c.Limits = Limits{MaxFailures: 3, FailureWindow: time.Minute}
		c.compare = cnt.compare
	})
	legacyID, legacySecret := e.legacyClient(t)
	one, two, three, four := from("127.0.0.1"), from("127.0.0.2"), from("127.0.0.3"), from("127.0.0.4")

	// Three failures of the app's id, each from its own address, block
	// nothing: none of those addresses reached MaxFailures.
	for i, hc := range []*http.Client{one, two, three} {
		e.token(hc, e.app.id, "wrong").want(t, fmt.Sprintf("app, failure %d", i+1), 401, "invalid_client")
	}
	e.token(four, e.app.id, e.app.secret).want(t, "app, right secret from a fresh address", 200, "")
	e.token(one, e.app.id, e.app.secret).want(t, "app, right secret from an address with one failure", 200, "")

	// Three failures of the legacy client from 127.0.0.5 block that
	// address, for every id: bcrypt checks are refused unchecked, wrong
	// secrets answer 429.
	five := from("127.0.0.5")
	for i := range 3 {
		e.token(five, legacyID, fmt.Sprint("wrong", i)).want(t, "legacy, wrong secret", 401, "invalid_client")
	}
	before := cnt.calls.Load()
	a := e.token(five, legacyID, legacySecret)
	a.want(t, "address blocked, bcrypt client's right secret", 429, "temporarily_unavailable")
	a.wantRetryAfter(t, "address blocked", 1, 60)
	e.token(five, "lc_another", "x").want(t, "address blocked, unknown id", 429, "temporarily_unavailable")
	a = e.token(five, e.machine.id, "wrong")
	a.want(t, "address blocked, keyed client's wrong secret", 429, "temporarily_unavailable")
	a.wantRetryAfter(t, "address blocked, keyed client's wrong secret", 1, 60)
	if got := cnt.calls.Load() - before; got != 0 {
		t.Errorf("blocked requests ran %d bcrypt comparisons, want none", got)
	}
	// A keyed client's right secret costs an HMAC: the block does not
	// refuse it.
	e.token(five, e.machine.id, e.machine.secret).want(t, "address blocked, keyed client's right secret", 200, "")
	// The legacy client itself, from elsewhere, is not blocked.
	e.token(from("127.0.0.6"), legacyID, legacySecret).want(t, "legacy client from another address", 200, "")

	// Per address: failures of three unknown ids from 127.0.0.7.
	seven := from("127.0.0.7")
	for i := range 3 {
		e.token(seven, fmt.Sprintf("lc_nobody%d", i), "x").want(t, "unknown id", 401, "invalid_client")
	}
	e.token(seven, e.machine.id, "wrong").want(t, "address blocked, wrong secret", 429, "temporarily_unavailable")
	e.token(seven, e.machine.id, e.machine.secret).want(t, "address blocked, keyed right secret", 200, "")
	e.token(seven, e.app.id, e.app.secret).want(t, "address blocked, another keyed client", 200, "")

	// The window ends. (The legacy client was replaced by the keyed form
	// at its success from 127.0.0.6.)
	e.clock.Advance(61 * time.Second)
	e.token(five, legacyID, legacySecret).want(t, "after the window", 200, "")
	e.token(seven, e.machine.id, "wrong").want(t, "after the window, wrong secret", 401, "invalid_client")
}

// TestBcryptBlockedBeforeTheCheck: a client still stored in bcrypt (0.4.0's
// hash, before its first token) is refused 429 from a blocked address,
// right secret or not, without a bcrypt comparison: the block is what
// bounds the bcrypt work a flood can cause.
func TestBcryptBlockedBeforeTheCheck(t *testing.T) {
	t.Parallel()
	cnt := newCounter("")
	e := newEnv(t, func(c *Config) {
		c.Limits = Limits{MaxFailures: 3, FailureWindow: time.Minute}
		c.compare = cnt.compare
	})
	legacyID, legacySecret := e.legacyClient(t)
	hc := from("127.0.0.8")
	for i := range 3 {
		e.token(hc, fmt.Sprintf("lc_nobody%d", i), "x").want(t, "unknown id", 401, "invalid_client")
	}
	if got := cnt.calls.Load(); got != 0 {
		t.Errorf("unknown ids ran %d bcrypt comparisons, want none (keyed world)", got)
	}
	for i := range 5 {
		e.token(hc, legacyID, fmt.Sprint("wrong", i)).want(t, "bcrypt client, blocked", 429, "temporarily_unavailable")
	}
	e.token(hc, legacyID, legacySecret).want(t, "bcrypt client's right secret, blocked", 429, "temporarily_unavailable")
	if got := cnt.calls.Load(); got != 0 {
		t.Errorf("a blocked address ran %d bcrypt comparisons, want none", got)
	}
}

// TestSecretChecksBounded: bcrypt comparisons (the hashes 0.4.0 stored)
// run behind the gate: with one slot and no waiters, a check arriving
// while another holds the slot answers 503 at once, without bcrypt; a
// waiter waits at most SecretWait; a keyed hash needs no slot.
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
			legacyID, legacySecret := e.legacyClient(t)

			held := make(chan tokenAnswer, 1)
			go func() { held <- e.token(http.DefaultClient, legacyID, "held") }()
			<-cnt.entered // the held check has the only slot
			before := cnt.calls.Load()
			a := e.token(http.DefaultClient, legacyID, legacySecret)
			a.want(t, "while the slot is held", 503, "temporarily_unavailable")
			a.wantRetryAfter(t, "while the slot is held", 1, 1)
			if got := cnt.calls.Load() - before; got != 0 {
				t.Errorf("the refused check ran %d comparisons", got)
			}
			// A keyed hash takes no slot: its clients are not starved.
			e.token(http.DefaultClient, e.machine.id, e.machine.secret).want(t, "keyed client while held", 200, "")
			e.token(http.DefaultClient, "lc_nobody", "x").want(t, "unknown id while held", 401, "invalid_client")

			close(cnt.release)
			(<-held).want(t, "the held check", 401, "invalid_client")
			e.token(http.DefaultClient, legacyID, legacySecret).want(t, "after the release", 200, "")
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

// TestTablesBounded: the failure table stays within its bound however
// many ids and addresses fail.
func TestTablesBounded(t *testing.T) {
	t.Parallel()
	l := Limits{FailureKeys: 64}.withDefaults()
	f := newFailures(l)
	now := time.Now()
	for i := range 10_000 {
		addr := addrKey(fmt.Sprintf("[2001:db8:%x::1]:443", i))
		f.fail(now, addr, pairKey(fmt.Sprint(i), addr))
	}
	if n := f.len(); n > 64 {
		t.Errorf("failure table: %d keys, want at most 64", n)
	}
	// A blocked address adds no keys, whatever ids it sends: its own and
	// MaxFailures pair keys.
	f = newFailures(Limits{MaxFailures: 3}.withDefaults())
	addr := addrKey("10.0.0.1:443")
	for i := range 1000 {
		f.fail(now, addr, pairKey(fmt.Sprint("lc_", i), addr))
	}
	if n := f.len(); n != 1+3 {
		t.Errorf("one address, 1000 ids: %d keys, want %d", n, 1+3)
	}
	// One IPv6 host's /64 is one key.
	if a, b := addrKey("[2001:db8:1:2:aaaa::1]:1"), addrKey("[2001:db8:1:2:bbbb::9]:2"); a != b {
		t.Errorf("addresses of one /64: keys %q and %q, want equal", a, b)
	}
	if a := addrKey("[::ffff:10.0.0.1]:1"); a != "addr:10.0.0.1" {
		t.Errorf("IPv4-mapped address: key %q", a)
	}
	// A pair key's size does not grow with the id sent.
	if a, b := pairKey("x", "addr:10.0.0.1"), pairKey(strings.Repeat("x", 10_000), "addr:10.0.0.1"); len(a) != len(b) || a == b {
		t.Errorf("pair keys %q and %.40q: want equal sizes, distinct", a, b)
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
	legacyID, legacySecret := e.legacyClient(t)
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, secret := e.machine.id, e.machine.secret
			if i%3 == 0 {
				id, secret = legacyID, legacySecret
			}
			if i%2 == 0 {
				a := e.token(http.DefaultClient, id, "wrong")
				if a.status != 401 && a.status != 503 {
					t.Errorf("wrong secret: %d %s", a.status, a.code)
				}
				return
			}
			a := e.token(http.DefaultClient, id, secret)
			if a.status != 200 && a.status != 503 {
				t.Errorf("right secret: %d %s", a.status, a.code)
			}
		}()
	}
	wg.Wait()
}
