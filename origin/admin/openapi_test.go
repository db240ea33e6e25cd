package admin

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/webhook"
)

// meterStub is a meter.Store no call reaches.
type meterStub struct{ meter.Store }

// TestOpenAPIMatchesRoutes: the description's operations are exactly the
// routes the admin API serves with every optional part on (clients,
// ledger, forensics, reload, metrics, the test clock, webhooks), and it is served
// at GET /admin/v1/openapi.json behind the admin token.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	// Any non-nil Meters registers the ledger and forensics routes; no
	// call reaches it here.
	h := Handler(Config{Token: "t", TestClock: true, Metrics: http.NotFoundHandler(), Forensics: &Forensics{},
		CreateClient: func(context.Context, string, []string, []string, []string) (string, string, error) {
			return "", "", nil
		},
		Reload:   func(context.Context, string) (string, error) { return "", nil },
		Meters:   meterStub{},
		Webhooks: webhook.New(webhook.Config{}),
	}).(*api)
	routes := slices.Clone(h.patterns)
	slices.Sort(routes)

	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	var ops []string
	for path, item := range doc.Paths {
		for method := range item {
			if method == "parameters" {
				continue
			}
			ops = append(ops, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(ops)
	if d := cmp.Diff(routes, ops); d != "" {
		t.Errorf("the description's operations (+) differ from the admin routes (-):\n%s", d)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi %q, want 3.1", doc.OpenAPI)
	}

	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(token string) (int, []byte) {
		req, _ := http.NewRequest("GET", srv.URL+"/admin/v1/openapi.json", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if status, _ := get(""); status != 401 {
		t.Errorf("without the token: %d, want 401", status)
	}
	if status, b := get("t"); status != 200 || string(b) != string(OpenAPI()) {
		t.Errorf("with the token: %d, %d bytes", status, len(b))
	}
}
