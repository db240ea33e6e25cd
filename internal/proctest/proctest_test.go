package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The test binary is the child when PROCTEST_CHILD says what it does:
// "ready" prints a ready line and waits to be killed, "exit" writes to
// standard error and exits without one.
func TestMain(m *testing.M) {
	switch os.Getenv("PROCTEST_CHILD") {
	case "ready":
		fmt.Println("starting")
		fmt.Println("READY a b")
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
