package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/origin/corpus"
	"github.com/lectern-api/lectern/origin/server"
	"github.com/lectern-api/lectern/shared/id"
)

// (k2): the downloads of one zip_url export's link, served from the bundle
// store as files, against the build of that bundle; and what they do to
// another organisation's lesson reads. The in-process origin shares its
// process with the bench's clients, so its CPU cannot be told apart there;
// as (c) does (lease_cpu.go), (k2) runs the origin binary as shipped as a
// child process on the bench's corpus, with its own bundle directory, and
// reads that process's CPU clock (user + system, every thread) around:
//
//   - cold builds: the child's bundle files removed (its store then builds
//     again on the next Get, as after Purge), one download of the link;
//   - windows of k2Clients clients downloading the link again and again,
//     honouring the 429s of the organisation's downloads at once
//     (server.DefaultDownloadsPerOrg) and their Retry-After, while one
//     client of another organisation reads a lesson serially; each after
//     a window of that client's reads alone, whose p50 is the idle one.

// k2Clients is the number of concurrent downloading clients of (k2).
const k2Clients = 16

// k2Window is the length of one window of (k2)'s downloads at the
// default -time of 3 s; it scales with -time.
const k2Window = 10 * time.Second

// k2Goal is (k2)'s goal: a download costs the origin at most 1/k2Goal of
// one build's CPU.
const k2Goal = 20

// otherOrg is the organisation whose lesson reads (k2) times during the
// downloads.
const otherOrg = "bench-other"

// bundleDownloads measures (k2) against a child origin serving corpusDir.
func bundleDownloads(ctx context.Context, o options, root, dir string, c *corpus.Corpus, lessonPath string,
	progress func(string, ...any)) ([]row, error) {
	if !haveProcCPU {
		return []row{{id: "k2", what: "zip downloads' origin CPU: not measured (no process CPU clock here)"}}, nil
	}
	bin, err := buildOrigin(ctx, root, dir, progress)
	if err != nil {
		return nil, err
	}
	bundleDir := filepath.Join(dir, "k2", "bundles")
	ch, err := startChild(ctx, bin, filepath.Join(dir, "k2"), c.Dir, "LECTERN_BUNDLE_DIR="+bundleDir)
	if err != nil {
		return nil, err
	}
	defer ch.stop()
	pid := ch.cmd.Process.Pid
	progress("(k2) origin pid %d started in %v", pid, ch.started.Round(time.Millisecond))

	exporter, err := ch.clientTokens(ctx, "demo", 1, "content.read", "content.export")
	if err != nil {
		return nil, err
	}
	org, err := json.Marshal(map[string]any{"orgId": otherOrg, "orgName": "Other Organisation", "contentGrants": id.Tiers})
	if err != nil {
		return nil, err
	}
	if err := ch.admin(ctx, "/admin/v1/orgs", string(org), http.StatusCreated, nil); err != nil {
		return nil, err
	}
	reader, err := ch.clientTokens(ctx, otherOrg, 1, "content.read")
	if err != nil {
		return nil, err
	}
	// The handler's own time of the other organisation's reads, from the
	// child's access log: how much of their latency is the origin's
	// handler, and how much waiting around it.
	ch.access.keep(`"org":"` + otherOrg + `"`)

	// One billed zip_url export: its link is every download's.
	sub := exportSubject(c)
	exportURL := ch.api + "/v1/exports/subjects/" + url.PathEscape(sub.Slug) + "?format=zip_url&tier=" + url.QueryEscape(sub.Tier)
	status, _, b, err := get(ctx, http.DefaultClient, "GET", exportURL, scoped(exporter)(0), nil)
	if err != nil {
		return nil, err
	}
	var res struct {
		URL string `json:"url"`
	}
	if status != 200 || json.Unmarshal(b, &res) != nil || res.URL == "" {
		return nil, fmt.Errorf("(k2) GET %s: status %d: %.300s", exportURL, status, b)
	}
	link := res.URL

	d := &k2Downloads{link: link, tr: newTransport(k2Clients)}
	defer d.tr.CloseIdleConnections()
	// The first download builds the bundle (and the child's bundle
	// builder): not counted.
	if _, err := d.one(ctx); err != nil {
		return nil, err
	}

	// Cold builds: the bundle's file removed, then one download.
	progress("(k2) origin CPU of a cold build: bundle removed, one download")
	var build []time.Duration
	for range max(o.runs, 5) {
		if n, err := removeBundles(bundleDir); err != nil || n != 1 {
			return nil, fmt.Errorf("(k2) remove the stored bundle: %d removed, %v", n, err)
		}
		c0, err := procCPU(pid)
		if err != nil {
			return nil, err
		}
		if _, err := d.one(ctx); err != nil {
			return nil, err
		}
		c1, err := procCPU(pid)
		if err != nil {
			return nil, err
		}
		if n, err := countBundles(bundleDir); err != nil || n != 1 {
			return nil, fmt.Errorf("(k2) after a cold download the store holds %d bundles (%v), want 1: no build?", n, err)
		}
		build = append(build, c1-c0)
	}
	buildCPU := medianDuration(build)

	// The origin's own CPU with no request: its tickers and collector.
	c0, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	c1, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	idleCPU := c1 - c0 // a second's

	rd := &k2Reader{url: ch.api + lessonPath, header: scoped(reader, "Accept-Encoding", "gzip")(0), tr: newTransport(1)}
	defer rd.tr.CloseIdleConnections()
	if _, err := rd.read(ctx, time.Now().Add(200*time.Millisecond)); err != nil { // warm-up
		return nil, err
	}
	window := time.Duration(float64(k2Window) * float64(o.time) / float64(3*time.Second)).Round(time.Millisecond)
	self := os.Getpid()
	var runs []k2Run
	for i := range o.runs {
		var r k2Run
		progress("round %d/%d: (k2) %s's lesson reads alone for %v", i+1, o.runs, otherOrg, o.time)
		c0, err := procCPU(pid)
		if err != nil {
			return nil, err
		}
		r.idleAt[0] = time.Now()
		if r.idle, err = rd.read(ctx, time.Now().Add(o.time)); err != nil {
			return nil, err
		}
		r.idleAt[1] = time.Now()
		c1, err := procCPU(pid)
		if err != nil {
			return nil, err
		}
		r.readCPU = (c1 - c0) / time.Duration(len(r.idle))

		// The downloads alone: the origin's CPU per download served, the
		// 429s of the per-organisation bounds and the idle work included.
		progress("round %d/%d: (k2) %d clients downloading the link alone for %v", i+1, o.runs, k2Clients, window)
		if c0, err = procCPU(pid); err != nil {
			return nil, err
		}
		if r.aloneServed, _, _, err = d.window(ctx, time.Now().Add(window)); err != nil {
			return nil, err
		}
		if c1, err = procCPU(pid); err != nil {
			return nil, err
		}
		r.aloneCPU = c1 - c0

		progress("round %d/%d: (k2) %d clients downloading the link for %v, %s's lesson reads beside", i+1, o.runs, k2Clients, window, otherOrg)
		c0, err = procCPU(pid)
		if err != nil {
			return nil, err
		}
		b0, err := procCPU(self)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		end := t0.Add(window)
		var (
			wg      sync.WaitGroup
			readErr error
		)
		wg.Go(func() { r.busy, readErr = rd.read(ctx, end) })
		r.served, r.refused, r.bytes, err = d.window(ctx, end)
		wg.Wait()
		r.wall = time.Since(t0)
		r.busyAt = [2]time.Time{t0, time.Now()}
		if err = errors.Join(err, readErr); err != nil {
			return nil, err
		}
		if c1, err = procCPU(pid); err != nil {
			return nil, err
		}
		b1, err := procCPU(self)
		if err != nil {
			return nil, err
		}
		r.cpu, r.benchCPU = c1-c0, b1-b0
		runs = append(runs, r)
	}

	if err := sleep(ctx, 100*time.Millisecond); err != nil { // the last access log lines
		return nil, err
	}
	var idleSrv, busySrv []float64
	for _, r := range runs {
		idleSrv = append(idleSrv, float64(percentile(ch.access.between(r.idleAt[0], r.idleAt[1]), 50)))
		busySrv = append(busySrv, float64(percentile(ch.access.between(r.busyAt[0], r.busyAt[1]), 50)))
	}

	// The result: every CPU second of the child in the windows (the 429s,
	// the other organisation's reads and the idle work included) over the
	// downloads served; net: the reads' share, at their CPU alone in the
	// round's idle window, subtracted.
	var per, net, idleP50, busyP50 []float64
	var rates, refusedRates, perS, netS, benchS []string
	var served, refused int64
	for _, r := range runs {
		p := float64(r.aloneCPU) / float64(r.aloneServed)
		n := (float64(r.cpu) - float64(len(r.busy))*float64(r.readCPU)) / float64(r.served)
		per, net = append(per, p), append(net, n)
		idleP50 = append(idleP50, float64(percentile(r.idle, 50)))
		busyP50 = append(busyP50, float64(percentile(r.busy, 50)))
		rates = append(rates, fmt.Sprintf("%.0f", float64(r.served)/r.wall.Seconds()))
		refusedRates = append(refusedRates, fmt.Sprintf("%d", r.refused))
		perS, netS = append(perS, fmt.Sprintf("%.0f", p/1e3)), append(netS, fmt.Sprintf("%.0f", n/1e3))
		benchS = append(benchS, fmt.Sprintf("%.0f", float64(r.benchCPU)/r.wall.Seconds()/1e6))
		served += r.served
		refused += r.refused
	}
	perDownload := median(per)
	times := float64(buildCPU) / perDownload
	idle50, busy50 := median(idleP50), median(busyP50)
	slowdown := busy50 / idle50
	zipKB := float64(runs[0].bytes) / float64(runs[0].served) / 1024
	return []row{
		{id: "k2", what: fmt.Sprintf("origin CPU per zip download of one link (%s, %.0f KB), %d clients, against one build", sub.Ref(), zipKB, k2Clients),
			result: fmt.Sprintf("%.0f µs/download", perDownload/1e3), ratio: fmt.Sprintf("1/%.0f of a build", times),
			goal: fmt.Sprintf("≤ 1/%d of a build", k2Goal), verdict: verdict(times >= k2Goal),
			detail: fmt.Sprintf("a child origin's CPU clock (user+system, all threads; the bench's clients are another process): a cold build (bundle file removed, one download, median of %d) %s; "+
				"%d windows of %v (10 s at -time 3s, scaled) of the downloads alone, every origin CPU second in them over the downloads served: %s µs/download (the 429s and the idle %.1f ms/s included); in the windows with the other org's reads beside, net of those reads at their CPU alone: %s µs/download; "+
				"%d downloads served (%s/s), %d answered 429 (%s per window; at most %d of an org's downloads at once and %d starts a second, each retried after its Retry-After); the clients' process used %s ms/s of CPU",
				len(build), ms(buildCPU), len(runs), window, strings.Join(perS, " "), float64(idleCPU)/1e6, strings.Join(netS, " "),
				served, strings.Join(rates, " "), refused, strings.Join(refusedRates, " "), server.DefaultDownloadsPerOrg, server.DefaultDownloadRate, strings.Join(benchS, " "))},
		{id: "k2", what: fmt.Sprintf("  %s's lesson read p50 during the downloads, against idle", otherOrg),
			result: ms(time.Duration(busy50)), ratio: fmt.Sprintf("%.2f× idle", slowdown), goal: "≤ 2× idle", verdict: verdict(slowdown <= 2),
			detail: fmt.Sprintf("GET %s (gzip) with %s's own token, one client, serial, client side; p50s by round: idle %s, during %s; p99 idle %s, during %s; "+
				"the origin handler's own time (the child's access log, durationMs) p50 by round: idle %s, during %s; the rest is waiting for a core (the origin's downloads and the bench's clients share the machine's %d)",
				lessonPath, otherOrg, durations(idleP50), durations(busyP50),
				ms(percentile(concat(runs, func(r k2Run) []time.Duration { return r.idle }), 99)),
				ms(percentile(concat(runs, func(r k2Run) []time.Duration { return r.busy }), 99)),
				durations(idleSrv), durations(busySrv), runtime.NumCPU())},
	}, nil
}

// accessLog keeps the durations of the access log lines (the origin's
// JSON log on its stdout, one line a request, durationMs the handler's
// time) that hold match, with the time each was read.
type accessLog struct {
	mu    sync.Mutex
	match []byte // nil: none kept
	lines []accessLine
}

type accessLine struct {
	at time.Time
	ms float64
}

// keep keeps the lines holding match from now on.
func (l *accessLog) keep(match string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.match = []byte(match)
}

// add keeps line when it holds the match.
func (l *accessLog) add(line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.match == nil || !bytes.Contains(line, l.match) {
		return
	}
	var r struct {
		D *float64 `json:"durationMs"`
	}
	if json.Unmarshal(line, &r) == nil && r.D != nil {
		l.lines = append(l.lines, accessLine{time.Now(), *r.D})
	}
}

// between is the durations of the lines read from a to b, as durations.
func (l *accessLog) between(a, b time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, x := range l.lines {
		if !x.at.Before(a) && x.at.Before(b) {
			out = append(out, time.Duration(x.ms*1e6))
		}
	}
	return out
}

// k2Run is one round of (k2).
type k2Run struct {
	idle, busy      []time.Duration // the other org's read latencies, alone and during the downloads
	readCPU         time.Duration   // the child's CPU per read alone
	served, refused int64
	bytes           int64
	cpu, benchCPU   time.Duration // the child's and the bench's CPU over the download window
	aloneCPU        time.Duration // the child's CPU over the window of downloads alone
	aloneServed     int64         // the downloads it served
	wall            time.Duration
	idleAt, busyAt  [2]time.Time // the windows
}

// k2Downloads are the clients downloading one link.
type k2Downloads struct {
	link string
	tr   *http.Transport
}

// one downloads the link once, whole, and returns its size.
func (d *k2Downloads) one(ctx context.Context) (int64, error) {
	status, n, _, err := d.get(ctx, make([]byte, 256<<10))
	if err == nil && status != 200 {
		err = fmt.Errorf("(k2) GET %s: status %d", d.link, status)
	}
	return n, err
}

// get downloads the link once, reading the body into buf and dropping it:
// the status, the body's size and the answer's Retry-After.
func (d *k2Downloads) get(ctx context.Context, buf []byte) (int, int64, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", d.link, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	req.Header.Set("User-Agent", "lectern-bench")
	resp, err := (&http.Client{Transport: d.tr}).Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer resp.Body.Close()
	// Large reads into one buffer: the client's share of the machine kept
	// small (io.Discard would read 8 KB at a time).
	var n int64
	for {
		m, err := resp.Body.Read(buf)
		n += int64(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, n, 0, err
		}
	}
	return resp.StatusCode, n, retryAfter(resp.Header), nil
}

// window runs k2Clients clients downloading the link until end (a
// download under way at end is finished and counted); a 429 is counted and
// its client waits its Retry-After.
func (d *k2Downloads) window(ctx context.Context, end time.Time) (served, refused, bytes int64, err error) {
	var (
		s, r, b atomic.Int64
		wg      sync.WaitGroup
		errs    = make([]error, k2Clients)
	)
	for c := range k2Clients {
		wg.Go(func() {
			buf := make([]byte, 256<<10)
			for time.Now().Before(end) && ctx.Err() == nil {
				status, n, wait, err := d.get(ctx, buf)
				switch {
				case err != nil:
					errs[c] = err
					return
				case status == http.StatusTooManyRequests:
					r.Add(1)
					if time.Now().Add(wait).After(end) {
						return
					}
					if errs[c] = sleep(ctx, wait); errs[c] != nil {
						return
					}
				case status == http.StatusOK:
					s.Add(1)
					b.Add(n)
				default:
					errs[c] = fmt.Errorf("(k2) GET %s: status %d", d.link, status)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, 0, err
	}
	if s.Load() == 0 {
		return 0, 0, 0, errors.New("(k2) no download served in a window")
	}
	return s.Load(), r.Load(), b.Load(), ctx.Err()
}

// k2Reader is the other organisation's client reading a lesson.
type k2Reader struct {
	url    string
	header http.Header
	tr     *http.Transport
}

// read reads the lesson serially until end and returns every read's
// latency.
func (rd *k2Reader) read(ctx context.Context, end time.Time) ([]time.Duration, error) {
	hc := &http.Client{Transport: rd.tr}
	req, err := http.NewRequestWithContext(ctx, "GET", rd.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header = rd.header
	var lat []time.Duration
	for time.Now().Before(end) {
		t0 := time.Now()
		status, err := roundTrip(hc, req)
		if err != nil {
			return nil, err
		}
		if status != 200 {
			return nil, fmt.Errorf("(k2) GET %s: status %d", rd.url, status)
		}
		lat = append(lat, time.Since(t0))
	}
	if len(lat) == 0 {
		return nil, fmt.Errorf("(k2) GET %s: no read in the window", rd.url)
	}
	return lat, ctx.Err()
}

// removeBundles removes the bundles in dir, as Store.Purge would in the
// child (whose store then builds again on the next Get of each), and
// returns how many it removed; temporary files are left.
func removeBundles(dir string) (int, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".tmp") || strings.HasPrefix(de.Name(), ".") || !de.Type().IsRegular() {
			continue // a build in progress, the store's lock
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// countBundles is the number of bundles in dir, temporary files and the
// lock left out.
func countBundles(dir string) (int, error) {
	des, err := os.ReadDir(dir)
	n := 0
	for _, de := range des {
		if !strings.HasSuffix(de.Name(), ".tmp") && !strings.HasPrefix(de.Name(), ".") && de.Type().IsRegular() {
			n++ // not a build in progress, nor the store's lock
		}
	}
	return n, err
}

// durations formats nanosecond figures as milliseconds.
func durations(ns []float64) string {
	s := make([]string, len(ns))
	for i, v := range ns {
		s[i] = strings.TrimSuffix(ms(time.Duration(v)), " ms")
	}
	return strings.Join(s, " ") + " ms"
}

// concat is f of every run, joined.
func concat(runs []k2Run, f func(k2Run) []time.Duration) []time.Duration {
	var out []time.Duration
	for _, r := range runs {
		out = append(out, f(r)...)
	}
	return out
}
