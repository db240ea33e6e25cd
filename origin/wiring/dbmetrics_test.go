package wiring

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/store/pgstore"
)

// scrapeAdmin reads the admin listener's metrics: each sample line's
// series and value.
func scrapeAdmin(t *testing.T, o *Origin) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", o.AdminURL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+o.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	return samples(string(b))
}

func samples(text string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); i > 0 && err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// TestOriginPoolAndTokenMetrics (issue #33, point 6): the admin
// listener's metrics include the SQLite store's pools (database/sql's
// Stats, read at scrape time) and the identity provider's token requests
// by grant type and result.
func TestOriginPoolAndTokenMetrics(t *testing.T) {
	o := openOrigin(t, nil)
	post := func(form url.Values) {
		resp, err := http.PostForm(o.IdPURL+"/oauth2/token", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post(url.Values{"grant_type": {"client_credentials"}, "client_id": {"nobody"}, "client_secret": {"wrong"}})
	post(url.Values{"grant_type": {"password"}, "client_id": {"nobody"}, "client_secret": {"wrong"}})
	s := scrapeAdmin(t, o)
	for name, want := range map[string]float64{
		`lectern_idp_token_requests_total{grant_type="client_credentials",result="invalid_client"}`: 1,
		`lectern_idp_token_requests_total{grant_type="other",result="invalid_client"}`:              1,
		`lectern_db_connections_max{pool="store-write"}`:                                            1,
	} {
		if got, ok := s[name]; !ok || got != want {
			t.Errorf("%s = %v (exposed %v), want %v", name, got, ok, want)
		}
	}
	for _, name := range []string{`lectern_db_connections{pool="store-read",state="idle"}`,
		`lectern_db_connections{pool="store-write",state="acquired"}`, `lectern_db_acquire_waits_total{pool="store-read"}`,
		`lectern_db_acquire_wait_seconds_total{pool="store-write"}`} {
		if _, ok := s[name]; !ok {
			t.Errorf("%s is not exposed", name)
		}
	}
}

// TestPostgresPoolMetrics: with PostgreSQL the store's pgxpool is read at
// scrape time (LECTERN_TEST_PG).
func TestPostgresPoolMetrics(t *testing.T) {
	dsn := pgschema.ForTest(t, "the PostgreSQL pool's metrics")
	s, err := pgstore.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reg := prometheus.NewRegistry()
	registerStoreMetrics(reg, s)
	if _, err := s.GetOrg(context.Background(), "nobody"); err == nil {
		t.Fatal("an org nobody created")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	if got["lectern_db_acquires_total pool=store"] < 1 || got["lectern_db_connections_max pool=store"] < 1 {
		t.Errorf("after one read: %v", got)
	}
	if _, ok := got["lectern_db_connections pool=store state=idle"]; !ok {
		t.Errorf("no idle connections series: %v", got)
	}
}
