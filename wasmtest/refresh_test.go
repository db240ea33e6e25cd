package wasmtest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/worker/wazero"
)

// jwksGate stands in front of the identity provider's JWKS: it passes
// fetches through, or, once hang is called, holds each one until release
// (or until the fetch is cancelled), recording what happened.
type jwksGate struct {
	upstream string
	fetches  atomic.Int64

	mu       sync.Mutex
	hanging  chan struct{} // closed by release; nil when passing through
	entered  chan struct{} // one send per fetch that hangs
	returned atomic.Bool   // a hung fetch has returned
	aborted  chan struct{} // one send per hung fetch the host cancelled
}

func newJWKSGate(upstream string) *jwksGate {
	return &jwksGate{upstream: upstream, entered: make(chan struct{}, 8), aborted: make(chan struct{}, 8)}
}

func (g *jwksGate) hang() {
	g.mu.Lock()
	g.hanging = make(chan struct{})
	g.returned.Store(false)
	g.mu.Unlock()
}

func (g *jwksGate) release() {
	g.mu.Lock()
	if g.hanging != nil {
		close(g.hanging)
		g.hanging = nil
	}
	g.mu.Unlock()
}

func (g *jwksGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.fetches.Add(1)
	g.mu.Lock()
	hanging := g.hanging
	g.mu.Unlock()
	if hanging != nil {
		g.entered <- struct{}{}
		defer g.returned.Store(true)
		select {
		case <-hanging:
		case <-r.Context().Done():
			g.aborted <- struct{}{}
			return
		}
	}
	resp, err := http.Get(g.upstream)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// TestStaleJWKSServedWhileRefreshing (issue #13, point 5): once the
// edge's JWKS is stale (older than token.DefaultMaxAge), a request whose
// token's kid is in it is answered at once while the set is refreshed in
// the background, even when the identity provider hangs: the answer comes
// while the JWKS fetch is still held. Released, the host delivers the
// refresh to the module, whose set is then fresh (no further fetch). A
// refresh still hanging when the host closes is cancelled by Close.
func TestStaleJWKSServedWhileRefreshing(t *testing.T) {
	if setupErr != nil {
		t.Fatal(setupErr)
	}
	o := startOrigin(t)
	forEachBuild(t, func(t *testing.T, b *build) {
		g := newJWKSGate(o.idp + "/.well-known/jwks.json")
		srv := httptest.NewServer(g)
		defer srv.Close()
		defer g.release()
		e := newEdge(t, b, o, func(c *wazero.Config) {
			c.JWKSURL = srv.URL
			c.Instances = 1 // one JWKS cache
		})
		id, sec := o.org(t, `{"orgId":"swr-`+b.name+`","contentGrants":`+allTiers+`}`, "content.read")
		tier := func(tok string) answer { return do(t, e.url, "GET", "/v1/tiers", "", "Authorization", "Bearer "+tok) }
		if a := tier(o.token(t, id, sec, "content.read")); a.status != 200 || g.fetches.Load() != 1 {
			t.Fatalf("first request: %d %s after %d JWKS fetches, want 200 after 1", a.status, a.body, g.fetches.Load())
		}

		o.advance(t, 3600+60) // past token.DefaultMaxAge: the set is stale
		g.hang()
		tok := o.token(t, id, sec, "content.read") // a new token: not in the verified-token cache
		answered := make(chan answer, 1)
		go func() { answered <- tier(tok) }()
		select {
		case <-g.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the stale set was not refreshed")
		}
		var a answer
		select {
		case a = <-answered:
		case <-time.After(30 * time.Second): // a deadlock guard: the old edge waits here for the fetch
			g.release()
			a = <-answered
		}
		if g.returned.Load() {
			t.Fatalf("the request was answered (%d) only after the JWKS fetch ended: it waited for the identity provider", a.status)
		}
		if a.status != 200 {
			t.Fatalf("stale set: got %d %s, want 200", a.status, a.body)
		}

		g.release()
		deadline := time.Now().Add(30 * time.Second)
		for e.host.Stats().Refreshes != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("the host did not deliver the refresh (stats %+v)", e.host.Stats())
			}
			time.Sleep(10 * time.Millisecond)
		}
		// Past the rate limit, well within the max age of the refreshed
		// set: no fetch.
		o.advance(t, 60)
		if a := tier(o.token(t, id, sec, "content.read")); a.status != 200 || g.fetches.Load() != 2 {
			t.Fatalf("after the refresh: %d %s after %d JWKS fetches, want 200 after 2", a.status, a.body, g.fetches.Load())
		}

		// Stale again, the provider hangs, and the host closes: Close
		// cancels the refresh and waits for it.
		o.advance(t, 3600+60)
		g.hang()
		if a := tier(o.token(t, id, sec, "content.read")); a.status != 200 {
			t.Fatalf("stale set again: got %d %s", a.status, a.body)
		}
		<-g.entered
		e.host.Close(context.Background())
		// Close returned after the refresh ended: the guest took its
		// (failed) answer before the instance closed.
		if n := e.host.Stats().Refreshes; n != 2 {
			t.Errorf("Close returned with %d refreshes delivered, want 2", n)
		}
		select {
		case <-g.aborted:
		case <-time.After(30 * time.Second):
			t.Error("Close did not cancel the hung JWKS fetch")
		}
	})
}
