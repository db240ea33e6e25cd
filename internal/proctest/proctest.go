// Package proctest is for tests that run a built command as a child
// process, as an operator runs it: started, its ready line awaited on
// standard output, stopped, resumed or killed with SIGKILL for real, and
// started again on the same state (origin/cmd/origin, wasmtest).
package proctest

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/logbuf"
)

// ReadyWithin bounds how long Start waits for the ready line; a child
// that has not printed it by then is killed.
const ReadyWithin = time.Minute

// Proc is a child process a test started.
type Proc struct {
	Cmd *exec.Cmd
	// Stderr is what the child wrote to its standard error, unless the
	// command had a writer of its own.
	Stderr *logbuf.Buffer
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
	var zero T
	p := &Proc{Cmd: cmd, name: name}
	if cmd.Stderr == nil {
		p.Stderr = new(logbuf.Buffer)
		cmd.Stderr = p.Stderr
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, zero, err
	}
	if err := cmd.Start(); err != nil {
		return nil, zero, fmt.Errorf("%s: %w", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		p.Kill()
		if t.Failed() && p.Stderr != nil && p.Stderr.Len() > 0 {
			t.Logf("%s stderr:\n%s", name, p.Stderr)
		}
	})
	timer := time.AfterFunc(ReadyWithin, func() { cmd.Process.Kill() })
	defer timer.Stop()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if v, ok := ready(sc.Text()); ok {
			go io.Copy(io.Discard, out)
			return p, v, nil
		}
	}
	cmd.Wait()
	return nil, zero, fmt.Errorf("%s exited, or printed no ready line within %v%s", name, ReadyWithin, p.stderr())
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
