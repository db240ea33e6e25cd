package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus/gen"
	"golang.org/x/oauth2/clientcredentials"
)

// When LECTERN_KILL_CHILD is set the test binary is the origin: the
// parent test below runs it as a child process and kills it.
func TestMain(m *testing.M) {
	if os.Getenv("LECTERN_KILL_CHILD") == "1" {
		ctx := context.Background()
		cfg, err := parseConfig(nil, os.Getenv)
		if err != nil {
			fmt.Println("config:", err)
			os.Exit(2)
		}
		st, err := start(ctx, cfg, os.Stderr)
		if err != nil {
			fmt.Println("start:", err)
			os.Exit(2)
		}
		fmt.Printf("READY %s %s %s\n", st.OriginURL, st.IdPURL, st.AdminURL)
		select {}
	}
	os.Exit(m.Run())
}

// startChild starts the test binary as an origin (TestMain's child mode)
// on env, its standard error to stderr, and returns it with its origin,
// identity provider and admin URLs once it is ready.
func startChild(env []string, stderr io.Writer) (*exec.Cmd, []string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = env
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "READY" {
			go io.Copy(io.Discard, out)
			return cmd, f[1:], nil
		}
	}
	cmd.Wait()
	return nil, nil, errors.New("the origin did not start")
}

// spec/issue: an increment is durable before its response is sent. The
// origin is killed with SIGKILL under load; after a restart on the same
// database its call meter equals the 200s the clients received, plus at
// most the requests in flight when it died.
func TestSIGKILLKeepsAcknowledgedCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: runs the origin as a child process")
	}
	dir := t.TempDir()
	if _, err := gen.Write(filepath.Join(dir, "corpus"), gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "LECTERN_KILL_CHILD=1",
		"LECTERN_ORIGIN_ADDR=127.0.0.1:0", "LECTERN_IDP_ADDR=127.0.0.1:0", "LECTERN_ADMIN_ADDR=127.0.0.1:0",
		"LECTERN_ADMIN_TOKEN=admin-token-for-tests", "LECTERN_DB="+filepath.Join(dir, "lectern.db"),
		"LECTERN_CORPUS="+filepath.Join(dir, "corpus"), "LECTERN_SECRET=a-test-secret-of-at-least-32-characters")
	child := func() (*exec.Cmd, []string) {
		cmd, urls, err := startChild(env, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return cmd, urls
	}
	cmd, urls := child()
	s := &testStack{t: t, stack: &stack{OriginURL: urls[0], IdPURL: urls[1], AdminURL: urls[2], AdminToken: "admin-token-for-tests"}}
	id, secret := s.org(`{"orgId":"acme","contentGrants":["high"]}`, "content.read")
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: s.IdPURL + "/oauth2/token", Scopes: []string{"service-api/content.read"}}
	tok, err := cc.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	var acked, sent atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	client := &http.Client{Timeout: 5 * time.Second}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", s.OriginURL+"/v1/tiers", nil)
				req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
				sent.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					return // the origin died
				}
				resp.Body.Close()
				if resp.StatusCode == 200 {
					acked.Add(1)
				}
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	close(stop)
	wg.Wait()
	if acked.Load() == 0 {
		t.Fatal("no request was acknowledged before the kill")
	}

	cmd, urls = child()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	s.AdminURL = urls[2]
	calls := int64(s.calls("acme"))
	t.Logf("acknowledged %d, sent %d, counted after restart %d", acked.Load(), sent.Load(), calls)
	if calls < acked.Load() {
		t.Errorf("lost acknowledged calls: counted %d, acknowledged %d", calls, acked.Load())
	}
	if calls > sent.Load() {
		t.Errorf("counted %d calls, more than the %d sent", calls, sent.Load())
	}
}
