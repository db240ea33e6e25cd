// Command bench measures Lectern's throughput as ratios to a baseline
// measured in the same run — a bare net/http handler answering a 200-byte
// body — and prints one table with the goal of each line (PASS/MISS is
// informational: the exit status is 0 unless something failed).
//
// It generates the full deterministic corpus (origin/corpus/gen, seed 1)
// into a temporary directory, wires the origin stack in process as
// origin/cmd/origin does (public API, identity provider, SQLite store and
// meters in a temporary database), creates an organisation granted every
// tier with no caps, and takes tokens from the identity provider. Every
// request crosses a real loopback listener.
//
// Sections (-only selects some, comma-separated):
//
//	content  requests per second, N keep-alive clients, median of -runs runs
//	         of -time: (a) the baseline, (b) a lesson at standard detail with
//	         Accept-Encoding: gzip, (c) /v1/subjects?limit=25, (d) a search,
//	         (e) a lesson 304 (If-None-Match); client-side p50/p99 latency;
//	         allocations per request (process-wide MemStats delta, and the
//	         origin handler alone, serially, for (b))
//	edge     (f) lesson 304s through the wazero host (wasmtest/host, as
//	         tools/edge serves it) with the gate call to the origin, per
//	         build; two references that bound it: (a2) two bare net/http
//	         hops with one subrequest each, and (a3) the first build's edge
//	         with the origin's gate 204 replayed by a bare handler (nothing
//	         read or metered), the edge's own share of (f)
//	worker   (g) time inside the module's calls per request, the module
//	         driven directly through its ABI: cached token (a locally
//	         answered 400, a gated 304, a forward) and a cold verification
//	module   (h) size, compile time and median instantiate time of each
//	         build: standard Go, and TinyGo when installed
//
// The throughput runs are interleaved (every scenario once per round) so
// that drift on a shared machine hits them alike.
//
//	go run ./tools/bench [-time 3s] [-runs 3] [-clients 16] [-only content,edge,worker,module] [-cpuprofile FILE] [-memprofile FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/wasmtest/host"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	time     time.Duration
	runs     int
	clients  int
	sections map[string]bool
	query    string
	corpus   string
	profile  string
	memprof  string
	variants string
}

var allSections = []string{"content", "edge", "worker", "module"}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.DurationVar(&o.time, "time", 3*time.Second, "length of one throughput run")
	fs.IntVar(&o.runs, "runs", 3, "throughput runs per scenario; the median is reported")
	fs.IntVar(&o.clients, "clients", 16, "concurrent keep-alive clients")
	only := fs.String("only", strings.Join(allSections, ","), "sections to run, comma-separated: "+strings.Join(allSections, ", "))
	fs.StringVar(&o.query, "q", "photosynthesis", "the search term of (d)")
	fs.StringVar(&o.corpus, "corpus", "", "serve this corpus directory instead of generating the full one")
	fs.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the whole run (client, edge and origin) to this file")
	fs.StringVar(&o.memprof, "memprofile", "", "write an allocation profile of the whole run to this file")
	fs.StringVar(&o.variants, "variants", "", "measure TinyGo builds with these build tags against the deployed one (variants.go): variants separated by commas, the tags of one by +")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.time <= 0 || o.runs < 1 || o.clients < 1 {
		return o, errors.New("-time, -runs and -clients must be positive")
	}
	o.sections = map[string]bool{}
	for _, s := range strings.Split(*only, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(allSections, s) {
			return o, fmt.Errorf("-only: unknown section %q (want %s)", s, strings.Join(allSections, ", "))
		}
		o.sections[s] = true
	}
	return o, nil
}

// row is one line of the table.
type row struct {
	id, what, result, ratio, goal, verdict, detail string
}

func verdict(pass bool) string {
	if pass {
		return "PASS"
	}
	return "MISS"
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if o.memprof != "" {
		f, err := os.Create(o.memprof)
		if err != nil {
			return err
		}
		defer func() {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}()
	}
	if o.profile != "" {
		f, err := os.Create(o.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	began := time.Now()

	dir, err := os.MkdirTemp("", "lectern-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	root, err := repoRoot(ctx)
	if err != nil {
		return err
	}

	var (
		rows    []row
		st      *stack
		tokens  []string
		builds  []build
		c       *corpus.Corpus
		lesson  *corpus.Lesson
		tgNote  string
		needStk = o.sections["content"] || o.sections["edge"] || o.sections["worker"]
	)
	if needStk {
		cdir := o.corpus
		if cdir == "" {
			cdir = filepath.Join(dir, "corpus")
			progress("generating the full corpus into %s", cdir)
			if _, err := gen.Write(cdir, gen.Options{Seed: 1}); err != nil {
				return fmt.Errorf("generate corpus: %w", err)
			}
		}
		if c, err = corpus.Load(cdir); err != nil {
			return fmt.Errorf("load corpus: %w", err)
		}
		progress("corpus %s: %d subjects, %d classes, %d media; starting the origin stack", c.ContentVersion, c.Counts.Subjects, c.Counts.Classes, c.Counts.Media)
		if st, err = startStack(ctx, dir, c, log); err != nil {
			return err
		}
		defer st.Close()
		if tokens, err = st.tokens(ctx, o.clients); err != nil {
			return err
		}
		lesson = c.Lessons[len(c.Lessons)/2]
	}
	if o.sections["edge"] || o.sections["worker"] || o.sections["module"] {
		if o.variants != "" {
			progress("building the edge module with TinyGo, as deployed and with -tags %s", o.variants)
			builds, err = variantBuilds(ctx, root, dir, o.variants)
		} else {
			progress("building the edge module (standard Go, and TinyGo when installed)")
			builds, tgNote, err = buildModules(ctx, root, dir)
		}
		if err != nil {
			return err
		}
	}

	fmt.Fprintf(stdout, "Lectern bench — %s/%s, GOMAXPROCS=%d, %s\n", runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.Version())
	if c != nil {
		fmt.Fprintf(stdout, "corpus %s (%d subjects, %d classes, %d media), origin in process on loopback, SQLite meters (group commit)\n",
			c.ContentVersion, c.Counts.Subjects, c.Counts.Classes, c.Counts.Media)
	}
	if o.sections["content"] || o.sections["edge"] {
		fmt.Fprintf(stdout, "throughput: %d keep-alive clients, median of %d interleaved runs of %v; ratios are to (a) of the same run\n",
			o.clients, o.runs, o.time)
	}

	if o.sections["content"] || o.sections["edge"] {
		r, err := throughput(ctx, o, st, tokens, lesson, builds, log, progress)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
		if o.variants != "" && o.sections["edge"] {
			rows = append(rows, variantRatios(r, builds)...)
		}
	}
	if o.sections["worker"] {
		measure := workerCPU
		if o.variants != "" {
			measure = workerRounds
		}
		r, err := measure(ctx, o, st, tokens, lesson, builds, progress)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	if o.sections["module"] && o.variants != "" {
		rows = append(rows, variantSizes(builds)...)
	} else if o.sections["module"] {
		r, err := modules(ctx, builds, progress)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	if tgNote != "" {
		rows = append(rows, row{what: tgNote + " (f, g and h measure standard Go only)"})
	}

	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tmeasurement\tresult\tvs (a)\tgoal\tverdict\tdetail")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.id, r.what, r.result, r.ratio, r.goal, r.verdict, r.detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n(bench took %v; goals are informational)\n", time.Since(began).Round(time.Second))
	return nil
}

// throughput measures (a)–(f).
func throughput(ctx context.Context, o options, st *stack, tokens []string, lesson *corpus.Lesson, builds []build,
	log *slog.Logger, progress func(string, ...any)) ([]row, error) {
	// (a) the baseline: a bare net/http handler answering a 200-byte body.
	const pre, post = `{"ok":true,"pad":"`, "\"}\n"
	body200 := []byte(pre + strings.Repeat("x", 200-len(pre)-len(post)) + post)
	baseURL, stopBase, err := serveLoopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body200)
	}), log)
	if err != nil {
		return nil, err
	}
	defer stopBase()
	plain := func(int) http.Header { return http.Header{"User-Agent": {"lectern-bench"}} }
	targets := []*target{{id: "a", name: "baseline: bare net/http handler, 200-byte body", url: baseURL + "/", header: plain, want: 200}}
	if o.sections["edge"] {
		// The ceiling of (f)'s design on this machine: two bare net/http
		// hops, the first making one subrequest to the second per request,
		// as the edge makes one gate call, with nothing else done.
		hopURL, stopHop, err := serveLoopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}), log)
		if err != nil {
			return nil, err
		}
		defer stopHop()
		sub := &http.Client{Transport: newTransport(64)}
		twoURL, stopTwo, err := serveLoopback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		}), log)
		if err != nil {
			return nil, err
		}
		defer stopTwo()
		targets = append(targets, &target{id: "a2", name: "reference: two bare net/http hops, one subrequest each, 304", url: twoURL + "/", header: plain, want: 304})
	}

	var lessonPath, etag, searchPath string
	if o.sections["content"] || o.sections["edge"] {
		lessonPath = "/v1/lessons/" + lesson.ID
		etag, err = lessonETag(ctx, st.OriginURL+lessonPath, tokens[0])
		if err != nil {
			return nil, err
		}
	}
	auth := func(extra ...string) func(int) http.Header {
		return func(c int) http.Header {
			h := http.Header{"User-Agent": {"lectern-bench"}, "Authorization": {"Bearer " + tokens[c%len(tokens)]}}
			for i := 0; i+1 < len(extra); i += 2 {
				h.Set(extra[i], extra[i+1])
			}
			return h
		}
	}
	conditional := auth("Accept-Encoding", "gzip", "If-None-Match", etag)
	var search *target
	if o.sections["content"] {
		searchPath = "/v1/search?q=" + url.QueryEscape(o.query)
		search = &target{id: "d", name: "search " + searchPath, url: st.OriginURL + searchPath, header: auth(), want: 200}
		targets = append(targets,
			&target{id: "b", name: "lesson " + lesson.ID + ", standard detail, gzip", url: st.OriginURL + lessonPath,
				header: auth("Accept-Encoding", "gzip"), want: 200},
			&target{id: "c", name: "subject list /v1/subjects?limit=25", url: st.OriginURL + "/v1/subjects?limit=25", header: auth(), want: 200},
			search,
			&target{id: "e", name: "lesson 304 (If-None-Match), direct to the origin", url: st.OriginURL + lessonPath,
				header: conditional, want: 304},
		)
	}
	type edge struct {
		t      *target
		h      *host.Host
		before host.Stats
	}
	// cpuSample: the edges clock one module call in cpuSample (odd:
	// host.Config.ThreadCPUEvery), so that the clock's system calls, about
	// 2 µs each here, weigh little on the throughput measured.
	const cpuSample = 7
	var edges []*edge
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	// addEdge serves build b's module through a wazero host whose origin
	// is origin, as target (id, name).
	addEdge := func(id, name, origin string, b build) error {
		mod, err := host.Compile(ctx, b.wasm)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			mod.Close(context.Background())
			return err
		}
		edgeURL := "http://" + ln.Addr().String()
		h, err := host.New(ctx, mod, host.Config{Origin: origin, JWKSURL: st.IdPURL + "/.well-known/jwks.json",
			Issuer: st.IdPURL, Audience: audience, Secret: st.Secret,
			ResourceMetadata: edgeURL + "/.well-known/oauth-protected-resource",
			Instances:        min(runtime.GOMAXPROCS(0), 4), // tools/edge's default
			Logger:           log, ThreadCPU: threadCPUClock(), ThreadCPUEvery: cpuSample})
		if err != nil {
			ln.Close()
			mod.Close(context.Background())
			return err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go srv.Serve(ln)
		closers = append(closers, func() { srv.Close(); h.Close(context.Background()); mod.Close(context.Background()) })
		primer := &http.Client{Transport: newTransport(1)}
		t := &target{id: id, name: name, url: edgeURL + lessonPath, header: conditional, want: 304,
			// One forwarded 200 per token gives the token's instance the
			// org's ETag inputs (docs/edge.md: Origin protocol).
			prime: func(ctx context.Context, c int) error {
				req, _ := http.NewRequestWithContext(ctx, "GET", edgeURL+lessonPath, nil)
				req.Header = auth("Accept-Encoding", "gzip")(c)
				resp, err := primer.Do(req)
				if err != nil {
					return err
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					return fmt.Errorf("prime the edge: GET %s: status %d", lessonPath, resp.StatusCode)
				}
				if got := resp.Header.Get("ETag"); got != etag {
					return fmt.Errorf("prime the edge: ETag %q, the origin's is %q", got, etag)
				}
				return nil
			}}
		edges = append(edges, &edge{t: t, h: h})
		targets = append(targets, t)
		return nil
	}
	if o.sections["edge"] && len(builds) > 0 {
		// The edge's own share of (f): the first build (the deployed one)
		// with the origin's gate answer replayed by a bare handler.
		replay, err := newReplayGate(st.OriginURL)
		if err != nil {
			return nil, err
		}
		replayURL, stopReplay, err := serveLoopback(replay, log)
		if err != nil {
			return nil, err
		}
		defer stopReplay()
		if err := addEdge("a3", "reference: edge 304, "+builds[0].name+", the gate's 204 replayed by a bare handler", replayURL, builds[0]); err != nil {
			return nil, err
		}
		for _, b := range builds {
			if err := addEdge("f", "edge 304 through the wazero host + gate, "+b.name, st.OriginURL, b); err != nil {
				return nil, err
			}
		}
	}

	// Warm up every target (connections, caches, the edge's instances).
	warm := min(o.time/3, time.Second)
	for _, t := range targets {
		if t.prime != nil {
			for c := range o.clients {
				if err := t.prime(ctx, c); err != nil {
					return nil, err
				}
			}
		}
		if _, err := t.measure(ctx, o.clients, warm, false); err != nil {
			return nil, fmt.Errorf("(%s) warm-up: %w", t.id, err)
		}
	}
	for _, e := range edges {
		e.before = e.h.Stats()
	}
	for i := range o.runs {
		for _, t := range targets {
			progress("round %d/%d: (%s) %s", i+1, o.runs, t.id, t.name)
			r, err := t.measure(ctx, o.clients, o.time, true)
			if err != nil {
				return nil, fmt.Errorf("(%s) %s: %w", t.id, t.name, err)
			}
			t.runs = append(t.runs, r)
		}
	}
	var latOne result
	if search != nil {
		progress("(d) search latency with 1 client")
		one := &target{url: search.url, header: search.header, want: 200}
		if latOne, err = one.measure(ctx, 1, o.time, true); err != nil {
			return nil, err
		}
	}
	var handlerAllocs, handlerBytes float64
	if o.sections["content"] {
		progress("(b) allocations of the origin handler alone")
		if handlerAllocs, handlerBytes, err = allocsPerRequest(st.API, lessonPath, auth("Accept-Encoding", "gzip")(0)); err != nil {
			return nil, err
		}
	}

	// The table's rows.
	base, _ := targets[0].median()
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms" }
	var rows []row
	for _, t := range targets {
		m, rates := t.median()
		var all []string
		for _, r := range rates {
			all = append(all, fmt.Sprintf("%.0f", r))
		}
		lat := slices.Concat(func() [][]time.Duration {
			var l [][]time.Duration
			for _, r := range t.runs {
				l = append(l, r.lat)
			}
			return l
		}()...)
		p50, p99 := percentile(lat, 50), percentile(lat, 99)
		bytes, allocs := t.perRequest()
		ratio := m.rate() / base.rate()
		r := row{id: t.id, what: t.name, result: fmt.Sprintf("%.0f req/s", m.rate()), ratio: fmt.Sprintf("%.2f×", ratio),
			detail: fmt.Sprintf("runs %s; p50 %s p99 %s; %.0f B/resp; %.0f allocs/req (process)", strings.Join(all, " "), ms(p50), ms(p99), bytes, allocs)}
		switch t.id {
		case "b":
			r.goal, r.verdict = "≥ 0.25×", verdict(ratio >= 0.25)
		case "a3", "f":
			if t.id == "f" {
				r.goal, r.verdict = "≥ 0.4×", verdict(ratio >= 0.4)
			}
			for _, e := range edges {
				if e.t == t {
					s := e.h.Stats()
					n, fwd, sub := s.Requests-e.before.Requests, s.Forwards-e.before.Forwards, s.Subrequests-e.before.Subrequests
					r.detail += fmt.Sprintf("; %d requests, %d gate calls, %d forwards", n, sub, fwd)
					if cpu := s.ModuleCPU - e.before.ModuleCPU; cpu > 0 && n > 0 {
						r.detail += fmt.Sprintf("; module CPU %.1f µs/req (thread CPU time under this load, one call in %d clocked)", float64(cpu)/float64(n)/1e3, cpuSample)
					}
					if fwd > 0 || s.Failures > 0 {
						r.verdict = "MISS (not gated)"
					}
				}
			}
		}
		rows = append(rows, r)
		if t.id == "b" && handlerAllocs > 0 {
			rows = append(rows, row{id: "b", what: "  allocations per lesson request, origin handler alone",
				result: fmt.Sprintf("%.0f allocs/req", handlerAllocs),
				detail: fmt.Sprintf("%.1f KB/req; serial ServeHTTP calls in process, MemStats delta (meters included)", handlerBytes/1024)})
		}
		if t.id == "d" {
			p99 := percentile(lat, 99)
			rows = append(rows, row{id: "d", what: fmt.Sprintf("  search latency, %d clients (client side)", o.clients),
				result: "p99 " + ms(p99), goal: "p99 < 2 ms", verdict: verdict(p99 < 2*time.Millisecond),
				detail: fmt.Sprintf("p50 %s over %d requests", ms(percentile(lat, 50)), len(lat))})
			p99 = percentile(latOne.lat, 99)
			rows = append(rows, row{id: "d", what: "  search latency, 1 client (client side)",
				result: "p99 " + ms(p99), goal: "p99 < 2 ms", verdict: verdict(p99 < 2*time.Millisecond),
				detail: fmt.Sprintf("p50 %s over %d requests, %.0f req/s", ms(percentile(latOne.lat, 50)), len(latOne.lat), latOne.rate())})
		}
	}
	return rows, nil
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

// workerCPU measures (g) for every build.
func workerCPU(ctx context.Context, o options, st *stack, tokens []string, lesson *corpus.Lesson, builds []build,
	progress func(string, ...any)) ([]row, error) {
	dur := min(o.time, 2*time.Second)
	client := &http.Client{Transport: newTransport(2),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	lessonPath := "/v1/lessons/" + lesson.ID
	etag, err := lessonETag(ctx, st.OriginURL+lessonPath, tokens[0])
	if err != nil {
		return nil, err
	}
	msg := func(path, query string, kv ...string) startMessage {
		m := startMessage{Method: "GET", Path: path, Query: query, Now: time.Now().UnixMilli(),
			Headers: [][2]string{{"Host", "api.lectern.test"}, {"User-Agent", "lectern-bench"}, {"Accept", "*/*"}}}
		for i := 0; i+1 < len(kv); i += 2 {
			m.Headers = append(m.Headers, [2]string{kv[i], kv[i+1]})
		}
		return m
	}
	bearer := "Bearer " + tokens[0]
	var rows []row
	for _, b := range builds {
		progress("(g) worker CPU, %s", b.name)
		rt, compiled, _, err := runtimeFor(ctx, b)
		if err != nil {
			return nil, err
		}
		defer rt.Close(context.Background())
		// One instance configured like the edge of the stack...
		warm, _, err := instantiate(ctx, rt, compiled)
		if err != nil {
			return nil, err
		}
		if err := warm.setup(guestConfig{Origin: st.OriginURL, JWKSURL: st.IdPURL + "/.well-known/jwks.json", Issuer: st.IdPURL,
			Audience: audience, Secret: st.Secret, ResourceMetadata: "http://edge.test/.well-known/oauth-protected-resource"}); err != nil {
			return nil, err
		}
		// ...and one trusting a key of the bench's, so that every request
		// can bring a token it has never seen.
		sg := newSigner("http://bench-issuer.test")
		cold, _, err := instantiate(ctx, rt, compiled)
		if err != nil {
			return nil, err
		}
		if err := cold.setup(guestConfig{Origin: st.OriginURL, JWKSURL: sg.issuer + "/.well-known/jwks.json", Issuer: sg.issuer,
			Audience: audience, Secret: st.Secret, ResourceMetadata: "http://edge.test/.well-known/oauth-protected-resource"}); err != nil {
			return nil, err
		}
		fetch := httpFetcher(client)
		var forwards int
		counting := func(out *output) resumeMessage {
			if out.Forward {
				forwards++
			}
			return fetch(out)
		}
		// Prime: the JWKS and the token (a local 400), the org's ETag
		// inputs (one forwarded lesson).
		for _, m := range []startMessage{msg("/v1/subjects", "limit=0", "Authorization", bearer),
			msg(lessonPath, "", "Authorization", bearer, "Accept-Encoding", "gzip")} {
			if _, _, _, err := warm.exchange(m, fetch); err != nil {
				return nil, fmt.Errorf("(g) prime %s: %w", b.name, err)
			}
		}
		flows := []*flow{
			{name: "cached token, locally answered 400 (/v1/subjects?limit=0)", want: 400, guest: warm, fetch: fetch,
				next: func(int) startMessage { return msg("/v1/subjects", "limit=0", "Authorization", bearer) }},
			{name: "cached token, edge 304: start + gate resume", want: 304, guest: warm, fetch: counting,
				next: func(int) startMessage {
					return msg(lessonPath, "", "Authorization", bearer, "Accept-Encoding", "gzip", "If-None-Match", etag)
				}},
			{name: "cached token, forwarded lesson: start + resume", want: 200, guest: warm, fetch: fetch,
				next: func(int) startMessage { return msg(lessonPath, "", "Authorization", bearer, "Accept-Encoding", "gzip") }},
			{name: "cold token (one EdDSA verification), local 400", want: 400, guest: cold, fetch: sg.fetch,
				next: func(int) startMessage { return msg("/v1/subjects", "limit=0", "Authorization", "Bearer "+sg.token()) }},
		}
		// The same 304 with module calls back to back: the gate's first
		// answer replayed, so no origin work runs between the calls and
		// evicts the module's code and data from the CPU's caches. Not
		// the goal's measure (the edge always waits on the origin between
		// its calls); it shows how much of that one is cold caches.
		var replay *resumeMessage
		flows = append(flows, &flow{name: "edge 304 back to back (gate answer replayed, warm caches), cached token", want: 304,
			guest: warm, next: flows[1].next, fetch: func(out *output) resumeMessage {
				if replay == nil {
					m := counting(out)
					replay = &m
				}
				return *replay
			}})
		for i, f := range flows {
			if err := f.run(dur); err != nil {
				return nil, fmt.Errorf("(g) %s: %w", b.name, err)
			}
			if i == 1 && forwards > 0 {
				return nil, fmt.Errorf("(g) %s: %d of the conditional requests were forwarded, not gated", b.name, forwards)
			}
			// CPU time where the thread's clock exists; else wall-clock time,
			// which also counts time the thread waited for a core.
			spent, clock := f.cpu, "thread CPU time"
			if !haveThreadCPU {
				spent, clock = f.wall, "wall-clock time (no thread CPU clock here)"
			}
			med, wall := medianDuration(spent), medianDuration(f.wall)
			r := row{id: "g", what: fmt.Sprintf("worker CPU, %s, %s", b.name, f.name),
				result: fmt.Sprintf("%.1f µs/req", float64(med)/1e3),
				detail: fmt.Sprintf("%s, median of %d requests, %d module call(s) each; p90 %.1f µs; wall-clock median %.1f µs",
					clock, len(spent), f.calls, float64(spent[len(spent)*9/10])/1e3, float64(wall)/1e3)}
			if strings.HasPrefix(f.name, "cached") {
				r.goal, r.verdict = "< 50 µs", verdict(med < 50*time.Microsecond)
			}
			rows = append(rows, r)
		}
		warm.mod.Close(ctx)
		cold.mod.Close(ctx)
	}
	return rows, nil
}

// modules measures (h) for every build.
func modules(ctx context.Context, builds []build, progress func(string, ...any)) ([]row, error) {
	const n = 15
	var rows []row
	for _, b := range builds {
		progress("(h) module %s: %d instantiations", b.name, n)
		rt, compiled, compile, err := runtimeFor(ctx, b)
		if err != nil {
			return nil, err
		}
		var took []time.Duration
		for range n {
			g, d, err := instantiate(ctx, rt, compiled)
			if err != nil {
				rt.Close(ctx)
				return nil, err
			}
			took = append(took, d)
			g.mod.Close(ctx)
		}
		rt.Close(ctx)
		rows = append(rows, row{id: "h", what: "module, " + host.Toolchain(b.wasm),
			result: fmt.Sprintf("%d KB, instantiate %.2f ms", (len(b.wasm)+1023)/1024, float64(medianDuration(took))/1e6),
			detail: fmt.Sprintf("%d bytes; median of %d instantiations (incl. _initialize) in wazero; compile %v",
				len(b.wasm), n, compile.Round(time.Millisecond))})
	}
	return rows, nil
}

// repoRoot is the module's root directory, where the builds run.
func repoRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run bench inside the lectern module")
	}
	return filepath.Dir(gomod), nil
}
