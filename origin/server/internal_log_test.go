package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/internal/telemetry"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/shared/logbuftest"
)

// brokenMeters fails every Apply, as a database that went away does.
type brokenMeters struct{ meter.Store }

func (brokenMeters) Apply(context.Context, meter.Op) (meter.Result, error) {
	return meter.Result{}, fmt.Errorf("meter batch: %w", errors.New("connection reset by peer"))
}

// Issue #33, point 5: a 500 logs its cause once, with the error chain,
// the operation, the organisation and the request id.
func TestInternalErrorLoggedOnce(t *testing.T) {
	logs := &logbuftest.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	h := newHarnessOpts(t, smallContent(t, ""), harnessOptions{meters: func(s meter.Store) meter.Store { return brokenMeters{s} }, logger: log})
	tok := h.org("acme", "high")
	ts := httptest.NewServer((&telemetry.Access{Log: slog.New(slog.DiscardHandler)}).Wrap(h.srv))
	t.Cleanup(ts.Close)
	req, _ := http.NewRequest("GET", ts.URL+"/v1/tiers", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Request-Id", "req-internal-0001")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Fatalf("status %d, want 500", resp.StatusCode)
	}
	out := logs.String()
	if n := strings.Count(out, "level=ERROR"); n != 1 {
		t.Errorf("%d error lines, want 1:\n%s", n, out)
	}
	for _, want := range []string{"requestId=req-internal-0001", "operation=listTiers", "org=acme", `err="meter batch: connection reset by peer"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the error line lacks %s:\n%s", want, out)
		}
	}
}
