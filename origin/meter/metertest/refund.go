package metertest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// An inline export is reserved before its bundle is built (issue #36,
// point 3): its op bills the call, the export and its downloads, so that
// concurrent exports past the quota are refused before any work; one that
// then does not ship (413, no room, a failed build) gives back the export
// and the downloads with a refund (meter.Step.Refund), the call staying
// billed.

// exportOp is an inline export's reservation of classes downloads under
// limits.
func exportOp(org string, now time.Time, classes int64, exports, downloads *int64, once string) meter.Op {
	return meter.Op{Org: org, Now: now, Once: once, Stages: []meter.Stage{call(nil, nil),
		{{Meter: meter.MonthExports, N: 1, Limit: exports}, {Meter: meter.MonthDownloads, N: classes, Limit: downloads}}}}
}

// refundOp gives back what exportOp billed, but the call.
func refundOp(org string, now time.Time, classes int64, once string) meter.Op {
	return meter.Op{Org: org, Now: now, Once: once, Stages: []meter.Stage{
		{{Meter: meter.MonthExports, N: 1, Refund: true}, {Meter: meter.MonthDownloads, N: classes, Refund: true}}}}
}

func testRefund(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	// Room for 3 downloads: a 3-class export passes, a second is refused.
	checkPassed(t, "reservation", apply(t, s, exportOp("acme", t0, 3, nil, lim(3), "")))
	checkRefused(t, "a second reservation", apply(t, s, exportOp("acme", t0, 3, nil, lim(3), "")), meter.MonthDownloads)
	// The first did not ship: refunded, the second passes.
	res := apply(t, s, refundOp("acme", t0, 3, ""))
	checkPassed(t, "refund", res)
	checkAfter(t, "refund", res.After, counters(meter.MonthCalls, 2, meter.HourCalls, 2))
	checkPassed(t, "after the refund", apply(t, s, exportOp("acme", t0, 3, nil, lim(3), "")))
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 3, meter.HourCalls, 3, meter.MonthExports, 1, meter.MonthDownloads, 3))

	// A refund never takes a counter below 0, nor touches another org's.
	res = apply(t, s, refundOp("acme", t0, 10, ""))
	checkAfter(t, "refund over the count", res.After, counters(meter.MonthCalls, 3, meter.HourCalls, 3))
	res = apply(t, s, refundOp("other", t0, 1, ""))
	checkAfter(t, "refund of nothing", res.After, meter.Counters{})
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 3, meter.HourCalls, 3))

	// Under a Once key, a refund applies once, and is not the
	// reservation's op (its shape differs): both bill under their keys.
	checkPassed(t, "keyed reservation", apply(t, s, exportOp("acme", t0, 2, nil, nil, "req-1")))
	apply(t, s, refundOp("acme", t0, 2, "req-1/refund"))
	if res := apply(t, s, refundOp("acme", t0, 2, "req-1/refund")); !res.Duplicate {
		t.Error("a refund sent again is not a duplicate")
	}
	if res := apply(t, s, exportOp("acme", t0, 2, nil, nil, "req-1")); !res.Duplicate {
		t.Error("the reservation sent again after its refund is not a duplicate")
	}
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 4, meter.HourCalls, 4))

	// The enumeration alarm refuses every op but a refund, which takes
	// nothing.
	checkPassed(t, "a reservation before the alarm", apply(t, s, exportOp("alarmed", t0, 1, nil, nil, "")))
	if res := apply(t, s, meter.Op{Org: "alarmed", Now: t0, Read: &meter.Read{Lesson: lesson(1), Granted: 1}}); !res.Tripped {
		t.Fatal("the alarm did not trip")
	}
	if res := apply(t, s, refundOp("alarmed", t0, 1, "")); res.Suspended {
		t.Error("a refund was refused by the alarm")
	}
	if res := apply(t, s, meter.Op{Org: "alarmed", Now: t0, Stages: []meter.Stage{{{Meter: meter.MonthExports, N: 1, Refund: true},
		{Meter: meter.MonthDownloads, N: 1}}}}); !res.Suspended {
		t.Error("an op of a refund and a charge passed the alarm")
	}
	checkUsage(t, s, "alarmed", t0, counters(meter.MonthCalls, 1, meter.HourCalls, 1, meter.HourLessonReads, 0))

	// A refund with a limit, Force or Shorten is invalid.
	for name, st := range map[string]meter.Step{
		"limit":   {Meter: meter.MonthDownloads, N: 1, Refund: true, Limit: lim(5)},
		"force":   {Meter: meter.MonthDownloads, N: 1, Refund: true, Force: true},
		"shorten": {Meter: meter.MonthDownloads, N: 1, Refund: true, Shorten: true},
	} {
		if _, err := s.Apply(t.Context(), meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{{st}}}); err == nil {
			t.Errorf("a refund with %s: no error", name)
		}
	}
}

// The two ends of an inline export, its ledger row when it ships and its
// refund when it does not, exclude each other (meter.Op.Unless): the edge
// may send the request to a second origin while the first, which
// reserved it, is slow; one may ship it while the other fails it. Of the
// two ops of a request, only the first applied stands, whatever Store of
// the database applies either.

// shipOp writes the ledger row of the inline export of request key,
// unless its refund was applied.
func shipOp(org, key string) meter.Op {
	return meter.Op{Org: org, Now: t0, Once: key + "/shipped", Unless: key + "/refund", Ledger: []meter.Entry{entry(1)}}
}

// endRefundOp refunds the inline export of request key, unless it
// shipped.
func endRefundOp(org, key string, classes int64) meter.Op {
	op := refundOp(org, t0, classes, key+"/refund")
	op.Unless = key + "/shipped"
	return op
}

func checkExcluded(t *testing.T, what string, res meter.Result, want bool) {
	t.Helper()
	if res.Excluded != want {
		t.Errorf("%s: Excluded %v, want %v", what, res.Excluded, want)
	}
	if want && (res.Duplicate || res.Refused != nil || res.Suspended || len(res.LedgerIDs) > 0) {
		t.Errorf("%s: excluded, yet %+v", what, res)
	}
}

func testShipRefundExclusive(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	// Shipped, then refunded: the refund gives nothing back, however
	// often it comes; the row is written once.
	checkPassed(t, "reservation 1", apply(t, s, exportOp("acme", t0, 2, nil, nil, "r1")))
	ship := apply(t, s, shipOp("acme", "r1"))
	checkExcluded(t, "the ship before any refund", ship, false)
	if len(ship.LedgerIDs) != 1 {
		t.Errorf("the ship wrote rows %v, want one", ship.LedgerIDs)
	}
	for i := range 2 {
		res := apply(t, s, endRefundOp("acme", "r1", 2))
		checkExcluded(t, fmt.Sprintf("the refund after the ship (%d)", i+1), res, true)
		checkAfter(t, "the excluded refund", res.After, counters(meter.MonthCalls, 1, meter.HourCalls, 1, meter.MonthExports, 1, meter.MonthDownloads, 2))
	}
	if res := apply(t, s, shipOp("acme", "r1")); !res.Duplicate || !slices.Equal(res.LedgerIDs, ship.LedgerIDs) {
		t.Errorf("the ship again: %+v, want the first's duplicate", res)
	}
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 1, meter.HourCalls, 1, meter.MonthExports, 1, meter.MonthDownloads, 2))

	// Refunded, then shipped: the ship writes nothing, however often it
	// comes (billing then bills the export again under a key of its own);
	// the refund stays applied once.
	checkPassed(t, "reservation 2", apply(t, s, exportOp("acme", t0, 2, nil, nil, "r2")))
	checkExcluded(t, "the refund before any ship", apply(t, s, endRefundOp("acme", "r2", 2)), false)
	for i := range 2 {
		checkExcluded(t, fmt.Sprintf("the ship after the refund (%d)", i+1), apply(t, s, shipOp("acme", "r2")), true)
	}
	if res := apply(t, s, endRefundOp("acme", "r2", 2)); !res.Duplicate {
		t.Errorf("the refund again: %+v, want a duplicate", res)
	}
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 2, meter.HourCalls, 2, meter.MonthExports, 1, meter.MonthDownloads, 2))
	if rows := ledger(t, s, "acme", 10); len(rows) != 1 {
		t.Errorf("%d ledger rows, want 1 (the shipped export's)", len(rows))
	}

	// Another org's record of the key excludes nothing.
	checkExcluded(t, "another org's ship", apply(t, s, shipOp("other", "r2")), false)

	// In one batch, the first of the two stands.
	if b, ok := s.(Batcher); ok {
		res, err := b.ApplyBatch(t.Context(), []meter.Op{exportOp("batch", t0, 1, nil, nil, "b1"), shipOp("batch", "b1"), endRefundOp("batch", "b1", 1),
			exportOp("batch", t0, 1, nil, nil, "b2"), endRefundOp("batch", "b2", 1), shipOp("batch", "b2")})
		if err != nil {
			t.Fatal(err)
		}
		checkExcluded(t, "b1's ship in the batch", res[1], false)
		checkExcluded(t, "b1's refund after it in the batch", res[2], true)
		checkExcluded(t, "b2's refund in the batch", res[4], false)
		checkExcluded(t, "b2's ship after it in the batch", res[5], true)
		checkUsage(t, s, "batch", t0, counters(meter.MonthCalls, 2, meter.HourCalls, 2, meter.MonthExports, 1, meter.MonthDownloads, 1))
		if rows := ledger(t, s, "batch", 10); len(rows) != 1 {
			t.Errorf("%d ledger rows after the batch, want 1", len(rows))
		}
	}

	// An overlong Unless key is an error and applies nothing.
	op := shipOp("acme", "r3")
	op.Unless = strings.Repeat("k", meter.MaxOnce+1)
	if _, err := s.Apply(t.Context(), op); err == nil {
		t.Error("an overlong Unless key: no error")
	}
	if rows := ledger(t, s, "acme", 10); len(rows) != 1 {
		t.Errorf("%d ledger rows after an invalid op, want 1", len(rows))
	}
}

// The ship and the refund of each of many requests, sent at once from
// every Store given (two origins on one database): of each request's
// two, exactly one applies, and the meters and the ledger hold exactly
// what the ships that applied bill.
func testShipRefundConcurrent(t *testing.T, stores []meter.Store) {
	const keys, classes = 30, 2
	for k := range keys {
		checkPassed(t, "a reservation", apply(t, stores[0], exportOp("acme", t0, classes, nil, nil, fmt.Sprintf("req-%d", k))))
	}
	var wg sync.WaitGroup
	var shipped, refunded atomic.Int64
	for k := range keys {
		key := fmt.Sprintf("req-%d", k)
		for i, op := range []meter.Op{shipOp("acme", key), endRefundOp("acme", key, classes)} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := stores[(k+i)%len(stores)].Apply(t.Context(), op)
				if err != nil {
					t.Error(err)
					return
				}
				if res.Excluded {
					return
				}
				if i == 0 {
					shipped.Add(1)
				} else {
					refunded.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	if shipped.Load()+refunded.Load() != keys {
		t.Errorf("%d ships and %d refunds applied for %d requests, want %d in all", shipped.Load(), refunded.Load(), keys, keys)
	}
	n := int(shipped.Load())
	checkUsage(t, stores[0], "acme", t0, counters(meter.MonthCalls, keys, meter.HourCalls, keys, meter.MonthExports, n, meter.MonthDownloads, n*classes))
	if rows := ledger(t, stores[0], "acme", 100); len(rows) != n {
		t.Errorf("%d ledger rows, want %d (the ships that applied)", len(rows), n)
	}
}

func testShipRefundConcurrentOneStore(t *testing.T, open func(t *testing.T) meter.Store) {
	testShipRefundConcurrent(t, []meter.Store{open(t)})
}

func testShipRefundConcurrentTwoStores(t *testing.T, open func(t *testing.T) meter.Store) {
	testShipRefundConcurrent(t, []meter.Store{open(t), open(t)})
}
