package wasmtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lectern-api/lectern/worker/wazero"
)

const mib = 1 << 20

// TestSoak: 100,000 requests through ONE module instance, most answered
// at the edge from a cached token (401, 404, 400, 403), some forwarded and
// some revalidated through the gate. The guest's memory must stay bounded
// and stop growing: a leak per request or per handle would show here long
// before it showed in production.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: 100,000 requests per build")
	}
	forDeployedBuild(t, func(t *testing.T, b *build) {
		o := shared(t)
		f := newFixture(t, o, "soak-"+b.name)
		e := newEdge(t, b, o, func(c *wazero.Config) { c.Instances = 1 })
		full, narrow := "Bearer "+f.tokens["content"], "Bearer "+f.tokens["narrow"]
		first := do(t, e.url, "GET", "/v1/tiers", "", "Authorization", full)
		tag := first.header.Get("ETag")
		if first.status != 200 || tag == "" {
			t.Fatalf("GET /v1/tiers: %d %q", first.status, tag)
		}
		type req struct {
			target string
			hdr    []string
			status int
		}
		mix := func(i int) req {
			switch k := i % 100; {
			case k == 0:
				return req{"/v1/tiers", []string{"Authorization", full}, 200}
			case k == 1:
				return req{"/v1/tiers", []string{"Authorization", full, "If-None-Match", tag}, 304}
			case k < 30:
				return req{fmt.Sprintf("/v1/tiers?bogus=%d", i), []string{"Authorization", full}, 400}
			case k < 50:
				return req{fmt.Sprintf("/v1/teachers/%d", i), []string{"Authorization", full}, 404}
			case k < 70:
				return req{"/v1/tiers", nil, 401}
			default:
				return req{"/v1/tiers", []string{"Authorization", narrow}, 403}
			}
		}
		const total, workers = 100_000, 8
		mem := func() uint64 { return e.host.Memory()[0] }
		var next atomic.Int64
		var wrong atomic.Int64
		samples := make([]uint64, 11) // memory at each tenth
		samples[0] = mem()
		var sampleMu sync.Mutex
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= total {
						return
					}
					r := mix(i)
					a := do(t, e.url, "GET", r.target, "", r.hdr...)
					if a.status != r.status && wrong.Add(1) <= 5 {
						t.Errorf("request %d GET %s: %d, want %d: %.200s", i, r.target, a.status, r.status, a.body)
					}
					if (i+1)%(total/10) == 0 {
						sampleMu.Lock()
						samples[(i+1)/(total/10)] = mem()
						sampleMu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		samples[10] = mem()
		st := e.host.Stats()
		line := ""
		for i, s := range samples {
			line += fmt.Sprintf(" %d%%:%.1f", i*10, float64(s)/mib)
		}
		t.Logf("%s: guest memory (MiB) %s; %d requests, %d forwards, %d gate/JWKS subrequests, %d wrong",
			b.name, line, st.Requests, st.Forwards, st.Subrequests, wrong.Load())
		start, half, end := samples[0], samples[5], samples[10]
		t.Logf("%s: memory at start %.1f MiB (%d pages), end %.1f MiB (%d pages)", b.name,
			float64(start)/mib, start/65536, float64(end)/mib, end/65536)
		if end >= 64*mib {
			t.Errorf("guest memory %.1f MiB, want under 64 MiB", float64(end)/mib)
		}
		if end > half+mib {
			t.Errorf("guest memory grew in the second half: %.1f MiB at 50%%, %.1f MiB at the end", float64(half)/mib, float64(end)/mib)
		}
		if st.Failures != 0 {
			t.Errorf("the host failed %d requests", st.Failures)
		}
	})
}
