package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNoConnectionBeforeReady (issue #28, point 3): an origin listens only
// once it can answer. It is started on a fixed port with its corpus to
// generate (seconds); until it is ready a connection to the port is
// refused (an edge then tries another origin at once), and every
// connection it accepts is answered promptly, never held in the
// kernel's queue while the corpus loads.
func TestNoConnectionBeforeReady(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a full corpus")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cmd, err := startChildAsync(killEnv(dir, filepath.Join(dir, "lectern.db"), "LECTERN_ORIGIN_ADDR="+addr))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var refused, answered int
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			refused++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 ") {
			t.Fatalf("a connection accepted after %d refused was not answered within 2 s: %q, %v", refused, line, err)
		}
		answered++
		break
	}
	if answered == 0 || refused == 0 {
		t.Errorf("%d connections refused while it started, %d answered; want some of each", refused, answered)
	}
}

// startChildAsync starts the test binary as an origin (TestMain's child
// mode) on env without waiting for it.
func startChildAsync(env []string) (*exec.Cmd, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = env
	return cmd, cmd.Start()
}
