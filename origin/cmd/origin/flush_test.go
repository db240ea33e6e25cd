package main

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/lectern-api/lectern/worker/wazero"
)

// TestUsageFlushesReachEveryOrigin (issue #33, point 2): an edge with
// leases in front of two origins sends its usage reports (Host.Flush,
// what its ticker does) to each origin in turn; each must take them (a
// 204), so the second origin bills the 304s the edge answered as the
// first does, and refuses no usage signature.
func TestUsageFlushesReachEveryOrigin(t *testing.T) {
	db := newPeerDB(t)
	dir := peerCorpus(t, "")
	ps := startPeers(t, db, dir, dir)
	id, secret := ps[0].org(`{"orgId":"acme","contentGrants":["high"]}`, "content.read")
	tok := ps[0].token(id, secret, "content.read")

	h, srv := peerEdge(t, []string{ps[0].OriginURL, ps[1].OriginURL}, ps[0].IdPURL, func(c *wazero.Config) {
		c.Instances, c.Leases, c.UsageLog = 1, true, filepath.Join(t.TempDir(), "usage.log")
	})

	get := func(etag string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/v1/tiers", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("ETag")
	}
	_, etag := get("")
	answered := 1
	flushes := 0
	for i := range 40 {
		if code, _ := get(etag); code != 304 {
			t.Fatalf("revalidation %d: %d, want 304", i, code)
		}
		answered++
		time.Sleep(20 * time.Millisecond) // the lease comes in the background
		if err := h.Flush(t.Context()); err != nil {
			t.Errorf("flush %d: %v", i, err)
		}
		flushes++
	}
	for i, p := range ps {
		took := metric(t, p.testStack, `lectern_edge_calls_total{http_response_status_code="204",kind="usage"}`)
		refused := metric(t, p.testStack, `lectern_edge_signatures_refused_total{purpose="usage",reason="mismatch"}`) +
			metric(t, p.testStack, `lectern_edge_signatures_refused_total{purpose="usage",reason="host"}`)
		t.Logf("origin %d: %d usage reports taken, %d refused", i, took, refused)
		if took == 0 || refused != 0 {
			t.Errorf("origin %d took %d usage reports and refused %d, want some and none", i, took, refused)
		}
	}
	code, m := ps[1].admin("GET", "/admin/v1/orgs/acme", "")
	if code != 200 {
		t.Fatalf("admin read: %d %v", code, m)
	}
	if got := m["meters"].(map[string]any)["month"].(map[string]any)["calls"]; got != float64(answered) {
		t.Errorf("billed %v calls after %d flushes, answered %d", got, flushes, answered)
	}
}

// scrape is s's admin /metrics, as its exposition writes it.
func scrape(t *testing.T, s *testStack) string {
	t.Helper()
	req, _ := http.NewRequest("GET", s.AdminURL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metric is the integer value of series on s's admin /metrics; 0 when
// the series is absent (a counter never incremented).
func metric(t *testing.T, s *testStack, series string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\d+)`).FindStringSubmatch(scrape(t, s))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
