package wasmtest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/worker/wazero"
)

// TestModuleCPU: with Config.ThreadCPU set, the host adds up the clock's
// advance over each module call (what tools/bench reports as module CPU
// under load), or over one call in Config.ThreadCPUEvery, scaled; without
// it, it counts nothing.
func TestModuleCPU(t *testing.T) {
	forEachBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		var reads atomic.Int64 // a clock that advances 1 µs on each reading
		clock := func() time.Duration { return time.Duration(reads.Add(1)) * time.Microsecond }
		e := newEdge(t, b, o, func(c *wazero.Config) { c.ThreadCPU = clock })
		before := e.host.Stats()
		// An unknown route is answered by the module in one call.
		if r := do(t, e.url, "GET", "/v1/nope", ""); r.status != 404 {
			t.Fatalf("GET /v1/nope: %d", r.status)
		}
		if got := e.host.Stats().ModuleCPU - before.ModuleCPU; got != time.Microsecond {
			t.Errorf("one module call counted %v, want 1µs (two readings, 1 µs apart)", got)
		}
		// Sampled: one call in 3 is clocked and counted three times
		// (configure was the instance's first call).
		sampled := newEdge(t, b, o, func(c *wazero.Config) { c.ThreadCPU, c.ThreadCPUEvery, c.Instances = clock, 3, 1 })
		before = sampled.host.Stats()
		for i := range 7 {
			do(t, sampled.url, "GET", "/v1/nope", "")
			want := time.Duration((i+2)/3*3) * time.Microsecond
			if got := sampled.host.Stats().ModuleCPU - before.ModuleCPU; got != want {
				t.Fatalf("after %d requests, one call in 3 clocked: ModuleCPU %v, want %v", i+1, got, want)
			}
		}
		plain := newEdge(t, b, o, nil)
		do(t, plain.url, "GET", "/v1/nope", "")
		if got := plain.host.Stats().ModuleCPU; got != 0 {
			t.Errorf("without ThreadCPU: ModuleCPU %v", got)
		}
	})
}
