// Command stack runs the whole local stack in the foreground for
// `make run`: the origin command (origin, identity provider, admin API)
// and, once the origin is healthy, the edge (worker/cmd/edge) in front of it.
//
//	stack -origin build/origin -edge build/edge
//
// Both children get this process's environment (the README's
// settings), plus two settings they must agree on when unset: the admin
// token (the stack polls the origin's health with it and the edge reads
// the test clock with it), which is then the one the origin keeps in
// var/admin-token, made on its first start and the same at every start
// after, and LECTERN_PUBLIC_URL = http://<LECTERN_EDGE_ADDR>, since the
// edge is the stack's front door.
//
// The edge runs with leases on unless LECTERN_EDGE_LEASES says off
// (docs/edge.md, "Leases"): the origin pushes revocations to it at
// http://<LECTERN_EDGE_ADDR>/internal/revoke, and it logs its leased 304s
// to var/edge-usage-<port>.log, which a restarted edge, on the same
// port, reports to the origin as it starts. The origin pushes only to the
// edge hosts its LECTERN_EDGE_URLS lists: when it is unset, the stack
// sets it, for the origin, to the edge it starts (edgeURLs).
//
// Stopping. Ctrl-C or SIGTERM stops the edge first, waiting for it to
// drain (its forwards need the origin), report its leases' usage and
// exit, and only then the origin, which drains and flushes its meters. Each child runs in its own process
// group, so a terminal's Ctrl-C reaches this process alone and the order
// holds; on Linux a child is sent SIGTERM if this process dies without
// stopping it (SIGKILL).
//
// Restarting. A child that dies after it was ready is restarted, with the
// reason logged (exit status or signal), after a backoff that starts at
// -backoff (1 s) and doubles to -max-backoff (30 s), and starts over once
// a child has run -stable (1 min). The other child keeps running: while
// the origin is down the edge answers its forwards with the spec's 500
// INTERNAL ("the origin could not be reached; safe to retry once"). A
// restart that fails -give-up (5) times in a row, the child exiting
// before it is ready, stops the stack with an error, as does a child that
// cannot start the first time: both are nearly always configuration (a
// port in use, a bad secret) that waiting will not fix.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/lectern-api/lectern/internal/cmdline"
	"github.com/lectern-api/lectern/shared/lease"
)

func main() { cmdline.Main("stack", run) }

// readyTimeout bounds a child's start, the origin's corpus generation
// included.
const readyTimeout = 10 * time.Minute

// policy is how children are restarted and stopped.
type policy struct {
	backoff, maxBackoff time.Duration // the first delay, doubled up to the cap
	stable              time.Duration // a child that ran this long starts the backoff over
	giveUp              int           // restarts failing in a row before the stack stops
	grace               time.Duration // from SIGTERM to SIGKILL when stopping a child
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := cmdline.New("stack", getenv)
	originBin := fs.String("origin", "build/origin", "the origin command")
	edgeBin := fs.String("edge", "build/edge", "the edge command")
	var pol policy
	fs.DurationVar(&pol.backoff, "backoff", time.Second, "first delay before restarting a child that died")
	fs.DurationVar(&pol.maxBackoff, "max-backoff", 30*time.Second, "longest delay before a restart")
	fs.DurationVar(&pol.stable, "stable", time.Minute, "a child that ran this long restarts after the first delay again")
	fs.IntVar(&pol.giveUp, "give-up", 5, "restarts failing in a row (the child exits before it is ready) that stop the stack")
	fs.DurationVar(&pol.grace, "grace", 15*time.Second, "time a child has to stop after SIGTERM before it is killed")
	if err := fs.Parse(args, stdout); err != nil {
		return err
	}
	if pol.backoff <= 0 || pol.maxBackoff < pol.backoff || pol.giveUp < 1 || pol.grace <= 0 {
		return errors.New("want 0 < -backoff <= -max-backoff, -give-up >= 1 and -grace > 0")
	}
	or := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	env := os.Environ()
	// The admin token: LECTERN_ADMIN_TOKEN, else the origin's, which it
	// prints in its walk-through.
	token := func() string {
		if t := getenv("LECTERN_ADMIN_TOKEN"); t != "" {
			return t
		}
		b, _ := os.ReadFile(adminTokenFile)
		return strings.TrimSpace(string(b))
	}
	edgeAddr := or("LECTERN_EDGE_ADDR", "127.0.0.1:8787")
	if getenv("LECTERN_PUBLIC_URL") == "" {
		env = append(env, "LECTERN_PUBLIC_URL=http://"+edgeAddr)
	}

	// make run's origin creates the demo organisation on a new database
	// and prints its walk-through; a production start does neither.
	originEnv := append(env[:len(env):len(env)], "LECTERN_DEMO=1")
	// Webhooks to a receiver on this machine (http, loopback): the
	// development setting, which production leaves off.
	if getenv("LECTERN_WEBHOOK_ALLOW_PRIVATE") == "" {
		originEnv = append(originEnv, "LECTERN_WEBHOOK_ALLOW_PRIVATE=1")
	}
	if getenv("LECTERN_EDGE_URLS") == "" {
		if urls := edgeURLs(getenv, edgeAddr); urls != "" {
			originEnv = append(originEnv, "LECTERN_EDGE_URLS="+urls)
		}
	}

	health := "http://" + or("LECTERN_ADMIN_ADDR", "127.0.0.1:8081") + "/admin/v1/health"
	origin := &proc{name: "origin", bin: *originBin, env: originEnv, out: stdout, pol: pol,
		ready: func(ctx context.Context) bool { return healthy(ctx, health, token) }}
	edge := &proc{name: "edge", bin: *edgeBin, env: env, out: stdout, pol: pol,
		ready: func(ctx context.Context) bool { return accepts(ctx, edgeAddr) }}

	// First start: the origin, healthy, then the edge. A failure here is
	// not retried.
	oc, err := origin.launch(ctx)
	if err != nil {
		return err
	}
	if getenv("LECTERN_ADMIN_TOKEN") == "" { // the origin has kept one by now
		edge.env = append(env[:len(env):len(env)], "LECTERN_ADMIN_TOKEN="+token())
	}
	ec, err := edge.launch(ctx)
	if err != nil {
		origin.stop(oc)
		return err
	}

	// Each child is supervised on its own context, so that stopping can
	// wait for the edge before it touches the origin.
	originCtx, stopOrigin := context.WithCancel(context.Background())
	edgeCtx, stopEdge := context.WithCancel(context.Background())
	defer stopOrigin()
	defer stopEdge()
	originDone, edgeDone := make(chan error, 1), make(chan error, 1)
	go func() { originDone <- origin.supervise(originCtx, oc) }()
	go func() { edgeDone <- edge.supervise(edgeCtx, ec) }()

	var failure error
	select {
	case <-ctx.Done():
	case failure = <-originDone:
		originDone <- failure
	case failure = <-edgeDone:
		edgeDone <- failure
	}
	fmt.Fprintln(stdout, "stack: stopping the edge, then the origin")
	stopEdge()
	errEdge := <-edgeDone
	stopOrigin()
	errOrigin := <-originDone
	if failure != nil {
		return failure
	}
	return errors.Join(errEdge, errOrigin)
}

// adminTokenFile is where the origin keeps its admin token when
// LECTERN_ADMIN_TOKEN is unset (origin/internal/private/kept.go), relative to
// the working directory both children share.
const adminTokenFile = "var/admin-token"

// proc is a child command the stack keeps running.
type proc struct {
	name, bin string
	env       []string
	out       io.Writer
	pol       policy
	// ready polls until the child answers (true) or ctx is done (false).
	ready func(ctx context.Context) bool
}

// child is one run of a proc; done is closed when it has exited.
type child struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
}

func (p *proc) logf(format string, args ...any) {
	fmt.Fprintf(p.out, "stack: "+format+"\n", args...)
}

// start starts one run of the child.
func (p *proc) start() (*child, error) {
	cmd := exec.Command(p.bin)
	cmd.Env, cmd.Stdout, cmd.Stderr = p.env, p.out, os.Stderr
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", p.bin, err)
	}
	c := &child{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// launch starts the child and waits until it is ready. When it is not (it
// exited, ctx is done, readyTimeout passed) the child is stopped and the
// error says why.
func (p *proc) launch(ctx context.Context) (*child, error) {
	c, err := p.start()
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-rctx.Done():
		}
	}()
	if p.ready(rctx) {
		p.logf("%s ready (pid %d)", p.name, c.cmd.Process.Pid)
		return c, nil
	}
	p.stop(c)
	switch {
	case exited(c):
		return nil, fmt.Errorf("%s exited before it was ready (%s)", p.name, c.cmd.ProcessState)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("interrupted before the %s was ready", p.name)
	default:
		return nil, fmt.Errorf("%s not ready after %s", p.name, readyTimeout)
	}
}

// supervise keeps the child running until ctx is done, then stops it. It
// returns an error only when restarts failed pol.giveUp times in a row.
func (p *proc) supervise(ctx context.Context, c *child) error {
	delay, failures := p.pol.backoff, 0
	for {
		if c != nil { // else the last restart failed: back off again
			select {
			case <-ctx.Done():
				p.stop(c)
				return nil
			case <-c.done:
			}
			if time.Since(c.started) >= p.pol.stable {
				delay = p.pol.backoff
			}
			p.logf("%s exited (%s); restarting it in %s", p.name, c.cmd.ProcessState, delay)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		next, err := p.launch(ctx)
		switch {
		case ctx.Err() != nil:
			if next != nil {
				p.stop(next)
			}
			return nil
		case err != nil:
			if failures++; failures >= p.pol.giveUp {
				return fmt.Errorf("%s: %d restarts in a row failed, the last: %w", p.name, failures, err)
			}
			delay = min(2*delay, p.pol.maxBackoff)
			p.logf("restart %d of the %s failed: %v; retrying in %s", failures, p.name, err, delay)
			c = nil
		default:
			delay = min(2*delay, p.pol.maxBackoff)
			failures, c = 0, next
		}
	}
}

func exited(c *child) bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop asks the child to stop (SIGTERM: it shuts down gracefully), waits,
// and kills it after the grace period.
func (p *proc) stop(c *child) {
	if exited(c) {
		return
	}
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(p.pol.grace):
		p.logf("%s did not stop within %s; killing it", p.name, p.pol.grace)
		c.cmd.Process.Kill()
		<-c.done
	}
}

// healthy polls the admin health check until it answers 200; token is
// read at each poll (a new origin makes its token as it starts).
func healthy(ctx context.Context, url string, token func() string) bool {
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+token())
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// accepts polls addr until it accepts a connection.
func accepts(ctx context.Context, addr string) bool {
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			conn.Close()
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// edgeURLs is the origin's LECTERN_EDGE_URLS when it is unset: the edge
// this stack starts, named as the edge names itself in its revoke URL
// (worker/cmd/edge: LECTERN_EDGE_REVOKE_URL, else http://<the address it
// listens on>/internal/revoke), so that the origin pushes revocations to
// it. A wildcard address is listed as the edge's listener reports it
// (0.0.0.0 or ::), a host name with its addresses (the edge listens on
// one of them). "" when there is nothing to list: a revoke URL that is
// not <scheme>://<host[:port]>/internal/revoke can be no listed edge's,
// and the origin then refuses the edge's leases (it serves without them).
func edgeURLs(getenv func(string) string, edgeAddr string) string {
	if u := getenv("LECTERN_EDGE_REVOKE_URL"); u != "" {
		base, ok := strings.CutSuffix(u, lease.RevokePath)
		if p, err := url.Parse(base); !ok || err != nil || p.Host == "" || p.Path != "" || p.User != nil {
			return ""
		}
		return base
	}
	host, port, err := net.SplitHostPort(edgeAddr)
	if err != nil {
		return ""
	}
	var hosts []string
	switch ip := net.ParseIP(host); {
	case host == "" || ip != nil && ip.IsUnspecified():
		hosts = []string{"0.0.0.0", "::"}
	case ip != nil:
		hosts = []string{host}
	default:
		addrs, _ := net.LookupHost(host)
		hosts = append([]string{host}, addrs...)
	}
	urls := make([]string, len(hosts))
	for i, h := range hosts {
		urls[i] = "http://" + net.JoinHostPort(h, port)
	}
	return strings.Join(urls, ",")
}
