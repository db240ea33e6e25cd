package wazero

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/shared/edgesig"
	"github.com/lectern-api/lectern/shared/lease"
)

const testSecret = "a-wazero-test-secret-of-at-least-32-chars"

func TestReadUsage(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]int64
	}{
		{"empty", "", map[string]int64{}},
		{"highest wins", "L1 3\nL2 1\nL1 5\nL1 4\n", map[string]int64{"L1": 5, "L2": 1}},
		{"torn last line", "L1 3\nL2 7\nL1 4", map[string]int64{"L1": 3, "L2": 7}},
		{"torn inside the count", "L1 3\nL1 1", map[string]int64{"L1": 3}},
		{"damage skipped", "L1 3\nnot a record\nL! 9\nL2 -1\nL2 x\n\nL2 2\n", map[string]int64{"L1": 3, "L2": 2}},
	} {
		got := map[string]int64{}
		readUsage([]byte(tc.in), got)
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func reportsOf(used map[string]int64) []lease.Report { return finalReports(used) }

// TestUsageLogRestart: the records of the run before, and a replay file
// that was never answered, become final reports at start, kept in the
// replay file; the log starts empty, mode 0600; the new run's records
// never mix with the replayed ones.
func TestUsageLogRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "var", "edge-usage.log")
	l, pending, err := openUsageLog(path, slog.New(slog.DiscardHandler))
	if err != nil || len(pending) != 0 {
		t.Fatalf("first start: %v, %v", pending, err)
	}
	for _, r := range []lease.Report{{Lease: "L1", Used: 1}, {Lease: "L1", Used: 2}, {Lease: "L2", Used: 1}} {
		if err := l.append(r.Lease, r.Used); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.append("bad id!", 1); err == nil {
		t.Error("a bad lease id was logged")
	}
	l.close() // as if killed: nothing more is written
	os.WriteFile(replayPath(path), []byte("L0 9\nL1 1\n"), 0o600)

	l, pending, err = openUsageLog(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	want := reportsOf(map[string]int64{"L0": 9, "L1": 2, "L2": 1})
	if !slices.Equal(pending, want) {
		t.Errorf("pending %v, want %v", pending, want)
	}
	for _, p := range []string{path, replayPath(path)} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want mode 0600", p, fi, err)
		}
	}
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Errorf("the log starts with %q", b)
	}
	l.append("L3", 1)
	got := map[string]int64{}
	b, _ := os.ReadFile(replayPath(path))
	readUsage(b, got)
	if !maps.Equal(got, map[string]int64{"L0": 9, "L1": 2, "L2": 1}) {
		t.Errorf("replay file holds %v", got)
	}
}

// TestUsageLogSurvivesSIGKILL: a child process appends records as a host
// does before each 304, and says so after each; killed with SIGKILL, every
// record it said it had written is replayed at the next start.
func TestUsageLogSurvivesSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage.log")
	cmd := exec.Command(os.Args[0], "-test.run=^TestUsageLogChild$")
	cmd.Env = append(os.Environ(), "LECTERN_USAGE_CHILD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]int64{}
	sc := bufio.NewScanner(out)
	for n := 0; n < 3000 && sc.Scan(); n++ {
		id, used, ok := strings.Cut(sc.Text(), " ")
		if v, err := strconv.ParseInt(used, 10, 64); ok && err == nil {
			acked[id] = v
		}
	}
	cmd.Process.Signal(syscall.SIGKILL) // while it appends
	for sc.Scan() {                     // what it said before it died
		if id, used, ok := strings.Cut(sc.Text(), " "); ok {
			v, _ := strconv.ParseInt(used, 10, 64)
			acked[id] = v
		}
	}
	cmd.Wait()
	if len(acked) == 0 {
		t.Fatal("the child wrote nothing")
	}
	l, pending, err := openUsageLog(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l.close()
	got := map[string]int64{}
	for _, r := range pending {
		if !r.Final {
			t.Errorf("replayed %v not final", r)
		}
		got[r.Lease] = r.Used
	}
	for id, n := range acked {
		if got[id] < n {
			t.Errorf("lease %s: replayed %d, but %d were answered", id, got[id], n)
		}
	}
}

// TestUsageLogChild is the child of TestUsageLogSurvivesSIGKILL.
func TestUsageLogChild(t *testing.T) {
	path := os.Getenv("LECTERN_USAGE_CHILD")
	if path == "" {
		t.Skip("the child of TestUsageLogSurvivesSIGKILL")
	}
	l, _, err := openUsageLog(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(os.Stdout)
	for n := int64(1); ; n++ {
		id := "L" + strconv.FormatInt(n%3, 10)
		if err := l.append(id, n); err != nil {
			t.Fatal(err)
		}
		// The "304" goes out only once its record is written.
		w.WriteString(id + " " + strconv.FormatInt(n, 10) + "\n")
		w.Flush()
	}
}

// usageOrigin is an origin's usage endpoint: it checks the edge's
// signature and records the reports, answering 500 to the first fail
// requests.
type usageOrigin struct {
	t    *testing.T
	mu   sync.Mutex
	fail int
	got  []lease.Report
	n    int
}

func (o *usageOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	keys := edgesig.KeysOf([]byte(testSecret))
	b, _ := io.ReadAll(r.Body)
	m := httpsig.Message(edgesig.Usage, r, edgesig.BodyHash(b))
	if _, err := edgesig.Verify(&keys, r.Header.Get(edgesig.Header), &m, time.Now().UnixMilli()); r.URL.Path != lease.UsagePath ||
		r.Method != "POST" || r.Header.Get("Content-Type") != "application/json" || err != nil {
		o.t.Errorf("%s %s %v: not a signed usage report (%v)", r.Method, r.URL, r.Header, err)
		w.WriteHeader(404)
		return
	}
	rs, err := lease.ParseReports(b)
	if err != nil || len(rs) > lease.MaxReports {
		o.t.Errorf("body %q: %v", b, err)
		w.WriteHeader(400)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n++; o.n <= o.fail {
		w.WriteHeader(500)
		return
	}
	o.got = append(o.got, rs...)
	w.WriteHeader(204)
}

func testHost(t *testing.T, origin string, adjust func(*Config)) *Host {
	t.Helper()
	cfg := Config{Origin: origin, Secret: testSecret}
	if adjust != nil {
		adjust(&cfg)
	}
	h, err := newHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestReplay: the replay is sent signed, in messages of at most
// lease.MaxReports, again after a failure, and its file is removed only
// once every message is answered 204.
func TestReplay(t *testing.T) {
	o := &usageOrigin{t: t, fail: 1}
	srv := httptest.NewServer(o)
	defer srv.Close()
	h := testHost(t, srv.URL, nil)
	used := map[string]int64{}
	for i := range lease.MaxReports + 6 {
		used["L"+strconv.Itoa(i)] = int64(i + 1)
	}
	rs := finalReports(used)
	path := filepath.Join(t.TempDir(), "usage.log.replay")
	writeReplay(path, rs)

	if err := h.sendReports(context.Background(), rs); err == nil {
		t.Fatal("a 500 was taken for an answer")
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the replay file is gone after a failure: %v", err)
	}
	o.mu.Lock()
	o.got, o.n = nil, 0
	o.mu.Unlock()

	h.replay(context.Background(), path, rs, time.Millisecond) // the first message fails, then all go
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the replay file is kept after 204s: %v", err)
	}
	got := map[string]int64{}
	for _, r := range o.got {
		if !r.Final {
			t.Errorf("%v is not final", r)
		}
		got[r.Lease] = max(got[r.Lease], r.Used)
	}
	if !maps.Equal(got, used) {
		t.Errorf("the origin got %v, want %v", got, used)
	}
	if o.n != 3 { // one refused, then two messages
		t.Errorf("%d requests, want 3", o.n)
	}
}

// TestReplayGivesUp: Close ends a replay the origin never answers; the
// file stays for the next start.
func TestReplayGivesUp(t *testing.T) {
	o := &usageOrigin{t: t, fail: 1 << 30}
	srv := httptest.NewServer(o)
	defer srv.Close()
	h := testHost(t, srv.URL, nil)
	path := filepath.Join(t.TempDir(), "usage.log.replay")
	rs := []lease.Report{{Lease: "L1", Used: 3, Final: true}}
	writeReplay(path, rs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		h.replay(ctx, path, rs, time.Millisecond)
		close(done)
	}()
	for {
		o.mu.Lock()
		n := o.n
		o.mu.Unlock()
		if n >= 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the replay file is gone: %v", err)
	}
}

// TestUsageLogCompacts: past its size bound the log is rewritten with one
// record per live lease, its highest count; a lease whose final report
// the origin acknowledged is left out; a non-final acknowledgement, or a
// final one below what was logged, settles nothing.
func TestUsageLogCompacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage.log")
	l, _, err := openUsageLog(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 5; i++ {
		for _, id := range []string{"L1", "L2", "L3", "L4"} {
			l.append(id, i)
		}
	}
	l.settled([]lease.Report{{Lease: "L1", Used: 5, Final: true}, {Lease: "L2", Used: 5}, {Lease: "L3", Used: 4, Final: true}})
	l.compactAt = 64
	l.append("L4", 6) // past the bound: compacts
	b, _ := os.ReadFile(path)
	if want := "L2 5\nL3 5\nL4 6\n"; string(b) != want {
		t.Errorf("compacted log %q, want %q", b, want)
	}
	l.append("L2", 6)
	l.close()
	l, pending, err := openUsageLog(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	l.close()
	if want := reportsOf(map[string]int64{"L2": 6, "L3": 5, "L4": 6}); !slices.Equal(pending, want) {
		t.Errorf("after compaction the next start replays %v, want %v", pending, want)
	}
}

// TestAcknowledgedSettles: the host settles a lease in its usage log when
// the origin acknowledges a final report of it: a 204 to a usage report,
// a 200 to a lease request carrying it; never on a failure.
func TestAcknowledgedSettles(t *testing.T) {
	h := testHost(t, "http://origin.test", nil)
	l, _, err := openUsageLog(filepath.Join(t.TempDir(), "usage.log"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	h.usage = l
	for _, id := range []string{"L1", "L2", "L3"} {
		l.append(id, 2)
	}
	usage := string(lease.AppendReports(nil, []lease.Report{{Lease: "L1", Used: 2, Final: true}}))
	ask := string(lease.AppendRequest(nil, &lease.Request{Want: 8, Reports: []lease.Report{{Lease: "L2", Used: 2, Final: true}}}))
	h.acknowledged("http://origin.test"+lease.UsagePath, usage, 500)
	h.acknowledged("http://origin.test"+lease.Path, ask, 0)
	if len(l.live) != 3 {
		t.Errorf("settled on failures: %v", l.live)
	}
	h.acknowledged("http://origin.test"+lease.UsagePath, usage, 204)
	h.acknowledged("http://origin.test"+lease.Path, ask, 200)
	if !maps.Equal(l.live, map[string]int64{"L3": 2}) {
		t.Errorf("live after the acknowledgements: %v, want L3 alone", l.live)
	}
}
