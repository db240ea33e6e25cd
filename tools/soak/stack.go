package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stack is the stack command (tools/stack) running the origin and the
// edge as `make run` does, its output kept in a log file.
type stack struct {
	cmd    *exec.Cmd
	exited chan struct{}

	mu        sync.Mutex
	originPid int           // the origin's last start
	readies   chan struct{} // a value for each "origin ready"
	edgeReady chan struct{} // closed at the first "edge ready"
	edgeOnce  sync.Once
	tail      []string // the output's last lines
}

var readyLine = regexp.MustCompile(`^stack: (origin|edge) ready \(pid (\d+)\)`)

// startStack runs bin/stack in dir with env, its output appended to log,
// and waits until the origin and the edge are ready.
func startStack(ctx context.Context, bin, dir string, env []string, log io.Writer) (*stack, error) {
	s := &stack{readies: make(chan struct{}, 16), edgeReady: make(chan struct{}), exited: make(chan struct{})}
	s.cmd = exec.Command(bin+"/stack", "-origin", bin+"/origin", "-edge", bin+"/edge", "-backoff", "1s")
	s.cmd.Dir, s.cmd.Env = dir, env
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = pw, pw
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.cmd.Wait()
		pw.Close()
		close(s.exited)
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			s.mu.Lock()
			if s.tail = append(s.tail, line); len(s.tail) > 40 {
				s.tail = s.tail[1:]
			}
			if m := readyLine.FindStringSubmatch(line); m != nil {
				if m[1] == "edge" {
					s.edgeOnce.Do(func() { close(s.edgeReady) })
				} else {
					s.originPid, _ = strconv.Atoi(m[2])
					select {
					case s.readies <- struct{}{}:
					default:
					}
				}
			}
			s.mu.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case <-s.edgeReady:
		<-s.readies // the origin is ready before the edge starts
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("the stack exited before it was ready:\n%s", s.lastLines())
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	case <-time.After(10 * time.Minute):
		s.stop()
		return nil, fmt.Errorf("the stack was not ready after 10 minutes:\n%s", s.lastLines())
	}
}

func (s *stack) lastLines() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.tail, "\n")
}

// killOrigin sends the origin SIGKILL; the stack restarts it.
func (s *stack) killOrigin() error {
	s.mu.Lock()
	pid := s.originPid
	s.mu.Unlock()
	if pid <= 0 {
		return errors.New("no origin pid")
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// awaitOrigin waits until the stack reports the origin ready again after
// a kill, at most d.
func (s *stack) awaitOrigin(d time.Duration) bool {
	select {
	case <-s.readies:
		return true
	case <-time.After(d):
		return false
	}
}

// stop stops the stack as Ctrl-C does (the edge, then the origin, which
// flushes its meters), and kills it after a minute.
func (s *stack) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(time.Minute):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
}

// pgRestart finds how to restart the PostgreSQL server dsn names, on
// this machine: pg_ctlcluster for the cluster listening on its port
// (Debian's postgresql-common), else `service postgresql`. It returns the
// command, or why there is none.
func pgRestart(dsn string) (cmd []string, why string) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, "the PostgreSQL DSN is not a postgres:// URL"
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	if ip := net.ParseIP(host); host != "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, "PostgreSQL is not on this machine (" + host + ")"
	}
	works := func(args ...string) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return exec.CommandContext(ctx, args[0], args[1:]...).Run() == nil
	}
	if out, err := exec.Command("pg_lsclusters", "-h").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 4 && f[2] == port && f[3] == "online" {
				if works("pg_ctlcluster", f[0], f[1], "status") {
					return []string{"pg_ctlcluster", f[0], f[1], "restart"}, ""
				}
			}
		}
	}
	if works("service", "postgresql", "status") {
		return []string{"service", "postgresql", "restart"}, ""
	}
	return nil, "neither pg_ctlcluster (for the cluster on port " + port + ") nor `service postgresql` works here (they need root or the cluster's owner)"
}

// runCommand runs a fault's command, bounded.
func runCommand(args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// baseEnv is the process's environment without any LECTERN_ setting, so
// that an operator's own (a database, a test clock) cannot leak into the
// soak's stack.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LECTERN_") {
			env = append(env, kv)
		}
	}
	return env
}
