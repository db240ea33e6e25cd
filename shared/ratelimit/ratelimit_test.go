package ratelimit

import (
	"testing"
	"time"
)

func TestItems(t *testing.T) {
	if got := string(AppendPolicy(nil, "calls-hour", 100, 3600)); got != `"calls-hour";q=100;w=3600` {
		t.Errorf("policy %s", got)
	}
	if got := string(AppendState([]byte("x, "), "calls-month", 99, 2700)); got != `x, "calls-month";r=99;t=2700` {
		t.Errorf("state %s", got)
	}
	for d, want := range map[time.Duration]int64{
		-time.Second: 1, 0: 1, time.Nanosecond: 1, time.Second: 1, time.Second + time.Nanosecond: 2, 2700 * time.Second: 2700,
	} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %d, want %d", d, got, want)
		}
	}
}
