// Package clock is the origin's time source. In production it is the wall
// clock. With LECTERN_TEST_CLOCK=1 the admin API can move it forward, like
// Stripe's test clocks, and the whole local stack (origin, identity
// provider, edge host) follows it; it never moves backward.
//
// A test clock keeps its offset in the database (Stored), so that it
// survives a restart: tokens minted before it stay valid, meters stay in
// their period. Origins sharing a database share the offset: each move is
// one statement on the stored offset, and each origin adopts moves made
// by others when it next writes or Syncs (Watch syncs every second).
package clock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// ErrBackward is Set's answer for a time before the clock's: time never
// runs backward, because meters, tokens and cursors all assume it does not.
var ErrBackward = errors.New("clock: time never moves backward")

// Store keeps a test clock's offset; store.Store implements it.
type Store interface {
	// TestClockOffset reads the stored offset (0 when none was stored).
	TestClockOffset(ctx context.Context) (time.Duration, error)
	// MoveTestClock stores max(offset+add, atLeast) and returns it.
	MoveTestClock(ctx context.Context, add, atLeast time.Duration) (time.Duration, error)
}

// writeTimeout bounds a move's write to the store.
const writeTimeout = 5 * time.Second

// Clock is a wall clock plus an offset that only a test clock may change.
// The zero value is not usable; use New or Stored. Safe for concurrent
// use.
type Clock struct {
	wall   func() time.Time
	offset atomic.Int64 // nanoseconds added to wall time
	store  Store        // nil: the offset lives in memory only
}

// New returns a clock reading wall (time.Now when nil) whose offset lives
// in memory.
func New(wall func() time.Time) *Clock {
	if wall == nil {
		wall = time.Now
	}
	return &Clock{wall: wall}
}

// Stored returns a clock reading wall (time.Now when nil) whose offset is
// kept in s: it starts at the stored offset, and every move is written to
// s before it takes effect.
func Stored(ctx context.Context, wall func() time.Time, s Store) (*Clock, error) {
	c := New(wall)
	c.store = s
	if err := c.Sync(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Now is the current time, in UTC.
func (c *Clock) Now() time.Time {
	return c.wall().Add(time.Duration(c.offset.Load())).UTC()
}

// Advance moves the clock forward by d; a d that is not positive is
// ignored. A stored clock writes the move first: when that fails the
// clock does not move and the error says why.
func (c *Clock) Advance(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if c.store == nil {
		c.offset.Add(int64(d))
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	stored, err := c.store.MoveTestClock(ctx, d, 0)
	if err != nil {
		return fmt.Errorf("clock: store the advance: %w", err)
	}
	c.raise(stored)
	return nil
}

// Set moves the clock forward to t. It answers ErrBackward, and changes
// nothing, when t is before Now. A stored clock writes the move first:
// when that fails the clock does not move and the error says why.
func (c *Clock) Set(t time.Time) error {
	if c.store == nil {
		for {
			old := c.offset.Load()
			now := c.wall().Add(time.Duration(old))
			if t.Before(now) {
				return ErrBackward
			}
			if c.offset.CompareAndSwap(old, old+int64(t.Sub(now))) {
				return nil
			}
		}
	}
	target := t.Sub(c.wall())
	if target < time.Duration(c.offset.Load()) {
		return ErrBackward
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	stored, err := c.store.MoveTestClock(ctx, 0, target)
	if err != nil {
		return fmt.Errorf("clock: store the move: %w", err)
	}
	c.raise(stored)
	if stored > target {
		// Another origin had moved the stored clock past t: nothing was
		// written, and this clock now follows that move instead.
		return ErrBackward
	}
	return nil
}

// Offset is how far the clock runs ahead of the wall clock.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Sync adopts the stored offset when it is ahead of the clock's (another
// origin on the database moved it). A clock that is not stored has
// nothing to sync.
func (c *Clock) Sync(ctx context.Context) error {
	if c.store == nil {
		return nil
	}
	stored, err := c.store.TestClockOffset(ctx)
	if err != nil {
		return fmt.Errorf("clock: read the stored offset: %w", err)
	}
	c.raise(stored)
	return nil
}

// Watch Syncs every interval until ctx is done, passing each failure to
// failed (which may be nil). It returns when ctx is done.
func (c *Clock) Watch(ctx context.Context, interval time.Duration, failed func(error)) {
	if c.store == nil {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := c.Sync(ctx); err != nil && ctx.Err() == nil && failed != nil {
				failed(err)
			}
		}
	}
}

// raise sets the offset to d unless it is already at least d.
func (c *Clock) raise(d time.Duration) {
	for {
		old := c.offset.Load()
		if int64(d) <= old || c.offset.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}
