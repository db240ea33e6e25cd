package wazero

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/shared/edgesig"
)

// The subrequests the module asks for: sent to the origins (origins.go),
// bounded by the forward's stall timer, their answers handed back.

// maxSubrequestBody bounds the JWKS and gate bodies handed to the guest
// (a larger one is a failed subrequest, status 0); the guest refuses more.
const maxSubrequestBody = 256 << 10

// subrequest performs what the guest asked for, within ctx (a client
// request's context; r is that request, nil for a background refresh).
// For a forward it returns the origin's response too, its body unread: it
// streams to the client on passthrough and never enters the guest.
//
// A URL under the origin base goes to one of the origins (origins.go),
// with the X-Lectern-Edge signed for that origin (the module's
// Signatures, or the host's own sign): when an attempt fails without an
// answer, the next origin is tried if the module's mark allows it
// (out.Retry): always when it is "any" (the client's body, read before
// the module saw the request, is sent again), and when the attempt cannot
// have been sent (it got no connection) whatever the mark; never after the
// forward timeout or the client going away. Otherwise the guest gets the
// failure (status 0), as with one origin.
func (h *Host) subrequest(parent context.Context, r *http.Request, out *Output) (ResumeMessage, *http.Response) {
	failed := func(err error) (ResumeMessage, *http.Response) {
		return ResumeMessage{Status: 0, Error: err.Error()}, nil
	}
	var ctx context.Context
	var cancel context.CancelFunc
	var st *stall // nil (doing nothing) but for a forward
	if out.Forward {
		ctx, cancel = context.WithCancel(parent)
		st = newStall(h.cfg.ForwardTimeout, cancel)
	} else {
		ctx, cancel = context.WithTimeout(parent, h.cfg.SubrequestTimeout)
	}
	targets := h.origins.route(out.URL)
	var resp *http.Response
	for i, t := range targets {
		req, connected, watched, err := attempt(ctx, r, out, t, len(targets) > 1)
		if err != nil {
			cancel()
			return failed(err)
		}
		st.set(func() { st.head = true })
		resp, err = h.cfg.Client.Do(req)
		st.set(func() { st.head = false })
		if t.origin != nil {
			h.observer.OriginAttempt(t.origin.base, subrequestKind(out), err)
		}
		if watched != nil {
			close(watched)
		}
		if err == nil && resp.StatusCode == http.StatusServiceUnavailable && out.Forward && out.Retry == retryAny &&
			i+1 < len(targets) && ctx.Err() == nil {
			// The origin could not serve it now (a bundle store without
			// room, docs/operations.md): nothing was applied, so an
			// idempotent request goes on to the next origin, as a load
			// balancer retries a 503.
			resp.Body.Close()
			h.stats.failovers.Add(1)
			if t.origin != nil {
				h.observer.Failover(t.origin.base)
			}
			h.cfg.Logger.Warn("edge: origin answered 503; trying the next", "url", t.url, "requestId", req.Header.Get("X-Request-Id"))
			continue
		}
		if err == nil {
			break
		}
		// An attempt that got no connection sent nothing: its dial failed,
		// or our own timers (the forward timeout, the subrequest bound)
		// cut it, which is as much the origin's failure; the client's
		// leaving is not.
		unsent := connected != nil && !connected.Load()
		if unsent && parent.Err() == nil {
			h.origins.failed(t.origin)
		}
		if i+1 < len(targets) && ctx.Err() == nil && (unsent || out.Retry == retryAny) {
			h.stats.failovers.Add(1)
			if t.origin != nil {
				h.observer.Failover(t.origin.base)
			}
			h.cfg.Logger.Warn("edge: origin failed; trying the next", "url", t.url, "err", err)
			continue
		}
		cancel()
		switch {
		case st.stalled():
			h.cfg.Logger.Warn("edge: the origin did not answer a forward in time", "url", t.url, "timeout", h.cfg.ForwardTimeout,
				"requestId", req.Header.Get("X-Request-Id"))
		case parent.Err() == nil:
			// The module answers the client 500 INTERNAL ("could not be
			// reached"): its cause is logged here, once.
			h.cfg.Logger.Warn("edge: origin unreachable", "url", t.url, "requestId", req.Header.Get("X-Request-Id"), "err", err)
		}
		return failed(err)
	}
	msg := ResumeMessage{Status: resp.StatusCode, Headers: pairs(resp.Header)}
	if out.Forward {
		resp.Body = &originBody{resp.Body, st, cancel}
		return msg, resp
	}
	defer cancel()
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSubrequestBody+1))
	if err == nil && len(b) > maxSubrequestBody {
		err = fmt.Errorf("%s %s: body over %d bytes", out.Method, out.URL, maxSubrequestBody)
	}
	if err != nil {
		return failed(err)
	}
	s := string(b)
	msg.Body = &s
	return msg, nil
}

// attempt is the request of out to the target t, under ctx, with its
// body, header fields, signature for t's origin and, on a call the
// module built itself, the client's traceparent (r's; nil: none). With
// several origins (several), connected says whether it got a connection,
// and an origin the probes eject while it waits for the answer cuts it
// short (probe.go), so that it goes on to the next origin if it may:
// watched is to be closed once the answer's head is in or it failed.
func attempt(ctx context.Context, r *http.Request, out *Output, t target, several bool) (req *http.Request, connected *atomic.Bool, watched chan struct{}, err error) {
	var rd io.Reader
	switch {
	case out.Forward && out.body != nil:
		rd = bytes.NewReader(out.body)
	case !out.Forward && out.Body != "":
		rd = strings.NewReader(out.Body) // a background POST's (lease, usage)
	}
	if several {
		ctx, connected = traceConnection(ctx)
		if t.origin != nil && !t.origin.isEjected() {
			var stop context.CancelFunc
			ctx, stop = context.WithCancel(ctx)
			watched = make(chan struct{})
			go func(gone <-chan struct{}) {
				select {
				case <-gone:
					stop()
				case <-watched:
				}
			}(t.origin.watch())
		}
	}
	if req, err = http.NewRequestWithContext(ctx, out.Method, t.url, rd); err != nil {
		if watched != nil {
			close(watched)
		}
		return nil, nil, nil, err
	}
	if out.Forward {
		req.ContentLength = int64(len(out.body))
	}
	out.SetHeader(req)
	if or := t.origin; or != nil {
		switch {
		case or.index < len(out.Signatures):
			req.Header.Set(edgesig.Header, out.Signatures[or.index])
		case out.sign != nil:
			req.Header.Set(edgesig.Header, out.sign(or.host))
		}
	}
	if r != nil && !out.Forward && req.Header.Get("Traceparent") == "" {
		// The module copies the client's fields to a forward, the W3C
		// traceparent among them, but builds a gate call's (and a JWKS
		// fetch's) itself: the host hands the trace on to them.
		if tp := r.Header.Get("Traceparent"); tp != "" {
			req.Header.Set("Traceparent", tp)
		}
	}
	return req, connected, watched, nil
}

// stall cancels a forward when the origin makes no progress for d. Its
// timer runs while the host waits on the origin: for the answer's head
// (but not while the client's body is being read: the server's read
// limit bounds the client), and in each read of the answer's body (but
// not while the answer is written to the client: the server's write
// limit bounds that). Every change of state starts it afresh. A nil
// stall does nothing.
type stall struct {
	mu    sync.Mutex
	d     time.Duration
	t     *time.Timer
	fired bool
	head  bool // waiting for the answer's head
	body  bool // reading the answer's body
}

func newStall(d time.Duration, cancel context.CancelFunc) *stall {
	s := &stall{d: d}
	s.t = time.AfterFunc(time.Hour, func() {
		s.mu.Lock()
		s.fired = true
		s.mu.Unlock()
		cancel()
	})
	s.t.Stop()
	return s
}

// set changes the state under the lock and runs or stops the timer.
func (s *stall) set(change func()) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	change()
	if s.head || s.body {
		s.t.Reset(s.d)
	} else {
		s.t.Stop()
	}
}

func (s *stall) stalled() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}

// originBody is the origin's answer to a forward, on its way to the
// client.
type originBody struct {
	io.ReadCloser
	st     *stall
	cancel context.CancelFunc
}

func (b *originBody) Read(p []byte) (int, error) {
	b.st.set(func() { b.st.body = true })
	n, err := b.ReadCloser.Read(p)
	b.st.set(func() { b.st.body = false })
	return n, err
}

func (b *originBody) Close() error {
	err := b.ReadCloser.Close()
	b.st.set(func() { b.st.head, b.st.body = false, false })
	b.cancel()
	return err
}

// pairs lists a header as [name, value] pairs, Content-Length included.
func pairs(h http.Header) [][2]string {
	out := make([][2]string, 0, len(h))
	for name, vs := range h {
		for _, v := range vs {
			out = append(out, [2]string{name, v})
		}
	}
	return out
}
