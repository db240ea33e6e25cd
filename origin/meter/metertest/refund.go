package metertest

import (
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
