package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/corpus/gen"
	"github.com/lectern-api/lectern/shared/logbuftest"
	"github.com/lectern-api/lectern/tools/internal/stackbin"
	"golang.org/x/oauth2/clientcredentials"
)

const (
	adminToken = "admin-token-for-stack-tests"
	secret     = "a-test-secret-of-at-least-32-characters"
)

// binDir holds the origin, edge and stack commands and the edge module
// (standard Go), built once for the tests that need them.
var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func bins(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "stack-test-"); binErr != nil {
			return
		}
		binErr = stackbin.Build(binDir, "")
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// freePort is stackbin.FreeAddr.
func freePort(t *testing.T) string {
	t.Helper()
	addr, err := stackbin.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// stackEnv is a stack on free ports with a small corpus and a temporary
// database, all in dir; bin holds the commands.
type stackEnv struct {
	t                              *testing.T
	dir, bin                       string
	env                            []string
	originAddr, idpAddr, adminAddr string
	edgeAddr                       string
	cmd                            *exec.Cmd
	mu                             sync.Mutex
	out                            bytes.Buffer // the stack's output so far
	lines                          chan string  // and line by line
	exited                         chan struct{}
}

func newEnv(t *testing.T) *stackEnv {
	dir, bin := t.TempDir(), bins(t)
	if _, err := gen.Write(filepath.Join(dir, "corpus"), gen.Options{Seed: 1, Small: true}); err != nil {
		t.Fatal(err)
	}
	e := &stackEnv{t: t, dir: dir, bin: bin, originAddr: freePort(t), idpAddr: freePort(t), adminAddr: freePort(t), edgeAddr: freePort(t)}
	e.env = append(os.Environ(),
		"LECTERN_ORIGIN_ADDR="+e.originAddr, "LECTERN_IDP_ADDR="+e.idpAddr,
		"LECTERN_ADMIN_ADDR="+e.adminAddr, "LECTERN_EDGE_ADDR="+e.edgeAddr,
		"LECTERN_ADMIN_TOKEN="+adminToken, "LECTERN_SECRET="+secret,
		"LECTERN_DB="+filepath.Join(dir, "lectern.db"), "LECTERN_CORPUS="+filepath.Join(dir, "corpus"),
		"LECTERN_EDGE_WASM="+filepath.Join(bin, stackbin.Module), "LECTERN_EDGE_INSTANCES=1")
	return e
}

// start runs the stack in its own process group, as a terminal's
// foreground job, and waits until both children are ready.
func (e *stackEnv) start(args ...string) {
	e.t.Helper()
	e.cmd = exec.Command(filepath.Join(e.bin, "stack"), append([]string{"-origin", filepath.Join(e.bin, "origin"), "-edge", filepath.Join(e.bin, "edge")}, args...)...)
	e.cmd.Dir, e.cmd.Env = e.dir, e.env
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	e.cmd.Stdout, e.cmd.Stderr = pw, pw
	if err := e.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	// This start's own channels and command: a second start replaces
	// the fields while this one's goroutines may still be ending.
	cmd, lines, exited := e.cmd, make(chan string, 1000), make(chan struct{})
	e.lines, e.exited = lines, exited
	go func() {
		cmd.Wait()
		pw.Close()
		close(exited)
	}()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			e.mu.Lock()
			e.out.WriteString(sc.Text() + "\n")
			e.mu.Unlock()
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	e.t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		for _, pid := range []int{e.pid("origin"), e.pid("edge")} {
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	e.await(`stack: origin ready`)
	e.await(`stack: edge ready`)
}

// await reads the stack's output until a line matches re.
func (e *stackEnv) await(re string) []string {
	e.t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-e.lines:
			if !ok {
				e.t.Fatalf("the stack exited before %q:\n%s", re, e.output())
			}
			if m := rx.FindStringSubmatch(line); m != nil {
				return m
			}
		case <-timeout:
			e.t.Fatalf("no %q in the stack's output:\n%s", re, e.output())
		}
	}
}

func (e *stackEnv) output() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.out.String()
}

// pid is the process id of the child's last start, from the stack's log.
func (e *stackEnv) pid(name string) int {
	m := regexp.MustCompile(`stack: `+name+` ready \(pid (\d+)\)`).FindAllStringSubmatch(e.output(), -1)
	if len(m) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

// admin calls the admin API.
func admin(t *testing.T, addr, method, path, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, m)
	}
	return m
}

// token creates the organisation acme and a client, and returns a token.
func (e *stackEnv) token() string {
	e.t.Helper()
	admin(e.t, e.adminAddr, "POST", "/admin/v1/orgs", `{"orgId":"acme","contentGrants":["high"]}`)
	c := admin(e.t, e.adminAddr, "POST", "/admin/v1/orgs/acme/clients", `{"scopes":["content.read"]}`)
	cc := clientcredentials.Config{ClientID: c["clientId"].(string), ClientSecret: c["clientSecret"].(string),
		TokenURL: "http://" + e.idpAddr + "/oauth2/token", Scopes: []string{"service-api/content.read"}}
	tok, err := cc.Token(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return tok.AccessToken
}

// get is GET /v1/tiers through the edge; inm, when set, is If-None-Match.
func get(client *http.Client, edgeAddr, tok, inm string) (*http.Response, error) {
	req, _ := http.NewRequest("GET", "http://"+edgeAddr+"/v1/tiers", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if inm != "" {
		req.Header.Set("If-None-Match", inm)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// issue #13: a Ctrl-C of `make run` under 30 clients ends with no 5xx:
// the stack stops the edge, which drains its forwards while the origin
// still answers, and only then the origin, which flushes its meters. The
// calls billed, read after a restart, are exactly the 200s and 304s the
// clients received (each bills one call: a forward, or a gate).
//
// The signal is SIGINT to the stack's process group, as a terminal sends
// it: it tests both the order and that the children, in their own groups,
// do not get it at the same time as the stack.
func TestShutdownUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: builds and runs the stack")
	}
	e := newEnv(t)
	e.start()
	tok := e.token()
	first, err := get(http.DefaultClient, e.edgeAddr, tok, "")
	if err != nil || first.StatusCode != 200 || first.Header.Get("ETag") == "" {
		t.Fatalf("first request: %v %v", first, err)
	}
	etag := first.Header.Get("ETag")

	var billed, refused, failed atomic.Int64
	billed.Add(1) // the first request
	var (
		mu     sync.Mutex
		others = map[int]int{}
	)
	var wg sync.WaitGroup
	for w := range 30 {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 20 * time.Second}
			defer client.CloseIdleConnections()
			inm := ""
			if w%2 == 1 {
				inm = etag // the edge's 304 path: a gate call to the origin
			}
			for {
				resp, err := get(client, e.edgeAddr, tok, inm)
				switch {
				case err != nil:
					// The edge is gone (connection refused or closed
					// before an answer): nothing was answered or billed.
					failed.Add(1)
					if strings.Contains(err.Error(), "refused") {
						return
					}
					continue
				case resp.StatusCode == 200 || resp.StatusCode == 304:
					billed.Add(1)
				default:
					refused.Add(1)
					mu.Lock()
					others[resp.StatusCode]++
					mu.Unlock()
				}
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	if billed.Load() < 100 {
		t.Logf("only %d answers before the signal", billed.Load())
	}
	syscall.Kill(-e.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-e.exited:
	case <-time.After(40 * time.Second):
		t.Fatalf("the stack did not stop:\n%s", e.output())
	}
	wg.Wait()
	if code := e.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the stack exited %d:\n%s", code, e.output())
	}
	t.Logf("answered 200/304: %d, other: %v, transport errors: %d", billed.Load(), others, failed.Load())
	if refused.Load() != 0 {
		t.Errorf("answers other than 200 and 304 during the shutdown: %v", others)
	}
	if strings.Contains(e.output(), "did not stop") {
		t.Errorf("a child had to be killed:\n%s", e.output())
	}

	// The origin again, on the same database: its meters.
	origin := exec.Command(filepath.Join(e.bin, "origin"))
	origin.Dir, origin.Env = e.dir, e.env
	if err := origin.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { origin.Process.Signal(syscall.SIGTERM); origin.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !healthy(ctx, "http://"+e.adminAddr+"/admin/v1/health", func() string { return adminToken }) {
		t.Fatal("the origin did not come back")
	}
	m := admin(t, e.adminAddr, "GET", "/admin/v1/orgs/acme", "")
	calls := m["meters"].(map[string]any)["month"].(map[string]any)["calls"].(float64)
	if int64(calls) != billed.Load() {
		t.Errorf("calls billed %v, want the %d answers 200 or 304", calls, billed.Load())
	}
}

// A child killed with SIGKILL is restarted (the reason logged) and serves
// again; while the origin is down, the edge keeps running.
func TestRestartsAChild(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short: builds and runs the stack")
	}
	e := newEnv(t)
	e.start("-backoff", "50ms")
	tok := e.token()
	for _, name := range []string{"origin", "edge"} {
		pid := e.pid(name)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		e.await(`stack: ` + name + ` exited \(signal: killed\); restarting it in 50ms`)
		e.await(`stack: ` + name + ` ready \(pid \d+\)`)
		if e.pid(name) == pid {
			t.Fatalf("%s: the same pid %d", name, pid)
		}
		resp, err := get(http.DefaultClient, e.edgeAddr, tok, "")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("after the %s's restart: %v %v", name, resp, err)
		}
	}
	syscall.Kill(e.cmd.Process.Pid, syscall.SIGTERM)
	<-e.exited
	if code := e.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the stack exited %d:\n%s", code, e.output())
	}
}

// A child that keeps failing to come back stops the supervisor after
// giveUp failures, with the delays doubling and the reason logged.
func TestGivesUp(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "child.sh")
	// The first run becomes ready and exits 3 when told; every later one
	// exits 3 before it is ready.
	os.WriteFile(script, []byte("#!/bin/sh\nif [ -e \"$D/started\" ]; then exit 3; fi\ntouch \"$D/started\" \"$D/ready\"\nwhile [ ! -e \"$D/die\" ]; do sleep 0.01; done\nexit 3\n"), 0o755)
	var out logbuftest.Buffer
	p := &proc{name: "child", bin: script, env: append(os.Environ(), "D="+dir), out: &out,
		pol: policy{backoff: 10 * time.Millisecond, maxBackoff: 30 * time.Millisecond, stable: time.Hour, giveUp: 3, grace: time.Second},
		ready: func(ctx context.Context) bool {
			for {
				if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
					return true
				}
				select {
				case <-ctx.Done():
					return false
				case <-time.After(5 * time.Millisecond):
				}
			}
		}}
	c, err := p.launch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "ready"))
	os.WriteFile(filepath.Join(dir, "die"), nil, 0o644)
	err = p.supervise(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), "3 restarts in a row failed") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("supervise: %v", err)
	}
	log := out.String()
	for _, want := range []string{
		"stack: child exited (exit status 3); restarting it in 10ms",
		"stack: restart 1 of the child failed: child exited before it was ready (exit status 3); retrying in 20ms",
		"stack: restart 2 of the child failed: child exited before it was ready (exit status 3); retrying in 30ms",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("no %q in the log:\n%s", want, log)
		}
	}
}

// issue #18, point 2: with LECTERN_ADMIN_TOKEN unset, the origin keeps
// its admin token in var/admin-token and the stack gives the edge that
// one (it needs it for the test clock); a restart keeps it, and the
// walk-through printed on the database that now has the demo organisation
// runs as pasted, under `set -u`, to the licence of a new client of it.
func TestWalkThroughRuns(t *testing.T) {
	e := newEnv(t)
	env := []string{"LECTERN_TEST_CLOCK=1"}
	for _, kv := range e.env {
		if !strings.HasPrefix(kv, "LECTERN_ADMIN_TOKEN=") {
			env = append(env, kv)
		}
	}
	e.env = env
	e.start()
	b, err := os.ReadFile(filepath.Join(e.dir, adminTokenFile))
	token := strings.TrimSpace(string(b))
	if err != nil || len(token) < 32 {
		t.Fatalf("%s: %q, %v", adminTokenFile, b, err)
	}
	stop := func() {
		syscall.Kill(-e.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-e.exited:
		case <-time.After(40 * time.Second):
			t.Fatalf("the stack did not stop:\n%s", e.output())
		}
	}
	stop()

	before := len(e.output())
	e.start()
	defer stop()
	var walk []string
	for deadline := time.Now().Add(30 * time.Second); walk == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		walk = walkThrough(e.output()[before:])
	}
	if walk == nil {
		t.Fatalf("no complete walk-through after the restart:\n%s", e.output()[before:])
	}
	out := e.output()[before:]
	if !strings.Contains(out, "admin token        "+token) {
		t.Errorf("the restart does not print the kept token %s:\n%s", token, out)
	}
	script := strings.ReplaceAll(strings.Join(walk, "\n"), "go run ./tools/adminctl", filepath.Join(e.bin, "adminctl"))
	if !strings.Contains(script, filepath.Join(e.bin, "adminctl")+" -addr ") || !strings.Contains(script, " client create demo ") {
		t.Fatalf("the walk-through does not create a client with adminctl:\n%s", script)
	}
	sh := exec.Command("bash", "-euo", "pipefail", "-c", script)
	sh.Dir, sh.Env = e.dir, e.env
	res, err := sh.CombinedOutput()
	if err != nil || !strings.Contains(string(res), `"orgId":"demo"`) {
		t.Fatalf("the walk-through: %v\n%s\nwhich ran:\n%s", err, res, script)
	}
}

// walkThrough is the shell lines of the walk-through in out, from "Try
// it" to the last curl, or nil when out does not hold all of it yet.
func walkThrough(out string) []string {
	i := strings.Index(out, "Try it")
	if i < 0 {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(out[i:], "\n")[1:] {
		if !strings.HasPrefix(l, "  ") {
			break
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "/v1/tiers") {
		return nil
	}
	return lines
}
