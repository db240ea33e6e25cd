package proctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lectern-api/lectern/shared/logbuftest"
)

// The test binary is the child when PROCTEST_CHILD says what it does:
// "ready" prints a ready line and waits to be killed, "silent" waits
// without one, "exit" writes to standard error and exits without one.
func TestMain(m *testing.M) {
	switch os.Getenv("PROCTEST_CHILD") {
	case "ready":
		fmt.Println("starting")
		fmt.Println("READY a b")
		time.Sleep(time.Hour)
	case "silent":
		time.Sleep(time.Hour)
	case "exit":
		fmt.Fprintln(os.Stderr, "no database")
		os.Exit(2)
	}
	os.Exit(m.Run())
}

func child(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROCTEST_CHILD="+mode)
	return cmd
}

func readyFields(line string) ([]string, bool) {
	f := strings.Fields(line)
	return f[min(1, len(f)):], len(f) > 0 && f[0] == "READY"
}

// TestStartAndKill: Start returns what the ready line says, and Kill
// ends the child with SIGKILL.
func TestStartAndKill(t *testing.T) {
	p, got, err := Start(t, "child", child("ready"), readyFields)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
		t.Errorf("ready line's fields (-want +got):\n%s", diff)
	}
	p.Kill()
	if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the child ended with %v, want SIGKILL", p.Cmd.ProcessState)
	}
}

// TestStartExits: a child that exits without its ready line is an error
// that says what it wrote to standard error.
func TestStartExits(t *testing.T) {
	_, _, err := Start(t, "child", child("exit"), readyFields)
	if err == nil || !strings.Contains(err.Error(), "no database") {
		t.Errorf("Start: %v, want an error with the child's standard error", err)
	}
}

// TestLaunchDeadline: a child that prints no ready line by the deadline
// of Launch's context is killed, and the error says the context's cause.
func TestLaunchDeadline(t *testing.T) {
	ctx, cancel := context.WithDeadlineCause(context.Background(), time.Now().Add(100*time.Millisecond), errors.New("too slow"))
	defer cancel()
	cmd := child("silent")
	_, _, err := Launch(ctx, "child", cmd, nil, readyFields)
	if err == nil || !strings.Contains(err.Error(), "too slow") {
		t.Errorf("Launch: %v, want the deadline's cause", err)
	}
	if cmd.ProcessState == nil {
		t.Errorf("the child was not waited for")
	}
}

// TestInterrupt: Interrupt ends the child with SIGINT, not SIGKILL, when
// it ends within the grace period (a Go program without a handler does).
func TestInterrupt(t *testing.T) {
	p, _, err := Launch(context.Background(), "child", child("ready"), nil, readyFields)
	if err != nil {
		t.Fatal(err)
	}
	p.Interrupt(time.Minute)
	if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGINT {
		t.Errorf("the child ended with %v, want SIGINT", p.Cmd.ProcessState)
	}
}

// TestAwaitKeepsTheRest: what follows the ready line, already read into
// Await's buffer with it, reaches rest whole.
func TestAwaitKeepsTheRest(t *testing.T) {
	rest := new(logbuftest.Buffer)
	got, ok := Await(strings.NewReader("starting\nREADY x\nafter 1\nafter 2\n"), rest, readyFields)
	if !ok || !slices.Equal(got, []string{"x"}) {
		t.Fatalf("Await: %q %v, want [x] true", got, ok)
	}
	for deadline := time.Now().Add(10 * time.Second); rest.String() != "after 1\nafter 2\n"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rest got %q, want the two lines after the ready line", rest)
		}
	}
}

// TestOriginReady: the origin is ready at its admin API's line, its
// three addresses read ("off": none), and every line it printed is in
// rest; with until, at the first line after the addresses that until
// accepts, not at a line before them that until would accept too.
func TestOriginReady(t *testing.T) {
	created := func(line string) bool { return strings.HasPrefix(line, "Created") }
	for _, tc := range []struct {
		name  string
		until func(string) bool
		lines []string // the last is the ready line
		idp   string
	}{
		{"addresses", nil, []string{"", "Lectern origin stack", "  API (direct)       http://127.0.0.1:1/v1",
			"  identity provider  off", "  admin API          http://127.0.0.1:3"}, ""},
		{"until", created, []string{"Created too early", "  API (direct)       http://127.0.0.1:1/v1",
			"  identity provider  http://127.0.0.1:2", "  admin API          http://127.0.0.1:3", "", "Created the demo organisation"},
			"http://127.0.0.1:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rest strings.Builder
			ready := originReadyUntil(&rest, tc.until)
			var o *Origin
			for i, line := range tc.lines {
				var ok bool
				if o, ok = ready(line); ok != (i == len(tc.lines)-1) {
					t.Fatalf("line %q: ready %v", line, ok)
				}
			}
			if o.API != "http://127.0.0.1:1" || o.IdP != tc.idp || o.Admin != "http://127.0.0.1:3" {
				t.Errorf("got API %q, IdP %q, admin %q", o.API, o.IdP, o.Admin)
			}
			if got, want := rest.String(), strings.Join(tc.lines, "\n")+"\n"; got != want {
				t.Errorf("rest got %q, want %q", got, want)
			}
		})
	}
}

func TestEdgeURL(t *testing.T) {
	type read struct {
		URL string
		OK  bool
	}
	var got []read
	for _, line := range []string{"Lectern edge", "  API (edge)         http://127.0.0.1:8787/v1", "  module             build/worker.wasm"} {
		u, ok := EdgeURL(line)
		got = append(got, read{u, ok})
	}
	want := []read{{"", false}, {"http://127.0.0.1:8787", true}, {"", false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EdgeURL (-want +got):\n%s", diff)
	}
}
