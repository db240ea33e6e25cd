// Package wazerotest is for tests of the edge host (worker/wazero) and of
// what runs it (worker/cmd/edge, wasmtest): the module built once per test
// binary, a host served on a real listener, the edge command's address
// read from its printout, and a transport that counts the host's
// subrequests to the origin.
//
// It does not import worker/wazero, so that the host's own tests can use
// it: a host is served as a Host, and the module is built by
// worker/wasmbuild.
package wazerotest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/worker/wasmbuild"
)

// ModulePackage is the edge's WebAssembly module.
const ModulePackage = "github.com/lectern-api/lectern/worker/wasm"

var module struct {
	once sync.Once
	wasm []byte
	err  error
}

// GoModule is the module built with standard Go, once per test binary
// (wasmbuild.BuildModule without TinyGo). In -short the test is skipped.
func GoModule(t testing.TB) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped in -short: builds the module")
	}
	module.once.Do(func() {
		dir, err := os.MkdirTemp("", "wazerotest-")
		if err != nil {
			module.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "worker.wasm")
		// A build of unchanged sources is copied (internal/buildcache).
		if err := wasmbuild.BuildModule(".", "", out, ModulePackage); err != nil {
			module.err = fmt.Errorf("build the module: %v", err)
			return
		}
		module.wasm, module.err = os.ReadFile(out)
	})
	if module.err != nil {
		t.Fatal(module.err)
	}
	return module.wasm
}

// Host is what a Server serves: a *wazero.Host.
type Host interface {
	http.Handler
	Close(context.Context) error
}

// Server is an httptest server for a host. Its URL is known before the
// host is made, so the host's configuration can name it (its revoke
// endpoint, its resource metadata).
type Server struct {
	URL string // http://127.0.0.1:port
	srv *httptest.Server
}

// Listen is a Server on ln, or on a new loopback listener when ln is nil.
// It serves nothing until Serve, and is closed when the test ends.
func Listen(t testing.TB, ln net.Listener) *Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	if ln != nil {
		srv.Listener.Close()
		srv.Listener = ln
	}
	t.Cleanup(srv.Close)
	return &Server{URL: "http://" + srv.Listener.Addr().String(), srv: srv}
}

// Serve serves h through handler (h itself when nil) until the test ends;
// the server is closed then, and after it h.
func (s *Server) Serve(t testing.TB, h Host, handler http.Handler) {
	if handler == nil {
		handler = h
	}
	s.srv.Config.Handler = handler
	s.srv.Start()
	t.Cleanup(func() {
		s.srv.Close()
		h.Close(context.Background())
	})
}

// Subrequests is a host's transport to the origin (its Config.Client's;
// see Client): it counts the subrequests by kind, shows the test each
// lease answer (Answered), and can hold one on its way (HoldNext).
type Subrequests struct {
	base http.RoundTripper

	Gates  atomic.Int64 // gate calls: a 304 that made none was answered on a lease
	Leases atomic.Int64 // lease requests
	Usages atomic.Int64 // usage reports
	Others atomic.Int64 // the rest: forwards, the JWKS

	// Answered, when set (before the host starts), is called with each
	// lease answer of status 200 that parses, in order, before it goes on
	// to the host.
	Answered func(lease.Answer)

	mu   sync.Mutex
	hold *Hold
}

// Hold is a lease answer held on its way to the host: Held is closed once
// the origin has given it, and it goes on when the test closes Release.
type Hold struct{ Held, Release chan struct{} }

// NewSubrequests is a Subrequests over a transport of its own (no
// compression asked for, 64 idle connections a host).
func NewSubrequests() *Subrequests {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	t.MaxIdleConnsPerHost = 64
	return &Subrequests{base: t}
}

// Client is the host's client through s: redirects are not followed.
func (s *Subrequests) Client() *http.Client {
	return &http.Client{Transport: s, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// HoldNext holds the next lease answer (see Hold).
func (s *Subrequests) HoldNext() *Hold {
	h := &Hold{Held: make(chan struct{}), Release: make(chan struct{})}
	s.mu.Lock()
	s.hold = h
	s.mu.Unlock()
	return h
}

func (s *Subrequests) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.URL.Path {
	case edgesig.GatePath:
		s.Gates.Add(1)
	case lease.UsagePath:
		s.Usages.Add(1)
	case lease.Path:
		s.Leases.Add(1)
		return s.leaseAnswer(r)
	default:
		s.Others.Add(1)
	}
	return s.base.RoundTrip(r)
}

// leaseAnswer sends a lease request and shows a 200 answer to Answered,
// holding it if asked to.
func (s *Subrequests) leaseAnswer(r *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(r)
	if err != nil || resp.StatusCode != 200 {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if a, err := lease.ParseAnswer(b); err == nil && s.Answered != nil {
		s.Answered(a)
	}
	s.mu.Lock()
	h := s.hold
	s.hold = nil
	s.mu.Unlock()
	if h != nil {
		close(h.Held)
		<-h.Release
	}
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	return resp, nil
}
