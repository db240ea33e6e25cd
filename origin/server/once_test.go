package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/lectern-api/lectern/internal/httpsig"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/edgesig"
)

// Issue #33, point 1: one request the edge sent to two origins (the
// first slow, then the second), each signed for its origin at the same
// time, is billed once: the second origin's bill is the first's
// duplicate, and it ships the export even though the first used the
// organisation's last export of the month (it must not read the
// allowance as spent by this very request).
func TestExportBilledOnceOnTwoOrigins(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	tok := h.exporter("org")
	one := int64(1)
	if _, err := h.store.UpdateOrg(context.Background(), "org", func(o *store.Org) error { o.Quota.Exports = &one; return nil }); err != nil {
		t.Fatal(err)
	}
	second := httptest.NewServer(New(h.srv.cfg)) // another origin on the same store and meters
	t.Cleanup(second.Close)
	path := "/v1/exports/classes/" + sub.Ref() + "/" + strconv.Itoa(sub.Lessons[0].Number) + "?format=inline"
	signed := h.now()
	send := func(base, id string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Request-Id", id)
		httpsig.Sign(testEdgeKeys, edgesig.Forward, req, nil, signed)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var body struct{ URL string }
		json.Unmarshal(b, &body)
		if resp.StatusCode != 200 {
			return resp.StatusCode, string(b)
		}
		return resp.StatusCode, body.URL
	}
	code, first := send(h.api, "req-once-export-1")
	if code != 200 {
		t.Fatalf("the first origin: %d %s", code, first)
	}
	code, again := send(second.URL, "req-once-export-1")
	if code != 200 {
		t.Fatalf("the same request at the second origin: %d %s, want 200", code, again)
	}
	u := h.usage("org")
	if u.Get(meter.MonthExports) != 1 || u.Get(meter.MonthCalls) != 1 || u.Get(meter.MonthDownloads) != 1 {
		t.Errorf("billed calls %d, exports %d, downloads %d; want 1 each", u.Get(meter.MonthCalls), u.Get(meter.MonthExports), u.Get(meter.MonthDownloads))
	}
	o, err := h.store.GetOrg(context.Background(), "org")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := h.meters.Ledger(context.Background(), meter.Key(o), 0, 10)
	if err != nil || len(rows) != 1 {
		t.Errorf("ledger rows %v, %v; want one", rows, err)
	}
	// Another request (another id) is refused: the allowance is spent.
	if code, body := send(second.URL, "req-once-export-2"); code != 429 {
		t.Errorf("another export: %d %s, want 429 EXPORT_LIMIT", code, body)
	}
}
