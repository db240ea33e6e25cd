package metertest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// childEnv marks the test binary that Crash re-executes.
const childEnv = "LECTERN_METERTEST_CHILD"

// addrPrefix starts the line on which Serve announces its address.
const addrPrefix = "metertest-addr "

// crashNow is when the crash test's ops count.
var crashNow = time.Date(2026, 11, 22, 10, 30, 0, 0, time.UTC)

const crashOrg = "crash"

// crashOp is the op of the crash test's request i: a call, a read of
// lesson i (distinct per request, so the day's count is a second tally),
// and two ledger rows naming i (a third).
func crashOp(i int) meter.Op {
	op := meter.Op{Org: crashOrg, Now: crashNow, Stages: []meter.Stage{call(nil, nil)},
		Read: &meter.Read{Lesson: lesson(i)}}
	for k := range 2 {
		e := entry(k)
		e.Target = crashTarget(i, k)
		op.Ledger = append(op.Ledger, e)
	}
	return op
}

func crashTarget(i, k int) string { return fmt.Sprintf("crash-%d-%d", i, k) }

// IsChild reports whether this process is a test binary that Crash
// re-executed to serve a store; its helper test then opens the store and
// calls Serve.
func IsChild() bool { return os.Getenv(childEnv) == "1" }

// Serve serves Apply on s for Crash over loopback HTTP until the process
// is killed: POST /apply?i=N applies request N's op and answers 200 only
// after Apply returned without error, with "ok" and the ids of its ledger
// rows; for CrashLeases, POST /report?lease=ID&used=N reports N used of
// lease ID (s must be a LeaseStore), answering 200 once applied. It
// announces its address on stdout.
func Serve(s meter.Store) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "metertest child:", err)
		os.Exit(2)
	}
	fmt.Printf("%s%s\n", addrPrefix, ln.Addr())
	err = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/report" {
			serveReport(w, r, s)
			return
		}
		i, err := strconv.Atoi(r.URL.Query().Get("i"))
		if err != nil || i < 0 {
			http.Error(w, "bad i", http.StatusBadRequest)
			return
		}
		res, err := s.Apply(r.Context(), crashOp(i))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
		for _, id := range res.LedgerIDs {
			fmt.Fprintf(w, " %d", id)
		}
	}))
	fmt.Fprintln(os.Stderr, "metertest child:", err)
	os.Exit(2)
}

// Crash is the durability test: it re-executes the test binary running
// only the test named helper, with env added to its environment; that
// test sees IsChild, opens the store and calls Serve. Crash drives 64
// concurrent clients against it, kills it with SIGKILL mid-load, then
// opens the store with open and checks that every acknowledged op is
// there and no more than the ops sent: acknowledged ≤ counted ≤ sent,
// and each op's two steps counted together; every acknowledged ledger row
// is listed under the id it was acknowledged with, and the rows listed
// are two per op counted, both of an op or neither.
func Crash(t *testing.T, helper string, env []string, open func(t *testing.T) meter.Store) {
	cmd, addr, stderr := startChild(t, helper, env)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var sent, acked, failed atomic.Int64
	var mu sync.Mutex
	ackedRows := map[int64]string{} // ledger id → target
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := sent.Add(1) - 1
				resp, err := client.Post(fmt.Sprintf("http://%s/apply?i=%d", addr, i), "text/plain", nil)
				if err != nil {
					return // the child is gone
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				ids, ok := parseAck(body)
				if err == nil && resp.StatusCode == http.StatusOK && ok && len(ids) == 2 {
					acked.Add(1)
					mu.Lock()
					for k, id := range ids {
						ackedRows[id] = crashTarget(int(i), k)
					}
					mu.Unlock()
				} else if err == nil {
					failed.Add(1)
				}
			}
		})
	}
	// Kill mid-load: after a few hundred acknowledgements, or 3 s.
	start := time.Now()
	for acked.Load() < 300 && time.Since(start) < 3*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	cmd.Wait()
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d ops answered with an error before the kill; child stderr:\n%s", n, stderr.String())
	}

	s := open(t)
	u := usage(t, s, crashOrg, crashNow)
	c, read := u.Counters, u.LessonsRead
	calls := c[meter.MonthCalls]
	a, n := acked.Load(), sent.Load()
	t.Logf("killed after %v: %d ops acknowledged, %d sent, %d counted, %d lessons read", time.Since(start).Round(time.Millisecond), a, n, calls, read)
	if a == 0 {
		t.Fatalf("no op acknowledged before the kill; child stderr:\n%s", stderr.String())
	}
	if calls < a || calls > n {
		t.Errorf("month calls = %d after the kill, want between %d acknowledged and %d sent", calls, a, n)
	}
	if c[meter.HourCalls] != calls {
		t.Errorf("hour calls = %d, month calls = %d: want equal (one stage)", c[meter.HourCalls], calls)
	}
	if int64(read) != calls {
		t.Errorf("lessons read = %d, month calls = %d: want equal (one op each)", read, calls)
	}
	rows := ledger(t, s, crashOrg, 1000)
	if int64(len(rows)) != 2*calls {
		t.Errorf("%d ledger rows after the kill, month calls = %d: want 2 per op", len(rows), calls)
	}
	listed := map[string]int64{}
	for _, r := range rows {
		listed[r.Target] = r.ID
	}
	for id, target := range ackedRows {
		if got, ok := listed[target]; !ok || got != id {
			t.Errorf("acknowledged ledger row %d (%s): listed as %d (%v)", id, target, got, ok)
		}
	}
	for _, r := range rows {
		var i, k int
		if _, err := fmt.Sscanf(r.Target, "crash-%d-%d", &i, &k); err != nil {
			t.Errorf("a row of target %q", r.Target)
			continue
		}
		if _, ok := listed[crashTarget(i, 1-k)]; !ok {
			t.Errorf("row %s listed without its op's other row", r.Target)
		}
	}
}

// startChild re-executes the test binary running only helper, with env
// added, and waits for it to serve (Serve); the child is killed when t
// ends if it still runs. It returns the command, the child's address and
// its standard error.
func startChild(t *testing.T, helper string, env []string) (*exec.Cmd, string, *bytes.Buffer) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // an error: it was killed already
		cmd.Wait()
	})
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), addrPrefix); ok {
				addrc <- a
				break
			}
		}
		io.Copy(io.Discard, stdout)
		close(addrc)
	}()
	select {
	case a, ok := <-addrc:
		if !ok {
			cmd.Wait()
			t.Fatalf("child exited without serving; stderr:\n%s", stderr.String())
		}
		return cmd, a, stderr
	case <-time.After(30 * time.Second):
		t.Fatalf("child did not serve within 30s; stderr:\n%s", stderr.String())
	}
	return nil, "", nil
}

// parseAck reads Serve's answer: "ok" and the ledger ids.
func parseAck(body []byte) ([]int64, bool) {
	f := strings.Fields(string(body))
	if len(f) == 0 || f[0] != "ok" {
		return nil, false
	}
	var ids []int64
	for _, s := range f[1:] {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}
