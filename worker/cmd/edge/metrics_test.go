package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const metricsTestToken = "an-admin-token-for-the-edge-metrics"

// startEdgeMetrics is startEdge with the metrics listener on; it returns
// the API's base URL and the metrics URL the edge printed.
func startEdgeMetrics(t *testing.T, origins string) (base, metricsURL string) {
	t.Helper()
	base, logs := startEdgeLog(t, origins, func(c *config) {
		c.MetricsAddr, c.AdminToken = "127.0.0.1:0", metricsTestToken
	})
	// The banner's metrics line comes after the API's, which startEdgeLog
	// read; the rest of the printout is in logs.
	deadline := time.Now().Add(hang)
	for metricsURL == "" && time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "metrics"); ok {
				metricsURL, _, _ = strings.Cut(strings.TrimSpace(rest), " ")
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if metricsURL == "" {
		t.Fatalf("the edge printed no metrics address:\n%s", logs.String())
	}
	return base, metricsURL
}

// scrape reads the metrics with token: each sample line's series (name
// and labels, as exposed) and value.
func scrape(t *testing.T, url, token string) (status int, series map[string]float64) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: hang}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	series = map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); i > 0 && err == nil {
			series[line[:i]] = v
		}
	}
	return resp.StatusCode, series
}

// TestEdgeMetrics (issue #33, point 6): the edge serves Prometheus metrics
// on a listener of its own behind the admin token (401 without it, as the
// origin's admin listener answers): requests by route template and
// status, attempts at each origin by kind and result, failovers, the
// probes' ejections and the instance pool.
func TestEdgeMetrics(t *testing.T) {
	dead, _ := deadOrigin(t, "dead")
	_, live := startOrigin(t, "b")
	base, metricsURL := startEdgeMetrics(t, dead+","+live.URL)

	for range 4 {
		if status, from, code := send(t, base, "GET", ""); status != 200 || from != "b" {
			t.Fatalf("GET: %d %s %s", status, from, code)
		}
	}
	resp, err := http.Get(base + "/v1/teachers")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	for _, token := range []string{"", "wrong"} {
		if status, series := scrape(t, metricsURL, token); status != 401 || len(series) != 0 {
			t.Errorf("scrape with token %q: %d, %d series; want 401 and none", token, status, len(series))
		}
	}
	if resp, err := http.Get(base + "/metrics"); err != nil || resp.StatusCode != 404 {
		t.Errorf("GET /metrics on the public listener: %v %v, want the module's 404", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	if status, _ := scrape(t, strings.TrimSuffix(metricsURL, "/metrics")+"/other", metricsTestToken); status != 404 {
		t.Errorf("another path with the token: %d, want 404", status)
	}

	// The dead origin's probes fail: it is ejected within a second or so.
	var series map[string]float64
	deadline := time.Now().Add(hang)
	for time.Now().Before(deadline) {
		var status int
		if status, series = scrape(t, metricsURL, metricsTestToken); status != 200 {
			t.Fatalf("scrape: %d", status)
		}
		if series[`lectern_edge_origin_ejections_total{origin="`+dead+`"}`] >= 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for name, want := range map[string]float64{
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="200",http_route="/.well-known/oauth-protected-resource"}`: 4,
		`http_server_request_duration_seconds_count{http_request_method="GET",http_response_status_code="404",http_route="unmatched"}`:                             2, // /v1/teachers, /metrics
		`lectern_edge_origin_attempts_total{kind="forward",origin="` + live.URL + `",result="answered"}`:                                                           4,
		`lectern_edge_origin_ejections_total{origin="` + dead + `"}`:                                                                                               1,
		`lectern_edge_origin_ejected{origin="` + dead + `"}`:                                                                                                       1,
		`lectern_edge_origin_ejected{origin="` + live.URL + `"}`:                                                                                                   0,
		`lectern_edge_instances{state="busy"}`:                                                                                                                     0,
		`lectern_edge_instances{state="idle"}`:                                                                                                                     1,
	} {
		if got, ok := series[name]; !ok || got != want {
			t.Errorf("%s = %v (exposed %v), want %v", name, got, ok, want)
		}
	}
	// The first request to the dead origin failed over to b; later ones
	// may have found it in backoff, or ejected.
	if f := series[`lectern_edge_failovers_total{origin="`+dead+`"}`]; f < 1 ||
		series[`lectern_edge_origin_attempts_total{kind="forward",origin="`+dead+`",result="failed"}`] != f {
		t.Errorf("failovers %v, failed attempts at the dead origin %v: want as many, at least 1", f,
			series[`lectern_edge_origin_attempts_total{kind="forward",origin="`+dead+`",result="failed"}`])
	}
	if series["go_goroutines"] == 0 {
		t.Error("no Go runtime series")
	}
}

// TestEdgeMetricsToken: the metrics listener takes LECTERN_ADMIN_TOKEN,
// else the origin's var/admin-token; with neither the edge does not start,
// naming both. Off (the default), no token is needed.
func TestEdgeMetricsToken(t *testing.T) {
	t.Chdir(t.TempDir())
	if tok, err := loadMetricsToken("configured"); err != nil || tok != "configured" {
		t.Errorf("configured: %q %v", tok, err)
	}
	if _, err := loadMetricsToken(""); err == nil || !strings.Contains(err.Error(), "LECTERN_ADMIN_TOKEN") ||
		!strings.Contains(err.Error(), adminTokenFile) {
		t.Errorf("neither: %v", err)
	}
	os.MkdirAll("var", 0o700)
	os.WriteFile(filepath.FromSlash(adminTokenFile), []byte("kept-token\n"), 0o600)
	if tok, err := loadMetricsToken(""); err != nil || tok != "kept-token" {
		t.Errorf("kept: %q %v", tok, err)
	}
	c, err := parseConfig(nil, env(nil))
	if err != nil || c.MetricsAddr != "off" {
		t.Errorf("default: %q %v, want off", c.MetricsAddr, err)
	}
}
