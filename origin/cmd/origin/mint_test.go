package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/shared/link"
)

// TestMintStack (issue #16, point 1) runs POST /v1/media/urls in the
// stack as an operator starts it, on both stores (PostgreSQL when
// LECTERN_TEST_PG is set): the ledger rows the admin API lists are the
// ones the links carry, the links download until the test clock passes
// their expiry (3600 s with longUrls), and the hourly mint cap and the
// monthly download quota bill as the spec says, writing no row.
func TestMintStack(t *testing.T) {
	onBothStores(t, "the mint", mintStack)
}

func mintStack(t *testing.T, s *testStack) {
	lesson := s.Content().Lessons[0]
	ids := []string{lesson.Media[0].ID, lesson.Media[1].ID, lesson.Media[0].ID}
	body := func(ids ...string) string {
		b, _ := json.Marshal(map[string]any{"mediaIds": ids, "expiresIn": 7200})
		return string(b)
	}
	id, sec := s.org(`{"orgId":"mint","contentGrants":`+allTiers+`,"longUrls":true,"rateLimits":{"urlMintsPerHour":4}}`, "media.download")
	tok := s.token(id, sec, "media.download")

	r := s.post("/v1/media/urls", tok, body(ids...))
	var a struct {
		Items []struct {
			MediaID, URL, ExpiresAt string
		}
		ExpiresIn int64
	}
	if err := json.Unmarshal(r.body, &a); r.status != 200 || err != nil || len(a.Items) != 3 || a.ExpiresIn != 3600 ||
		r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("mint: %d, Cache-Control %q: %s", r.status, r.header.Get("Cache-Control"), r.body)
	}
	s.wantMeters("mint", 1, 3, 3)
	rows := s.ledgerRows("mint")
	if len(rows) != 3 {
		t.Fatalf("%d ledger rows, want 3", len(rows))
	}
	paths := make([]string, len(a.Items))
	for i, it := range a.Items {
		_, rest, _ := strings.Cut(it.URL, link.Prefix)
		paths[i] = link.Prefix + rest
		row := rows[i]
		if it.MediaID != ids[i] || row["target"] != ids[i] || row["kind"] != "media" || row["expiresAt"] != it.ExpiresAt ||
			!strings.Contains(it.URL, "&r="+strconv.FormatFloat(row["id"].(float64), 'f', -1, 64)+"&") {
			t.Errorf("item %d %+v, ledger row %v", i, it, row)
		}
		if d := s.get("GET", paths[i], ""); d.status != 200 {
			t.Errorf("download %d: %d", i, d.status)
		}
	}
	s.wantMeters("mint", 1, 3, 3) // downloads bill nothing

	// The hourly cap: the call only, no row.
	s.expect(s.post("/v1/media/urls", tok, body(ids[:2]...)), 429, "RATE_LIMITED")
	s.wantMeters("mint", 2, 3, 3)
	// An unknown id: the call only, no row.
	s.expect(s.post("/v1/media/urls", tok, body(ids[0], lesson.ID+"#no-such-card#video")), 404, "UNKNOWN_MEDIA")
	s.wantMeters("mint", 3, 3, 3)
	if n := len(s.ledgerRows("mint")); n != 3 {
		t.Errorf("%d ledger rows after the refusals, want 3", n)
	}

	// The monthly download quota: the call and the hourly reservation.
	qid, qsec := s.org(`{"orgId":"mint-quota","contentGrants":`+allTiers+`,"quota":{"downloads":2}}`, "media.download")
	s.expect(s.post("/v1/media/urls", s.token(qid, qsec, "media.download"), body(ids...)), 429, "QUOTA_EXCEEDED")
	s.wantMeters("mint-quota", 1, 3, 0)
	if n := len(s.ledgerRows("mint-quota")); n != 0 {
		t.Errorf("%d ledger rows after QUOTA_EXCEEDED", n)
	}

	// The links live until expiresAt on the stack's clock (which runs on
	// from where the admin API moves it): 3600 s after the mint's second.
	expires, err := time.Parse(time.RFC3339, a.Items[0].ExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	if left := expires.Sub(s.Clock().Now()); left <= 3590*time.Second || left > 3600*time.Second {
		t.Fatalf("expiresAt %s is %v away", a.Items[0].ExpiresAt, left)
	}
	s.advance(int(expires.Sub(s.Clock().Now())/time.Second) - 2)
	if d := s.get("GET", paths[0], ""); d.status != 200 {
		t.Errorf("download 2 s before expiresAt: %d", d.status)
	}
	s.advance(3)
	s.expect(s.get("GET", paths[0], ""), 404, "NOT_FOUND")
}

// post sends a JSON body to the origin's API with tok.
func (s *testStack) post(path, tok, body string) response {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.OriginURL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	return s.send(req)
}

// wantMeters checks the organisation's monthly calls and downloads and
// hourly mints.
func (s *testStack) wantMeters(org string, calls, mints, downloads float64) {
	s.t.Helper()
	m := s.meters(org)
	month, hour := m["month"].(map[string]any), m["hour"].(map[string]any)
	if month["calls"] != calls || hour["mints"] != mints || month["downloads"] != downloads {
		s.t.Errorf("%s: calls %v, mints %v, downloads %v; want %v, %v, %v", org, month["calls"], hour["mints"], month["downloads"], calls, mints, downloads)
	}
}

// ledgerRows lists the organisation's ledger through the admin API.
func (s *testStack) ledgerRows(org string) []map[string]any {
	s.t.Helper()
	code, m := s.admin("GET", "/admin/v1/orgs/"+org+"/ledger", "")
	if code != 200 {
		s.t.Fatalf("ledger of %s: %d %v", org, code, m)
	}
	items, _ := m["items"].([]any)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i], _ = it.(map[string]any)
	}
	return out
}

// advance moves the stack's test clock forward.
func (s *testStack) advance(seconds int) {
	s.t.Helper()
	if code, m := s.admin("POST", "/admin/v1/clock", `{"advanceSeconds":`+strconv.Itoa(seconds)+`}`); code != 200 {
		s.t.Fatalf("advance the clock: %d %v", code, m)
	}
}
