package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// refundGate holds an origin's refunds of an inline export (an op with a
// refund step) while hold is set: reached is told, and the refund waits
// for release, as a slow origin's would.
type refundGate struct {
	meter.Store
	hold    atomic.Bool
	reached chan struct{}
	release chan struct{}
}

func (g *refundGate) Apply(ctx context.Context, op meter.Op) (meter.Result, error) {
	if g.hold.Load() && len(op.Stages) > 0 && len(op.Stages[0]) > 0 && op.Stages[0][0].Refund {
		g.reached <- struct{}{}
		<-g.release
	}
	return g.Store.Apply(ctx, op)
}

// Issue #36 point 3, the review: the shipment and the refund of one
// inline export exclude each other across origins. The edge sends one
// request to origin A, which reserves it and is slow, then to origin B
// (the same signed request), whose reservation is A's duplicate; one of
// them ships it and the other fails it (here A, whose lower ceiling
// makes it 413). Whichever order the ship and the refund come in, a
// request that ships bills one call, one export and its downloads, and
// writes one ledger row; a request whose refunded export another took
// meanwhile is refused at B, billed its call only.
func TestExportShippedAndRefundedOnTwoOrigins(t *testing.T) {
	h := newExportHarness(t, 0)
	sub := multiClass(t, h.corpus())
	classes := int64(len(sub.Lessons))
	gate := &refundGate{Store: h.srv.cfg.Meters, reached: make(chan struct{}), release: make(chan struct{})}
	cfg := h.srv.cfg
	cfg.Meters, cfg.InlineCeiling = gate, 2000 // the subject's bundle is larger: A fails it, after its reservation
	a := httptest.NewServer(New(cfg))
	t.Cleanup(a.Close)
	b := h.api
	path := "/v1/exports/subjects/" + sub.Slug + "?tier=" + sub.Tier + "&format=inline"
	send := func(base, tok, id string, signed time.Time) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("X-Request-Id", id)
		httpsig.Sign(testEdgeKeys, edgesig.Forward, req, nil, signed)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if len(body) > 300 {
			body = body[:300]
		}
		return resp.StatusCode, string(body)
	}
	billed := func(what, org string, calls, exports, rows int64) {
		t.Helper()
		u := h.usage(org)
		if u.Get(meter.MonthCalls) != calls || u.Get(meter.MonthExports) != exports || u.Get(meter.MonthDownloads) != exports*classes {
			t.Errorf("%s: billed calls %d, exports %d, downloads %d; want %d, %d, %d", what,
				u.Get(meter.MonthCalls), u.Get(meter.MonthExports), u.Get(meter.MonthDownloads), calls, exports, exports*classes)
		}
		if n := len(h.ledger(org)); int64(n) != rows {
			t.Errorf("%s: %d ledger rows, want %d", what, n, rows)
		}
	}

	t.Run("RefundAfterShip", func(t *testing.T) {
		tok, signed := h.exporter("late"), h.now()
		gate.hold.Store(true)
		defer gate.hold.Store(false)
		done := make(chan int, 1)
		go func() {
			code, _ := send(a.URL, tok, "req-late", signed)
			done <- code
		}()
		select {
		case <-gate.reached: // A reserved, built, found it too large: its refund waits
		case code := <-done:
			t.Fatalf("origin A answered %d without refunding", code)
		case <-time.After(20 * time.Second):
			t.Fatal("origin A never refunded")
		}
		if code, body := send(b, tok, "req-late", signed); code != 200 {
			t.Errorf("origin B: %d %s, want 200", code, body)
		}
		close(gate.release)
		if code := <-done; code != 413 {
			t.Errorf("origin A: %d, want 413", code)
		}
		billed("shipped by B, then refunded by A", "late", 1, 1, 1)
	})

	t.Run("RefundBeforeShip", func(t *testing.T) {
		tok, signed := h.exporter("early"), h.now()
		if code, body := send(a.URL, tok, "req-early", signed); code != 413 {
			t.Fatalf("origin A: %d %s, want 413", code, body)
		}
		billed("refunded by A", "early", 1, 0, 0)
		for i := range 2 { // B, then B again (the edge retried): billed once
			if code, body := send(b, tok, "req-early", signed); code != 200 {
				t.Errorf("origin B (%d): %d %s, want 200", i+1, code, body)
			}
			billed("refunded by A, then shipped by B", "early", 1, 1, 1)
		}
	})

	t.Run("RefundBeforeShipAllowanceTaken", func(t *testing.T) {
		tok, signed := h.exporter("taken"), h.now()
		one := int64(1)
		if _, err := h.store.UpdateOrg(context.Background(), "taken", func(o *store.Org) error { o.Quota.Exports = &one; return nil }); err != nil {
			t.Fatal(err)
		}
		if code, body := send(a.URL, tok, "req-taken", signed); code != 413 {
			t.Fatalf("origin A: %d %s, want 413", code, body)
		}
		if code, body := send(b, tok, "req-other", h.now()); code != 200 { // another request takes the export given back
			t.Fatalf("another export: %d %s, want 200", code, body)
		}
		if code, body := send(b, tok, "req-taken", signed); code != 429 || !strings.Contains(body, "EXPORT_LIMIT") {
			t.Errorf("origin B after the allowance was taken: %d %s, want 429 EXPORT_LIMIT", code, body)
		}
		billed("refunded by A, the allowance taken, refused by B", "taken", 2, 1, 1)
	})
}
