package wasmtest

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestLeaseFrozenEdge (issue #33, point 3): the edge (worker/cmd/edge, a
// child process) holds a lease and is stopped with SIGSTOP for two lease
// TTLs while the organisation is changed again and again through the
// admin API. A lease is over at its validity's end whether or not its
// edge answers: each change waits at most the TTL + 1 s, and the changes
// made once the lease expired wait for nothing; the admin reading answers
// within its 250 ms settle bound throughout. Resumed and stopped, the
// edge reports what it answered: billed equals served.
func TestLeaseFrozenEdge(t *testing.T) {
	forDeployedBuild(t, func(t *testing.T, b *build) {
		o := startLeaseOrigin(t)
		org := "lfrozen-" + b.name
		id, sec := o.org(t, `{"orgId":"`+org+`","contentGrants":`+allTiers+`}`, "content.read")
		tok := o.token(t, id, sec, "content.read")
		e := startEdgeProc(t, b, o, "127.0.0.1:0", filepath.Join(t.TempDir(), "usage.log"))
		first := do(t, e.url, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok)
		tag := first.header.Get("ETag")
		if first.status != 200 || tag == "" {
			t.Fatalf("GET /v1/tiers: %d", first.status)
		}
		served := 1
		for range 20 { // the lease comes in the background; then 304s on it
			if r := do(t, e.url, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok, "If-None-Match", tag); r.status != 304 {
				t.Fatalf("revalidation: %d %.200s", r.status, r.body)
			}
			served++
			time.Sleep(20 * time.Millisecond)
		}

		const ttl = 5 * time.Second // the origin's default lease TTL
		e.cmd.Process.Signal(syscall.SIGSTOP)
		frozen := time.Now()
		var slowestPatch, slowestLate, slowestRead time.Duration
		patches := 0
		for n := 0; time.Since(frozen) < 2*ttl; n++ {
			began := time.Now()
			if code, m := o.adminCall(t, "PATCH", "/admin/v1/orgs/"+org, fmt.Sprintf(`{"orgName":"Frozen %d"}`, n)); code != 200 {
				e.cmd.Process.Signal(syscall.SIGCONT)
				t.Fatalf("PATCH %d: %d %v", n, code, m)
			}
			took := time.Since(began)
			patches++
			slowestPatch = max(slowestPatch, took)
			if began.Sub(frozen) > ttl+time.Second {
				slowestLate = max(slowestLate, took)
			}
			began = time.Now()
			if code, _ := o.adminCall(t, "GET", "/admin/v1/orgs/"+org, ""); code != 200 {
				t.Errorf("GET org: %d", code)
			}
			slowestRead = max(slowestRead, time.Since(began))
		}
		e.cmd.Process.Signal(syscall.SIGCONT)
		t.Logf("edge frozen %s: %d PATCHes, the slowest %s, %s once the lease had expired; the slowest GET of the org %s",
			(2 * ttl).String(), patches, slowestPatch.Round(time.Millisecond), slowestLate.Round(time.Millisecond), slowestRead.Round(time.Millisecond))
		// Bounds with room for a loaded machine, still far below what a
		// change cost before (a 2 s push and a 2 s settle, every time).
		if slowestPatch > ttl+time.Second+time.Second {
			t.Errorf("a PATCH took %s with the edge frozen, want at most the TTL + 1 s (%s)", slowestPatch, ttl+time.Second)
		}
		if slowestLate > time.Second {
			t.Errorf("a PATCH made after the lease expired took %s, want well under a second", slowestLate)
		}
		if slowestRead > 750*time.Millisecond {
			t.Errorf("a GET of the org took %s with the edge frozen, want about its 250 ms settle bound", slowestRead)
		}
		e.cmd.Process.Signal(syscall.SIGTERM)
		if err := e.cmd.Wait(); err != nil {
			t.Errorf("the edge stopped with %v", err)
		}
		if got := o.calls(t, org); got != served {
			t.Errorf("billed %d, served %d", got, served)
		}
	})
}
