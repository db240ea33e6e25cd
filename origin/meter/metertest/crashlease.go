package metertest

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// The leases of CrashLeases: their org, and how many.
const (
	crashLeaseOrg = "crash-leases"
	crashLeases   = 32
)

func crashLeaseID(i int) string { return fmt.Sprintf("crash-lease-%d", i) }

// serveReport is Serve's POST /report.
func serveReport(w http.ResponseWriter, r *http.Request, s meter.Store) {
	ls, ok := s.(meter.LeaseStore)
	used, err := strconv.ParseInt(r.URL.Query().Get("used"), 10, 64)
	if !ok || err != nil {
		http.Error(w, "not a lease store, or bad used", http.StatusBadRequest)
		return
	}
	if err := ls.ReportLeases(r.Context(), crashNow, []meter.Report{{Lease: r.URL.Query().Get("lease"), Used: used}}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprint(w, "ok")
}

// CrashLeases is the durability test of lease reports, run as Crash is
// (the same helper test and env): it grants crashLeases leases through
// open's Store, closes it, then drives the child with one client per lease
// reporting its usage 1, 2, 3, ... and kills it mid-load. Reopened, every
// lease's Used is at least its last acknowledged report and at most its
// last sent, and the calls billed are the sum of the leases' Used: a
// report's billing and its Used commit together.
func CrashLeases(t *testing.T, helper string, env []string, open func(t *testing.T) LeaseStore) {
	s := open(t)
	for i := range crashLeases {
		e, err := s.Epoch(t.Context(), crashLeaseOrg)
		if err != nil {
			t.Fatal(err)
		}
		g, err := s.GrantLease(t.Context(), meter.LeaseGrant{Org: crashLeaseOrg, Now: crashNow, ID: crashLeaseID(i), Epoch: e,
			Want: 1 << 20, Floor: 1, Share: 1, Expires: crashNow.Add(time.Hour), Settle: crashNow.Add(2 * time.Hour)})
		if err != nil || g.Calls != 1<<20 {
			t.Fatalf("grant %d: %+v, %v", i, g, err)
		}
	}
	s.Close()

	cmd, addr, stderr := startChild(t, helper, env)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: crashLeases}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var acked, sent [crashLeases]atomic.Int64
	var total, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range crashLeases {
		wg.Go(func() {
			for used := int64(1); ; used++ {
				select {
				case <-stop:
					return
				default:
				}
				sent[i].Store(used)
				resp, err := client.Post(fmt.Sprintf("http://%s/report?lease=%s&used=%d", addr, crashLeaseID(i), used), "text/plain", nil)
				if err != nil {
					return // the child is gone
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode == http.StatusOK && string(body) == "ok" {
					acked[i].Store(used)
					total.Add(1)
				} else if err == nil {
					failed.Add(1)
				}
			}
		})
	}
	start := time.Now()
	for total.Load() < 300 && time.Since(start) < 3*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	cmd.Wait()
	close(stop)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d reports answered with an error before the kill; child stderr:\n%s", n, stderr.String())
	}
	if total.Load() == 0 {
		t.Fatalf("no report acknowledged before the kill; child stderr:\n%s", stderr.String())
	}

	s = open(t)
	ls := openLeases(t, s, crashLeaseOrg, crashNow)
	if len(ls) != crashLeases {
		t.Fatalf("%d leases open after the kill, want %d", len(ls), crashLeases)
	}
	var sum int64
	for _, l := range ls {
		var i int
		if _, err := fmt.Sscanf(l.ID, "crash-lease-%d", &i); err != nil || i < 0 || i >= crashLeases {
			t.Fatalf("a lease %q", l.ID)
		}
		if a, n := acked[i].Load(), sent[i].Load(); l.Used < a || l.Used > n {
			t.Errorf("lease %s: Used %d after the kill, want between %d acknowledged and %d sent", l.ID, l.Used, a, n)
		}
		sum += l.Used
	}
	u := usage(t, s, crashLeaseOrg, crashNow)
	if u.Get(meter.MonthCalls) != sum || u.Get(meter.HourCalls) != sum {
		t.Errorf("billed month %d, hour %d after the kill; want the leases' %d used", u.Get(meter.MonthCalls), u.Get(meter.HourCalls), sum)
	}
	t.Logf("killed after %v: %d reports acknowledged, %d calls used", time.Since(start).Round(time.Millisecond), total.Load(), sum)
}
