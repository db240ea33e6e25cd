package billing_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/billing"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/sqlitemeter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
)

var now = time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)

func biller(t *testing.T) (*billing.Biller, meter.Store) {
	t.Helper()
	s, err := sqlitemeter.New(context.Background(), filepath.Join(t.TempDir(), "m.db"), sqlitemeter.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &billing.Biller{Store: s}, s
}

func n(v int64) *int64 { return &v }

func org(mod func(*store.Org)) *store.Org {
	o := &store.Org{ID: "acme", Status: "active"}
	if mod != nil {
		mod(o)
	}
	return o
}

// usage checks the organisation's counters: pairs of meter and count, every
// other meter zero.
func usage(t *testing.T, s meter.Store, pairs ...any) {
	t.Helper()
	u, err := s.Usage(context.Background(), "acme", now)
	if err != nil {
		t.Fatal(err)
	}
	got := u.Counters
	var want meter.Counters
	for i := 0; i < len(pairs); i += 2 {
		want[pairs[i].(meter.Meter)] = int64(pairs[i+1].(int))
	}
	for _, m := range meter.Meters {
		if got.Get(m) != want.Get(m) {
			h := "month"
			if m.Hourly() {
				h = "hour"
			}
			t.Errorf("%s %s = %d, want %d", h, m, got.Get(m), want.Get(m))
		}
	}
}

// urls are the ledger entries of a mint of n URLs.
func urls(n int) []meter.Entry {
	es := make([]meter.Entry, n)
	for i := range es {
		es[i] = meter.Entry{Kind: meter.KindMedia, Target: "high-algebra-1-img-" + strconv.Itoa(i), Format: "url",
			Client: "c1", Scopes: []string{"service-api/media.download"}, ContentVersion: "v1", RequestID: "r1",
			Expires: now.Add(15 * time.Minute), KeyID: "k1"}
	}
	return es
}

// export is the ledger entry of an export.
func export() meter.Entry {
	return meter.Entry{Kind: meter.KindExport, Target: "high/algebra", Format: "zip_url", Client: "c1",
		Scopes: []string{"service-api/content.export"}, ContentVersion: "v1", RequestID: "r2",
		Expires: now.Add(15 * time.Minute), KeyID: "k1"}
}

// rows checks the number of the organisation's ledger rows.
func rows(t *testing.T, s meter.Store, want int) []meter.Row {
	t.Helper()
	got, err := s.Ledger(context.Background(), "acme", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != want {
		t.Errorf("%d ledger rows, want %d", len(got), want)
	}
	return got
}

// result carries a billing call's two results into the checks below.
type result struct {
	b   billing.Bill
	err error
}

func r(b billing.Bill, err error) result { return result{b, err} }

func ok(t *testing.T, res result) billing.Bill {
	t.Helper()
	if res.err != nil {
		t.Fatal(res.err)
	}
	return res.b
}

// refusal is the refusal res carries as its error, or nil when it carries
// none; any other error fails the test.
func refusal(t *testing.T, res result) *apierr.Error {
	t.Helper()
	var e *apierr.Error
	if res.err != nil && !errors.As(res.err, &e) {
		t.Fatal(res.err)
	}
	return e
}

func refused(t *testing.T, res result, code apierr.Code) *apierr.Error {
	t.Helper()
	e := refusal(t, res)
	if e == nil || e.Code != code {
		t.Fatalf("got %v, want %s", e, code)
	}
	if e.RetryAfter == nil || *e.RetryAfter < 1 {
		t.Errorf("%s without Retry-After", code)
	}
	return e
}

// The spec's cost examples (Limits: "Cost examples that follow from the
// rules").
func TestCostExamples(t *testing.T) {
	ctx := context.Background()
	t.Run("one subject of 30 classes exported is 1 call, 30 downloads, 1 export", func(t *testing.T) {
		b, s := biller(t)
		ok(t, r(b.Export(ctx, org(nil), now, 30, export())))
		usage(t, s, meter.MonthCalls, 1, meter.HourCalls, 1, meter.MonthDownloads, 30, meter.MonthExports, 1)
		rows(t, s, 1)
	})
	t.Run("the same subject read class by class is 60 calls and 60 lesson reads", func(t *testing.T) {
		b, s := biller(t)
		for class := 1; class <= 30; class++ {
			// the lesson and its transcript: two lesson reads per class
			read := &meter.Read{Lesson: "high/algebra/" + strconv.Itoa(class)}
			ok(t, r(b.LessonRead(ctx, org(nil), now, read)))
			ok(t, r(b.LessonRead(ctx, org(nil), now, read)))
		}
		usage(t, s, meter.MonthCalls, 60, meter.HourCalls, 60, meter.HourLessonReads, 60)
	})
	t.Run("a 304 revalidation of an inline export is 1 call", func(t *testing.T) {
		b, s := biller(t)
		ok(t, r(b.Call(ctx, org(nil), now)))
		usage(t, s, meter.MonthCalls, 1, meter.HourCalls, 1)
		rows(t, s, 0)
	})
}

// spec: Limits, "Effects of refusals" and the Errors table's 429s.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	monthEnd := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	t.Run("monthly call quota spent: QUOTA_EXCEEDED bills nothing", func(t *testing.T) {
		b, s := biller(t)
		o := org(func(o *store.Org) { o.Quota.Calls = n(2) })
		ok(t, r(b.Call(ctx, o, now)))
		ok(t, r(b.Call(ctx, o, now)))
		refused(t, r(b.LessonRead(ctx, o, now, nil)), apierr.QuotaExceeded)
		usage(t, s, meter.MonthCalls, 2, meter.HourCalls, 2)
	})
	t.Run("hourly call cap: RATE_LIMITED bills the call", func(t *testing.T) {
		b, s := biller(t)
		o := org(func(o *store.Org) { o.RateLimits.CallsPerHour = n(1) })
		ok(t, r(b.Call(ctx, o, now)))
		e := refused(t, r(b.LessonRead(ctx, o, now, nil)), apierr.RateLimited)
		if *e.RetryAfter > 3600 || *e.RetryAfter != int64(45*60) {
			t.Errorf("Retry-After %d, want 2700 (to the top of the hour)", *e.RetryAfter)
		}
		usage(t, s, meter.MonthCalls, 2, meter.HourCalls, 2)
	})
	t.Run("hourly lesson-read cap: RATE_LIMITED bills the call only", func(t *testing.T) {
		b, s := biller(t)
		o := org(func(o *store.Org) { o.RateLimits.LessonReadsPerHour = n(1) })
		ok(t, r(b.LessonRead(ctx, o, now, nil)))
		refused(t, r(b.LessonRead(ctx, o, now, nil)), apierr.RateLimited)
		usage(t, s, meter.MonthCalls, 2, meter.HourCalls, 2, meter.HourLessonReads, 1)
	})
	t.Run("a clean 100-id mint is 100 downloads and 100 mints", func(t *testing.T) {
		b, s := biller(t)
		bill := ok(t, r(b.Mint(ctx, org(nil), now, urls(100))))
		usage(t, s, meter.MonthCalls, 1, meter.HourCalls, 1, meter.HourMints, 100, meter.MonthDownloads, 100)
		if got := rows(t, s, 100); len(bill.LedgerIDs) != 100 || len(got) == 100 && got[99].ID != bill.LedgerIDs[99] {
			t.Errorf("LedgerIDs %v", bill.LedgerIDs)
		}
	})
	t.Run("a mint stopped by the hourly mint cap bills the call only", func(t *testing.T) {
		b, s := biller(t)
		o := org(func(o *store.Org) { o.RateLimits.URLMintsPerHour = n(99) })
		refused(t, r(b.Mint(ctx, o, now, urls(100))), apierr.RateLimited)
		usage(t, s, meter.MonthCalls, 1, meter.HourCalls, 1)
		rows(t, s, 0)
	})
	t.Run("a mint stopped by the monthly download quota bills the call plus the hourly reservation", func(t *testing.T) {
		b, s := biller(t)
		o := org(func(o *store.Org) { o.Quota.Downloads = n(50) })
		e := refused(t, r(b.Mint(ctx, o, now, urls(100))), apierr.QuotaExceeded)
		if *e.RetryAfter != int64(monthEnd.Sub(now)/time.Second) || e.QuotaResetsAt != "2026-12-01T00:00:00Z" {
			t.Errorf("Retry-After %d quotaResetsAt %s", *e.RetryAfter, e.QuotaResetsAt)
		}
		usage(t, s, meter.MonthCalls, 1, meter.HourCalls, 1, meter.HourMints, 100)
		rows(t, s, 0)
	})
	t.Run("export allowance spent: EXPORT_LIMIT with position, bills the call", func(t *testing.T) {
		b, s := biller(t)
		o := org(func(o *store.Org) { o.Quota.Exports = n(1) })
		ok(t, r(b.Export(ctx, o, now, 1, export())))
		e := refused(t, r(b.Export(ctx, o, now, 1, export())), apierr.ExportLimit)
		if *e.ExportsUsed != 1 || *e.ExportsLimit != 1 || e.QuotaResetsAt == "" {
			t.Errorf("EXPORT_LIMIT keys: %s", e.AppendJSON(nil, "r"))
		}
		usage(t, s, meter.MonthCalls, 2, meter.HourCalls, 2, meter.MonthExports, 1, meter.MonthDownloads, 1)
		rows(t, s, 1)
	})
	t.Run("an export stopped by the download quota bills the call, not the export", func(t *testing.T) {
		b, s := biller(t)
		o := org(func(o *store.Org) { o.Quota.Downloads = n(10) })
		refused(t, r(b.Export(ctx, o, now, 30, export())), apierr.QuotaExceeded)
		usage(t, s, meter.MonthCalls, 1, meter.HourCalls, 1)
		rows(t, s, 0)
	})
	t.Run("test-prep page shortened to the allowance, then refused", func(t *testing.T) {
		b, s := biller(t)
		o := org(func(o *store.Org) { o.Quota.TestprepItems = n(30) })
		if got := ok(t, r(b.TestprepPage(ctx, o, now, 25))); got.Granted != 25 {
			t.Errorf("first page granted %d", got.Granted)
		}
		if got := ok(t, r(b.TestprepPage(ctx, o, now, 25))); got.Granted != 5 {
			t.Errorf("second page granted %d, want 5 (shortened, not refused)", got.Granted)
		}
		refused(t, r(b.TestprepPage(ctx, o, now, 25)), apierr.QuotaExceeded)
		usage(t, s, meter.MonthCalls, 3, meter.HourCalls, 3, meter.HourLessonReads, 2, meter.MonthTestprepItems, 30)
	})
	t.Run("null limits never refuse", func(t *testing.T) {
		b, _ := biller(t)
		for i := 0; i < 20; i++ {
			ok(t, r(b.Mint(ctx, org(nil), now, urls(100))))
		}
	})
}

// RateLimit headers name every capped meter the bill touched, with what is
// left and the seconds to its reset.
func TestHeaders(t *testing.T) {
	b, _ := biller(t)
	o := org(func(o *store.Org) { o.RateLimits.CallsPerHour = n(100); o.Quota.Calls = n(1000) })
	bill := ok(t, r(b.Call(context.Background(), o, now)))
	h := bill.Headers()
	if len(h) != 2 || h[0].Name != "RateLimit-Policy" || h[1].Name != "RateLimit" {
		t.Fatalf("headers %v", h)
	}
	if want := `"calls-month";q=1000;w=2592000, "calls-hour";q=100;w=3600`; h[0].Value != want {
		t.Errorf("policy %q, want %q", h[0].Value, want)
	}
	if want := `"calls-month";r=999;t=740700, "calls-hour";r=99;t=2700`; h[1].Value != want {
		t.Errorf("state %q, want %q", h[1].Value, want)
	}
	if h := ok(t, r(b.Call(context.Background(), org(nil), now))).Headers(); h != nil {
		t.Errorf("no caps, headers %v", h)
	}
	// A refused bill still reports them: nothing is left of the cap.
	b, _ = biller(t)
	capped := org(func(o *store.Org) { o.RateLimits.CallsPerHour = n(1) })
	ok(t, r(b.Call(context.Background(), capped, now)))
	bill, err := b.Call(context.Background(), capped, now)
	refused(t, r(bill, err), apierr.RateLimited)
	if h := bill.Headers(); len(h) != 2 || h[1].Value != `"calls-hour";r=0;t=2700` {
		t.Errorf("refused bill's headers %v", h)
	}
}

// An organisation created again under a deleted one's id meters apart from
// it (issue #13): a request of the old one still in flight bills under the
// old generation's key, and neither its calls nor its lesson reads count
// against the new one's quota or enumeration record. One created before
// generations keeps its bare id, and so its meters.
func TestKeyGenerations(t *testing.T) {
	b, s := biller(t)
	ctx := context.Background()
	old := org(func(o *store.Org) { o.Generation = "gen-1" })
	cur := org(func(o *store.Org) { o.Generation = "gen-2"; o.Quota.Calls = n(1) })
	if meter.Key(old) == meter.Key(cur) {
		t.Fatalf("two generations share the key %q", meter.Key(old))
	}
	if got := meter.Key(org(nil)); got != "acme" {
		t.Errorf("Key of an org without generation = %q, want its id", got)
	}
	for range 3 {
		if _, err := b.LessonRead(ctx, old, now, &meter.Read{Lesson: "high/algebra/7"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Call(ctx, cur, now); err != nil {
		t.Fatalf("the new org's first call, quota 1: %v", err)
	}
	u, err := s.Usage(ctx, meter.Key(cur), now)
	if err != nil {
		t.Fatal(err)
	}
	got, read := u.Counters, u.LessonsRead
	if got.Get(meter.MonthCalls) != 1 || got.Get(meter.HourLessonReads) != 0 || read != 0 {
		t.Errorf("new org: month calls %d, hour lesson reads %d, lessons read %d; want 1, 0, 0",
			got.Get(meter.MonthCalls), got.Get(meter.HourLessonReads), read)
	}
}

// spec: States and transitions, enumeration alarm. The read that trips
// the alarm is served; every billed request after it is refused 403
// ORG_SUSPENDED, as the gate refuses a suspended organisation, and bills
// nothing (docs/decisions/enumeration-alarm.md).
func TestEnumerationAlarm(t *testing.T) {
	b, s := biller(t)
	ctx := context.Background()
	o := org(nil)
	read := func(class int) *meter.Read {
		return &meter.Read{Lesson: "high/algebra/" + strconv.Itoa(class), Granted: 10}
	}
	for class := 1; class <= 4; class++ {
		if bill := ok(t, r(b.LessonRead(ctx, o, now, read(class)))); bill.Tripped {
			t.Fatalf("read %d of 10 tripped the alarm", class)
		}
	}
	if bill := ok(t, r(b.LessonRead(ctx, o, now, read(5)))); !bill.Tripped {
		t.Fatalf("read 5 of 10 did not trip the alarm")
	}
	for name, res := range map[string]result{
		"call":           r(b.Call(ctx, o, now)),
		"lesson read":    r(b.LessonRead(ctx, o, now, read(1))),
		"404 read":       r(b.LessonRead(ctx, o, now, nil)),
		"mint":           r(b.Mint(ctx, o, now, urls(3))),
		"export":         r(b.Export(ctx, o, now, 2, export())),
		"test-prep page": r(b.TestprepPage(ctx, o, now, 10)),
	} {
		e := refusal(t, res)
		if e == nil || e.Code != apierr.OrgSuspended || e.Status() != 403 || e.RetryAfter != nil {
			t.Errorf("%s after the alarm: %+v, want 403 ORG_SUSPENDED without Retry-After", name, e)
		}
	}
	usage(t, s, meter.MonthCalls, 5, meter.HourCalls, 5, meter.HourLessonReads, 5)
	rows(t, s, 0)
}

// A mint writes a ledger row per URL, duplicates each, in its order, with
// the bill's ids; an export writes one; both in the op's transaction, so
// the rows are the entries given, stamped with the op's time.
func TestLedger(t *testing.T) {
	b, s := biller(t)
	ctx := context.Background()
	mint := urls(3)
	mint[2] = mint[0] // a duplicate id: minted and written again
	m := ok(t, r(b.Mint(ctx, org(nil), now, mint)))
	e := ok(t, r(b.Export(ctx, org(nil), now, 30, export())))
	got := rows(t, s, 4)
	want := append(mint, export())
	ids := append(m.LedgerIDs, e.LedgerIDs...)
	if len(got) != 4 || len(ids) != 4 {
		t.Fatalf("ids %v", ids)
	}
	for i, row := range got {
		if row.ID != ids[i] || row.Target != want[i].Target || row.Kind != want[i].Kind || !row.Created.Equal(now) || !row.Expires.Equal(want[i].Expires) {
			t.Errorf("row %d = %+v, want id %d of %+v at %s", i, row, ids[i], want[i], now)
		}
	}
	if ids[0] == ids[2] {
		t.Errorf("a duplicate id's two URLs share the ledger id %d", ids[0])
	}
	// An entry no store may write fails the bill, which bills nothing.
	bad := export()
	bad.Kind = "download"
	if _, err := b.Export(ctx, org(nil), now, 1, bad); err == nil {
		t.Errorf("an export with a bad ledger entry: no error")
	}
	usage(t, s, meter.MonthCalls, 2, meter.HourCalls, 2, meter.HourMints, 3, meter.MonthDownloads, 33, meter.MonthExports, 1)
}
