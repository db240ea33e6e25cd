package token

import (
	"errors"
	"testing"
	"time"
)

// clock is a fake clock the Cache tests advance by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// fetchIfNeeded is what a caller does under its mutex: ask, begin, and
// report whether it started a fetch.
func fetchIfNeeded(c *Cache, now time.Time, unknownKid bool) bool {
	return c.NeedsRefresh(now, unknownKid) && c.BeginRefresh(now)
}

func TestCacheFirstFetch(t *testing.T) {
	k := loadKeys(t)
	clk := &clock{testNow}
	var c Cache
	if c.Keys() != nil || !c.NeedsRefresh(clk.now(), false) {
		t.Fatal("an empty cache does not ask for a fetch")
	}
	if !c.BeginRefresh(clk.now()) || c.BeginRefresh(clk.now()) {
		t.Fatal("BeginRefresh is not single-flight")
	}
	clk.advance(time.Second)
	c.EndRefresh(clk.now(), k.set, nil)
	if c.Keys() != k.set || !c.FetchedAt().Equal(clk.now()) || c.Err() != nil {
		t.Fatal("EndRefresh did not store the set")
	}
	if c.NeedsRefresh(clk.now(), false) {
		t.Error("a fresh set asks for a fetch")
	}
}

// A burst of 100 tokens with unknown kids, while the fetch they cause is
// in flight and after it ended, costs exactly one fetch.
func TestCacheUnknownKidBurst(t *testing.T) {
	k := loadKeys(t)
	clk := &clock{testNow}
	var c Cache
	c.EndRefresh(clk.now(), k.set, nil) // installed at start-up
	clk.advance(time.Minute)
	fetches := 0
	for i := range 100 {
		if fetchIfNeeded(&c, clk.now(), true) {
			fetches++
		}
		if i == 10 {
			c.EndRefresh(clk.now(), k.set, nil) // the fetch returns mid-burst
		}
		clk.advance(100 * time.Millisecond)
	}
	if fetches != 1 {
		t.Errorf("100 unknown kids caused %d fetches, want 1", fetches)
	}
	// After MinInterval another unknown kid may fetch again.
	clk.advance(DefaultMinInterval)
	if !fetchIfNeeded(&c, clk.now(), true) {
		t.Error("no fetch for an unknown kid after MinInterval")
	}
}

func TestCacheMaxAge(t *testing.T) {
	k := loadKeys(t)
	clk := &clock{testNow}
	c := Cache{MaxAge: 10 * time.Minute, MinInterval: 5 * time.Second}
	c.EndRefresh(clk.now(), k.set, nil)
	clk.advance(10*time.Minute - time.Second)
	if c.NeedsRefresh(clk.now(), false) {
		t.Error("refresh before MaxAge")
	}
	clk.advance(time.Second)
	if !fetchIfNeeded(&c, clk.now(), false) {
		t.Fatal("no refresh at MaxAge")
	}
	if fetchIfNeeded(&c, clk.now(), false) {
		t.Error("second concurrent refresh of a stale set")
	}
	// The fetch fails: the old set stays, and the next try waits
	// MinInterval.
	boom := errors.New("idp down")
	c.EndRefresh(clk.now(), nil, boom)
	if c.Keys() != k.set || c.Err() != boom {
		t.Error("a failed fetch dropped the set or the error")
	}
	clk.advance(4 * time.Second)
	if c.NeedsRefresh(clk.now(), false) || c.NeedsRefresh(clk.now(), true) {
		t.Error("retry within MinInterval of a failure")
	}
	clk.advance(time.Second)
	if !fetchIfNeeded(&c, clk.now(), false) {
		t.Error("no retry after MinInterval")
	}
}

func TestCacheIdentityProviderDown(t *testing.T) {
	clk := &clock{testNow}
	var c Cache
	fetches := 0
	for range 600 { // ten minutes of requests, one every second, fetch always failing
		if fetchIfNeeded(&c, clk.now(), true) {
			fetches++
			c.EndRefresh(clk.now(), nil, errors.New("down"))
		}
		clk.advance(time.Second)
	}
	if want := int(10 * time.Minute / DefaultMinInterval); fetches != want {
		t.Errorf("%d fetches in ten minutes with the provider down, want %d", fetches, want)
	}
	if c.Keys() != nil {
		t.Error("keys from nowhere")
	}
}

func TestCacheLostFetch(t *testing.T) {
	clk := &clock{testNow}
	var c Cache
	if !fetchIfNeeded(&c, clk.now(), false) {
		t.Fatal("no first fetch")
	}
	clk.advance(DefaultInFlightTimeout - time.Second)
	if !c.InFlight(clk.now()) || c.BeginRefresh(clk.now()) {
		t.Error("fetch not in flight before the timeout")
	}
	clk.advance(time.Second)
	if c.InFlight(clk.now()) || !fetchIfNeeded(&c, clk.now(), false) {
		t.Error("a lost fetch blocks refreshes after the timeout")
	}
	c.EndRefresh(clk.now(), nil, nil)
	if c.Err() == nil || c.Keys() != nil {
		t.Error("EndRefresh with neither set nor error is not a failure")
	}
}
