// Package leasetest is an edge host's revoke endpoint for tests of the
// origin's side of leases (docs/edge.md, "Taking leases back"): it
// checks each push's signature with the deployment's edge key, answers
// the usage of the leases it holds (final, and forgets them, unless the
// push keeps them), records every push, and can fail or hold its answers.
package leasetest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
)

// Edge is a fake edge host serving lease.RevokePath on a real listener.
type Edge struct {
	t       testing.TB
	recv    edgesig.Receiver
	now     func() time.Time
	srv     *httptest.Server
	mu      sync.Mutex
	used    map[string]int64
	pushes  []lease.Revoke
	status  int           // answered instead of the reports, when set
	arrived chan struct{} // when held: told of each push
	release chan struct{} // when held: each push waits until it is closed
	frozen  bool          // each push waits until its sender gives up
	sent    int           // pushes received, answered or not
}

// NewEdge serves an Edge checking signatures with keys (the deployment's
// edge keys) at the time now gives, made for its own host and accepted
// once, as an edge host does; closed when t ends.
func NewEdge(t testing.TB, keys edgesig.Keys, now func() time.Time) *Edge {
	e := &Edge{t: t, recv: edgesig.Receiver{Keys: keys}, now: now, used: map[string]int64{}}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	e.recv.Hosts = []string{e.srv.Listener.Addr().String()}
	t.Cleanup(e.srv.Close)
	return e
}

// URL is the revoke URL an edge would send in its lease requests.
func (e *Edge) URL() string { return e.srv.URL + lease.RevokePath }

// Base is the edge host's base URL, as the origin lists it in
// LECTERN_EDGE_URLS (lease.Config.Edges): URL is it plus the revoke path.
func (e *Edge) Base() string { return e.srv.URL }

// Set makes the edge hold lease id with used uses.
func (e *Edge) Set(id string, used int64) {
	e.mu.Lock()
	e.used[id] = used
	e.mu.Unlock()
}

// Holds reports whether the edge still holds lease id.
func (e *Edge) Holds(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.used[id]
	return ok
}

// Pushes are the pushes answered so far, in order.
func (e *Edge) Pushes() []lease.Revoke {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.pushes)
}

// Fail makes every later push answered status (a failed push).
func (e *Edge) Fail(status int) {
	e.mu.Lock()
	e.status = status
	e.mu.Unlock()
}

// Hold makes every later push wait, before it is answered, until Release;
// the channel is told of each push as it arrives.
func (e *Edge) Hold() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.arrived, e.release = make(chan struct{}, 64), make(chan struct{})
	return e.arrived
}

// Release answers the pushes held and stops holding.
func (e *Edge) Release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.release != nil {
		close(e.release)
	}
	e.arrived, e.release = nil, nil
}

// Freeze makes every later push go unanswered, as a SIGSTOPped host's
// would: it is held until its sender gives up (closes the connection),
// then dropped unrecorded. Thaw ends it.
func (e *Edge) Freeze() {
	e.mu.Lock()
	e.frozen = true
	e.mu.Unlock()
}

// Thaw answers pushes again.
func (e *Edge) Thaw() {
	e.mu.Lock()
	e.frozen = false
	e.mu.Unlock()
}

// Received is how many pushes arrived, frozen ones included.
func (e *Edge) Received() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent
}

func (e *Edge) serve(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.sent++
	frozen := e.frozen
	e.mu.Unlock()
	b, _ := io.ReadAll(r.Body) // read whole, so that the server sees the sender close
	if frozen {
		<-r.Context().Done()
		return
	}
	id := r.Header.Get("X-Request-Id")
	m := httpsig.Message(edgesig.Revoke, r, edgesig.BodyHash(b))
	if r.Method != http.MethodPost || r.URL.Path != lease.RevokePath || id == "" {
		e.t.Errorf("a push that is no revoke: %s %s %v", r.Method, r.URL, r.Header)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if err := e.recv.Accept(r.Header.Get(edgesig.Header), &m, e.now().UnixMilli()); err != nil {
		e.t.Errorf("a push without a valid signature (%v): %s %s %v", err, r.Method, r.URL, r.Header)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	rv, err := lease.ParseRevoke(b)
	if err != nil {
		e.t.Errorf("a push's body: %v: %s", err, b)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	arrived, release := e.arrived, e.release
	e.mu.Unlock()
	if arrived != nil {
		arrived <- struct{}{}
		<-release
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pushes = append(e.pushes, rv)
	if e.status != 0 {
		w.WriteHeader(e.status)
		return
	}
	var rs []lease.Report
	for _, l := range rv.Leases {
		if used, ok := e.used[l]; ok {
			rs = append(rs, lease.Report{Lease: l, Used: used, Final: !rv.Keep})
			if !rv.Keep {
				delete(e.used, l)
			}
		}
	}
	w.Write(lease.AppendReports(nil, rs))
}
