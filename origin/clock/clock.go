// Package clock is the origin's time source. In production it is the wall
// clock. With LECTERN_TEST_CLOCK=1 the admin API can move it forward, like
// Stripe's test clocks, and the whole local stack (origin, identity
// provider, edge host) follows it; it never moves backward.
package clock

import (
	"sync/atomic"
	"time"
)

// Clock is a wall clock plus an offset that only a test clock may change.
// The zero value is not usable; use New. Safe for concurrent use.
type Clock struct {
	wall   func() time.Time
	offset atomic.Int64 // nanoseconds added to wall time
}

// New returns a clock reading wall (time.Now when nil).
func New(wall func() time.Time) *Clock {
	if wall == nil {
		wall = time.Now
	}
	return &Clock{wall: wall}
}

// Now is the current time, in UTC.
func (c *Clock) Now() time.Time {
	return c.wall().Add(time.Duration(c.offset.Load())).UTC()
}

// Advance moves the clock forward by d; a negative d is ignored.
func (c *Clock) Advance(d time.Duration) {
	if d > 0 {
		c.offset.Add(int64(d))
	}
}

// Set moves the clock forward to t. It reports false, and changes
// nothing, when t is before Now: time never runs backward, because meters,
// tokens and cursors all assume it does not.
func (c *Clock) Set(t time.Time) bool {
	for {
		old := c.offset.Load()
		now := c.wall().Add(time.Duration(old))
		if t.Before(now) {
			return false
		}
		if c.offset.CompareAndSwap(old, old+int64(t.Sub(now))) {
			return true
		}
	}
}

// Offset is how far the clock runs ahead of the wall clock.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }
