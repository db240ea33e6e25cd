package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The edge killed (SIGKILL) with leased 304s it had answered and not yet
// reported: the stack restarts it, it reports its usage log to the origin
// as it starts, and the calls billed are exactly the 200s and 304s the
// client received, as they are without leases.
func TestEdgeKilledBillsItsLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: builds and runs the stack")
	}
	e := newEnv(t)
	e.start("-backoff", "50ms")
	tok := e.token()
	first, err := get(http.DefaultClient, e.edgeAddr, tok, "")
	if err != nil || first.StatusCode != 200 || first.Header.Get("ETag") == "" {
		t.Fatalf("first request: %v %v", first, err)
	}
	answered := 1
	_, port, _ := net.SplitHostPort(e.edgeAddr)
	log := filepath.Join(e.dir, "var", "edge-usage-"+port+".log")
	leased := func() int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), "\n")
	}
	// Revalidations until the edge has answered some with a lease: the
	// first is gated and asks for the lease in the background.
	for leased() < 5 {
		resp, err := get(http.DefaultClient, e.edgeAddr, tok, first.Header.Get("ETag"))
		if err != nil || resp.StatusCode != 304 {
			t.Fatalf("revalidation: %v %v", resp, err)
		}
		if answered++; answered > 1000 {
			t.Fatalf("1000 revalidations and no lease: usage log %s holds %d records\n%s", log, leased(), e.output())
		}
	}

	pid := e.pid("edge")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.await(`stack: edge exited \(signal: killed\)`)
	e.await(`edge: usage log replayed`)
	m := admin(t, e.adminAddr, "GET", "/admin/v1/orgs/acme", "")
	calls := m["meters"].(map[string]any)["month"].(map[string]any)["calls"].(float64)
	if int(calls) != answered {
		t.Errorf("calls billed %v, want the %d answers (%d leased 304s in the killed edge's log)", calls, answered, leased())
	}
}
