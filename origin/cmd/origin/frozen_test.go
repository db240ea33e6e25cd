package main

import (
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestPeersFrozenBehindEdge (issue #28, point 1): two origins on one
// PostgreSQL database behind an edge (the module under the wazero host,
// as worker/cmd/edge runs it), 8 clients reading through the edge; one origin
// is stopped with SIGSTOP for 10 s. Through the edge the throughput stays
// at least half of what it was before, and no request waits more than
// 2 s: the edge ejects the frozen origin (its liveness probes), and the
// other origin's meter writes wait on the frozen one's row locks well
// under a second (pgmeter's session bounds).
func TestPeersFrozenBehindEdge(t *testing.T) {
	db := newPeerDB(t)
	dir := peerCorpus(t, "")
	ps := startPeers(t, db, dir, dir)
	id, secret := ps[0].org(`{"orgId":"acme","contentGrants":["high"]}`, "content.read")
	tok := ps[0].token(id, secret, "content.read")

	_, srv := peerEdge(t, []string{ps[0].OriginURL, ps[1].OriginURL}, ps[0].IdPURL, nil)

	var done, failed atomic.Int64
	var slowest atomic.Int64 // ns
	stop := make(chan struct{})
	var wg sync.WaitGroup
	readLoops(&wg, stop, 8, srv.URL+"/v1/tiers", tok, func(took time.Duration, ok bool) {
		for {
			old := slowest.Load()
			if int64(took) <= old || slowest.CompareAndSwap(old, int64(took)) {
				break
			}
		}
		if ok {
			done.Add(1)
		} else {
			failed.Add(1)
		}
	})
	defer func() { close(stop); ps[0].cmd.Process.Signal(syscall.SIGCONT); wg.Wait() }()

	time.Sleep(time.Second) // warm: tokens verified, connections open
	rate := func(d time.Duration) float64 {
		n0 := done.Load()
		time.Sleep(d)
		return float64(done.Load()-n0) / d.Seconds()
	}
	before := rate(3 * time.Second)
	slowest.Store(0)
	ps[0].cmd.Process.Signal(syscall.SIGSTOP)
	during := rate(10 * time.Second)
	ps[0].cmd.Process.Signal(syscall.SIGCONT)
	worst := time.Duration(slowest.Load())
	t.Logf("through the edge: %.0f req/s before, %.0f with one origin stopped for 10 s (%.2f×); slowest request %s; %d failed",
		before, during, during/before, worst.Round(time.Millisecond), failed.Load())
	if during < before/2 {
		t.Errorf("with one origin stopped the edge served %.0f req/s, under half the %.0f before", during, before)
	}
	if worst > 2*time.Second {
		t.Errorf("a request waited %s with one origin stopped, want at most 2 s", worst)
	}
}
