package clock

import (
	"testing"
	"time"
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
	if c.Set(base) {
		t.Error("Set to the past succeeded")
	}
	month := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if !c.Set(month) || !c.Now().Equal(month) {
		t.Errorf("Set(%v): Now = %v", month, c.Now())
	}
	if c.Offset() != month.Sub(base) {
		t.Errorf("Offset = %v", c.Offset())
	}
}
