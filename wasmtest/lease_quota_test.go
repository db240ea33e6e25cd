package wasmtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestLeaseQuota: three edge instances (three hosts, leases on) and
// direct calls revalidate concurrently for an organisation with a calls
// quota of L until each is refused: after a flush exactly L calls were
// served (200s and 304s, counted by the clients) and billed (the admin
// API), and every call is then 429 QUOTA_EXCEEDED, through every edge
// and directly (issue 19: the quota is never exceeded, no call is lost,
// no false 429 ends a client early).
func TestLeaseQuota(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startLeaseOrigin(t)
	midHour(t, o)
	const quota = 300
	forEachBuild(t, func(t *testing.T, b *build) {
		org := "lquota-" + b.name
		id, sec := o.org(t, fmt.Sprintf(`{"orgId":%q,"contentGrants":%s,"quota":{"calls":%d}}`, org, allTiers, quota), "content.read")
		tok := o.token(t, id, sec, "content.read")
		var edges []*leaseEdge
		bases := []string{o.api}
		for range 3 {
			e := newLeaseEdge(t, b, o, nil)
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
						case r.status == 429 && r.code() == "QUOTA_EXCEEDED":
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
		if got := billed(t, o, org, edges...); got != quota || served.Load() != quota {
			t.Errorf("quota %d: served %d, billed %d", quota, served.Load(), got)
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
				if r.status != 429 || r.code() != "QUOTA_EXCEEDED" {
					t.Errorf("%s after the quota: %d %.200s", base, r.status, r.body)
				}
			}
		}
		if got := billed(t, o, org, edges...); got != quota {
			t.Errorf("billed %d after the refusals, want %d", got, quota)
		}
	})
}
