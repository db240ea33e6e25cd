package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"

	"github.com/lectern-api/lectern/shared/edgesig"
)

// replayGate stands in for the origin in reference (a3): it sends the
// first gate call to the origin and answers every later one with the
// origin's 204 as it recorded it, from a bare handler that reads and
// meters nothing. Every other request (the edge's priming forwards) goes
// to the origin. So (a3) is the edge's own share of (f): the module, the
// host and the two hops, with the origin's share taken out.
type replayGate struct {
	origin string
	proxy  *httputil.ReverseProxy
	client *http.Client

	mu     sync.Mutex
	header http.Header // the recorded 204's; nil until one is recorded
}

func newReplayGate(origin string) (*replayGate, error) {
	u, err := url.Parse(origin)
	if err != nil {
		return nil, err
	}
	return &replayGate{origin: origin, proxy: httputil.NewSingleHostReverseProxy(u),
		client: &http.Client{Transport: newTransport(1)}}, nil
}

func (g *replayGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != edgesig.GatePath {
		g.proxy.ServeHTTP(w, r)
		return
	}
	io.Copy(io.Discard, r.Body)
	g.mu.Lock()
	header := g.header
	g.mu.Unlock()
	if header == nil {
		var err error
		if header, err = g.record(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
	}
	wh := w.Header()
	for name, vs := range header {
		wh[name] = vs
	}
	w.WriteHeader(http.StatusNoContent)
}

// record sends r to the origin's gate and keeps its answer, which must
// be a 204.
func (g *replayGate) record(r *http.Request) (http.Header, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, g.origin+r.URL.RequestURI(), http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	req.Host = r.Host // the edge signed the call for this host (docs/edge.md, The signature rule)
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return nil, fmt.Errorf("replay gate: the origin's gate answered %d, want 204", resp.StatusCode)
	}
	h := resp.Header.Clone()
	delete(h, "Date") // the server sets its own
	g.mu.Lock()
	g.header = h
	g.mu.Unlock()
	return h, nil
}
