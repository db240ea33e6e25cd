package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Interrupting a sync (issue #35, point 10; docs/integrating.md, Exit
// status): the first SIGINT or SIGTERM cancels the run's context, so the
// step under way is abandoned (a download, a call) or ends (a swap, a
// state write: each is atomic, as for a kill -9) and no other begins; the
// state is written and the command exits 128 + the signal's number (130
// for SIGINT, 143 for SIGTERM), as a shell reports a process the signal
// ended. A second signal ends the process at once, as an uncaught one
// does; the state is consistent at rest either way.

// interrupted is the cause of a run's context cancelled by a signal.
type interrupted struct{ sig os.Signal }

func (e *interrupted) Error() string { return "interrupted (" + signalName(e.sig) + ")" }

// code is the exit status of a run the signal interrupted.
func (e *interrupted) code() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 130
}

func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// signalContext is parent, cancelled with an *interrupted cause by the
// first SIGINT or SIGTERM; stop releases the signals.
func signalContext(parent context.Context) (ctx context.Context, stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	ctx, stopCtx := cancelOnSignal(parent, ch, func() { signal.Stop(ch) })
	return ctx, func() { signal.Stop(ch); stopCtx() }
}

// cancelOnSignal is parent, cancelled by the first signal from ch with an
// *interrupted cause, after release (which lets a second signal through).
func cancelOnSignal(parent context.Context, ch <-chan os.Signal, release func()) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			release()
			cancel(&interrupted{sig})
		case <-done:
		}
	}()
	return ctx, func() { close(done); cancel(nil) }
}

// interruptedRun is the signal that interrupted a run on ctx which ended
// with err, or nil when none did or the run completed anyway. The summary
// then says so instead of the error the cancellation caused.
func interruptedRun(ctx context.Context, err error, sum *summary) *interrupted {
	var in *interrupted
	if err == nil || !errors.As(context.Cause(ctx), &in) {
		return nil
	}
	sum.Stopped, sum.Error = in.Error(), ""
	return in
}

// progressEvery bounds how long the overall progress line waits while
// subjects complete unchanged.
const progressEvery = time.Second

// progress is the overall count of a run's subjects, said on the progress
// output as "N/M subjects" when a subject was fetched, at least every
// progressEvery otherwise, and for the last.
type progress struct {
	done, total int
	said        time.Time
}

// progressed counts sub done; fetchedBefore is the summary's Fetched
// before it.
func (s *syncer) progressed(fetchedBefore int) {
	p := &s.prog
	p.done++
	if s.sum.Subjects.Fetched == fetchedBefore && p.done < p.total && time.Since(p.said) < progressEvery {
		return
	}
	p.said = time.Now()
	s.say("%d/%d subjects", p.done, p.total)
}

// stopIfInterrupted is the run's end when ctx is done (a signal, the
// -timeout) before the next subject begins: nil otherwise.
func stopIfInterrupted(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("stopped before the next subject: %w", context.Cause(ctx))
}

// progressAll says the n subjects of a run that found them all current.
func (s *syncer) progressAll(n int) {
	if n > 0 {
		s.say("%d/%d subjects", n, n)
	}
}
