package wasmtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lectern-api/lectern/worker/wazero"
)

// TestLeaseQuota: three edge instances (three hosts, leases on) and
// direct calls revalidate concurrently for an organisation with a calls
// quota of L until each is refused: after a flush exactly L calls were
// served (200s and 304s, counted by the clients) and billed (the admin
// API), and every call is then 429 QUOTA_EXCEEDED, through every edge
// and directly (issue 19: the quota is never exceeded, no call is lost,
// no false 429 ends a client early).
func TestLeaseQuota(t *testing.T) {
	leaseLimit(t, "lquota", `"quota":{"calls":%d}`, "QUOTA_EXCEEDED", false, true)
}

// TestLeaseQuotaNoPush is TestLeaseQuota with edges the origin cannot
// push to (revoke URL "", as on Cloudflare): a call refused only for
// their reservations waits for their leases to end, and is then served.
func TestLeaseQuotaNoPush(t *testing.T) {
	leaseLimit(t, "lnopush", `"quota":{"calls":%d}`, "QUOTA_EXCEEDED", false, false)
}

// TestLeaseHourlyCap is TestLeaseQuota with an hourly calls cap: exactly
// the cap served and billed in the hour, then 429 RATE_LIMITED.
func TestLeaseHourlyCap(t *testing.T) {
	leaseLimit(t, "lcap", `"rateLimits":{"callsPerHour":%d}`, "RATE_LIMITED", true, true)
}

// leaseLimit drives three edges and direct calls against an
// organisation with limit (a JSON member, %d the number) until refused
// with code, and checks what was served and billed (the hour's meter
// when hour); push says whether the edges take the origin's pushes.
func leaseLimit(t *testing.T, name, limit, code string, hour, push bool) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startLeaseOrigin(t)
	midHour(t, o)
	const quota = 300
	forDeployedBuild(t, func(t *testing.T, b *build) {
		org := name + "-" + b.name
		id, sec := o.org(t, fmt.Sprintf(`{"orgId":%q,"contentGrants":%s,`+limit+`}`, org, allTiers, quota), "content.read")
		tok := o.token(t, id, sec, "content.read")
		var edges []*leaseEdge
		bases := []string{o.api}
		for range 3 {
			e := newLeaseEdge(t, b, o, func(c *wazero.Config) {
				if !push {
					c.Revoke = ""
				}
			})
			edges = append(edges, e)
			bases = append(bases, e.url)
		}
		target := "/v1/tiers"
		var served, refused atomic.Int64
		var known atomic.Value // the ETag the clients revalidate with
		var wg sync.WaitGroup
		for i, base := range bases {
			for c := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tag := ""
					for n := 0; ; n++ {
						hdr := []string{"Authorization", "Bearer " + tok, "X-Request-Id", fmt.Sprintf("lquota-%s-%d-%d-%05d", b.name, i, c, n)}
						if tag != "" {
							hdr = append(hdr, "If-None-Match", tag)
						}
						r, err := send(base, "GET", target, hdr...)
						switch {
						case err != nil:
							t.Errorf("%s: %v", base, err)
							return
						case r.status == 200:
							tag = r.header.Get("ETag")
							known.Store(tag)
							served.Add(1)
						case r.status == 304:
							served.Add(1)
						case r.status == 429 && r.code() == code:
							refused.Add(1)
							return
						default:
							t.Errorf("%s: %d %.300s", base, r.status, r.body)
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		billed := func() int64 {
			month, hourly := usedCalls(t, o, org, edges...)
			if hour {
				return hourly
			}
			return month
		}
		// A call refused at the hourly cap is billed (spec: Limits), one
		// refused by the quota is not.
		refusedBilled := func() int64 {
			if hour {
				return refused.Load()
			}
			return 0
		}
		if got := billed(); got != quota+refusedBilled() || served.Load() != quota {
			t.Errorf("limit %d: served %d, billed %d, refused %d", quota, served.Load(), got, refused.Load())
		}
		leased := int64(0)
		for _, e := range edges {
			st := e.host.Stats()
			leased += st.Requests - st.Forwards - e.probe.gates.Load()
		}
		t.Logf("served %d, %d clients refused; about %d answered on leases", served.Load(), refused.Load(), leased)
		tag, _ := known.Load().(string)
		for _, base := range bases {
			for _, hdr := range [][]string{nil, {"If-None-Match", tag}, {"If-None-Match", `W/"0000000000000000"`}} {
				r := do(t, base, "GET", target, "", append([]string{"Authorization", "Bearer " + tok}, hdr...)...)
				if r.status != 429 || r.code() != code {
					t.Errorf("%s after the limit: %d %.200s", base, r.status, r.body)
				}
				refused.Add(1)
			}
		}
		if got := billed(); got != quota+refusedBilled() {
			t.Errorf("billed %d after %d refusals, want %d", got, refused.Load(), quota+refusedBilled())
		}
	})
}
