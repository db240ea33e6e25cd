package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// onWrite is a progress output that calls hook with everything written
// so far after each write.
type onWrite struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	hook func(string)
}

func (w *onWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.hook != nil {
		w.hook(w.buf.String())
	}
	return len(p), nil
}

// Issue #35, point 10: SIGINT once the first subject is in stops the run
// before the next one, leaves the state consistent and exits 130; the
// summary names the version; the next run completes without exporting
// the first subject again. The progress line counts every subject, the
// unchanged ones of a current mirror too.
func TestSyncInterrupted(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	ver := s.Content.Load().ContentVersion
	all := s.subjects()
	if len(all) < 3 {
		t.Fatalf("want 3 subjects or more, the corpus has %d", len(all))
	}
	ch := make(chan os.Signal, 1)
	ctx, stop := cancelOnSignal(context.Background(), ch, func() {})
	defer stop()
	first := fmt.Sprintf("1/%d subjects", len(all))
	var once sync.Once
	errw := &onWrite{hook: func(so string) {
		if strings.Contains(so, first) {
			once.Do(func() { ch <- os.Interrupt; <-ctx.Done() })
		}
	}}
	var out bytes.Buffer
	code := run(ctx, []string{"sync", dir}, s.env(), &out, errw)
	stderr := errw.buf.String()
	if code != 130 {
		t.Fatalf("interrupted sync exited %d, want 130: %s", code, stderr)
	}
	for _, want := range []string{first, "lectern sync: incomplete at " + ver + ":", "interrupted (SIGINT)", dir + " is consistent"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, stderr)
		}
	}
	if strings.Contains(stderr, fmt.Sprintf("2/%d subjects", len(all))) || s.exports() != 1 {
		t.Errorf("a subject after the interrupt was started: %d exports: %s", s.exports(), stderr)
	}

	code, sum := runSyncCmd(t, s, dir)
	if code != 0 || !sum.Complete || sum.ContentVersion != ver || sum.Subjects.Fetched != len(all)-1 || s.exports() != len(all) {
		t.Fatalf("the next run: %d %+v, %d exports; want complete at %s, %d fetched, %d exports", code, sum, s.exports(), ver, len(all)-1, len(all))
	}
	checkMirror(t, dir, all)

	var again bytes.Buffer
	if code := run(context.Background(), []string{"sync", dir}, s.env(), &out, &again); code != 0 ||
		!strings.Contains(again.String(), fmt.Sprintf("%d/%d subjects", len(all), len(all))) {
		t.Errorf("a current mirror: %d, no %d/%d progress: %s", code, len(all), len(all), again.String())
	}
}

// A real SIGINT cancels signalContext's context with a cause that exits
// 130; a run interrupted before it read the licence names the version
// DIR holds ("incomplete at :" before), or says there is none yet.
func TestSignalExitCode(t *testing.T) {
	s := newTestStack(t, nil)
	dir := t.TempDir()
	if code, _ := runSyncCmd(t, s, dir); code != 0 {
		t.Fatalf("first sync exited %d", code)
	}
	ctx, stop := signalContext(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	for _, c := range []struct{ dir, version string }{
		{dir, s.Content.Load().ContentVersion},
		{t.TempDir(), "no contentVersion yet"},
	} {
		var out, errb bytes.Buffer
		code := run(ctx, []string{"sync", c.dir}, s.env(), &out, &errb)
		if code != 130 || !strings.Contains(errb.String(), "incomplete at "+c.version+":") || !strings.Contains(errb.String(), "interrupted (SIGINT)") {
			t.Errorf("sync on an interrupted context: %d: %s; want 130, incomplete at %s", code, errb.String(), c.version)
		}
		out.Reset()
		if code := run(ctx, []string{"sync", "-json", c.dir}, s.env(), &out, &errb); code != 130 ||
			!strings.Contains(out.String(), `"contentVersion": "`+strings.TrimSuffix(c.version, "no contentVersion yet")+`"`) ||
			!strings.Contains(out.String(), `"stopped": "interrupted (SIGINT)"`) {
			t.Errorf("-json on an interrupted context: %d: %s", code, out.String())
		}
	}
}
