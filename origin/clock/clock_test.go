package clock

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/store/sqlitestore"
)

func TestClock(t *testing.T) {
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	c := New(func() time.Time { return base })
	if !c.Now().Equal(base) {
		t.Fatalf("Now = %v, want %v", c.Now(), base)
	}
	c.Advance(90 * time.Second)
	if got, want := c.Now(), base.Add(90*time.Second); !got.Equal(want) {
		t.Errorf("after Advance: %v, want %v", got, want)
	}
	c.Advance(-time.Hour)
	if got, want := c.Now(), base.Add(90*time.Second); !got.Equal(want) {
		t.Errorf("a negative Advance moved the clock: %v", got)
	}
	if err := c.Set(base); !errors.Is(err, ErrBackward) {
		t.Errorf("Set to the past: %v, want ErrBackward", err)
	}
	month := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if err := c.Set(month); err != nil || !c.Now().Equal(month) {
		t.Errorf("Set(%v): %v, Now = %v", month, err, c.Now())
	}
	if c.Offset() != month.Sub(base) {
		t.Errorf("Offset = %v", c.Offset())
	}
}

// A stored clock's offset survives a restart (a new clock on the reopened
// database), and two clocks on one database agree after a Sync.
func TestStored(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	wall := func() time.Time { return base }
	path := filepath.Join(t.TempDir(), "lectern.db")
	st, err := sqlitestore.New(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Stored(ctx, wall, st)
	if err != nil || c.Offset() != 0 {
		t.Fatalf("Stored on a new database: offset %v, %v", c.Offset(), err)
	}
	if err := c.Advance(time.Hour); err != nil {
		t.Fatal(err)
	}
	month := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if err := c.Set(month); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(month.Add(-time.Second)); !errors.Is(err, ErrBackward) {
		t.Errorf("Set to the past: %v, want ErrBackward", err)
	}

	// Another clock on the database (another origin) moves it; c follows
	// on Sync, and c's own moves add to the shared offset.
	other, err := Stored(ctx, wall, st)
	if err != nil || !other.Now().Equal(month) {
		t.Fatalf("a second clock reads %v, %v; want %v", other.Now(), err, month)
	}
	other.Advance(time.Minute)
	if err := c.Sync(ctx); err != nil || !c.Now().Equal(month.Add(time.Minute)) {
		t.Errorf("after Sync: %v, %v; want %v", c.Now(), err, month.Add(time.Minute))
	}
	other.Advance(time.Minute)
	c.Advance(time.Minute) // without a Sync between: the stored offset adds up
	if want := month.Add(3 * time.Minute); !c.Now().Equal(want) {
		t.Errorf("after both advanced: %v, want %v", c.Now(), want)
	}
	// A Set that another origin's move overtook is refused, and the clock
	// follows the stored offset.
	other.Advance(time.Hour)
	if err := c.Set(month.Add(5 * time.Minute)); !errors.Is(err, ErrBackward) {
		t.Errorf("Set behind another origin's move: %v, want ErrBackward", err)
	}
	want := month.Add(63 * time.Minute)
	if !c.Now().Equal(want) {
		t.Errorf("after the refused Set: %v, want %v", c.Now(), want)
	}
	st.Close()

	// Restart: a new store and clock on the same file.
	st, err = sqlitestore.New(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err = Stored(ctx, wall, st)
	if err != nil || !c.Now().Equal(want) {
		t.Errorf("after a restart: %v, %v; want %v", c.Now(), err, want)
	}
}

// Watch adopts another clock's move without a call from the caller.
func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	st, err := sqlitestore.New(ctx, filepath.Join(t.TempDir(), "lectern.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, _ := Stored(ctx, nil, st)
	b, _ := Stored(ctx, nil, st)
	done := make(chan struct{})
	go func() { a.Watch(ctx, time.Millisecond, func(err error) { t.Error(err) }); close(done) }()
	b.Advance(time.Hour)
	for a.Offset() != time.Hour {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

type failing struct{ Store }

func (failing) MoveTestClock(context.Context, time.Duration, time.Duration) (time.Duration, error) {
	return 0, errors.New("disk full")
}

// A move that cannot be stored does not happen.
func TestStoredFailure(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.New(ctx, filepath.Join(t.TempDir(), "lectern.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := Stored(ctx, nil, failing{st})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Advance(time.Hour); err == nil || c.Offset() != 0 {
		t.Errorf("Advance with a failing store: %v, offset %v", err, c.Offset())
	}
	if err := c.Set(time.Now().Add(time.Hour)); err == nil || errors.Is(err, ErrBackward) || c.Offset() != 0 {
		t.Errorf("Set with a failing store: %v, offset %v", err, c.Offset())
	}
}
