// Command soak is the soak with faults (issue #18, point 7): it runs the
// real stack from freshly built binaries (tools/stack starting the origin
// command and the edge, the edge module under wazero, TinyGo's build when
// TinyGo is installed, else standard Go's), on SQLite, or on PostgreSQL
// when -pg or LECTERN_TEST_PG names a database (a temporary schema of it,
// dropped afterwards), and mixes every route through the edge for
// -duration, across 50 organisations, while it injects faults; then it
// checks what the clients were told against what the stack recorded.
//
//	go run ./tools/soak                 # 10 minutes on SQLite
//	go run ./tools/soak -short          # 60 seconds (CI)
//	go run ./tools/soak -short -pg 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// The organisations are made through the admin API with various grants
// (every tier, some tiers, one tier, one or two subjects, a tier and a
// subject) and plans (no caps; low hourly caps, so RATE_LIMITED happens;
// monthly download, export and test-prep quotas; a monthly calls quota;
// moderate caps), each with a client_credentials client and a learner app
// whose learners sign in through the dev identity provider
// (authorization_code with PKCE S256). Workers then send lessons,
// transcripts, quizzes, media lists, lists and search with their cursors,
// If-None-Match revalidations (304s), mints and downloads of the minted
// links, exports in both formats and downloads of the zips, the test-prep
// catalog and pages, the licence, progress PUTs and GETs, and refusals,
// free and billed. Lesson reads keep within 40% of an organisation's
// granted lessons, so that the enumeration alarm does not suspend it.
//
// Faults: the origin is killed with SIGKILL (once; twice in the long run)
// and tools/stack restarts it; its bundle directory is removed (it makes
// it again); on PostgreSQL a second origin serves beside it behind the
// same edge and is stopped with SIGSTOP for 10 s (once; twice in the long
// run: the edge sends what it holds to the other, and each request must
// still be billed once), and the server is restarted once
// (pg_ctlcluster for the cluster on the DSN's port, else `service
// postgresql restart`; skipped, saying why, when neither works here: they
// need root or the cluster's owner).
//
// Checks, printed, each failing the run (exit status 1):
//
//  1. Meters: per organisation and meter (the month's calls, downloads,
//     exports and test-prep items; the hour's calls, lesson reads and
//     mints, as GET /admin/v1/orgs/{orgId} shows them), the tally of what
//     every answered request must have billed (spec: Limits) ≤ metered ≤
//     that tally plus the most the requests whose answer was lost (no
//     answer, or a 5xx) can have billed. For the hourly meters, a request
//     that spans the top of the check's hour counts in that tolerance.
//  2. The export ledger (GET /admin/v1/orgs/{orgId}/ledger) holds a row for
//     every URL a mint answered, under the row id its link names, and for
//     every export shipped, matched by the request id the client sent;
//     no row of a request that was refused; and no request billed twice:
//     one whose answer was lost has at most the rows it asked for.
//  3. No acknowledged progress write is lost: each learner's final record
//     (GET /v1/progress, every page) holds every class a PUT answered 200
//     for, with a bestScore and score those PUTs explain, and an XP that
//     its classes add up to.
//  4. Error rate (no answer or 5xx) and p99 latency before, during and
//     after each fault, and the recovery time: from the fault to the
//     first success of a request begun after it. A fault the stack never
//     recovers from fails the run.
//  5. Every download begun after the bundle directory was removed (until
//     the next fault) got a definite answer: no 5xx.
//
// Answers no request of the mix may get (a 400 on a valid request, a
// wrong request id) are listed and fail the run too.
package main

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lectern-api/lectern/internal/cmdline"
	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/tools/internal/stackbin"
	"github.com/lectern-api/lectern/worker/wasmbuild"
)

func main() { cmdline.Main("soak", run) }

// config is the soak's command line.
type config struct {
	duration  time.Duration
	short     bool
	pg        string
	corpusDir string
	orgs      int
	learners  int
	workers   int
	keep      bool
	seed      uint64
}

// errChecks is run's answer when a check failed (the summary says which).
var errChecks = errors.New("checks failed")

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var cfg config
	fs := cmdline.New("soak", getenv)
	fs.DurationVar(&cfg.duration, "duration", 10*time.Minute, "how long the mix runs")
	fs.BoolVar(&cfg.short, "short", false, "a 60-second run (CI): -duration 1m, one origin kill (and one PostgreSQL restart)")
	fs.Env(&cfg.pg, "LECTERN_TEST_PG", "pg", "", "PostgreSQL database URL to run on, in a temporary schema (default: SQLite)")
	fs.StringVar(&cfg.corpusDir, "corpus", "", "corpus directory (default: the small generated corpus, in the run's directory)")
	fs.IntVar(&cfg.orgs, "orgs", 50, "organisations")
	fs.IntVar(&cfg.learners, "learners", 2, "learners per organisation")
	fs.IntVar(&cfg.workers, "workers", 12, "concurrent clients")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the run's directory (stack log, database) and print it")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the mix's choices")
	if err := fs.Parse(args, stdout); err != nil {
		return err
	}
	if cfg.short {
		cfg.duration = time.Minute
	}
	if cfg.duration < 30*time.Second || cfg.orgs < 1 || cfg.learners < 1 || cfg.workers < 1 {
		return errors.New("want -duration >= 30s, -orgs, -learners and -workers >= 1")
	}

	dir, err := os.MkdirTemp("", "lectern-soak-")
	if err != nil {
		return err
	}
	if cfg.keep {
		defer fmt.Fprintln(stdout, "soak: kept", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	began := time.Now()
	bin := filepath.Join(dir, "bin")
	tinygo := wasmbuild.TinyGo()
	module := "standard Go"
	if tinygo != "" {
		module = "TinyGo (" + tinygo + ")"
	}
	fmt.Fprintf(stdout, "soak: building the commands and the edge module (%s)\n", module)
	if err := stackbin.Build(bin, tinygo); err != nil {
		return err
	}
	if cfg.corpusDir == "" {
		cfg.corpusDir = filepath.Join(dir, "corpus")
		if _, err := gen.Write(cfg.corpusDir, gen.Options{Seed: 1, Small: true}); err != nil {
			return err
		}
	}
	c, err := corpus.Load(cfg.corpusDir)
	if err != nil {
		return err
	}

	store, db := "sqlite", filepath.Join(dir, "lectern.db")
	var pgFault []string
	var pgSkip string
	if cfg.pg != "" {
		store = "postgres"
		dsn, drop, err := pgschema.New(ctx, cfg.pg, "lectern_soak_")
		if err != nil {
			return fmt.Errorf("PostgreSQL: %w", err)
		}
		defer drop()
		db = dsn
		pgFault, pgSkip = pgRestart(cfg.pg)
	}
	addrs := make([]string, 4) // edge, origin, identity provider, admin API
	for i := range addrs {
		if addrs[i], err = stackbin.FreeAddr(); err != nil {
			return err
		}
	}
	adminToken := "soak-" + crand.Text()
	bundleDir := filepath.Join(dir, "bundles") // the stack's origin's: a fault removes it
	env := append(baseEnv(), "LECTERN_EDGE_ADDR="+addrs[0], "LECTERN_ORIGIN_ADDR="+addrs[1], "LECTERN_IDP_ADDR="+addrs[2],
		"LECTERN_ADMIN_ADDR="+addrs[3], "LECTERN_ADMIN_TOKEN="+adminToken, "LECTERN_SECRET=soak-"+crand.Text()+crand.Text(),
		"LECTERN_ISSUER=http://"+addrs[2], "LECTERN_DB="+db, "LECTERN_CORPUS="+cfg.corpusDir,
		"LECTERN_EDGE_WASM="+filepath.Join(bin, stackbin.Module), "LECTERN_LOG_LEVEL=warn",
		"LECTERN_BUNDLE_DIR="+bundleDir, "LECTERN_EDGE_URLS=http://"+addrs[0])
	logFile, err := os.Create(filepath.Join(dir, "stack.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	// On PostgreSQL a second origin serves beside the stack's, behind the
	// same edge; a fault freezes it.
	var second *peer
	if cfg.pg != "" {
		peerAddrs := make([]string, 3) // origin, identity provider, admin API
		for i := range peerAddrs {
			if peerAddrs[i], err = stackbin.FreeAddr(); err != nil {
				return err
			}
		}
		penv := append(env[:len(env):len(env)], "LECTERN_ORIGIN_ADDR="+peerAddrs[0], "LECTERN_IDP_ADDR="+peerAddrs[1],
			"LECTERN_ADMIN_ADDR="+peerAddrs[2], "LECTERN_BUNDLE_DIR="+filepath.Join(dir, "bundles-second"))
		if second, err = startPeer(ctx, bin, dir, penv, logFile, peerAddrs[0], peerAddrs[2], adminToken); err != nil {
			return err
		}
		defer second.stop()
		env = append(env, "LECTERN_ORIGIN_URL=http://"+addrs[1]+","+second.url)
	}
	fmt.Fprintf(stdout, "soak: built in %s; starting the stack on %s (log: %s)\n", time.Since(began).Round(100*time.Millisecond), store, logFile.Name())
	stackBegan := time.Now()
	st, err := startStack(ctx, bin, dir, env, logFile)
	if err != nil {
		return err
	}
	defer st.stop()

	admin := &adminAPI{url: "http://" + addrs[3], token: adminToken, client: &http.Client{Timeout: 30 * time.Second}}
	orgs := makeOrgs(c, cfg.orgs)
	fmt.Fprintf(stdout, "soak: stack ready in %s; creating %d organisations, their clients and %d learners each\n",
		time.Since(stackBegan).Round(100*time.Millisecond), len(orgs), cfg.learners)
	created := time.Now()
	var cwg sync.WaitGroup
	errs := make([]error, len(orgs))
	next := make(chan int)
	for range 4 {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for i := range next {
				errs[i] = orgs[i].create(ctx, admin, "http://"+addrs[2], cfg.learners)
			}
		}()
	}
	for i := range orgs {
		next <- i
	}
	close(next)
	cwg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "soak: organisations created in %s\n", time.Since(created).Round(100*time.Millisecond))
	setup := time.Since(began)

	// The faults, at fixed shares of the run.
	type planned struct {
		at   float64
		what string
	}
	schedule := []planned{{1.0 / 3, "SIGKILL origin"}, {0.5, faultBundles}}
	if cfg.pg != "" {
		schedule = append(schedule, planned{2.0 / 3, "restart PostgreSQL"}, planned{0.1, faultFreeze})
	}
	if !cfg.short {
		schedule = []planned{{0.25, "SIGKILL origin"}, {0.75, "SIGKILL origin"}, {0.4, faultBundles}}
		if cfg.pg != "" {
			schedule = append(schedule, planned{0.5, "restart PostgreSQL"}, planned{0.1, faultFreeze}, planned{0.6, faultFreeze})
		}
	}
	sort.Slice(schedule, func(i, j int) bool { return schedule[i].at < schedule[j].at })

	m := &mix{edge: "http://" + addrs[0], corpus: c, orgs: orgs, tags: map[string]string{},
		client: &http.Client{Timeout: 35 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.workers + 4}}}
	fmt.Fprintf(stdout, "soak: mixing for %s with %d workers (setup took %s)\n", cfg.duration, cfg.workers, setup.Round(time.Second))
	mixCtx, stopMix := context.WithTimeout(ctx, cfg.duration)
	defer stopMix()
	start := time.Now()
	workers := make([]*worker, cfg.workers)
	var wg sync.WaitGroup
	for i := range workers {
		workers[i] = &worker{m: m, id: i, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			workers[i].run(mixCtx)
		}()
	}
	var faults []fault
	for _, p := range schedule {
		select {
		case <-mixCtx.Done():
		case <-time.After(time.Until(start.Add(time.Duration(p.at * float64(cfg.duration))))):
		}
		if mixCtx.Err() != nil {
			break
		}
		f := fault{What: p.what, At: time.Now()}
		switch p.what {
		case "SIGKILL origin":
			if err := st.killOrigin(); err != nil {
				return err
			}
			f.Done = time.Now()
			if !st.awaitOrigin(3 * time.Minute) {
				fmt.Fprintf(stdout, "soak: the origin did not come back within 3 minutes:\n%s\n", st.lastLines())
			}
		case faultFreeze:
			if err := second.freeze(mixCtx, freezeFor); err != nil {
				return err
			}
			f.Done = time.Now()
		case faultBundles:
			// Moved away at once (the origin may be writing in it, which
			// a removal file by file would race), then removed.
			gone := bundleDir + ".removed"
			if err := os.Rename(bundleDir, gone); err != nil {
				return err
			}
			f.Done = time.Now()
			if err := os.RemoveAll(gone); err != nil {
				return err
			}
		case "restart PostgreSQL":
			if pgFault == nil {
				f.Skipped = pgSkip
				fmt.Fprintln(stdout, "soak: PostgreSQL restart skipped:", pgSkip)
				break
			}
			if err := runCommand(pgFault); err != nil {
				f.Skipped = err.Error()
				fmt.Fprintln(stdout, "soak: PostgreSQL restart failed:", err)
			}
			f.Done = time.Now()
		}
		fmt.Fprintf(stdout, "soak: %s at +%s\n", f.What, f.At.Sub(start).Round(time.Second))
		faults = append(faults, f)
	}
	wg.Wait()
	end := time.Now()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// The learners' final records: GETs through the edge, billed like the
	// mix's, so read before the meters, after the organisations' caps and
	// quotas are lifted (a spent one would refuse them).
	for _, o := range orgs {
		lift := map[string]any{"rateLimits": map[string]any{"callsPerHour": nil, "lessonReadsPerHour": nil, "urlMintsPerHour": nil},
			"quota": map[string]any{"calls": nil, "downloads": nil, "exports": nil, "testprepitems": nil}}
		if err := retry(time.Minute, func() error { return admin.call(ctx, "PATCH", "/admin/v1/orgs/"+o.ID, lift, nil) }); err != nil {
			return err
		}
	}
	fin := &worker{m: m, id: cfg.workers, rng: rand.New(rand.NewPCG(cfg.seed, 1<<32))}
	records := map[string]record{}
	for i, o := range orgs {
		for _, l := range o.learners {
			rec, err := fin.finalRecord(o, i, l)
			if err != nil {
				return fmt.Errorf("final record of %s: %w", l.ID, err)
			}
			records[l.ID] = rec
		}
	}
	var outs []outcome
	for _, w := range workers {
		outs = append(outs, w.outs...)
	}
	outs = append(outs, fin.outs...)

	// The meters, all read within one hour (else read again).
	names := make([]string, len(orgs))
	plans := make([]plan, len(orgs))
	for i, o := range orgs {
		names[i], plans[i] = o.ID, o.Plan
	}
	var at time.Time
	metered := make([]units, len(orgs))
	for {
		at = time.Now()
		for i, o := range orgs {
			if err := retry(time.Minute, func() (err error) { metered[i], err = admin.meters(ctx, o.ID); return err }); err != nil {
				return err
			}
		}
		if time.Now().Truncate(time.Hour).Equal(at.Truncate(time.Hour)) {
			break
		}
	}
	rows := make([][]ledgerRow, len(orgs))
	for i, o := range orgs {
		if err := retry(time.Minute, func() (err error) { rows[i], err = admin.ledger(ctx, o.ID); return err }); err != nil {
			return err
		}
	}
	for i := range faults {
		if faults[i].Skipped == "" {
			recoverTime(&faults[i], outs)
		}
	}
	failed := report(stdout, summary{store: store, module: module, duration: end.Sub(start), setup: setup, orgs: len(orgs),
		workers: cfg.workers, outs: outs, names: names, tallies: tallyAt(outs, plans, at), metered: metered, rows: rows,
		records: records, faults: faults, end: end, window: min(30*time.Second, cfg.duration/6)})
	if failed {
		return errChecks
	}
	return nil
}

// The faults of issue #33: the second origin stopped with SIGSTOP (the
// edge fails over what it holds; each request is still billed once), and
// the stack's origin's bundle directory removed (it makes it again:
// downloads go on).
const (
	faultFreeze  = "SIGSTOP second origin"
	faultBundles = "remove bundle directory"
	freezeFor    = 10 * time.Second
)

// summary is what the report prints.
type summary struct {
	store, module   string
	duration, setup time.Duration
	orgs, workers   int
	outs            []outcome
	names           []string
	tallies         []tally
	metered         []units
	rows            [][]ledgerRow
	records         map[string]record
	faults          []fault
	end             time.Time
	window          time.Duration
}

// report prints the summary and the four checks; it reports whether any
// failed.
func report(w io.Writer, s summary) (failed bool) {
	fmt.Fprintf(w, "\nsoak summary: %s on %s, edge module %s, %d organisations, %d workers (setup %s)\n",
		s.duration.Round(time.Second), s.store, s.module, s.orgs, s.workers, s.setup.Round(time.Second))
	var byKind [numKinds]map[string]int
	var unexpected []string
	errs := 0
	for i := range s.outs {
		o := &s.outs[i]
		if byKind[o.Kind] == nil {
			byKind[o.Kind] = map[string]int{}
		}
		label := fmt.Sprint(o.Status)
		switch {
		case o.Status == 0:
			label = "no answer"
		case o.Code != "":
			label += " " + o.Code
		}
		byKind[o.Kind][label]++
		if !o.answered() {
			errs++
		}
		if o.Unexpected != "" {
			unexpected = append(unexpected, o.Unexpected)
		}
	}
	fmt.Fprintf(w, "  %d requests (%.0f/s), %d without an answer or 5xx (%.2f%%)\n", len(s.outs),
		float64(len(s.outs))/s.duration.Seconds(), errs, 100*float64(errs)/float64(max(1, len(s.outs))))
	for k, m := range byKind {
		if m == nil {
			continue
		}
		var parts []string
		for label, n := range m {
			parts = append(parts, fmt.Sprintf("%s: %d", label, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(w, "    %-15s %s\n", kind(k), strings.Join(parts, ", "))
	}

	mr := checkMeters(s.names, s.tallies, s.metered)
	fmt.Fprintf(w, "\n(1) meters = acknowledged answers, %d organisations; %d requests without a definite answer bound the tolerance\n", len(s.names), mr.Lost)
	fmt.Fprintf(w, "    %-20s %12s %12s %12s\n", "meter", "acknowledged", "+ unknown", "metered")
	for m, name := range meterNames {
		fmt.Fprintf(w, "    %-20s %12d %12d %12d\n", name, mr.Acked[m], mr.Unknown[m], mr.Metered[m])
	}
	failed = verdict(w, mr.Failures) || failed

	lr := checkLedger(s.names, s.outs, s.rows)
	fmt.Fprintf(w, "\n(2) ledger holds every minted URL and shipped export: %d URLs, %d exports acknowledged; %d rows\n", lr.MintedURLs, lr.Exports, lr.Rows)
	failed = verdict(w, lr.Failures) || failed

	pr := checkProgress(s.outs, s.records)
	fmt.Fprintf(w, "\n(3) no acknowledged progress write lost: %d PUTs answered 200, %d learners, %d classes recorded\n", pr.AckedPuts, pr.Learners, pr.Classes)
	failed = verdict(w, pr.Failures) || failed

	ff := printWindows(w, s.faults, s.window, s.end, s.outs)
	failed = verdict(w, ff) || failed

	n, bf := checkBundleFault(s.faults, s.outs)
	fmt.Fprintf(w, "\n(5) downloads after the bundle directory was removed: %d, none without an answer or 5xx\n", n)
	failed = verdict(w, bf) || failed

	fmt.Fprintf(w, "\nanswers no request of the mix may get: %d\n", len(unexpected))
	sort.Strings(unexpected)
	failed = verdict(w, unexpected) || failed
	if failed {
		fmt.Fprintln(w, "\nsoak: FAILED")
	} else {
		fmt.Fprintln(w, "\nsoak: every check passed")
	}
	return failed
}

// checkBundleFault holds the downloads that began after the bundle
// directory was removed, until the next fault, to a definite answer: the
// origin makes the directory again (no 500). It returns how many there
// were.
func checkBundleFault(faults []fault, outs []outcome) (int, []string) {
	var failures []string
	n := 0
	for i, f := range faults {
		if f.What != faultBundles || f.Skipped != "" {
			continue
		}
		until := time.Time{}
		for _, g := range faults {
			if g.At.After(f.At) && (until.IsZero() || g.At.Before(until)) {
				until = g.At
			}
		}
		for j := range outs {
			o := &outs[j]
			if o.Kind != kFile || o.Start.Before(faults[i].Done) || !until.IsZero() && !o.End.Before(until) {
				continue
			}
			n++
			if !o.answered() && len(failures) < 20 {
				failures = append(failures, fmt.Sprintf("download (request %s) at +%s after the directory went: status %d %s",
					o.ReqID, o.Start.Sub(f.Done).Round(time.Millisecond), o.Status, o.Code))
			}
		}
	}
	return n, failures
}

// verdict prints PASS, or FAIL and up to 20 failures; it reports a
// failure.
func verdict(w io.Writer, failures []string) bool {
	if len(failures) == 0 {
		fmt.Fprintln(w, "    PASS")
		return false
	}
	fmt.Fprintf(w, "    FAIL (%d)\n", len(failures))
	for i, f := range failures {
		if i == 20 {
			fmt.Fprintf(w, "      … %d more\n", len(failures)-20)
			break
		}
		fmt.Fprintln(w, "      "+f)
	}
	return true
}
