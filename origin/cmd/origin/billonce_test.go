package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestBilledOnceAcrossFailover (issue #33, point 1): two origins on one
// PostgreSQL database behind an edge, 8 clients reading tiers, lessons
// and class exports (a call; a call and a lesson read; a call, an export,
// a download and a ledger row) through it; one origin is stopped with
// SIGSTOP for 4 s, twice. The edge cuts the requests the stopped origin
// holds and sends them to the other, which serves them; the stopped one
// resumes and serves them too. Every unit billed is a unit answered, and
// no request id has two ledger rows.
func TestBilledOnceAcrossFailover(t *testing.T) {
	db := newPeerDB(t)
	dir := peerCorpus(t, "")
	ps := startPeers(t, db, dir, dir)
	id, secret := ps[0].org(`{"orgId":"acme","contentGrants":["high"]}`, "content.read", "content.export")
	tok := ps[0].token(id, secret, "content.read", "content.export")
	var lessons []string
	for _, l := range lessonIDs(t, dir) {
		if strings.HasPrefix(l, "high/") {
			lessons = append(lessons, l)
		}
	}
	lessons = lessons[:2] // under the enumeration alarm's 40%

	_, srv := peerEdge(t, []string{ps[0].OriginURL, ps[1].OriginURL}, ps[0].IdPURL, nil)

	// What the clients were answered, in units.
	var mu sync.Mutex
	var calls, reads, exports, failed int
	ids := map[string]bool{} // request ids answered with an export
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				l := lessons[(w*31+i)%len(lessons)]
				path, kind := "/v1/tiers", "call"
				switch i % 4 {
				case 1:
					path, kind = "/v1/lessons/"+l, "read"
				case 3:
					path, kind = "/v1/exports/classes/"+l, "export"
				}
				req, _ := http.NewRequest("GET", srv.URL+path, nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				ok := err == nil && resp.StatusCode == 200
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				switch {
				case !ok:
					failed++
					if failed > 5 {
						// reported below
					} else if err == nil {
						t.Errorf("%s: %d", path, resp.StatusCode)
					} else {
						t.Errorf("%s: %v", path, err)
					}
				case kind == "call":
					calls++
				case kind == "read":
					calls++
					reads++
				default:
					calls++
					exports++
					ids[resp.Header.Get("X-Request-Id")] = true
				}
				mu.Unlock()
			}
		}()
	}
	defer func() { ps[1].cmd.Process.Signal(syscall.SIGCONT) }()
	time.Sleep(time.Second)
	for range 2 {
		ps[1].cmd.Process.Signal(syscall.SIGSTOP)
		time.Sleep(4 * time.Second)
		ps[1].cmd.Process.Signal(syscall.SIGCONT)
		time.Sleep(2 * time.Second)
	}
	close(stop)
	wg.Wait()
	// The resumed origin finishes what it held (its clients are gone).
	time.Sleep(2 * time.Second)

	code, m := ps[0].admin("GET", "/admin/v1/orgs/acme", "")
	if code != 200 {
		t.Fatalf("admin read: %d %v", code, m)
	}
	month := m["meters"].(map[string]any)["month"].(map[string]any)
	hour := m["meters"].(map[string]any)["hour"].(map[string]any)
	got := fmt.Sprintf("calls %v, lesson reads %v, exports %v, downloads %v", month["calls"], hour["lessonreads"], month["exports"], month["downloads"])
	want := fmt.Sprintf("calls %d, lesson reads %d, exports %d, downloads %d", calls, reads, exports, exports)
	t.Logf("answered %s (%d failed); billed %s", want, failed, got)
	if got != want {
		t.Errorf("billed %s; answered %s", got, want)
	}
	rows := ledgerRows(t, ps[0].testStack, "acme")
	perID := map[string]int{}
	for _, r := range rows {
		perID[r.requestID]++
	}
	for id, n := range perID {
		if n != 1 {
			t.Errorf("request %s has %d ledger rows, want 1", id, n)
		}
		if !ids[id] {
			t.Errorf("request %s has a ledger row but was not answered with an export", id)
		}
	}
	if len(rows) != exports {
		t.Errorf("%d ledger rows for %d exports answered", len(rows), exports)
	}
}

type ledgerRow struct{ requestID string }

// ledgerRows lists every ledger row of org through the admin API.
func ledgerRows(t *testing.T, s *testStack, org string) []ledgerRow {
	t.Helper()
	var out []ledgerRow
	after := ""
	for {
		code, m := s.admin("GET", "/admin/v1/orgs/"+org+"/ledger?limit=1000"+after, "")
		if code != 200 {
			t.Fatalf("ledger: %d %v", code, m)
		}
		for _, it := range m["items"].([]any) {
			out = append(out, ledgerRow{requestID: it.(map[string]any)["requestId"].(string)})
		}
		next, ok := m["nextAfter"].(float64)
		if !ok {
			return out
		}
		after = "&after=" + strconv.FormatInt(int64(next), 10)
	}
}
