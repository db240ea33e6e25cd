package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/shared/scope"
)

// (c): the origin's CPU per edge 304, gated and leased. The in-process
// origin shares its process with the bench's clients and edges, so its
// CPU cannot be told apart there; (c) runs the origin binary as shipped
// as a child process (as (o) does, memory.go), on the bench's corpus,
// and reads that process's own CPU time around windows of edge 304s
// sent at a fixed rate, below saturation, through a gated and a leased
// edge in turn.

// leaseCPURate is (c)'s request rate, per second: below the saturation of
// the gated edge on this machine (a few thousand 304s a second: (f)), so
// that both edges serve the same load and the origin's CPU per 304 is
// not that of a queue (decisions-bench.md).
const leaseCPURate = 500

// leaseCPUWorkers send (c)'s requests: enough that one slow answer does
// not hold the rate back (at 500/s a worker has 16 ms a request).
const leaseCPUWorkers = 8

// leaseCPUGoal is (c)'s goal: leased at least this many times less CPU.
const leaseCPUGoal = 20

// originCPU measures (c) with build b's edges against a child origin
// serving corpusDir.
func originCPU(ctx context.Context, o options, b build, root, dir, corpusDir, lessonPath string,
	log *slog.Logger, progress func(string, ...any)) ([]row, error) {
	if !haveProcCPU {
		return []row{{id: "c", what: "origin CPU per edge 304: not measured (no process CPU clock here)"}}, nil
	}
	bin, err := buildOrigin(ctx, root, dir, progress)
	if err != nil {
		return nil, err
	}
	edges, err := edgeURLs()
	if err != nil {
		return nil, err
	}
	ch, err := startChild(ctx, bin, filepath.Join(dir, "lease-cpu"), corpusDir, "LECTERN_EDGE_URLS="+strings.Join(edges, ","))
	if err != nil {
		return nil, err
	}
	defer ch.stop()
	pid := ch.cmd.Process.Pid
	progress("(c) origin pid %d started in %v", pid, ch.started.Round(time.Millisecond))
	// Four clients' tokens: requests spread over the edges' instances.
	tokens, err := ch.tokens(ctx, 4)
	if err != nil {
		return nil, err
	}
	tb := &throughputBench{ctx: ctx, o: o, tokens: tokens, log: log, progress: progress, lessonPath: lessonPath}
	defer tb.close()
	if tb.etag, err = lessonETag(ctx, ch.api+lessonPath, tokens[0]); err != nil {
		return nil, err
	}
	origin := edgeOrigin{url: ch.api, idp: ch.idp, secret: childSecret}
	gated, err := tb.startEdge(b, origin, false, 0, "c-gated")
	if err != nil {
		return nil, err
	}
	leased, err := tb.startEdge(b, origin, true, 0, "c-leased")
	if err != nil {
		return nil, err
	}
	arms := []*cpuArm{{edge: gated}, {edge: leased, leased: true}}
	for _, a := range arms {
		prime := tb.primeEdge(a.edge.url)
		for c := range tokens {
			if err := prime(ctx, c); err != nil {
				return nil, err
			}
		}
		a.t = &target{url: a.edge.url + lessonPath, header: tb.conditional(), want: 304, also: hostFailed}
		if _, err := paced(ctx, a.t, leaseCPURate, min(o.time/3, time.Second)); err != nil {
			return nil, fmt.Errorf("(c) warm-up: %w", err)
		}
	}
	// The origin's own CPU with no request: its tickers and collector.
	if err := leased.host.Flush(ctx); err != nil {
		return nil, fmt.Errorf("(c) flush: %w", err)
	}
	idleFor := time.Second
	c0, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	time.Sleep(idleFor)
	c1, err := procCPU(pid)
	if err != nil {
		return nil, err
	}
	idle := float64(c1-c0) / idleFor.Seconds() // ns a second
	ticks0, ticksErr := procTicks(pid)
	for i := range o.runs {
		for _, a := range arms {
			progress("round %d/%d: (c) origin CPU, edge 304s at %d/s, leases %v", i+1, o.runs, leaseCPURate, a.leased)
			if err := a.window(ctx, pid, o.time); err != nil {
				return nil, err
			}
		}
	}
	ticks1, err := procTicks(pid)
	ticksErr = errors.Join(ticksErr, err)

	g, l := arms[0].perReq(), arms[1].perReq()
	gm, lm := median(g), median(l)
	ticks := ""
	if ticksErr == nil {
		var total time.Duration
		var n int64
		for _, a := range arms {
			for i := range a.cpu {
				total += a.cpu[i]
				n += a.n[i]
			}
		}
		ticks = fmt.Sprintf("; /proc/%d/stat utime+stime over the rounds %d ticks of 10 ms, the clock %.0f ms", pid, ticks1-ticks0, float64(total)/1e6)
	}
	how := fmt.Sprintf("the child origin's CPU clock (user+system, all threads) over %d windows of %v at %d req/s each; idle %.2f ms/s not subtracted", o.runs, o.time, leaseCPURate, idle/1e6)
	rows := []row{
		{id: "c", what: fmt.Sprintf("origin CPU per edge 304 at %d req/s, gated (leases off)", leaseCPURate),
			result: fmt.Sprintf("%.1f µs/304", gm), detail: how + "; " + arms[0].detail(idle) + ticks},
		{id: "c", what: "  leased", result: fmt.Sprintf("%.1f µs/304 (%.1f× less)", lm, gm/lm),
			goal: fmt.Sprintf("≥ %d× less", leaseCPUGoal), verdict: verdict(gm >= leaseCPUGoal*lm && arms[1].failures() == 0), detail: arms[1].detail(idle)},
	}
	return rows, nil
}

// cpuArm is one edge of (c) and its windows: requests served, the origin's
// CPU, the subrequests.
type cpuArm struct {
	edge   *leaseEdge
	leased bool
	t      *target
	n      []int64
	cpu    []time.Duration
	wall   []time.Duration
	subs   subCounts
}

// window sends 304s through a's edge at leaseCPURate for dur and adds the
// origin's CPU over it. A leased edge's usage not yet reported is flushed
// before the window closes, so that the window holds all the origin work
// its 304s cause (the next one starts with none pending).
func (a *cpuArm) window(ctx context.Context, pid int, dur time.Duration) error {
	s0 := a.edge.subs.counts()
	c0, err := procCPU(pid)
	if err != nil {
		return err
	}
	t0 := time.Now()
	r, err := paced(ctx, a.t, leaseCPURate, dur)
	if err != nil {
		return fmt.Errorf("(c) leases %v: %w", a.leased, err)
	}
	if a.leased {
		if err := a.edge.host.Flush(ctx); err != nil {
			return fmt.Errorf("(c) flush: %w", err)
		}
	}
	c1, err := procCPU(pid)
	if err != nil {
		return err
	}
	a.n, a.cpu, a.wall = append(a.n, r.requests), append(a.cpu, c1-c0), append(a.wall, time.Since(t0))
	a.t.runs = append(a.t.runs, r)
	a.subs = a.subs.plus(a.edge.subs.counts().minus(s0))
	return nil
}

// perReq is each window's origin CPU per request, in µs.
func (a *cpuArm) perReq() []float64 {
	out := make([]float64, len(a.n))
	for i := range a.n {
		out[i] = float64(a.cpu[i]) / float64(a.n[i]) / 1e3
	}
	return out
}

// detail is the arm's windows, their rates, latency and subrequests, and
// the CPU per request net of the origin's idle CPU.
func (a *cpuArm) detail(idle float64) string {
	var per, net, rates []string
	var n, failed int64
	for i, v := range a.perReq() {
		per = append(per, fmt.Sprintf("%.1f", v))
		net = append(net, fmt.Sprintf("%.1f", (float64(a.cpu[i])-idle*a.wall[i].Seconds())/float64(a.n[i])/1e3))
		rates = append(rates, fmt.Sprintf("%.0f", a.t.runs[i].rate()))
		n += a.n[i]
		failed += a.t.runs[i].also
	}
	lat := a.t.latencies()
	d := fmt.Sprintf("windows %s µs/304 (net of idle %s); %d requests at %s req/s; p50 %s p99 %s; %s",
		strings.Join(per, " "), strings.Join(net, " "), n, strings.Join(rates, " "), ms(percentile(lat, 50)), ms(percentile(lat, 99)), a.subs)
	if failed > 0 {
		d += fmt.Sprintf("; %d answered 500 by the host (module instance failures)", failed)
	}
	return d
}

// paced sends t's request at rate a second for dur, open loop: request i
// is due at start + i/rate whatever the answers before it, sent by
// whichever of leaseCPUWorkers is free; a request that found no worker
// free goes late and the rate achieved shows it. Answers of a status in
// t.also are counted (result.also) and in the requests.
func paced(ctx context.Context, t *target, rate int, dur time.Duration) (result, error) {
	if t.transport == nil {
		t.transport = newTransport(leaseCPUWorkers)
	}
	hc := &http.Client{Transport: t.transport}
	interval := time.Second / time.Duration(rate)
	total := int64(dur / interval)
	var (
		next     atomic.Int64
		also     atomic.Int64
		mu       sync.Mutex
		lat      []time.Duration
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for w := range leaseCPUWorkers {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", t.url, nil)
			req.Header = t.header(w)
			var mine []time.Duration
			defer func() { mu.Lock(); lat = append(lat, mine...); mu.Unlock() }()
			for {
				i := next.Add(1) - 1
				if i >= total || ctx.Err() != nil {
					return
				}
				if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
					time.Sleep(d)
				}
				t0 := time.Now()
				status, err := roundTrip(hc, req)
				if slices.Contains(t.also, status) {
					also.Add(1)
				} else if err == nil && status != t.want {
					err = fmt.Errorf("GET %s: status %d, want %d", t.url, status, t.want)
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return result{}, firstErr
	}
	return result{requests: int64(len(lat)), elapsed: time.Since(start), lat: lat, also: also.Load()}, ctx.Err()
}

// roundTrip sends req and reads its answer whole.
func roundTrip(hc *http.Client, req *http.Request) (int, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// buildOrigin builds the origin binary as shipped into dir, once per run
// and directory ((o), (k2), (c) and the scale rows run the same one).
func buildOrigin(ctx context.Context, root, dir string, progress func(string, ...any)) (string, error) {
	if originBin != "" {
		return originBin, nil
	}
	bin := filepath.Join(dir, "origin")
	progress("building the origin binary")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./origin/cmd/origin")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./origin/cmd/origin: %v\n%s", err, out)
	}
	originBin = bin
	return bin, nil
}

// originBin is the origin binary buildOrigin built, once it has.
var originBin string

// tokens registers a client of the child's demo organisation through its
// admin API and takes n content.read tokens from its identity provider.
func (ch *child) tokens(ctx context.Context, n int) ([]string, error) {
	return ch.clientTokens(ctx, "demo", n, "content.read")
}

// clientTokens registers a client_credentials client of the child's
// organisation org with scopes through its admin API and takes n tokens
// of those scopes from its identity provider.
func (ch *child) clientTokens(ctx context.Context, org string, n int, scopes ...string) ([]string, error) {
	var cl struct {
		ClientID     string `json:"clientId"`
		ClientSecret string `json:"clientSecret"`
	}
	body, err := json.Marshal(map[string]any{"scopes": scopes, "grantTypes": []string{"client_credentials"}})
	if err != nil {
		return nil, err
	}
	if err := ch.admin(ctx, "/admin/v1/orgs/"+url.PathEscape(org)+"/clients", string(body), http.StatusCreated, &cl); err != nil {
		return nil, err
	}
	full := make([]string, len(scopes))
	for i, s := range scopes {
		full[i] = scope.Full(s)
	}
	out := make([]string, 0, n)
	for range n {
		form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(full, " ")}}
		req, err := http.NewRequestWithContext(ctx, "POST", ch.idp+"/oauth2/token", strings.NewReader(form.Encode()))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(cl.ClientID, cl.ClientSecret)
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		if err := do(req, http.StatusOK, &tok); err != nil || tok.AccessToken == "" {
			return nil, fmt.Errorf("child token of %s: %v", org, err)
		}
		out = append(out, tok.AccessToken)
	}
	return out, nil
}

// procTicks is utime + stime of /proc/pid/stat, in clock ticks (1/100 s).
func procTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which may hold spaces: state is
	// field 3 of proc(5), utime 14, stime 15.
	i := strings.LastIndexByte(string(b), ')')
	var f []string
	if i >= 0 {
		f = strings.Fields(string(b[i+1:]))
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %.100q", pid, b)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	return u + s, errors.Join(err1, err2)
}

// failures is the requests of a's windows the host answered 500.
func (a *cpuArm) failures() int64 {
	var n int64
	for _, r := range a.t.runs {
		n += r.also
	}
	return n
}
