// Command bench measures Lectern's throughput as ratios to a baseline
// measured in the same run — a bare net/http handler answering a 200-byte
// body — and prints one table with the goal of each line (PASS/MISS is
// informational: the exit status is 0 unless something failed).
//
// It generates the full deterministic corpus (origin/corpus/gen, seed 1)
// into a temporary directory, opens the whole origin in process as
// origin/cmd/origin does (origin/wiring: public API with its access log,
// metrics and health, identity provider, store and meters in a new
// database, a bundle store beside it; no admin API), creates an
// organisation granted every tier with no caps, and takes tokens from the
// identity provider. Every request crosses a real loopback listener.
//
// -db says where the rows that touch storage run (backend.go): SQLite in
// the temporary directory (the default), PostgreSQL in a new schema of
// the database a postgres:// URL names (dropped at the end), or both,
// "sqlite,postgres://…", one pass after the other, each with its own (a)
// measured in its own rounds; every row names its backend (column db, and
// "backend" in the recorded JSON), "-" when it touches none. Without a
// postgres:// URL the header says that PostgreSQL was skipped.
//
// Sections (-only selects some, comma-separated):
//
//	content  requests per second, N keep-alive clients, median of -runs runs
//	         of -time: (a) the baseline, (b) a lesson at standard detail with
//	         Accept-Encoding: gzip, (c) /v1/subjects?limit=25, (d) a search,
//	         (e) a lesson 304 (If-None-Match); client-side p50/p99 latency;
//	         allocations per request (process-wide MemStats delta, and the
//	         origin handler alone, serially, for (b)); (i) a mint of 100
//	         media ids, and its p50 with one client; (j) the inline export
//	         of a 30-class subject, 200 and 304; the export rows, as in
//	         exports; learner progress (progress.go): (l) PUTs by N
//	         learners at once, p50 and p99, (m) GET /v1/progress of a
//	         learner with 100 classes, 200 and 304, (n) N writers on one
//	         learner, saved writes per second and the share answered 409
//	progress (a) and the learner progress rows (l)–(n) alone, the
//	         content section's rounds without its other rows
//	exports  the content section's export rows alone (exports.go,
//	         downloads.go): (k) a zip_url export and its zip download,
//	         the bundle store purged before each (a cold build), against
//	         reading its lessons and transcripts one by one, and the peak
//	         heap of 16 concurrent zip downloads; (k2) the origin's CPU
//	         per download of one export's link by 16 clients (the 429s of
//	         the per-organisation bound retried) against one cold build's,
//	         from a child origin process's CPU clock, and another
//	         organisation's lesson-read p50 during the downloads against
//	         idle; (k3) a refused inline export's origin time against a
//	         refused zip_url export's (exports quota 0)
//	edge     (f) lesson 304s through the wazero host (worker/wazero, as
//	         worker/cmd/edge serves it) with the gate call to the origin, per
//	         build; two references that bound it: (a2) two bare net/http
//	         hops with one subrequest each, and (a3) the first build's edge
//	         with the origin's gate 204 replayed by a bare handler (nothing
//	         read or metered), the edge's own share of (f)
//	leases   edge leases (#19, lease*.go), the deployed build: (f) lesson
//	         304s through a wazero host with leases on, a scenario of the
//	         throughput rounds beside (a3); (l1) edge-304 latency with one
//	         client and a 30 ms edge-to-origin delay, gated and leased; (l2)
//	         the same with N clients, requests per second; (c) the origin's
//	         CPU per edge 304 at 500 requests a second, gated and leased, from
//	         a child origin process's CPU clock
//	tokens   client_credentials tokens per second from the identity
//	         provider (tokens.go), ratios to (a) of the same run: (t1) a
//	         known client, a scenario of the throughput rounds (goal ≥
//	         2,000/s); (t2) a new client each request, registered with the
//	         keyed hash; (t3) the same registered with bcrypt, 0.4.0's form
//	worker   (g) time inside the module's calls per request, the module
//	         driven directly through its ABI: cached token (a locally
//	         answered 400, a gated 304, a forward) and a cold verification
//	module   (h) size, compile time and median instantiate time of each
//	         build: standard Go, and TinyGo when installed
//	memory   (o) the origin's resident memory with the corpus: the binary
//	         as shipped run as a child process, its VmRSS settled after
//	         the start, at its peak under lesson reads and during a corpus
//	         reload, and settled after the reload (memory.go)
//	meters   (p) durable meter increments per second, group commit against
//	         one transaction per op, 1 and 64 clients (meters.go; goal ≥ 10×
//	         at 64 clients)
//	scale    (s) the origin as shipped on corpora -scales times the deployed
//	         one (1, 4, 10): RSS settled and peak, ready time, reload time,
//	         lesson read p50, search p99 with 1 and -clients clients, the
//	         largest subject's export (scale.go), on the first -db backend
//
// The machine's load averages at the start and the end are printed above
// the table and recorded. -trace FILE writes a runtime/trace of (d)'s
// one-client search run, each request a "request" region.
//
// The throughput runs are interleaved (every scenario once per round) so
// that drift on a shared machine hits them alike.
//
//	go run ./tools/bench [-db sqlite|postgres://…|sqlite,postgres://…] [-time 3s] [-runs 3] [-clients 16] [-only content,progress,exports,edge,leases,tokens,worker,module,memory,meters,scale] [-scales 1,4,10] [-memlimit=false] [-cpuprofile FILE] [-memprofile FILE] [-trace FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	"github.com/lectern-api/lectern/origin/wiring"
	"github.com/lectern-api/lectern/worker/wazero"
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
	record   bool      // write the results under var/bench/ and compare with the previous file
	memLimit bool      // set the memory limit in process as the origin does
	backends []backend // -db, in turn (backend.go)
	scales   []int     // -scales: the scale section's corpus sizes, × the deployed one
	trace    string    // -trace: a runtime/trace of (d)'s one-client search latency run
}

var allSections = []string{"content", "progress", "exports", "edge", "leases", "tokens", "worker", "module", "memory", "meters", "scale"}

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
	fs.BoolVar(&o.record, "record", true, "write the results as JSON under "+benchDir+"/ and print each row's change against the previous file there")
	fs.BoolVar(&o.memLimit, "memlimit", true, "set the memory limit of the in-process origin as origin/cmd/origin does (unless GOMEMLIMIT is set)")
	db := fs.String("db", "sqlite", "the storage of the rows that touch it: sqlite, a postgres:// URL (a new schema of that database, dropped at the end), or both separated by a comma, run in turn")
	scales := fs.String("scales", "1,4,10", "the scale section's corpora, in multiples of the deployed one (corpusgen -scale)")
	fs.StringVar(&o.trace, "trace", "", "write a runtime/trace of (d)'s one-client search latency run to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.backends, err = parseBackends(*db); err != nil {
		return o, err
	}
	for _, f := range strings.Split(*scales, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 || k > gen.MaxScale {
			return o, fmt.Errorf("-scales: %q is not a scale from 1 to %d", f, gen.MaxScale)
		}
		o.scales = append(o.scales, k)
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
	backend                                        string // the storage it ran on: sqlite, postgres, or "-" for none (backend.go)
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
	rec := newRecord(ctx, root, args, began)

	var (
		rows   []row
		builds []build
		tgNote string
		c      *corpus.Corpus // the corpus served, for the header
	)
	cdir := o.corpus
	if (o.needsStack() || o.sections["memory"]) && cdir == "" {
		cdir = filepath.Join(dir, "corpus")
		progress("generating the full corpus into %s", cdir)
		if _, err := gen.Write(cdir, gen.Options{Seed: 1}); err != nil {
			return fmt.Errorf("generate corpus: %w", err)
		}
	}
	if o.sections["edge"] || o.sections["leases"] || o.sections["worker"] || o.sections["module"] {
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
	// Every section that touches storage, once per backend, in turn,
	// each pass's origin closed before the next opens (one corpus in the
	// process, as in a single-backend run).
	var passes []*pass
	for i, b := range o.backends {
		p := &pass{o: o, b: b, first: i == 0, root: root, dir: filepath.Join(dir, b.name), cdir: cdir,
			builds: builds, log: log, progress: progress}
		passes = append(passes, p)
		r, pc, err := p.run(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", b.label(), err)
		}
		if pc != nil {
			c = pc
		}
		for _, w := range r {
			if w.backend == "" {
				w.backend = b.name
				if noStorage[w.id] || w.id == "" {
					w.backend = "-"
				}
			}
			rows = append(rows, w)
		}
	}
	if len(passes) > 1 && (o.sections["content"] || o.sections["progress"]) {
		r, err := acrossBackends(ctx, o, passes, memLimit(o), log, progress)
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
	if o.sections["scale"] {
		r, err := scaleRows(ctx, o, root, dir, progress)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	for i := range rows {
		if rows[i].backend == "" {
			rows[i].backend = "-"
		}
	}

	rec.add(rows)
	rec.Machine.LoadEnd = loadAverage()
	records := filepath.Join(root, benchDir)
	prev, prevPath := latest(records)
	fmt.Fprintf(stdout, "Lectern bench — %s/%s, GOMAXPROCS=%d, %s\n", runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(stdout, "machine: %d CPUs%s; load average %s at the start, %s at the end (1, 5, 15 min; the bench's own clients count in the second)\n",
		rec.Machine.CPUs, or(", "+rec.Machine.CPU, ""), rec.Machine.LoadAvg, rec.Machine.LoadEnd)
	if c != nil {
		fmt.Fprintf(stdout, "corpus %s (%d subjects, %d classes, %d media)\n", c.ContentVersion, c.Counts.Subjects, c.Counts.Classes, c.Counts.Media)
	}
	if o.needsStack() || o.sections["memory"] || o.sections["meters"] || o.sections["scale"] {
		var names []string
		for _, b := range o.backends {
			names = append(names, b.label())
		}
		fmt.Fprintf(stdout, "storage (column db): %s, each in a new database (SQLite: a file in a temporary directory; PostgreSQL: a new schema, dropped at the end), meters with group commit; rows marked - touch no storage\n",
			strings.Join(names, ", then "))
		if !hasPostgres(o.backends) {
			fmt.Fprintln(stdout, "PostgreSQL: skipped, no -db postgres://… given (-db sqlite,postgres://user@host/db runs both)")
		}
	}
	if o.sections["content"] || o.sections["progress"] || o.sections["edge"] || o.sections["leases"] || o.sections["tokens"] {
		fmt.Fprintf(stdout, "throughput: %d keep-alive clients, median of %d interleaved runs of %v; ratios are to (a) of the same backend's rounds\n",
			o.clients, o.runs, o.time)
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tdb\tmeasurement\tresult\tvs (a)\tgoal\tverdict\tvs previous\tdetail")
	for i, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.id, r.backend, r.what, r.result, r.ratio, r.goal, r.verdict, change(prev, rec.Rows[i]), r.detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\n(bench took %v on commit %s, load %s at the start and %s at the end; goals are informational)\n",
		time.Since(began).Round(time.Second), or(rec.Commit, "unknown"), rec.Machine.LoadAvg, rec.Machine.LoadEnd)
	if prev != nil {
		fmt.Fprintf(stdout, "vs previous: %s (commit %s, load %.1f)\n", prevPath, or(prev.Commit, "unknown"), prev.Machine.Load1)
	}
	if o.record {
		path, err := rec.write(records)
		if err != nil {
			return fmt.Errorf("record the results: %w", err)
		}
		fmt.Fprintf(stdout, "results: %s\n", path)
	}
	return nil
}

// acrossBackends measures (l) on a new stack of every backend, all open
// at once, in the same interleaved rounds with one (a), so that the goal
// that compares backends (PostgreSQL's progress PUTs at least SQLite's)
// compares rates measured side by side, not in passes minutes apart.
func acrossBackends(ctx context.Context, o options, passes []*pass, memLimit bool, log *slog.Logger,
	progress func(string, ...any)) ([]row, error) {
	var (
		scenarios []*scenario
		tbs       []*throughputBench
	)
	defer func() {
		for _, tb := range tbs {
			tb.close()
		}
		for _, p := range passes {
			p.close()
		}
	}()
	for i, p := range passes {
		progress("(l) a new origin stack (%s) beside the others", p.b.label())
		dir := filepath.Join(p.dir, "across")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		db, drop, err := p.b.database(ctx, dir, "lectern_bench_")
		if err != nil {
			return nil, err
		}
		st, err := startStack(ctx, dir, p.cdir, db, log, memLimit)
		if err != nil {
			if drop != nil {
				drop()
			}
			return nil, err
		}
		p.stack, p.drop = st, drop
		tb := &throughputBench{ctx: ctx, o: o, st: st, log: log, progress: progress}
		tbs = append(tbs, tb)
		if i == 0 {
			a, err := tb.baseline()
			if err != nil {
				return nil, err
			}
			scenarios = append(scenarios, a)
		}
		l, err := tb.progressWrites()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.b.label(), err)
		}
		l.name = p.b.label() + ": " + l.name
		scenarios = append(scenarios, l)
	}
	progress("(l) every backend in the same rounds")
	if err := tbs[0].measure(scenarios); err != nil {
		return nil, err
	}
	base, _ := scenarios[0].median()
	var rows []row
	var rates []float64
	for i, s := range scenarios[1:] {
		r := s.row(base)
		r.id, r.backend, r.what = "l", passes[i].b.name, "  same rounds: "+s.name
		m, _ := s.median()
		rates = append(rates, m.rate())
		rows = append(rows, r)
	}
	// Round by round: each round's PostgreSQL rate over SQLite's.
	sq := slices.IndexFunc(passes, func(p *pass) bool { return p.b.url == "" })
	pg := slices.IndexFunc(passes, func(p *pass) bool { return p.b.url != "" })
	if sq < 0 || pg < 0 {
		return rows, nil
	}
	var per []float64
	for k := range scenarios[1+sq].runs {
		per = append(per, scenarios[1+pg].runs[k].rate()/scenarios[1+sq].runs[k].rate())
	}
	var all []string
	for _, f := range per {
		all = append(all, fmt.Sprintf("%.2f", f))
	}
	med := slices.Sorted(slices.Values(per))[len(per)/2]
	rows = append(rows, row{id: "l", backend: "both", what: "  progress PUTs, PostgreSQL ÷ SQLite, the same rounds",
		result: fmt.Sprintf("%.2f×", med), goal: "≥ 1×", verdict: verdict(med >= 1),
		detail: fmt.Sprintf("median of the rounds' ratios %s; medians %.0f against %.0f req/s; (a) in the same rounds %.0f req/s",
			strings.Join(all, " "), rates[pg], rates[sq], base.rate())})
	return rows, nil
}

// memLimit reports whether the in-process origin sets its memory limit
// (-memlimit, unless GOMEMLIMIT is set).
func memLimit(o options) bool { return o.memLimit && os.Getenv("GOMEMLIMIT") == "" }

// needsStack reports whether a selected section needs the origin opened
// in process.
func (o options) needsStack() bool {
	return o.sections["content"] || o.sections["exports"] || o.sections["progress"] || o.sections["edge"] ||
		o.sections["leases"] || o.sections["tokens"] || o.sections["worker"]
}

// A pass runs the sections that touch storage on one backend: the
// in-process origin on a new database of it, and the child origins of
// (o), (k2) and (c) each on one of their own; worker (g) in the first
// pass only.
type pass struct {
	o          options
	b          backend
	first      bool
	root, dir  string
	cdir       string
	builds     []build
	log        *slog.Logger
	progress   func(string, ...any)
	stack      *stack // the in-process origin, left open (close)
	drop       func() // drops its PostgreSQL schema; nil: none
	lessonPath string
}

// close closes the pass's stack and drops its database.
func (p *pass) close() {
	if p.stack != nil {
		p.stack.Close()
		p.stack = nil
	}
	if p.drop != nil {
		p.drop()
		p.drop = nil
	}
}

func (p *pass) run(ctx context.Context) (_ []row, c *corpus.Corpus, err error) {
	o, progress := p.o, p.progress
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, nil, err
	}
	childBackend = p.b
	var (
		rows    []row
		memRows []row // (o), measured first, listed last
		st      *stack
		tokens  []string
		lesson  *corpus.Lesson
		exports = o.sections["content"] || o.sections["exports"]
	)
	if o.sections["memory"] {
		// First, while the bench's process is still small and the
		// machine quiet. The bench's own load of the corpus is garbage
		// once the rows are measured.
		mc, err := corpus.Load(p.cdir)
		if err != nil {
			return nil, nil, fmt.Errorf("load corpus: %w", err)
		}
		if memRows, err = memory(ctx, o, p.root, p.dir, mc, progress); err != nil {
			return nil, nil, err
		}
		if !o.needsStack() {
			c = mc // for the header: no origin in process loads it
		}
	}
	if o.needsStack() {
		progress("starting the origin stack (%s) on the corpus in %s", p.b.label(), p.cdir)
		memLimit := memLimit(o)
		db, drop, err := p.b.database(ctx, p.dir, "lectern_bench_")
		if err != nil {
			return nil, nil, err
		}
		if st, err = startStack(ctx, p.dir, p.cdir, db, p.log, memLimit); err != nil {
			if drop != nil {
				drop()
			}
			return nil, nil, err
		}
		p.stack, p.drop = st, drop
		defer p.close()
		// The origin's corpus, the one load of it: settled again as the
		// origin does once its corpus is served (origin/wiring,
		// memory.go): here the limit also covers the bench's clients.
		c = st.Content.Corpus
		progress("corpus %s: %d subjects, %d classes, %d media", c.ContentVersion, c.Counts.Subjects, c.Counts.Classes, c.Counts.Media)
		wiring.SettleMemory(memLimit)
		if tokens, err = st.tokens(ctx, o.clients); err != nil {
			return nil, nil, err
		}
		lesson = c.Lessons[len(c.Lessons)/2]
	}
	if o.sections["content"] || o.sections["progress"] || o.sections["edge"] || o.sections["leases"] || o.sections["tokens"] {
		r, err := throughput(ctx, o, st, tokens, lesson, p.builds, p.log, progress)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, r...)
		if o.variants != "" && o.sections["edge"] {
			rows = append(rows, variantRatios(r, p.builds)...)
		}
	}
	if o.sections["leases"] {
		r, err := leaseRows(ctx, o, st, tokens, "/v1/lessons/"+lesson.ID, p.builds, p.root, p.dir, c.Dir, p.log, progress)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, r...)
	}
	if exports {
		r, err := zipExport(ctx, o, st, progress)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, r...)
		if r, err = bundleDownloads(ctx, o, p.root, p.dir, c, "/v1/lessons/"+lesson.ID, progress); err != nil {
			return nil, nil, err
		}
		rows = append(rows, r...)
		if r, err = refusedExports(ctx, o, st, progress); err != nil {
			return nil, nil, err
		}
		rows = append(rows, r...)
	}
	if o.sections["worker"] && p.first {
		measure := workerCPU
		if o.variants != "" {
			measure = workerRounds
		}
		r, err := measure(ctx, o, st, tokens, lesson, p.builds, progress)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, r...)
	}
	if o.sections["meters"] {
		r, err := meterRows(ctx, o, p.b, p.dir, progress)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, r...)
	}
	return append(rows, memRows...), c, nil
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
	msg := func(path, query string, kv ...string) wazero.StartMessage {
		m := wazero.StartMessage{Method: "GET", Path: path, Query: query, Now: time.Now().UnixMilli(),
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
		mod, err := wazero.Compile(ctx, b.wasm)
		if err != nil {
			return nil, fmt.Errorf("(g) %s: %w", b.name, err)
		}
		defer mod.Close(context.Background())
		// One instance configured like the edge of the stack...
		g, err := mod.Instantiate(ctx, io.Discard)
		if err != nil {
			return nil, err
		}
		warm := guest{g}
		if err := warm.Configure(wazero.ConfigMessage{Origin: st.OriginURL, JWKSURL: st.IdPURL + "/.well-known/jwks.json", Issuer: st.IdPURL,
			Audience: audience, Secret: st.Secret, ResourceMetadata: "http://edge.test/.well-known/oauth-protected-resource"}); err != nil {
			return nil, err
		}
		// ...and one trusting a key of the bench's, so that every request
		// can bring a token it has never seen.
		sg := newSigner("http://bench-issuer.test")
		if g, err = mod.Instantiate(ctx, io.Discard); err != nil {
			return nil, err
		}
		cold := guest{g}
		if err := cold.Configure(wazero.ConfigMessage{Origin: st.OriginURL, JWKSURL: sg.issuer + "/.well-known/jwks.json", Issuer: sg.issuer,
			Audience: audience, Secret: st.Secret, ResourceMetadata: "http://edge.test/.well-known/oauth-protected-resource"}); err != nil {
			return nil, err
		}
		fetch := httpFetcher(client)
		var forwards int
		counting := func(out *wazero.Output) wazero.ResumeMessage {
			if out.Forward {
				forwards++
			}
			return fetch(out)
		}
		// Prime: the JWKS and the token (a local 400), the org's ETag
		// inputs (one forwarded lesson).
		for _, m := range []wazero.StartMessage{msg("/v1/subjects", "limit=0", "Authorization", bearer),
			msg(lessonPath, "", "Authorization", bearer, "Accept-Encoding", "gzip")} {
			if _, _, _, err := warm.exchange(m, fetch); err != nil {
				return nil, fmt.Errorf("(g) prime %s: %w", b.name, err)
			}
		}
		flows := []*flow{
			{name: "cached token, locally answered 400 (/v1/subjects?limit=0)", want: 400, guest: warm, fetch: fetch,
				next: func(int) wazero.StartMessage { return msg("/v1/subjects", "limit=0", "Authorization", bearer) }},
			{name: "cached token, edge 304: start + gate resume", want: 304, guest: warm, fetch: counting,
				next: func(int) wazero.StartMessage {
					return msg(lessonPath, "", "Authorization", bearer, "Accept-Encoding", "gzip", "If-None-Match", etag)
				}},
			{name: "cached token, forwarded lesson: start + resume", want: 200, guest: warm, fetch: fetch,
				next: func(int) wazero.StartMessage {
					return msg(lessonPath, "", "Authorization", bearer, "Accept-Encoding", "gzip")
				}},
			{name: "cold token (one EdDSA verification), local 400", want: 400, guest: cold, fetch: sg.fetch,
				next: func(int) wazero.StartMessage {
					return msg("/v1/subjects", "limit=0", "Authorization", "Bearer "+sg.token())
				}},
		}
		// The same 304 with module calls back to back: the gate's first
		// answer replayed, so no origin work runs between the calls and
		// evicts the module's code and data from the CPU's caches. Not
		// the goal's measure (the edge always waits on the origin between
		// its calls); it shows how much of that one is cold caches.
		var replay *wazero.ResumeMessage
		flows = append(flows, &flow{name: "edge 304 back to back (gate answer replayed, warm caches), cached token", want: 304,
			guest: warm, next: flows[1].next, fetch: func(out *wazero.Output) wazero.ResumeMessage {
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
		warm.Close(ctx)
		cold.Close(ctx)
	}
	return rows, nil
}

// modules measures (h) for every build.
func modules(ctx context.Context, builds []build, progress func(string, ...any)) ([]row, error) {
	const n = 15
	var rows []row
	for _, b := range builds {
		progress("(h) module %s: %d instantiations", b.name, n)
		t0 := time.Now()
		mod, err := wazero.Compile(ctx, b.wasm)
		compile := time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("(h) %s: %w", b.name, err)
		}
		var took []time.Duration
		for range n {
			t0 := time.Now()
			g, err := mod.Instantiate(ctx, io.Discard)
			took = append(took, time.Since(t0))
			if err != nil {
				mod.Close(ctx)
				return nil, err
			}
			g.Close(ctx)
		}
		mod.Close(ctx)
		rows = append(rows, row{id: "h", what: "module, " + mod.Toolchain,
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
