package wazero

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestEjectionDelay (issue #33, point 7): an origin that accepts
// connections but never answers (a frozen process) is ejected after
// ProbeFailures probes in a row fail. The first probe after the freeze
// starts within DefaultProbeEvery and waits its ProbeTimeout; the next
// tick is already due, so the second starts at once and waits as long:
// EjectionDelay's bounds, which docs/edge.md states.
func TestEjectionDelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accept, read, never answer
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { b := make([]byte, 4096); c.Read(b) }()
		}
	}()
	frozen := "http://" + ln.Addr().String()
	o, err := newOrigins(frozen, []string{frozen, "http://127.0.0.1:1"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	began := time.Now()
	go o.probe(ctx, &http.Client{}, DefaultProbeEvery, func(string, ...any) {})
	select {
	case <-o.list[0].watch():
	case <-time.After(10 * time.Second):
		t.Fatal("the frozen origin was not ejected in 10 s")
	}
	took := time.Since(began)
	lo, hi := EjectionDelay(DefaultProbeEvery)
	t.Logf("ejected after %s (stated: %s to %s)", took.Round(time.Millisecond), lo, hi)
	// The lower bound is exact (two probes' bounds run out first); the
	// upper one gets scheduling slack on a loaded machine.
	if took < lo || took > hi+time.Second {
		t.Errorf("ejected after %s, want %s to %s", took, lo, hi)
	}
}
