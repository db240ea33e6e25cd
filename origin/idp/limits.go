package idp

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bounds the work that callers who hold no valid secret can make
// the provider do (issue #13; docs/decisions/identity-provider.md). A zero field takes its default.
type Limits struct {
	// SecretChecks is how many bcrypt comparisons may run at once:
	// max(1, GOMAXPROCS/2) by default, so that API requests keep the
	// other half of the CPUs.
	SecretChecks int
	// SecretWaiters is how many more checks may wait for a slot (16 ×
	// SecretChecks by default, about what 1 s of default-cost checks
	// clears; negative: none). Past it a token request answers 503
	// temporarily_unavailable at once, with Retry-After.
	SecretWaiters int
	// SecretWait is the longest a check waits for a slot (1 s).
	SecretWait time.Duration
	// MaxFailures failed client authentications from one client id, or
	// from one remote address (an IPv6 address counts by its /64), within
	// FailureWindow block further attempts from it until the window ends:
	// 429 temporarily_unavailable with Retry-After. Defaults: 10, 1 min.
	MaxFailures   int
	FailureWindow time.Duration
	// FailureKeys bounds the ids and addresses tracked (10,000).
	FailureKeys int
	// VerifiedTTL is how long a verified secret is remembered, so that it
	// is not checked with bcrypt again (1 h); VerifiedEntries bounds the
	// entries (10,000).
	VerifiedTTL     time.Duration
	VerifiedEntries int
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
	defDur(&l.VerifiedTTL, time.Hour)
	def(&l.VerifiedEntries, 10_000)
	def(&l.PendingCodes, 100)
	l.SecretChecks = max(l.SecretChecks, 1)
	l.SecretWaiters = max(l.SecretWaiters, 0)
	l.MaxFailures = max(l.MaxFailures, 1)
	l.FailureKeys = max(l.FailureKeys, 1)
	l.VerifiedEntries = max(l.VerifiedEntries, 1)
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

// evict is the shared eviction of the two in-memory tables: when
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
	var d time.Duration
	for _, k := range keys {
		if w := f.m[k]; w != nil && w.n >= f.max && now.Before(w.end) {
			d = max(d, w.end.Sub(now))
		}
	}
	return d
}

// fail counts one failure against each key.
func (f *failures) fail(now time.Time, keys ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
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
}

// len is the number of keys tracked.
func (f *failures) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}

// verified remembers secrets that passed bcrypt, as an HMAC-SHA-256 under
// a per-process random key of (client id, stored hash, secret): a memory
// dump holds no secret, and a client whose stored hash changes, or that
// is deleted (the store is read first), no longer matches.
type verified struct {
	key   [32]byte
	ttl   time.Duration
	limit int
	mu    sync.Mutex
	m     map[[sha256.Size]byte]time.Time // MAC → expiry
}

func newVerified(l Limits) *verified {
	v := &verified{ttl: l.VerifiedTTL, limit: l.VerifiedEntries, m: map[[sha256.Size]byte]time.Time{}}
	rand.Read(v.key[:])
	return v
}

func (v *verified) mac(id string, hash []byte, secret string) [sha256.Size]byte {
	h := hmac.New(sha256.New, v.key[:])
	for _, part := range [][]byte{[]byte(id), hash, []byte(secret)} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// has reports whether secret was verified for the client within ttl.
func (v *verified) has(now time.Time, id string, hash []byte, secret string) bool {
	k := v.mac(id, hash, secret)
	v.mu.Lock()
	defer v.mu.Unlock()
	exp, ok := v.m[k]
	if ok && !now.Before(exp) {
		delete(v.m, k)
		return false
	}
	return ok
}

func (v *verified) add(now time.Time, id string, hash []byte, secret string) {
	k := v.mac(id, hash, secret)
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.m[k]; !ok {
		evict(v.m, v.limit, func(exp time.Time) bool { return !now.Before(exp) })
	}
	v.m[k] = now.Add(v.ttl)
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
