package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"runtime/trace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// target is the load of one throughput scenario: GET url with per-client
// headers, every answer expected to have status want.
type target struct {
	id, name string
	url      string
	header   func(client int) http.Header
	method   string // GET when empty
	body     string // the body of every request, when method is set
	// bodyOf, when set, is the body of each request of client c instead.
	bodyOf func(client int) string
	want   int
	also   []int // statuses accepted besides want, counted in result.also
	// next, when set, is the URL of each request instead of url (called
	// by every client's goroutine: one client's, for the scale rows).
	next func() string
	// prime, when set, runs once per client before the warm-up (the edge
	// needs one forwarded response per instance before it can gate 304s).
	prime func(ctx context.Context, client int) error

	transport *http.Transport
	runs      []result
}

// result is one measured run.
type result struct {
	requests int64
	elapsed  time.Duration
	bytes    int64           // body bytes read, as sent (compressed when gzip)
	mallocs  uint64          // heap allocations of the whole process during the run
	lat      []time.Duration // client-side latency of every request, when kept
	also     int64           // requests answered with a status of target.also
}

func (r result) rate() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// newTransport is a keep-alive pool for n clients that leaves bodies as
// the server sent them (no transparent decompression).
func newTransport(n int) *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        n + 4,
		MaxIdleConnsPerHost: n + 4,
		IdleConnTimeout:     2 * time.Minute,
		DisableCompression:  true,
	}
}

// measure runs clients concurrent keep-alive clients against t for dur.
func (t *target) measure(ctx context.Context, clients int, dur time.Duration, keepLat bool) (result, error) {
	if t.transport == nil {
		t.transport = newTransport(clients)
	}
	hc := &http.Client{Transport: t.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var (
		done, bytes atomic.Int64
		also        atomic.Int64
		mu          sync.Mutex
		lats        [][]time.Duration
		firstErr    error
		once        sync.Once
		wg          sync.WaitGroup
	)
	fail := func(err error) { once.Do(func() { firstErr = err }) }
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	deadline := start.Add(dur)
	for c := range clients {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, cmp.Or(t.method, "GET"), t.url, nil)
			if err != nil {
				fail(err)
				return
			}
			req.Header = t.header(c)
			var lat []time.Duration
			if keepLat {
				lat = make([]time.Duration, 0, 4096)
			}
			for n := 0; ; n++ {
				t0 := time.Now()
				if !t0.Before(deadline) || ctx.Err() != nil {
					break
				}
				if t.next != nil {
					u, err := url.Parse(t.next())
					if err != nil {
						fail(err)
						return
					}
					req.URL, req.Host = u, u.Host
				}
				if t.method != "" {
					b := t.body
					if t.bodyOf != nil {
						b = t.bodyOf(c)
					}
					req.Body, req.ContentLength = io.NopCloser(strings.NewReader(b)), int64(len(b))
				}
				var region *trace.Region // each request, in a -trace
				if trace.IsEnabled() {
					region = trace.StartRegion(ctx, "request")
				}
				resp, err := hc.Do(req)
				if err != nil {
					fail(err)
					return
				}
				nb, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(t0)
				if region != nil {
					region.End()
				}
				if err != nil {
					fail(err)
					return
				}
				if slices.Contains(t.also, resp.StatusCode) {
					also.Add(1)
				} else if resp.StatusCode != t.want {
					fail(fmt.Errorf("%s %s: status %d, want %d (after %d requests of this client)", req.Method, t.url, resp.StatusCode, t.want, n))
					return
				}
				done.Add(1)
				bytes.Add(nb)
				if keepLat {
					lat = append(lat, d)
				}
			}
			mu.Lock()
			lats = append(lats, lat)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	if firstErr != nil {
		return result{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	r := result{requests: done.Load(), elapsed: elapsed, bytes: bytes.Load(), mallocs: m1.Mallocs - m0.Mallocs, also: also.Load()}
	if keepLat {
		r.lat = slices.Concat(lats...)
	}
	if r.requests == 0 {
		return r, fmt.Errorf("GET %s: no request completed in %v", t.url, dur)
	}
	return r, nil
}

// median is the run of median rate, and every run's rate in run order.
func (t *target) median() (result, []float64) {
	rates := make([]float64, len(t.runs))
	for i, r := range t.runs {
		rates[i] = r.rate()
	}
	sorted := slices.Clone(t.runs)
	slices.SortFunc(sorted, func(a, b result) int {
		switch ra, rb := a.rate(), b.rate(); {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return 0
	})
	return sorted[len(sorted)/2], rates
}

// perRequest is the mean body size and process allocations per request
// over every run.
func (t *target) perRequest() (bytes, mallocs float64) {
	var n, b int64
	var m uint64
	for _, r := range t.runs {
		n += r.requests
		b += r.bytes
		m += r.mallocs
	}
	return float64(b) / float64(n), float64(m) / float64(n)
}

// percentile returns the p-th percentile (0 < p < 100) of lat, sorting it.
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	i := int(float64(len(lat))*p/100+0.5) - 1
	return lat[max(0, min(i, len(lat)-1))]
}
