package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/worker/wazero"
)

// throughput measures (a)–(f), (i), (j) and (l)–(n). Each row of the table is set up by a
// function of its own (one scenario each: a target and what its rows need
// besides); then every scenario is warmed up and measured in interleaved
// rounds, and writes its rows.
func throughput(ctx context.Context, o options, st *stack, tokens []string, lesson *corpus.Lesson, builds []build,
	log *slog.Logger, progress func(string, ...any)) ([]row, error) {
	tb := &throughputBench{ctx: ctx, o: o, st: st, tokens: tokens, log: log, progress: progress,
		lessonID: lesson.ID, lessonPath: "/v1/lessons/" + lesson.ID}
	defer tb.close()
	var err error
	if tb.etag, err = lessonETag(ctx, st.OriginURL+tb.lessonPath, tokens[0]); err != nil {
		return nil, err
	}
	setups := []func() (*scenario, error){tb.baseline}
	if o.sections["edge"] {
		setups = append(setups, tb.twoHops)
	}
	if o.sections["content"] {
		setups = append(setups, tb.lesson, tb.subjects, tb.search, tb.lesson304, tb.mint,
			func() (*scenario, error) { return tb.inlineExport(false) }, func() (*scenario, error) { return tb.inlineExport(true) })
	}
	if o.sections["content"] || o.sections["progress"] {
		setups = append(setups, tb.progressSetups()...) // (l)–(n), progress.go
	}
	if o.sections["edge"] && len(builds) > 0 {
		setups = append(setups, func() (*scenario, error) { return tb.edgeReplayed(builds[0]) })
		for _, b := range builds {
			setups = append(setups, func() (*scenario, error) { return tb.edge(b) })
		}
	}
	if o.sections["leases"] {
		setups = append(setups, tb.leaseSetups(builds)...) // (f) with leases, lease.go
	}
	if o.sections["tokens"] {
		setups = append(setups, tb.tokenSetups()...) // (t1)–(t3), tokens.go
	}
	var scenarios []*scenario
	for _, setup := range setups {
		s, err := setup()
		if err != nil {
			return nil, err
		}
		scenarios = append(scenarios, s)
	}
	if err := tb.measure(scenarios); err != nil {
		return nil, err
	}
	base, _ := scenarios[0].median()
	tb.baseRate = base.rate()
	var rows []row
	for _, s := range scenarios {
		r := s.row(base)
		if s.rows == nil {
			rows = append(rows, r)
		} else {
			rows = append(rows, s.rows(r)...)
		}
	}
	return rows, nil
}

// throughputBench is what the scenarios of (a)–(f) share: the stack and its
// tokens, the lesson the lesson rows ask for and its ETag, and the servers
// to stop at the end.
type throughputBench struct {
	ctx      context.Context
	o        options
	st       *stack
	tokens   []string
	log      *slog.Logger
	progress func(string, ...any)

	lessonID   string
	lessonPath string
	etag       string // the lesson's, with Accept-Encoding: gzip
	closers    []func()
	baseRate   float64 // (a)'s median rate, once measured: the rows' unit
}

func (tb *throughputBench) close() {
	for _, c := range slices.Backward(tb.closers) {
		c()
	}
}

// serve serves h on a new loopback listener until close.
func (tb *throughputBench) serve(h http.Handler) (string, error) {
	u, stop, err := serveLoopback(h, tb.log)
	if err != nil {
		return "", err
	}
	tb.closers = append(tb.closers, stop)
	return u, nil
}

// plain is the header of a request without a token.
func plain(int) http.Header { return http.Header{"User-Agent": {"lectern-bench"}} }

// auth is the header of client c's requests: its token, and the extra
// name, value pairs.
func (tb *throughputBench) auth(extra ...string) func(int) http.Header {
	return scoped(tb.tokens, extra...)
}

// conditional is the header of a lesson revalidation that matches.
func (tb *throughputBench) conditional() func(int) http.Header {
	return tb.auth("Accept-Encoding", "gzip", "If-None-Match", tb.etag)
}

// scenario is one row of the table, with its sub-rows: the target measured
// in the rounds, and what the rows need besides.
type scenario struct {
	*target
	goal   *goal
	warmed func()       // after every target's warm-up, before the rounds
	after  func() error // after the rounds: a measurement of the row's own, alone
	// rows, when set, writes the scenario's rows from its main one (rate,
	// ratio to (a), latency, the goal's verdict); by default that row alone.
	rows func(main row) []row
}

// goal is a row's goal: its text, and whether a ratio to (a) meets it.
type goal struct {
	text string
	met  func(ratio float64) bool
}

// measure warms every scenario up, then runs o.runs rounds of every
// scenario once, then the scenarios' own measurements.
func (tb *throughputBench) measure(scenarios []*scenario) error {
	ctx, o := tb.ctx, tb.o
	// Warm up every target (connections, caches, the edge's instances).
	warm := min(o.time/3, time.Second)
	for _, s := range scenarios {
		if s.prime != nil {
			for c := range o.clients {
				if err := s.prime(ctx, c); err != nil {
					return err
				}
			}
		}
		if _, err := s.target.measure(ctx, o.clients, warm, false); err != nil {
			return fmt.Errorf("(%s) warm-up: %w", s.id, err)
		}
	}
	for _, s := range scenarios {
		if s.warmed != nil {
			s.warmed()
		}
	}
	for i := range o.runs {
		for _, s := range scenarios {
			tb.progress("round %d/%d: (%s) %s", i+1, o.runs, s.id, s.name)
			r, err := s.target.measure(ctx, o.clients, o.time, true)
			if err != nil {
				return fmt.Errorf("(%s) %s: %w", s.id, s.name, err)
			}
			s.runs = append(s.runs, r)
		}
	}
	for _, s := range scenarios {
		if s.after != nil {
			if err := s.after(); err != nil {
				return err
			}
		}
	}
	return nil
}

// row is the scenario's main row: its median rate, the ratio to base,
// the latency and sizes over every run, and its goal's verdict.
func (s *scenario) row(base result) row {
	m, rates := s.median()
	var all []string
	for _, r := range rates {
		all = append(all, fmt.Sprintf("%.0f", r))
	}
	lat := s.latencies()
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	bytes, allocs := s.perRequest()
	ratio := m.rate() / base.rate()
	r := row{id: s.id, what: s.name, result: fmt.Sprintf("%.0f req/s", m.rate()), ratio: fmt.Sprintf("%.2f×", ratio),
		detail: fmt.Sprintf("runs %s; p50 %s p99 %s; %.0f B/resp; %.0f allocs/req (process)", strings.Join(all, " "), ms(p50), ms(p99), bytes, allocs)}
	if s.goal != nil {
		r.goal, r.verdict = s.goal.text, verdict(s.goal.met(ratio))
	}
	return r
}

// latencies is the client-side latency of every request of every run.
func (t *target) latencies() []time.Duration {
	var l []time.Duration
	for _, r := range t.runs {
		l = append(l, r.lat...)
	}
	return l
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms" }

// baseline is (a), the unit of every ratio: a bare net/http handler
// answering a 200-byte body.
func (tb *throughputBench) baseline() (*scenario, error) {
	const pre, post = `{"ok":true,"pad":"`, "\"}\n"
	body200 := []byte(pre + strings.Repeat("x", 200-len(pre)-len(post)) + post)
	u, err := tb.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body200)
	}))
	if err != nil {
		return nil, err
	}
	return &scenario{target: &target{id: "a", name: "baseline: bare net/http handler, 200-byte body", url: u + "/", header: plain, want: 200}}, nil
}

// twoHops is (a2), the ceiling of (f)'s design on this machine: two bare
// net/http hops, the first making one subrequest to the second per
// request, as the edge makes one gate call, with nothing else done.
func (tb *throughputBench) twoHops() (*scenario, error) {
	hopURL, err := tb.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		return nil, err
	}
	sub := &http.Client{Transport: newTransport(64)}
	twoURL, err := tb.serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, hopURL+"/", http.NoBody)
		req.Header.Set("X-Target", r.URL.RequestURI())
		resp, err := sub.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.Header().Set("ETag", `W/"x"`)
		w.WriteHeader(http.StatusNotModified)
	}))
	if err != nil {
		return nil, err
	}
	return &scenario{target: &target{id: "a2", name: "reference: two bare net/http hops, one subrequest each, 304", url: twoURL + "/", header: plain, want: 304}}, nil
}

// lesson is (b): a lesson at standard detail with Accept-Encoding: gzip,
// and after the rounds the allocations of the origin handler alone.
func (tb *throughputBench) lesson() (*scenario, error) {
	header := tb.auth("Accept-Encoding", "gzip")
	var handlerAllocs, handlerBytes float64
	return &scenario{
		target: &target{id: "b", name: "lesson " + tb.lessonID + ", standard detail, gzip",
			url: tb.st.OriginURL + tb.lessonPath, header: header, want: 200},
		goal: &goal{"≥ 0.25×", func(ratio float64) bool { return ratio >= 0.25 }},
		after: func() (err error) {
			tb.progress("(b) allocations of the origin handler alone")
			handlerAllocs, handlerBytes, err = allocsPerRequest(tb.st.API, tb.lessonPath, header(0))
			return err
		},
		rows: func(main row) []row {
			if handlerAllocs <= 0 {
				return []row{main}
			}
			return []row{main, {id: "b", what: "  allocations per lesson request, origin handler alone",
				result: fmt.Sprintf("%.0f allocs/req", handlerAllocs),
				detail: fmt.Sprintf("%.1f KB/req; serial ServeHTTP calls in process, MemStats delta (meters, access log and metrics included)", handlerBytes/1024)}}
		},
	}, nil
}

// subjects is (c): the subject list, a page of 25.
func (tb *throughputBench) subjects() (*scenario, error) {
	return &scenario{target: &target{id: "c", name: "subject list /v1/subjects?limit=25",
		url: tb.st.OriginURL + "/v1/subjects?limit=25", header: tb.auth(), want: 200}}, nil
}

// search is (d): a search for -q, with its client-side latency under the
// rounds' load and, after them, with one client alone.
func (tb *throughputBench) search() (*scenario, error) {
	path := "/v1/search?q=" + url.QueryEscape(tb.o.query)
	s := &scenario{target: &target{id: "d", name: "search " + path, url: tb.st.OriginURL + path, header: tb.auth(), want: 200}}
	var one result
	var gcs, gcCPU float64 // during the one-client run
	s.after = func() (err error) {
		tb.progress("(d) search latency with 1 client")
		alone := &target{url: s.url, header: s.header, want: 200}
		if tb.o.trace != "" {
			stop, err := startTrace(tb.o.trace)
			if err != nil {
				return err
			}
			defer stop()
		}
		before := gcStats()
		one, err = alone.measure(tb.ctx, 1, tb.o.time, true)
		after := gcStats()
		gcs, gcCPU = after[0]-before[0], after[1]-before[1]
		return err
	}
	s.rows = func(main row) []row {
		lat := s.latencies()
		p99 := percentile(lat, 99)
		loaded := row{id: "d", what: fmt.Sprintf("  search latency, %d clients (client side)", tb.o.clients),
			result: "p99 " + ms(p99), goal: "p99 < 2 ms", verdict: verdict(p99 < 2*time.Millisecond),
			detail: fmt.Sprintf("p50 %s over %d requests", ms(percentile(lat, 50)), len(lat))}
		p99 = percentile(one.lat, 99)
		alone := row{id: "d", what: "  search latency, 1 client (client side)",
			result: "p99 " + ms(p99), goal: "p99 < 2 ms", verdict: verdict(p99 < 2*time.Millisecond),
			detail: fmt.Sprintf("p50 %s over %d requests, %.0f req/s; %.0f GC cycles in the process meanwhile, %.0f ms of GC CPU",
				ms(percentile(one.lat, 50)), len(one.lat), one.rate(), gcs, gcCPU*1e3)}
		return []row{main, loaded, alone}
	}
	return s, nil
}

// lesson304 is (e): the lesson revalidated (If-None-Match), direct to the
// origin.
func (tb *throughputBench) lesson304() (*scenario, error) {
	return &scenario{target: &target{id: "e", name: "lesson 304 (If-None-Match), direct to the origin",
		url: tb.st.OriginURL + tb.lessonPath, header: tb.conditional(), want: 304}}, nil
}

// edgeReplayed is (a3), the edge's own share of (f): build b's edge with
// the origin's gate answer replayed by a bare handler (nothing read or
// metered).
func (tb *throughputBench) edgeReplayed(b build) (*scenario, error) {
	replay, err := newReplayGate(tb.st.OriginURL)
	if err != nil {
		return nil, err
	}
	replayURL, err := tb.serve(replay)
	if err != nil {
		return nil, err
	}
	return tb.throughEdge("a3", "reference: edge 304, "+b.name+", the gate's 204 replayed by a bare handler", replayURL, b, nil)
}

// edge is (f): lesson 304s through build b's module in the wazero host, as
// worker/cmd/edge serves it, with the gate call to the origin.
func (tb *throughputBench) edge(b build) (*scenario, error) {
	return tb.throughEdge("f", "edge 304 through the wazero host + gate, "+b.name, tb.st.OriginURL, b,
		&goal{"≥ 0.4×", func(ratio float64) bool { return ratio >= 0.4 }})
}

// cpuSample: the edges clock one module call in cpuSample (odd:
// wazero.Config.ThreadCPUEvery), so that the clock's system calls, about
// 2 µs each here, weigh little on the throughput measured.
const cpuSample = 7

// throughEdge serves build b's module through a wazero host whose origin
// is origin, and measures lesson 304s through it as scenario (id, name).
// Its row adds the host's counts over the rounds, and is a miss whenever
// a request was not gated.
func (tb *throughputBench) throughEdge(id, name, origin string, b build, g *goal) (*scenario, error) {
	e, err := tb.startEdge(b, edgeOrigin{url: origin, idp: tb.st.IdPURL, secret: tb.st.Secret}, false, 0, "")
	if err != nil {
		return nil, err
	}
	h, edgeURL := e.host, e.url
	var before wazero.Stats
	return &scenario{
		target: &target{id: id, name: name, url: edgeURL + tb.lessonPath, header: tb.conditional(), want: 304,
			prime: tb.primeEdge(edgeURL)},
		goal:   g,
		warmed: func() { before = h.Stats() },
		rows: func(r row) []row {
			s := h.Stats()
			n, fwd, sub := s.Requests-before.Requests, s.Forwards-before.Forwards, s.Subrequests-before.Subrequests
			r.detail += fmt.Sprintf("; %d requests, %d gate calls, %d forwards", n, sub, fwd)
			if cpu := s.ModuleCPU - before.ModuleCPU; cpu > 0 && n > 0 {
				r.detail += fmt.Sprintf("; module CPU %.1f µs/req (thread CPU time under this load, one call in %d clocked)", float64(cpu)/float64(n)/1e3, cpuSample)
			}
			if fwd > 0 || s.Failures > 0 {
				r.verdict = "MISS (not gated)"
			}
			return []row{r}
		},
	}, nil
}

// serveLoopback serves h on a new loopback listener.
func serveLoopback(h http.Handler, log *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// lessonETag fetches the lesson once and returns its ETag.
func lessonETag(ctx context.Context, url, tok string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := (&http.Client{Transport: newTransport(1)}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("ETag") == "" {
		return "", fmt.Errorf("GET %s: status %d, ETag %q: %.300s", url, resp.StatusCode, resp.Header.Get("ETag"), b)
	}
	if resp.Header.Get("Content-Encoding") != "gzip" {
		return "", fmt.Errorf("GET %s with Accept-Encoding: gzip: Content-Encoding %q", url, resp.Header.Get("Content-Encoding"))
	}
	return resp.Header.Get("ETag"), nil
}

// allocsPerRequest serves path through h serially in process and returns
// the heap allocations and bytes per request (runtime.MemStats delta),
// the meters' work included.
func allocsPerRequest(h http.Handler, path string, header http.Header) (allocs, bytes float64, err error) {
	const warm, n = 50, 1000
	var m0, m1 runtime.MemStats
	for i := range warm + n {
		if i == warm {
			runtime.GC()
			runtime.ReadMemStats(&m0)
		}
		r := httptest.NewRequest("GET", path, nil)
		r.Header = header
		w := &discard{h: http.Header{}}
		h.ServeHTTP(w, r)
		if w.status != 200 {
			return 0, 0, fmt.Errorf("in-process GET %s: status %d", path, w.status)
		}
	}
	runtime.ReadMemStats(&m1)
	return float64(m1.Mallocs-m0.Mallocs) / n, float64(m1.TotalAlloc-m0.TotalAlloc) / n, nil
}

// discard is a ResponseWriter that keeps only the status.
type discard struct {
	h      http.Header
	status int
}

func (w *discard) Header() http.Header { return w.h }
func (w *discard) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discard) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	return len(p), nil
}
