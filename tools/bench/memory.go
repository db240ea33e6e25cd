package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/internal/proctest"
	"github.com/lectern-api/lectern/origin/corpus"
)

// Section memory: (o), the origin's resident memory with the bench's
// corpus. The origin of the other sections shares the bench's process
// with its clients, edges and modules, so its memory cannot be told
// apart there; (o) builds the origin binary as shipped
// (./origin/cmd/origin), runs it as a child process on the same corpus
// with a database of its own, and reads its VmRSS from /proc (Linux):
// settled after the start, at its peak under lesson reads, at its peak
// while a corpus reload builds the corpus again beside the served one,
// and settled after that reload.

// memGoal is (o)'s goal, in MiB of resident memory (issue #18).
const memGoal = 400

// memSettle is how long (o) waits for the child's resident memory to
// settle after its start and after a reload answered: the origin returns
// the free memory once the corpus is swapped in (origin/wiring,
// memory.go), and the runtime's background scavenger the rest.
const memSettle = 3 * time.Second

// memory measures (o).
func memory(ctx context.Context, o options, root, dir string, c *corpus.Corpus, progress func(string, ...any)) ([]row, error) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		return []row{{id: "o", what: "origin resident memory: not measured (no /proc here)"}}, nil
	}
	bin, err := buildOrigin(ctx, root, dir, progress)
	if err != nil {
		return nil, err
	}
	ch, err := startChild(ctx, bin, filepath.Join(dir, "memory"), c.Dir)
	if err != nil {
		return nil, err
	}
	defer ch.stop()
	progress("(o) origin pid %d started in %v; settling", ch.cmd.Process.Pid, ch.started.Round(time.Millisecond))
	time.Sleep(memSettle)
	idle, err := rss(ch.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	hwm, _ := statusKB(ch.cmd.Process.Pid, "VmHWM")

	tok, err := ch.token(ctx)
	if err != nil {
		return nil, err
	}
	// Lesson reads spread over a third of the corpus's lessons (the
	// enumeration alarm suspends an organisation above 40% a day): the
	// standard lesson gzip-compressed, (b)'s read, for most; identity
	// bodies, full detail and transcripts, which render per request, for
	// the rest.
	var paths []string
	for i, l := range c.Lessons {
		if i%3 != 0 {
			continue
		}
		p := "/v1/lessons/" + l.ID
		paths = append(paths, p, p, p, p, p, p, p+"?detail=full", p+"/transcript?include=markdown")
	}
	dur := time.Duration(o.runs) * o.time
	progress("(o) lesson reads with %d clients for %v", o.clients, dur)
	var load memLoad
	loadPeak, err := peakRSS(ch.cmd.Process.Pid, func() error { return load.run(ctx, ch.api, tok, paths, o.clients, dur) })
	if err != nil {
		return nil, err
	}

	progress("(o) corpus reload of %s", c.Dir)
	t0 := time.Now()
	reloadPeak, err := peakRSS(ch.cmd.Process.Pid, func() error { return ch.reload(ctx, c.Dir) })
	if err != nil {
		return nil, err
	}
	took := time.Since(t0)
	time.Sleep(memSettle)
	after, err := rss(ch.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}

	mib := func(kb int64) string { return fmt.Sprintf("%.0f MiB", float64(kb)/1024) }
	goal := fmt.Sprintf("< %d MiB", memGoal)
	meets := func(kb int64) string { return verdict(kb < memGoal*1024) }
	method := "VmRSS of a child origin process (the binary as shipped) on this corpus"
	return []row{
		{id: "o", what: "origin resident memory, settled after the start", result: mib(idle), goal: goal, verdict: meets(idle),
			detail: fmt.Sprintf("%s, %v after it answered; peak of the start (VmHWM) %s", method, memSettle, mib(hwm))},
		{id: "o", what: "  peak under lesson reads", result: mib(loadPeak), goal: goal, verdict: meets(loadPeak),
			detail: fmt.Sprintf("sampled every 20 ms; %d clients, %d reads in %v (%.0f/s, %d failed) over %d lessons: 3/4 standard gzip, the rest identity, full, transcript",
				o.clients, load.n.Load(), dur, float64(load.n.Load())/dur.Seconds(), load.failed.Load(), len(paths)/8)},
		{id: "o", what: "  peak during a corpus reload", result: mib(reloadPeak),
			detail: fmt.Sprintf("the same directory reloaded through the admin API, %v: the served corpus and the new one both live until the swap; no goal", took.Round(time.Millisecond))},
		{id: "o", what: "  settled after the reload", result: mib(after), goal: goal, verdict: meets(after),
			detail: fmt.Sprintf("%v after the reload answered", memSettle)},
	}, nil
}

// childSecret is the LECTERN_SECRET of a child origin, which an edge of
// it is configured with too (lease_cpu.go).
const childSecret = "bench-memory-secret-of-at-least-32-characters"

// child is an origin process (o) runs, and its addresses.
type child struct {
	proc          *proctest.Origin
	cmd           *exec.Cmd // proc's, whose pid the sections read
	api, idp, adm string
	started       time.Duration
	adminToken    string
	access        accessLog // the access log's lines (k2 keeps some)
	drop          func()    // drops its PostgreSQL schema once it has exited; nil: none
}

// childStartWithin bounds a child's start, in place of
// proctest.ReadyWithin: on a 10× corpus (scale.go) an origin takes about
// a minute to be ready on a busy machine.
const childStartWithin = 5 * time.Minute

// startChild starts bin serving corpusDir, with its database in dir and
// env's variables besides (NAME=value), and waits until it has served and
// made its demo organisation (it prints its addresses, then creates the
// organisation on a new database).
func startChild(ctx context.Context, bin, dir, corpusDir string, env ...string) (*child, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	corpusDir, err := filepath.Abs(corpusDir)
	if err != nil {
		return nil, err
	}
	ch := &child{adminToken: "bench-admin-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	// A new database on the pass's backend (backend.go).
	db, drop, err := childBackend.database(ctx, dir, "lectern_bench_child_")
	if err != nil {
		return nil, err
	}
	ch.drop = drop
	cmd := exec.Command(bin)
	cmd.Dir = dir // whatever it would keep in var/ stays in the bench's directory
	cmd.Env = append(os.Environ(),
		"LECTERN_ORIGIN_ADDR=127.0.0.1:0", "LECTERN_IDP_ADDR=127.0.0.1:0", "LECTERN_ADMIN_ADDR=127.0.0.1:0",
		"LECTERN_DB="+db, "LECTERN_CORPUS="+corpusDir,
		"LECTERN_SECRET="+childSecret, "LECTERN_ADMIN_TOKEN="+ch.adminToken, "LECTERN_DEMO=1")
	if childBackend.url != "" {
		// On PostgreSQL every origin of the database issues and accepts
		// tokens under one issuer, named up front: the identity
		// provider's own address, on a port chosen here.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			if drop != nil {
				drop()
			}
			return nil, err
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd.Env = append(cmd.Env, "LECTERN_IDP_ADDR="+addr, "LECTERN_ISSUER=http://"+addr)
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	// Its lines, the access log's among them, go to ch.access; it is
	// ready once it has created the demo organisation.
	within, cancel := context.WithTimeoutCause(ctx, childStartWithin,
		fmt.Errorf("did not start within %v", childStartWithin))
	defer cancel()
	t0 := time.Now()
	o, err := proctest.LaunchOriginUntil(within, cmd, &lineWriter{line: ch.access.add},
		func(line string) bool { return strings.HasPrefix(line, "Created the demo organisation") })
	if err != nil {
		if drop != nil {
			drop()
		}
		return nil, fmt.Errorf("(o) %w", err)
	}
	ch.started = time.Since(t0)
	ch.proc, ch.cmd, ch.api, ch.idp, ch.adm = o, cmd, o.API, o.IdP, o.Admin
	return ch, nil
}

// stop ends the child (SIGINT: it drains and closes its database) and
// waits for it.
func (ch *child) stop() {
	ch.proc.Interrupt(15 * time.Second)
	if ch.drop != nil {
		ch.drop()
		ch.drop = nil
	}
}

// lineWriter hands each whole line written to it, without its newline,
// to line: the child's output reaches ch.access line by line, as its
// ready wait reads it and in the chunks copied after.
type lineWriter struct {
	part []byte // the start of a line whose newline has not come yet
	line func([]byte)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.part = append(w.part, p...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		w.line(w.part[:i])
		w.part = w.part[i+1:]
	}
	return len(p), nil
}

// token registers a client of the demo organisation the child created
// (every tier granted) through its admin API and takes a content.read
// token from its identity provider.
func (ch *child) token(ctx context.Context) (string, error) {
	var cl struct {
		ClientID     string `json:"clientId"`
		ClientSecret string `json:"clientSecret"`
	}
	body := `{"scopes":["content.read"],"grantTypes":["client_credentials"]}`
	if err := ch.admin(ctx, "/admin/v1/orgs/demo/clients", body, http.StatusCreated, &cl); err != nil {
		return "", err
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"service-api/content.read"}}
	req, err := http.NewRequestWithContext(ctx, "POST", ch.idp+"/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(cl.ClientID, cl.ClientSecret)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := do(req, http.StatusOK, &tok); err != nil || tok.AccessToken == "" {
		return "", fmt.Errorf("(o) token: %v", err)
	}
	return tok.AccessToken, nil
}

// reload reloads the corpus in dir through the child's admin API.
func (ch *child) reload(ctx context.Context, dir string) error {
	b, _ := json.Marshal(map[string]string{"dir": dir})
	return ch.admin(ctx, "/admin/v1/corpus/reload", string(b), http.StatusOK, nil)
}

// admin POSTs body to the child's admin API and decodes the answer, which
// must have status want, into v (when not nil).
func (ch *child) admin(ctx context.Context, path, body string, want int, v any) error {
	req, err := http.NewRequestWithContext(ctx, "POST", ch.adm+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+ch.adminToken)
	req.Header.Set("Content-Type", "application/json")
	if err := do(req, want, v); err != nil {
		return fmt.Errorf("(o) POST %s: %w", path, err)
	}
	return nil
}

// do sends req and decodes its answer, which must have status want, into
// v (when not nil).
func do(req *http.Request, want int, v any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, b)
	}
	if v != nil {
		return json.Unmarshal(b, v)
	}
	return nil
}

// memLoad is (o)'s lesson reads and their counts.
type memLoad struct{ n, failed atomic.Int64 }

// run reads paths of api, in turn from a different offset per client, with
// clients keep-alive clients for dur; gzip is accepted on every read but
// one in four.
func (ld *memLoad) run(ctx context.Context, api, tok string, paths []string, clients int, dur time.Duration) error {
	tr := newTransport(clients)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	end := time.Now().Add(dur)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c * len(paths) / clients; time.Now().Before(end) && ctx.Err() == nil; i++ {
				req, _ := http.NewRequestWithContext(ctx, "GET", api+paths[i%len(paths)], nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				if i%4 != 0 {
					req.Header.Set("Accept-Encoding", "gzip")
				}
				resp, err := hc.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = errors.New(resp.Status)
					}
				}
				ld.n.Add(1)
				if err != nil {
					ld.failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// peakRSS runs f while sampling pid's VmRSS every 20 ms, and returns the
// highest sample, in kB.
func peakRSS(pid int, f func() error) (int64, error) {
	stop := make(chan struct{})
	peak := make(chan int64)
	go func() {
		var hi int64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if kb, err := rss(pid); err == nil {
				hi = max(hi, kb)
			}
			select {
			case <-stop:
				peak <- hi
				return
			case <-t.C:
			}
		}
	}()
	err := f()
	close(stop)
	return <-peak, err
}

// rss is pid's resident memory (VmRSS) in kB.
func rss(pid int) (int64, error) { return statusKB(pid, "VmRSS") }

// statusKB reads field (in kB) of /proc/pid/status.
func statusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte(field+":")); ok {
			f := strings.Fields(string(v))
			if len(f) == 2 && f[1] == "kB" {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}
