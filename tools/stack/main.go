// Command stack runs the whole local stack in the foreground for
// `make run`: the origin command (origin, identity provider, admin API)
// and, once the origin is healthy, the edge (tools/edge) in front of it.
// Ctrl-C (or SIGTERM) stops both; so does either one exiting.
//
//	stack -origin build/origin -edge build/edge
//
// Both children get this process's environment (DESIGN.md's operator
// contract), plus two settings they must agree on when unset: a generated
// LECTERN_ADMIN_TOKEN (the edge reads the test clock with it) and
// LECTERN_PUBLIC_URL = http://<LECTERN_EDGE_ADDR>, since the edge is the
// stack's front door.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stack:", err)
		os.Exit(1)
	}
}

// readyTimeout bounds the origin's start, corpus generation included.
const readyTimeout = 10 * time.Minute

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet("stack", flag.ContinueOnError)
	originBin := fs.String("origin", "build/origin", "the origin command")
	edgeBin := fs.String("edge", "build/edge", "the edge command")
	if err := fs.Parse(args); err != nil {
		return err
	}
	or := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	env := os.Environ()
	token := getenv("LECTERN_ADMIN_TOKEN")
	if token == "" {
		var b [24]byte
		rand.Read(b[:])
		token = hex.EncodeToString(b[:])
		env = append(env, "LECTERN_ADMIN_TOKEN="+token)
		fmt.Fprintf(stdout, "admin token %s   (set LECTERN_ADMIN_TOKEN to choose one)\n", token)
	}
	if getenv("LECTERN_PUBLIC_URL") == "" {
		env = append(env, "LECTERN_PUBLIC_URL=http://"+or("LECTERN_EDGE_ADDR", "127.0.0.1:8787"))
	}

	origin, err := startChild(*originBin, env, stdout)
	if err != nil {
		return err
	}
	children := []*child{origin}
	defer func() { stopAll(children) }()

	health := "http://" + or("LECTERN_ADMIN_ADDR", "127.0.0.1:8081") + "/admin/v1/health"
	if err := waitHealthy(ctx, health, token, origin); err != nil {
		return err
	}
	edge, err := startChild(*edgeBin, env, stdout)
	if err != nil {
		return err
	}
	children = append(children, edge)

	select {
	case <-ctx.Done():
		return nil
	case <-origin.done:
		return fmt.Errorf("origin exited: %v", origin.err)
	case <-edge.done:
		return fmt.Errorf("edge exited: %v", edge.err)
	}
}

// child is a running child process; done is closed when it has exited.
type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startChild(bin string, env []string, stdout io.Writer) (*child, error) {
	cmd := exec.Command(bin)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// stopAll asks every child still running to stop (SIGTERM: each shuts
// down gracefully), waits, and kills what is left after a grace period.
func stopAll(children []*child) {
	for _, c := range children {
		c.cmd.Process.Signal(syscall.SIGTERM)
	}
	grace := time.After(15 * time.Second)
	for _, c := range children {
		select {
		case <-c.done:
		case <-grace:
			c.cmd.Process.Kill()
			<-c.done
		}
	}
}

// waitHealthy polls the admin health check until it answers 200.
func waitHealthy(ctx context.Context, url, token string, origin *child) error {
	deadline := time.After(readyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted before the origin was ready")
		case <-origin.done:
			return fmt.Errorf("origin exited before it was ready: %v", origin.err)
		case <-deadline:
			return fmt.Errorf("origin not healthy at %s after %s", url, readyTimeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
