package wazero

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// countingObserver counts what the host tells it, by event and label.
type countingObserver struct {
	mu     sync.Mutex
	counts map[string]int
}

func (o *countingObserver) add(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.counts == nil {
		o.counts = map[string]int{}
	}
	o.counts[key]++
}

func (o *countingObserver) get(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[key]
}

func (o *countingObserver) NotModified(by string) { o.add("304 " + by) }
func (o *countingObserver) OriginAttempt(origin, kind string, err error) {
	result := "answered"
	if err != nil {
		result = "failed"
	}
	o.add("attempt " + kind + " " + result)
}
func (o *countingObserver) Failover(origin string) { o.add("failover") }
func (o *countingObserver) Ejected(origin string, ejected bool) {
	if ejected {
		o.add("ejected")
	} else {
		o.add("back")
	}
}
func (o *countingObserver) LeaseRequest(result string) { o.add("lease " + result) }
func (o *countingObserver) UsageReport(result string)  { o.add("usage " + result) }

// TestObserverLeases: the Observer hears of the gated 304, the lease
// granted, the leased 304s, the usage report the flush sent, and each
// attempt at the origin by kind; the pool is idle between requests.
func TestObserverLeases(t *testing.T) {
	o := newLeaseOrigin(t, 8)
	obs := &countingObserver{}
	h, base := leasedHost(t, o.url, func(c *Config) {
		leaseHostConfig(o, filepath.Join(t.TempDir(), "usage.log"))(c)
		c.Observer = obs
	})
	c := newLeaseClient(t, base)
	c.revalidate()
	waitFor(func() bool { return h.Stats().Backgrounds >= 1 })
	c.revalidate()
	c.revalidate()
	if err := h.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"304 gate": 1, "304 lease": 2, "lease granted": 1, "usage accepted": 1,
		"attempt forward answered": 1, "attempt gate answered": 1, "attempt lease answered": 1, "attempt usage answered": 1,
		"attempt other answered": 1, // the JWKS, on the scripted origin
	}
	obs.mu.Lock()
	got := obs.counts
	obs.mu.Unlock()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("observed (-want +got):\n%s", d)
	}
	if p := h.Pool(); p != (Pool{Instances: 2, Busy: 0}) {
		t.Errorf("pool between requests %+v, want 2 instances, none busy", p)
	}
}

// TestObserverEjections: with two origins, one whose liveness probe
// fails is ejected (once), and back in the rotation when it answers again.
func TestObserverEjections(t *testing.T) {
	var mu sync.Mutex
	down := true
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(flaky.Close)
	good := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(good.Close)
	obs := &countingObserver{}
	h, err := newHost(Config{Origins: []string{flaky.URL, good.URL}, ProbeEvery: 10 * time.Millisecond, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	h.startProbes()
	t.Cleanup(func() { h.bgCancel(); h.bg.Wait() })
	waitFor(func() bool { return obs.get("ejected") == 1 })
	time.Sleep(50 * time.Millisecond) // more failed probes: still one ejection
	mu.Lock()
	down = false
	mu.Unlock()
	waitFor(func() bool { return obs.get("back") == 1 })
	if n := obs.get("ejected"); n != 1 {
		t.Errorf("%d ejections, want 1", n)
	}
}
