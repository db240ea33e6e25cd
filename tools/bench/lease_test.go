package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
)

// The edge's transport counts its subrequests by the path they go to.
func TestSubrequestsCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	subs := &subrequests{base: http.DefaultTransport}
	hc := &http.Client{Transport: subs}
	for _, p := range []string{edgesig.GatePath, edgesig.GatePath, lease.Path, lease.UsagePath, lease.UsagePath, lease.UsagePath, "/v1/lessons/x"} {
		resp, err := hc.Post(srv.URL+p, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got, want := subs.counts(), (subCounts{gate: 2, lease: 1, usage: 3, other: 1}); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if got := subs.counts().minus(subCounts{gate: 1, usage: 3}).plus(subCounts{other: 2}); got != (subCounts{gate: 1, lease: 1, other: 3}) {
		t.Errorf("minus, plus: %+v", got)
	}
}

// A delayed subrequest whose request is cancelled fails with the
// context's error instead of waiting out the delay.
func TestSubrequestsDelayCancelled(t *testing.T) {
	subs := &subrequests{base: http.DefaultTransport, delay: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:1/", nil)
	if _, err := subs.RoundTrip(req); err != context.Canceled {
		t.Errorf("RoundTrip: %v, want context.Canceled", err)
	}
}

// paced sends exactly rate × dur requests (open loop), each counted once.
func TestPacedCount(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(304)
	}))
	defer srv.Close()
	tg := &target{url: srv.URL, header: plain, want: 304}
	r, err := paced(t.Context(), tg, 400, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.requests != 20 || hits.Load() != 20 || len(r.lat) != 20 {
		t.Errorf("requests %d, served %d, latencies %d; want 20", r.requests, hits.Load(), len(r.lat))
	}
	tg.want = 200
	if _, err := paced(t.Context(), tg, 400, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "status 304") {
		t.Errorf("a wrong status: %v", err)
	}
	// A status taken besides want (a host failure) is counted, not fatal.
	tg.also = []int{304}
	if r, err := paced(t.Context(), tg, 400, 50*time.Millisecond); err != nil || r.also != 20 || r.requests != 20 {
		t.Errorf("also: %d of %d, %v; want 20 of 20", r.also, r.requests, err)
	}
}

// procCPU reads the same count as /proc/PID/stat's utime + stime, finer.
func TestProcCPU(t *testing.T) {
	if !haveProcCPU {
		t.Skip("no process CPU clock here")
	}
	x := 0
	for i := range 30_000_000 { // some CPU time to read
		x ^= i
	}
	pid := os.Getpid()
	ticks, err := procTicks(pid)
	if err != nil {
		t.Fatal(err)
	}
	clock, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Ticks are 10 ms, rounded down; the clock was read a little later.
	if d := clock - time.Duration(ticks)*10*time.Millisecond; clock <= 0 || d < -20*time.Millisecond || d > 50*time.Millisecond {
		t.Errorf("clock %v, stat %d ticks (%d)", clock, ticks, x)
	}
	if _, err := procCPU(1<<22 + 7); err == nil { // above the kernel's largest pid_max
		t.Error("procCPU of no process: no error")
	}
}
