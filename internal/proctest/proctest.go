// Package proctest is for tests that run a built command as a child
// process, as an operator runs it: started, its ready line awaited on
// standard output, stopped, resumed or killed with SIGKILL for real, and
// started again on the same state (origin/cmd/origin, wasmtest), or
// measured (tools/bench).
//
// It is the one harness for children: Start and Launch (any command, a
// ready line of its own), StartOrigin and LaunchOrigin (the origin
// command, ready once it prints its addresses; LaunchOriginUntil, at a
// line after them), StartEdge (the edge command, ready at EdgeURL's
// line), and Await, the ready-line wait itself, for an edge a test runs
// in its own process.
package proctest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/logbuftest"
)

// ReadyWithin bounds how long Start waits for the ready line, and Launch
// when its context has no deadline; a child that has not printed it by
// then is killed.
const ReadyWithin = time.Minute

// Proc is a child process a test started.
type Proc struct {
	Cmd *exec.Cmd
	// Stderr is what the child wrote to its standard error, unless the
	// command had a writer of its own.
	Stderr *logbuftest.Buffer
	name   string
}

// Start starts cmd, named name in messages, and reads its standard output
// until ready accepts a line: it returns what ready made of that line,
// and the rest of the output is discarded. A child that exits before
// such a line, or prints none within ReadyWithin, is an error (with what
// it wrote to standard error). Its standard error goes to cmd.Stderr when
// set, else to the Proc's Stderr.
//
// When the test ends the child is resumed (the test may have stopped it),
// killed and waited for; its standard error, when the Proc holds it, is
// logged if the test failed. Start does not stop the test, so it may run
// on any goroutine.
func Start[T any](t testing.TB, name string, cmd *exec.Cmd, ready func(line string) (T, bool)) (*Proc, T, error) {
	p, v, err := Launch(context.Background(), name, cmd, nil, ready)
	if err != nil {
		return nil, v, err
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		p.Kill()
		if t.Failed() && p.Stderr != nil && p.Stderr.Len() > 0 {
			t.Logf("%s stderr:\n%s", name, p.Stderr)
		}
	})
	return p, v, nil
}

// Launch is Start for a caller that is no test, or a child that outlives
// the test that started it (a suite's shared origin): the caller kills
// the Proc. The output after the ready line goes to rest (nil: it is
// discarded). A child that prints no ready line before ctx ends is
// killed, and the error says ctx's cause; ctx's deadline, when it has
// one, replaces ReadyWithin, so that a child known to start slowly (the
// bench's origin on a corpus ten times the deployed one) is given longer.
func Launch[T any](ctx context.Context, name string, cmd *exec.Cmd, rest io.Writer, ready func(line string) (T, bool)) (*Proc, T, error) {
	var zero T
	p := &Proc{Cmd: cmd, name: name}
	if cmd.Stderr == nil {
		p.Stderr = new(logbuftest.Buffer)
		cmd.Stderr = p.Stderr
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, zero, err
	}
	if err := cmd.Start(); err != nil {
		return nil, zero, fmt.Errorf("%s: %w", name, err)
	}
	within := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		within, cancel = context.WithTimeout(ctx, ReadyWithin)
		defer cancel()
	}
	stop := context.AfterFunc(within, func() { cmd.Process.Kill() })
	// A ready line read as the wait ends counts only if the kill has not
	// started: stop reports false once it has.
	if v, ok := Await(out, rest, ready); ok && stop() {
		return p, v, nil
	}
	stop()
	cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return nil, zero, fmt.Errorf("%s: %w%s", name, context.Cause(ctx), p.stderr())
	case within.Err() != nil:
		return nil, zero, fmt.Errorf("%s printed no ready line within %v%s", name, ReadyWithin, p.stderr())
	}
	return nil, zero, fmt.Errorf("%s exited before its ready line%s", name, p.stderr())
}

// Await reads out, a command's standard output, until ready accepts a
// line, and returns what ready made of it; the rest of out is copied to
// rest (nil: discarded) on a goroutine of its own. It reports false when
// out ends first. It is how Start and Launch wait for a child, and how a
// test waits for a command it runs in its own process (worker/cmd/edge's
// serve, printing to a pipe).
func Await[T any](out io.Reader, rest io.Writer, ready func(line string) (T, bool)) (T, bool) {
	if rest == nil {
		rest = io.Discard
	}
	br := bufio.NewReader(out) // its buffer, read past the ready line, goes to rest first
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if v, ok := ready(strings.TrimRight(line, "\r\n")); ok {
				go io.Copy(rest, br)
				return v, true
			}
		}
		if err != nil {
			break
		}
	}
	var zero T
	return zero, false
}

// Interrupt asks the child to end with SIGINT, as an operator's Ctrl-C
// does (an origin drains and closes its database), and waits for it; a
// child still running after grace is killed with SIGKILL.
func (p *Proc) Interrupt(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		p.Cmd.Wait()
		close(done)
	}()
	p.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-done:
	case <-time.After(grace):
		p.Cmd.Process.Kill()
		<-done
	}
}

// Kill kills the child with SIGKILL and waits for it to end.
func (p *Proc) Kill() {
	p.Cmd.Process.Signal(syscall.SIGKILL)
	p.Cmd.Wait()
}

// stderr is what the child wrote to standard error, as the end of an
// error message; empty when the Proc does not hold it.
func (p *Proc) stderr() string {
	if p.Stderr == nil || p.Stderr.Len() == 0 {
		return ""
	}
	return ":\n" + p.Stderr.String()
}
