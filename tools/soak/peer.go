package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"syscall"
	"time"
)

// peer is a second origin on the PostgreSQL database, beside the stack's
// (issue #33): the edge lists both, and one fault stops it with SIGSTOP,
// so the edge sends what it holds to the stack's origin while it still
// holds it, and the meters must bill each request once.
type peer struct {
	cmd    *exec.Cmd
	url    string // its public API
	exited chan struct{}
}

// startPeer runs bin/origin in dir with env (its own addresses and bundle
// directory among them), its output appended to log, and waits until its
// admin health answers 200 on adminAddr.
func startPeer(ctx context.Context, bin, dir string, env []string, log io.Writer, originAddr, adminAddr, token string) (*peer, error) {
	p := &peer{url: "http://" + originAddr, exited: make(chan struct{})}
	p.cmd = exec.Command(bin + "/origin")
	p.cmd.Dir, p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = dir, env, log, log
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+adminAddr+"/admin/v1/health", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p, nil
			}
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("the second origin exited before it was ready (its output is in the stack log)")
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("the second origin was not ready after 5 minutes")
		}
	}
}

// freeze stops the peer with SIGSTOP for d (less if ctx ends first).
func (p *peer) freeze(ctx context.Context, d time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return p.cmd.Process.Signal(syscall.SIGCONT)
}

// stop ends the peer as an operator does (SIGTERM: it drains and flushes
// its meters), and kills it after a minute.
func (p *peer) stop() {
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		p.cmd.Process.Kill()
		<-p.exited
	}
}
