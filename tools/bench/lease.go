package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
	"github.com/lectern-api/lectern/worker/wazero"
)

// Section leases: issue #19's performance rows, edge 304s answered from a
// lease against the same 304s gated by the origin, in one run.
//
//	(f)  saturated edge-304 throughput with leases, a scenario of the
//	     throughput rounds (ratio to (a), beside (a3) and the gated (f))
//	(l1) edge-304 latency, one client, with every edge-to-origin
//	     subrequest delayed by leaseDelay: gated, then leased
//	(l2) the same with -clients clients: requests per second
//	(c)  the origin's CPU per edge 304 at leaseCPURate requests a second,
//	     read from a child origin process's own CPU time (lease_cpu.go)
//
// Gated is an edge host with leases off (the module gates every 304, as
// before #19), leased one with leases on; both run the deployed build
// (the first of the builds) against the same origin, whose leases are on.

// leaseDelay is the injected edge-to-origin delay of (l1) and (l2): a far
// origin's round trip.
const leaseDelay = 30 * time.Millisecond

// edgeOrigin is the origin an edge of this section is configured for.
type edgeOrigin struct {
	url, idp, secret string
}

// leasedEdges are the listeners of the section's edges with leases on,
// opened before any origin of the bench starts: an origin pushes revokes
// only to the edge hosts its LECTERN_EDGE_URLS lists (lease.Config.Edges)
// and refuses a lease to an edge naming another revoke URL, so every
// origin of the bench lists them all (edgeURLs) and startEdge takes one
// for each leased edge. More than the section starts: (f), (l) and (c).
var leasedEdges = struct {
	once sync.Once
	urls []string
	free chan net.Listener
	err  error
}{}

const leasedEdgePool = 24 // two backends' passes (main.go)

// edgeURLs are the base URLs of the leased edges' listeners, for the
// origins' LECTERN_EDGE_URLS.
func edgeURLs() ([]string, error) {
	p := &leasedEdges
	p.once.Do(func() {
		p.free = make(chan net.Listener, leasedEdgePool)
		for range leasedEdgePool {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				p.err = fmt.Errorf("listen for a leased edge: %w", err)
				return
			}
			p.free <- ln
			p.urls = append(p.urls, "http://"+ln.Addr().String())
		}
	})
	return p.urls, p.err
}

// leasedEdgeListener is the listener of a new edge with leases on.
func leasedEdgeListener() (net.Listener, error) {
	if _, err := edgeURLs(); err != nil {
		return nil, err
	}
	select {
	case ln := <-leasedEdges.free:
		return ln, nil
	default:
		return nil, fmt.Errorf("all %d leased edge listeners are taken (leasedEdgePool)", leasedEdgePool)
	}
}

// stackOrigin is the in-process origin of the throughput rows.
func (tb *throughputBench) stackOrigin() edgeOrigin {
	return edgeOrigin{url: tb.st.OriginURL, idp: tb.st.IdPURL, secret: tb.st.Secret}
}

// subrequests counts an edge's subrequests by kind and delays each by
// delay, sleeping (no CPU spent) before the request is sent: the wazero
// host's Client transport in this section.
type subrequests struct {
	base                      http.RoundTripper
	delay                     time.Duration
	gate, lease, usage, other atomic.Int64
}

// subCounts is a snapshot of the counters.
type subCounts struct{ gate, lease, usage, other int64 }

func (s *subrequests) counts() subCounts {
	return subCounts{s.gate.Load(), s.lease.Load(), s.usage.Load(), s.other.Load()}
}

func (c subCounts) plus(d subCounts) subCounts {
	return subCounts{c.gate + d.gate, c.lease + d.lease, c.usage + d.usage, c.other + d.other}
}

func (c subCounts) minus(d subCounts) subCounts {
	return subCounts{c.gate - d.gate, c.lease - d.lease, c.usage - d.usage, c.other - d.other}
}

func (c subCounts) String() string {
	return fmt.Sprintf("subrequests: %d gate calls, %d lease requests, %d usage reports, %d other", c.gate, c.lease, c.usage, c.other)
}

func (s *subrequests) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.URL.Path {
	case edgesig.GatePath:
		s.gate.Add(1)
	case lease.Path:
		s.lease.Add(1)
	case lease.UsagePath:
		s.usage.Add(1)
	default:
		s.other.Add(1)
	}
	if s.delay > 0 {
		t := time.NewTimer(s.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return nil, r.Context().Err()
		}
	}
	return s.base.RoundTrip(r)
}

// leaseEdge is an edge host of this section on its own loopback listener.
type leaseEdge struct {
	url  string
	host *wazero.Host
	subs *subrequests
}

// startEdge serves build b through a wazero host for origin, with leases
// on or off, its subrequests counted and delayed by delay; tag names its
// usage log (in a temporary directory of its own, removed at the close).
// The host is configured as worker/cmd/edge's; every edge row of the bench
// starts its edge here (throughEdge with leases off and no delay).
func (tb *throughputBench) startEdge(b build, origin edgeOrigin, leased bool, delay time.Duration, tag string) (*leaseEdge, error) {
	ctx, log := tb.ctx, tb.log
	mod, err := wazero.Compile(ctx, b.wasm)
	if err != nil {
		return nil, err
	}
	var ln net.Listener
	if leased { // an address the origins list in LECTERN_EDGE_URLS
		ln, err = leasedEdgeListener()
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		mod.Close(context.Background())
		return nil, err
	}
	edgeURL := "http://" + ln.Addr().String()
	// As the host's default Client, whose transport this one wraps.
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.DisableCompression, base.MaxIdleConnsPerHost = true, 64
	subs := &subrequests{base: base, delay: delay}
	cfg := wazero.Config{Origin: origin.url, JWKSURL: origin.idp + "/.well-known/jwks.json",
		Issuer: origin.idp, Audience: audience, Secret: origin.secret,
		ResourceMetadata: edgeURL + "/.well-known/oauth-protected-resource",
		Instances:        min(runtime.GOMAXPROCS(0), 4), // worker/cmd/edge's default
		Client: &http.Client{Transport: subs,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		Logger: log, ThreadCPU: threadCPUClock(), ThreadCPUEvery: cpuSample}
	logDir := ""
	if leased {
		if logDir, err = os.MkdirTemp("", "lectern-bench-usage-"); err != nil {
			ln.Close()
			mod.Close(context.Background())
			return nil, err
		}
		cfg.Leases, cfg.Revoke = true, edgeURL+lease.RevokePath
		cfg.UsageLog = filepath.Join(logDir, "usage-"+tag+".log")
	}
	h, err := wazero.New(ctx, mod, cfg)
	if err != nil {
		ln.Close()
		mod.Close(context.Background())
		if logDir != "" {
			os.RemoveAll(logDir)
		}
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go srv.Serve(ln)
	tb.closers = append(tb.closers, func() {
		srv.Close()
		h.Close(context.Background())
		mod.Close(context.Background())
		if logDir != "" {
			os.RemoveAll(logDir)
		}
	})
	return &leaseEdge{url: edgeURL, host: h, subs: subs}, nil
}

// primeEdge is a target's prime for an edge at edgeURL: one forwarded 200
// per client's token gives the token's instance the organisation's ETag
// inputs (docs/edge.md: Origin protocol). Every edge row primes with it.
func (tb *throughputBench) primeEdge(edgeURL string) func(ctx context.Context, c int) error {
	primer := &http.Client{Transport: newTransport(1)}
	forward := tb.auth("Accept-Encoding", "gzip")
	return func(ctx context.Context, c int) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", edgeURL+tb.lessonPath, nil)
		req.Header = forward(c)
		resp, err := primer.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("prime the edge: GET %s: status %d", tb.lessonPath, resp.StatusCode)
		}
		if got := resp.Header.Get("ETag"); got != tb.etag {
			return fmt.Errorf("prime the edge: ETag %q, the origin's is %q", got, tb.etag)
		}
		return nil
	}
}

// leaseSetups are the section's scenarios of the throughput rounds: (f)
// with leases, and (a3) for reference when the edge section is not run.
func (tb *throughputBench) leaseSetups(builds []build) []func() (*scenario, error) {
	if len(builds) == 0 {
		return nil
	}
	var setups []func() (*scenario, error)
	if !tb.o.sections["edge"] {
		setups = append(setups, func() (*scenario, error) { return tb.edgeReplayed(builds[0]) })
	}
	return append(setups, func() (*scenario, error) { return tb.leasedEdge(builds[0]) })
}

// hostFailed are the statuses a leased edge's target takes besides its
// 304, counted and shown instead of ending the run: a 500 is the host's
// answer when a module instance fails, and a failing lease path is what
// these rows are to show.
var hostFailed = []int{http.StatusInternalServerError}

// leasedEdge is (f) with leases: lesson 304s through build b's module in
// a wazero host with leases on, against the in-process origin. Its row
// adds the subrequests made over the rounds; a request the host failed
// is a miss.
func (tb *throughputBench) leasedEdge(b build) (*scenario, error) {
	e, err := tb.startEdge(b, tb.stackOrigin(), true, 0, "f")
	if err != nil {
		return nil, err
	}
	var before wazero.Stats
	var subs0 subCounts
	return &scenario{
		target: &target{id: "f", name: "edge 304 with leases (wazero host, no gate call within a lease), " + b.name,
			url: e.url + tb.lessonPath, header: tb.conditional(), want: 304, also: hostFailed, prime: tb.primeEdge(e.url)},
		goal:   &goal{"≥ 0.4×", func(ratio float64) bool { return ratio >= 0.4 }},
		warmed: func() { before, subs0 = e.host.Stats(), e.subs.counts() },
		rows: func(r row) []row {
			s := e.host.Stats()
			n := s.Requests - before.Requests
			subs := e.subs.counts().minus(subs0)
			r.detail += fmt.Sprintf("; %d requests, %s; %d forwards", n, subs, s.Forwards-before.Forwards)
			if cpu := s.ModuleCPU - before.ModuleCPU; cpu > 0 && n > 0 {
				r.detail += fmt.Sprintf("; module CPU %.1f µs/req (thread CPU time, one call in %d clocked)", float64(cpu)/float64(n)/1e3, cpuSample)
			}
			if failed := s.Failures - before.Failures; failed > 0 {
				r.detail += fmt.Sprintf("; %d answered 500 by the host (module instance failures; counted in the rate)", failed)
				r.verdict = "MISS (host failures)"
			}
			return []row{r}
		},
	}, nil
}

// leaseRows measures (l1) and (l2) against the in-process origin st, then
// (c) against a child origin (lease_cpu.go), with the deployed build.
func leaseRows(ctx context.Context, o options, st *stack, tokens []string, lessonPath string, builds []build,
	root, dir, corpusDir string, log *slog.Logger, progress func(string, ...any)) ([]row, error) {
	if len(builds) == 0 {
		return nil, nil
	}
	tb := &throughputBench{ctx: ctx, o: o, st: st, tokens: tokens, log: log, progress: progress, lessonPath: lessonPath}
	defer tb.close()
	var err error
	if tb.etag, err = lessonETag(ctx, st.OriginURL+lessonPath, tokens[0]); err != nil {
		return nil, err
	}
	rows, err := tb.latency(builds[0])
	if err != nil {
		return nil, err
	}
	cpu, err := originCPU(ctx, o, builds[0], root, dir, corpusDir, lessonPath, log, progress)
	if err != nil {
		return nil, err
	}
	return append(rows, cpu...), nil
}

// latency measures (l1) and (l2): a gated and a leased edge, every
// subrequest delayed by leaseDelay, with one client and with -clients,
// the four targets interleaved in -runs rounds.
func (tb *throughputBench) latency(b build) ([]row, error) {
	o := tb.o
	gated, err := tb.startEdge(b, tb.stackOrigin(), false, leaseDelay, "l-gated")
	if err != nil {
		return nil, err
	}
	leased, err := tb.startEdge(b, tb.stackOrigin(), true, leaseDelay, "l-leased")
	if err != nil {
		return nil, err
	}
	type arm = latencyArm
	var arms []*arm
	for _, clients := range []int{1, o.clients} {
		for _, e := range []*leaseEdge{gated, leased} {
			arms = append(arms, &arm{edge: e, clients: clients,
				t: &target{url: e.url + tb.lessonPath, header: tb.conditional(), want: 304, also: hostFailed}})
		}
	}
	for _, e := range []*leaseEdge{gated, leased} {
		prime := tb.primeEdge(e.url)
		for c := range o.clients {
			if err := prime(tb.ctx, c); err != nil {
				return nil, err
			}
		}
	}
	warm := min(o.time/3, time.Second)
	for _, a := range arms {
		if _, err := a.t.measure(tb.ctx, a.clients, warm, false); err != nil {
			return nil, fmt.Errorf("(l) warm-up: %w", err)
		}
	}
	// Runs of at most 2 s: a gated 1-client run is then ~60 requests (180
	// over 3 runs, enough for a p99 that is not the slowest one), and the
	// section stays within a minute or two.
	run := min(o.time, 2*time.Second)
	for i := range o.runs {
		for _, a := range arms {
			tb.progress("round %d/%d: (l) edge 304, %d client(s), 30 ms to the origin, leases %v", i+1, o.runs, a.clients, a.edge == leased)
			s0 := a.edge.subs.counts()
			r, err := a.t.measure(tb.ctx, a.clients, run, true)
			if err != nil {
				return nil, fmt.Errorf("(l) %d client(s), leases %v: %w", a.clients, a.edge == leased, err)
			}
			a.t.runs = append(a.t.runs, r)
			a.subs = a.subs.plus(a.edge.subs.counts().minus(s0))
		}
	}
	detail := func(a *arm) string {
		lat := a.t.latencies()
		var p50s []string
		for _, r := range a.t.runs {
			p50s = append(p50s, ms(percentile(slices.Clone(r.lat), 50)))
		}
		m, rates := a.t.median()
		var rs []string
		for _, r := range rates {
			rs = append(rs, fmt.Sprintf("%.0f", r))
		}
		d := fmt.Sprintf("%d requests; p50 per run %s; p99.9 %s; %.0f req/s (runs %s); %s",
			len(lat), strings.Join(p50s, " "), ms(percentile(lat, 99.9)), m.rate(), strings.Join(rs, " "), a.subs)
		if n := a.failed(); n > 0 {
			d += fmt.Sprintf("; %d answered 500 by the host (module instance failures)", n)
		}
		return d
	}
	pcts := func(a *arm) (time.Duration, time.Duration) {
		lat := a.t.latencies()
		return percentile(lat, 50), percentile(lat, 99)
	}
	g50, g99 := pcts(arms[0])
	l50, l99 := pcts(arms[1])
	l1Verdict := verdict(l50 < time.Millisecond && l99 < 3*time.Millisecond && arms[1].failed() == 0)
	gm, _ := arms[2].t.median()
	lm, _ := arms[3].t.median()
	delay := fmt.Sprintf("%v injected edge-to-origin delay", leaseDelay)
	return []row{
		{id: "l1", what: "edge 304 latency, 1 client, " + delay + ", gated (leases off)",
			result: fmt.Sprintf("p50 %s p99 %s", ms(g50), ms(g99)), detail: detail(arms[0])},
		{id: "l1", what: "  leased, 1 client", result: fmt.Sprintf("p50 %s p99 %s", ms(l50), ms(l99)),
			goal: "p50 < 1 ms, p99 < 3 ms", verdict: l1Verdict, detail: detail(arms[1])},
		{id: "l2", what: fmt.Sprintf("edge 304s, %d clients, %s, gated (leases off)", o.clients, delay),
			result: fmt.Sprintf("%.0f req/s", gm.rate()), detail: detail(arms[2])},
		{id: "l2", what: fmt.Sprintf("  leased, %d clients", o.clients),
			result: fmt.Sprintf("%.0f req/s (%.1f× gated)", lm.rate(), lm.rate()/gm.rate()), detail: detail(arms[3])},
	}, nil
}

// latencyArm is one target of (l1)/(l2): an edge, its clients, its runs
// and the subrequests they made.
type latencyArm struct {
	edge    *leaseEdge
	clients int
	t       *target
	subs    subCounts
}

// failed is the requests of a's runs the host answered 500.
func (a *latencyArm) failed() int64 {
	var n int64
	for _, r := range a.t.runs {
		n += r.also
	}
	return n
}
