package wasmtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/shared/logbuftest"
	"github.com/lectern-api/lectern/worker/wazero"
	"github.com/lectern-api/lectern/worker/wazero/wazerotest"
)

// The lease tests' tools (issue 19): an edge with leases on whose
// subrequests the test watches, and ways to wait for what the module does
// in the background.

// probe is an edge host's transport to the origin, a
// wazerotest.Subrequests, under the names the lease tests use: it counts
// the gate calls (a 304 that made none was answered on a lease), lease
// requests and usage reports, keeps the lease answers, and can hold one
// lease answer on its way (holdNext).
type probe struct {
	*wazerotest.Subrequests
	gates, asks, usages *atomic.Int64

	mu      sync.Mutex
	answers []lease.Answer // 200 answers of lease requests, in order
}

func newProbe() *probe {
	s := wazerotest.NewSubrequests()
	p := &probe{Subrequests: s, gates: &s.Gates, asks: &s.Leases, usages: &s.Usages}
	s.Answered = func(a lease.Answer) {
		p.mu.Lock()
		p.answers = append(p.answers, a)
		p.mu.Unlock()
	}
	return p
}

// holdLease is a lease answer held on its way: held is closed once the
// origin has given it, and it goes on to the module when release is
// closed.
type holdLease struct{ held, release chan struct{} }

// holdNext holds the next lease answer.
func (p *probe) holdNext() *holdLease {
	h := p.HoldNext()
	return &holdLease{held: h.Held, release: h.Release}
}

// last is the last lease answer (calls 0: none granted), and whether
// there was one.
func (p *probe) last() (lease.Answer, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.answers) == 0 {
		return lease.Answer{}, false
	}
	return p.answers[len(p.answers)-1], true
}

// leaseEdge is an edge with leases on: its usage log in the test's
// directory, its revoke endpoint on its own listener (so the origin's
// pushes reach it), its subrequests through a probe.
type leaseEdge struct {
	*edge
	probe *probe
	log   string

	mu     sync.Mutex
	pushes []push // the origin's revoke pushes, in order
}

// newLeaseEdge serves b in front of o with leases on and one instance
// (each instance holds its own leases: one makes "the next 304 is leased"
// a fact the test can rely on); adjust may change the configuration.
func newLeaseEdge(t *testing.T, b *build, o *origin, adjust func(*wazero.Config)) *leaseEdge {
	t.Helper()
	srv := wazerotest.Listen(t, o.edgeListener(t)) // an address o lists in LECTERN_EDGE_URLS
	p := newProbe()
	cfg := edgeConfig(o)
	cfg.Instances = 1
	cfg.Leases = true
	cfg.Revoke = srv.URL + lease.RevokePath
	cfg.UsageLog = filepath.Join(t.TempDir(), "usage.log")
	cfg.Client = p.Client()
	if adjust != nil {
		adjust(&cfg)
	}
	e := &edge{url: srv.URL, stderr: new(logbuftest.Buffer)}
	cfg.Stderr = e.stderr
	// The host's own warnings and errors (why it answered 500, a failed
	// background call) go with the guest's output, shown when a test fails.
	cfg.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	t.Cleanup(func() { // after the server and the host are closed
		if t.Failed() && e.stderr.Len() > 0 {
			t.Logf("guest output:\n%s", e.stderr)
		}
	})
	h, err := wazero.New(context.Background(), b.mod, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.host = h
	le := &leaseEdge{edge: e, probe: p, log: cfg.UsageLog}
	srv.Serve(t, h, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != lease.RevokePath {
			h.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		le.mu.Lock()
		le.pushes = append(le.pushes, push{body: string(body), status: rec.status, answer: rec.body.String()})
		le.mu.Unlock()
	}))
	return le
}

// push is a revoke push the origin made to an edge, and the edge's
// answer.
type push struct {
	body   string
	status int
	answer string
}

// recorder keeps a copy of what a handler answers.
type recorder struct {
	http.ResponseWriter
	status int
	body   strings.Builder
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = 200
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

// gatedEdge is newEdge with one instance and a probe: the edge of today,
// leases off.
func gatedEdge(t *testing.T, b *build, o *origin) *leaseEdge {
	t.Helper()
	p := newProbe()
	e := newEdge(t, b, o, func(c *wazero.Config) {
		c.Instances = 1
		c.Client = p.Client()
	})
	return &leaseEdge{edge: e, probe: p}
}

// flush has the edge report its usage now; it fails the test if the
// origin does not acknowledge it.
func (e *leaseEdge) flush(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.host.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// waitFor polls cond until it holds; it fails the test after a minute.
// It bounds a wait for background work, never asserts a duration.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// acquire makes the edge hold a lease for tok's organisation on target:
// a 200 (the edge learns the organisation), a gated 304 (which asks for
// a lease in the background), the answer awaited. It returns the ETag and
// the lease answer; it fails the test if no lease was granted.
func (e *leaseEdge) acquire(t testing.TB, tok, target string) (string, lease.Answer) {
	t.Helper()
	first := do(t, e.url, "GET", target, "", "Authorization", "Bearer "+tok)
	tag := first.header.Get("ETag")
	if first.status != 200 || tag == "" {
		t.Fatalf("GET %s: %d, ETag %q: %.300s", target, first.status, tag, first.body)
	}
	// Until a 304 is answered on a lease: a gated one asks for it, unless
	// a request is in flight or the edge backs off after a refusal (a
	// second, on its clock).
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		asks, bg := e.probe.asks.Load(), e.host.Stats().Backgrounds
		r, leased := e.cond(t, tok, target, tag)
		switch {
		case r.status != 304:
			t.Fatalf("GET %s If-None-Match: %d: %.300s", target, r.status, r.body)
		case leased:
			a, _ := e.probe.last()
			return tag, a
		case e.probe.asks.Load() > asks:
			waitFor(t, "the lease answer", func() bool { return e.host.Stats().Backgrounds > bg })
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	a, _ := e.probe.last()
	t.Fatalf("no 304 answered on a lease for %s in a minute (last lease answer %+v)", target, a)
	return "", lease.Answer{}
}

// cond sends a conditional GET through the edge and reports whether it
// was answered without a gate call (leased: a 304 with no subrequest).
func (e *leaseEdge) cond(t testing.TB, tok, target, tag string, hdr ...string) (answer, bool) {
	t.Helper()
	g := e.probe.gates.Load()
	r := do(t, e.url, "GET", target, "", append([]string{"Authorization", "Bearer " + tok, "If-None-Match", tag}, hdr...)...)
	return r, r.status == 304 && e.probe.gates.Load() == g
}

// rateLimit is one item of a RateLimit field: "name";r=R;t=T.
type rateLimit struct {
	name string
	r, t int64
}

func parseRateLimit(v string) ([]rateLimit, error) {
	if v == "" {
		return nil, nil
	}
	var out []rateLimit
	for _, item := range strings.Split(v, ", ") {
		parts := strings.Split(item, ";")
		if len(parts) != 3 || !strings.HasPrefix(parts[1], "r=") || !strings.HasPrefix(parts[2], "t=") {
			return nil, fmt.Errorf("RateLimit item %q", item)
		}
		r, err1 := strconv.ParseInt(parts[1][2:], 10, 64)
		tt, err2 := strconv.ParseInt(parts[2][2:], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("RateLimit item %q: %w", item, err)
		}
		out = append(out, rateLimit{name: strings.Trim(parts[0], `"`), r: r, t: tt})
	}
	return out, nil
}

// startLeaseOrigin starts an origin of the test's own with more settings
// (LECTERN_LEASE_TTL, LECTERN_LEASES).
func startLeaseOrigin(t *testing.T, env ...string) *origin {
	t.Helper()
	o, err := launch(t.TempDir(), nil, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.stop)
	return o
}

// midHour moves o's test clock to 20 minutes past the next UTC hour, so
// that a lease's validity (never past the hour) is its TTL whatever the
// real time.
func midHour(t *testing.T, o *origin) {
	t.Helper()
	now := o.now().UTC()
	next := now.Truncate(time.Hour).Add(time.Hour + 20*time.Minute)
	o.advance(t, int(next.Sub(now)/time.Second))
}

// billed is org's monthly call meter read from the admin API, after the
// edges have flushed (the read settles leases the origin can push to).
func billed(t *testing.T, o *origin, org string, edges ...*leaseEdge) int {
	t.Helper()
	for _, e := range edges {
		e.flush(t)
	}
	return o.calls(t, org)
}

// send is do for goroutines and for requests that may fail: it returns
// the error instead of failing the test.
func send(base, method, target string, hdr ...string) (answer, error) {
	req, err := http.NewRequest(method, base+target, nil)
	if err != nil {
		return answer{}, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	a.body, err = io.ReadAll(resp.Body)
	return a, err
}
