package idp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bounds the work that callers who hold no valid secret can make
// the provider do (issues #13 and #36; docs/decisions/identity-provider.md).
// A zero field takes its default.
type Limits struct {
	// SecretChecks is how many bcrypt comparisons may run at once:
	// max(1, GOMAXPROCS/2) by default, so that API requests keep the
	// other half of the CPUs. Only hashes stored by releases up to 0.4.0
	// (or under Config.BcryptSecrets) are bcrypt; a keyed hash is
	// checked at once, without the gate.
	SecretChecks int
	// SecretWaiters is how many more bcrypt checks may wait for a slot
	// (16 × SecretChecks by default, about what 1 s of default-cost
	// checks clears; negative: none). Past it a token request answers 503
	// temporarily_unavailable at once, with Retry-After.
	SecretWaiters int
	// SecretWait is the longest a bcrypt check waits for a slot (1 s).
	SecretWait time.Duration
	// MaxFailures failed client authentications from one remote address
	// (an IPv6 address counts by its /64), or for one client id from one
	// address, within FailureWindow block that address (or that id from
	// that address) until the window ends: a wrong secret answers 429
	// temporarily_unavailable with Retry-After instead of 401, and a
	// check that would cost bcrypt is refused so before it runs. The
	// right secret of a keyed hash always passes, blocked or not, and a
	// client id is never blocked as such (client.go, authenticate).
	// Defaults: 10, 1 min.
	MaxFailures   int
	FailureWindow time.Duration
	// FailureKeys bounds the keys tracked (10,000).
	FailureKeys int
	// PendingCodes bounds the unredeemed authorization codes of a client;
	// past it the oldest is dropped (100).
	PendingCodes int
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.SecretChecks, max(1, runtime.GOMAXPROCS(0)/2))
	def(&l.SecretWaiters, 16*l.SecretChecks)
	defDur(&l.SecretWait, time.Second)
	def(&l.MaxFailures, 10)
	defDur(&l.FailureWindow, time.Minute)
	def(&l.FailureKeys, 10_000)
	def(&l.PendingCodes, 100)
	l.SecretChecks = max(l.SecretChecks, 1)
	l.SecretWaiters = max(l.SecretWaiters, 0)
	l.MaxFailures = max(l.MaxFailures, 1)
	l.FailureKeys = max(l.FailureKeys, 1)
	l.PendingCodes = max(l.PendingCodes, 1)
	return l
}

// gate is a semaphore with a bounded queue and a bounded wait.
type gate struct {
	slots      chan struct{}
	waiting    atomic.Int64
	maxWaiting int64
	wait       time.Duration
}

func newGate(slots, waiters int, wait time.Duration) *gate {
	return &gate{slots: make(chan struct{}, slots), maxWaiting: int64(waiters), wait: wait}
}

// acquire takes a slot, waiting for one at most g.wait and only while
// fewer than maxWaiting others wait; false when it got none.
func (g *gate) acquire(ctx context.Context) bool {
	select {
	case g.slots <- struct{}{}:
		return true
	default:
	}
	if g.waiting.Add(1) > g.maxWaiting {
		g.waiting.Add(-1)
		return false
	}
	defer g.waiting.Add(-1)
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

func (g *gate) release() { <-g.slots }

// evict is the eviction of the failure table: when
// full it drops expired entries, and if none expired, an eighth of the
// entries (Go's map order is random enough that an attacker cannot
// choose which), so an insert costs O(1) amortised.
func evict[K comparable, V any](m map[K]V, limit int, expired func(V) bool) {
	if len(m) < limit {
		return
	}
	for k, v := range m {
		if expired(v) {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) <= limit-max(1, limit/8) {
			break
		}
		delete(m, k)
	}
}

// failures counts failed authentications per key in fixed windows.
type failures struct {
	mu     sync.Mutex
	max    int
	window time.Duration
	limit  int
	m      map[string]*failWindow
}

type failWindow struct {
	n   int
	end time.Time
}

func newFailures(l Limits) *failures {
	return &failures{max: l.MaxFailures, window: l.FailureWindow, limit: l.FailureKeys, m: map[string]*failWindow{}}
}

// blocked returns how long the first blocked key of keys stays blocked,
// or 0 when none is.
func (f *failures) blocked(now time.Time, keys ...string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blockedLocked(now, keys)
}

func (f *failures) blockedLocked(now time.Time, keys []string) time.Duration {
	var d time.Duration
	for _, k := range keys {
		if w := f.m[k]; w != nil && w.n >= f.max && now.Before(w.end) {
			d = max(d, w.end.Sub(now))
		}
	}
	return d
}

// fail counts one failure against each key, unless one of them is
// blocked already: then it counts nothing and returns how long that key
// stays blocked (as blocked does). So a blocked address adds no key to
// the table: each address holds at most its own key and MaxFailures pair
// keys per window, whatever ids it sends.
func (f *failures) fail(now time.Time, keys ...string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.blockedLocked(now, keys); d > 0 {
		return d
	}
	for _, k := range keys {
		w := f.m[k]
		if w == nil || !now.Before(w.end) {
			if w == nil {
				evict(f.m, f.limit, func(w *failWindow) bool { return !now.Before(w.end) })
			}
			w = &failWindow{end: now.Add(f.window)}
			f.m[k] = w
		}
		w.n++
	}
	return 0
}

// len is the number of keys tracked.
func (f *failures) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// addrKey is the failure key of a remote address: the IP, or an IPv6
// address's /64 (one host usually holds a whole /64).
func addrKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "addr:" + host
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return "addr:" + p.String()
	}
	return "addr:" + a.String()
}

// pairKey is the failure key of a client id from an address (addrKey's):
// the id by its SHA-256, so that a key's size does not depend on what a
// caller sends.
func pairKey(clientID, addr string) string {
	h := sha256.Sum256([]byte(clientID))
	return "id:" + base64.RawURLEncoding.EncodeToString(h[:18]) + "@" + addr
}
