package wazero

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// Frozen origins (issue #28; docs/edge.md, "Several origins"). An origin
// that stops answering without closing its sockets (SIGSTOP, a hung
// process) still accepts connections: a request sent to it waits, not
// failing, so neither the dial bound nor the backoff notices it. With
// several origins the host therefore asks each, every ProbeEvery, for its
// liveness (GET /healthz, which reads nothing), bounded by ProbeTimeout.
// After ProbeFailures failures in a row the origin is ejected: tried after
// the others until a probe succeeds again, and every attempt waiting on it
// for an answer's head is cancelled, so that a GET or PUT goes on to the
// next origin and a POST (which may have been applied) is answered
// 500 INTERNAL at once. An attempt waits on a frozen origin at most
// EjectionDelay (1 to 1.25 s with the defaults), not the forward timeout.
const (
	DefaultProbeEvery = 250 * time.Millisecond
	ProbeTimeout      = 500 * time.Millisecond
	ProbeFailures     = 2
	// ProbePath is the origin's liveness endpoint: 200 while its process
	// serves, whatever its database does.
	ProbePath = "/healthz"
)

// EjectionDelay bounds the time from an origin's freezing to its
// ejection, probing every every: the first probe after the freeze starts
// within every and fails at its ProbeTimeout; the ticks due meanwhile
// start the next at once, and each fails at its ProbeTimeout too. A
// shorter ProbeTimeout (250 ms: 0.5 to 0.75 s) was rejected: a busy
// origin's /healthz on a loaded host can take that long, and an ejection
// cuts the attempts waiting on it, answering a POST among them 500.
func EjectionDelay(every time.Duration) (lo, hi time.Duration) {
	return ProbeFailures * ProbeTimeout, every + ProbeFailures*max(ProbeTimeout, every)
}

// ejection is an origin's probed state.
type ejection struct {
	mu      sync.Mutex
	failed  int           // probes failed in a row
	ejected bool          // tried last; gone is closed
	gone    chan struct{} // closed when the origin is ejected (newOrigins makes the first)
}

// watch returns a channel closed when or is ejected (now, if it is).
func (or *origin) watch() <-chan struct{} {
	e := &or.probed
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gone
}

// isEjected reports whether the probes found or frozen.
func (or *origin) isEjected() bool {
	e := &or.probed
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ejected
}

// probeResult records one probe of or: ejected after ProbeFailures
// failures in a row, back at the first success.
func (or *origin) probeResult(ok bool) (changed bool) {
	e := &or.probed
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case ok && e.ejected:
		e.failed, e.ejected, e.gone = 0, false, make(chan struct{})
		return true
	case ok:
		e.failed = 0
	case !e.ejected:
		e.failed++
		if e.failed >= ProbeFailures {
			e.ejected = true
			close(e.gone)
			return true
		}
	}
	return false
}

// probe asks every origin for its liveness every every, until ctx ends.
func (o *origins) probe(ctx context.Context, client *http.Client, every time.Duration, log func(msg string, args ...any)) {
	var wg sync.WaitGroup
	for _, or := range o.list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				ok := probeOnce(ctx, client, or.base+ProbePath)
				if ctx.Err() != nil {
					return
				}
				if or.probeResult(ok) {
					o.observer.Ejected(or.base, !ok)
					if ok {
						log("edge: origin answers again; back in the rotation", "origin", or.base)
					} else {
						log("edge: origin does not answer its liveness probe; ejected until it does", "origin", or.base,
							"failures", ProbeFailures, "timeout", ProbeTimeout.String())
					}
				}
			}
		}()
	}
	wg.Wait()
}

// probeOnce is one liveness probe: a 200 within ProbeTimeout.
func probeOnce(ctx context.Context, client *http.Client, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// startProbes starts the origins' liveness probes (probe.go) when there
// are several, as background work that Close stops.
func (h *Host) startProbes() {
	if len(h.origins.list) < 2 || h.cfg.ProbeEvery < 0 {
		return
	}
	every := h.cfg.ProbeEvery
	if every == 0 {
		every = DefaultProbeEvery
	}
	h.bgMu.Lock()
	defer h.bgMu.Unlock()
	if h.bgClosed {
		return
	}
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		h.origins.probe(h.bgCtx, h.cfg.Client, every, h.cfg.Logger.Warn)
	}()
}
