// Package metertest is the conformance suite for meter.Store. Every
// backend runs the same suite from its own tests:
//
//	func TestMeter(t *testing.T) {
//		var paths sync.Map // *testing.T → database path
//		metertest.Run(t, func(t *testing.T) meter.Store {
//			p, _ := paths.LoadOrStore(t, filepath.Join(t.TempDir(), "meter.db"))
//			s, err := sqlitemeter.New(t.Context(), p.(string), sqlitemeter.Options{})
//			...
//		})
//	}
//
// Besides the contract's words the suite holds backends to these rules:
// within a stage, a step over its limit that is not Force refuses the op
// and bills none of the stage even when a Force step of the stage is over
// too (a monthly quota refusal bills nothing); Granted is 0 when the
// Shorten step's stage is not billed; a refused op with a Read reports
// the day's count without recording the read; an op naming an unknown
// meter, a negative N, an empty or overlong lesson id or a negative
// Granted is an error and applies nothing; Apply after Close is an error;
// a ledger entry of an unknown kind, an empty target or a field over its
// bound, not UTF-8 or holding NUL, or more than meter.MaxLedger of them,
// is an error and applies nothing. alarm.go holds the enumeration
// alarm's tests, ledger.go the export ledger's; lease.go is the suite of
// meter.LeaseStore (RunLeases), which a backend runs beside Run.
//
// Crash is the SIGKILL test, run by each backend from a re-executed test
// binary (see Crash and Serve); CrashLeases is the leases' (reports).
package metertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// Kind says how the Stores of one database may coexist.
type Kind int

const (
	// Shared: several Stores (origins) may apply ops to one database at
	// once (pgmeter).
	Shared Kind = iota
	// Exclusive: one Store at a time owns a database (sqlitemeter, which
	// remembers the counters it committed).
	Exclusive
)

// Run runs the suite. open returns a new Store over the database of t:
// the first call for a given t starts from a fresh, empty database, and
// later calls with the same t open another Store over that same data, as
// a restarted or a second origin would. Subtests run in parallel, each on
// its own database. open should close the Store when t ends (Close may
// then be called twice); the suite closes some itself.
//
// kind says whether several Stores may share one database at once: a
// Shared backend must keep caps exact across them (TwoStoresOneDatabase);
// an Exclusive one is its database's only writer, which the backend's own
// tests show refuses a second Store.
func Run(t *testing.T, kind Kind, open func(t *testing.T) meter.Store) {
	run(t, kind, open, false)
}

// RunVariant is Run for another configuration of a backend whose default
// one Run covers (no group commit, small batches). Under -short, the race
// pass, it leaves out LedgerTrimWindows: its 10,500 ledger rows take
// seconds under the race detector, and the default configuration's run
// covers the trim's concurrency. make test's main pass runs it whole.
func RunVariant(t *testing.T, kind Kind, open func(t *testing.T) meter.Store) {
	run(t, kind, open, true)
}

func run(t *testing.T, kind Kind, open func(t *testing.T) meter.Store, variant bool) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) meter.Store)
	}{
		{"PassesUnderCaps", testPassesUnderCaps},
		{"LimitInclusive", testLimitInclusive},
		{"QuotaKeepsEarlierStages", testQuotaKeepsEarlierStages},
		{"ForceBillsAndRefuses", testForceBillsAndRefuses},
		{"HardRefusalBeatsForce", testHardRefusalBeatsForce},
		{"Shorten", testShorten},
		{"StageAllOrNothing", testStageAllOrNothing},
		{"SameMeterTwiceInStage", testSameMeterTwiceInStage},
		{"HourRollover", testHourRollover},
		{"MonthRollover", testMonthRollover},
		{"NullLimitsNeverRefuse", testNullLimits},
		{"IndependentOrgs", testIndependentOrgs},
		{"LessonsRead", testLessonsRead},
		{"LessonsReadNewDay", testLessonsReadNewDay},
		{"LessonsReadOneRecordForAnyCorpus", testLessonsReadAnyCorpus},
		{"LessonsReadNotWhenRefused", testLessonsReadRefused},
		{"AlarmTrips", testAlarmTrips},
		{"AlarmRefusesNextOps", testAlarmRefuses},
		{"AlarmSameBatch", testAlarmSameBatch},
		{"AlarmConcurrentExact", testAlarmConcurrent},
		{"AlarmAnyGranted", testAlarmAnyGranted},
		{"AlarmReinstate", testAlarmReinstate},
		{"AlarmPerOrg", testAlarmPerOrg},
		{"UsageMatchesAfter", testUsageMatchesAfter},
		{"InvalidOps", testInvalidOps},
		{"ConcurrentHardCap", testConcurrentHardCap},
		{"ConcurrentNoLostIncrement", testConcurrentNoLost},
		{"CancelledAppliesNothing", testCancelled},
		{"Reopen", testReopen},
		{"Close", testClose},
		{"LedgerWritten", testLedgerWritten},
		{"LedgerNotWhenRefused", testLedgerNotWhenRefused},
		{"LedgerPaging", testLedgerPaging},
		{"LedgerSameBatch", testLedgerSameBatch},
		{"LedgerConcurrent", testLedgerConcurrent},
		{"LedgerReopen", testLedgerReopen},
		{"LedgerTrim", testLedgerTrim},
		{"LedgerTrimWindows", testLedgerTrimWindows},
		{"OnceBillsOnce", testOnceBillsOnce},
		{"OnceOutcome", testOnceOutcome},
		{"OnceSameBatch", testOnceSameBatch},
		{"OnceConcurrent", testOnceConcurrentOneStore},
		{"OncePrune", testOncePrune},
		{"OnceOtherShape", testOnceOtherShape},
		{"OnceTooOld", testOnceTooOld},
		{"Refund", testRefund},
		{"ShipRefundExclusive", testShipRefundExclusive},
		{"ShipRefundConcurrent", testShipRefundConcurrentOneStore},
	}
	if kind == Shared {
		tests = append(tests, []struct {
			name string
			fn   func(t *testing.T, open func(t *testing.T) meter.Store)
		}{
			{"TwoStoresOneDatabase", testTwoStores},
			{"AlarmTwoStores", testAlarmTwoStores},
			{"AlarmConcurrentExactTwoStores", testAlarmConcurrentTwoStores},
			{"LedgerConcurrentTwoStores", testLedgerConcurrentTwoStores},
			{"OnceConcurrentTwoStores", testOnceConcurrentTwoStores},
			{"ShipRefundConcurrentTwoStores", testShipRefundConcurrentTwoStores},
		}...)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if variant && testing.Short() && tt.name == "LedgerTrimWindows" {
				t.Skip("-short: a configuration's variant; the default configuration's run and the full pass make it")
			}
			t.Parallel()
			tt.fn(t, open)
		})
	}
}

// t0 is the suite's clock: a Sunday morning in November, UTC.
var t0 = time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)

func lim(n int64) *int64 { return &n }

// call is the first stage of every metered request (spec: Limits): a call
// against the monthly quota and the hourly cap.
func call(quota, perHour *int64) meter.Stage {
	return meter.Stage{
		{Meter: meter.MonthCalls, N: 1, Limit: quota},
		{Meter: meter.HourCalls, N: 1, Limit: perHour},
	}
}

func apply(t *testing.T, s meter.Store, op meter.Op) meter.Result {
	t.Helper()
	res, err := s.Apply(t.Context(), op)
	if err != nil {
		t.Fatalf("Apply(%s at %s): %v", op.Org, op.Now.Format(time.RFC3339Nano), err)
	}
	return res
}

func usage(t *testing.T, s meter.Store, org string, now time.Time) meter.Usage {
	t.Helper()
	u, err := s.Usage(t.Context(), org, now)
	if err != nil {
		t.Fatalf("Usage(%s at %s): %v", org, now.Format(time.RFC3339Nano), err)
	}
	return u
}

// counters builds Counters from meter, count pairs.
func counters(kv ...any) meter.Counters {
	var c meter.Counters
	for i := 0; i < len(kv); i += 2 {
		c[kv[i].(meter.Meter)] = int64(kv[i+1].(int))
	}
	return c
}

func fmtCounters(c meter.Counters) string {
	s := ""
	for _, m := range meter.Meters {
		if c[m] != 0 {
			kind := "month"
			if m.Hourly() {
				kind = "hour"
			}
			s += fmt.Sprintf(" %s.%s=%d", kind, m, c[m])
		}
	}
	if s == "" {
		return "{}"
	}
	return "{" + s[1:] + "}"
}

func checkAfter(t *testing.T, what string, got, want meter.Counters) {
	t.Helper()
	if got != want {
		t.Errorf("%s: After = %s, want %s", what, fmtCounters(got), fmtCounters(want))
	}
}

func checkPassed(t *testing.T, what string, res meter.Result) {
	t.Helper()
	if res.Refused != nil {
		t.Errorf("%s: refused by %+v, want passed", what, *res.Refused)
	}
}

func checkRefused(t *testing.T, what string, res meter.Result, m meter.Meter) {
	t.Helper()
	switch {
	case res.Refused == nil:
		t.Errorf("%s: passed, want refused by %s", what, m)
	case res.Refused.Meter != m:
		t.Errorf("%s: refused by %s (hourly %v), want %s (hourly %v)", what, res.Refused.Meter, res.Refused.Meter.Hourly(), m, m.Hourly())
	}
}

func checkUsage(t *testing.T, s meter.Store, org string, now time.Time, want meter.Counters) {
	t.Helper()
	if got := usage(t, s, org, now).Counters; got != want {
		t.Errorf("Usage(%s at %s) = %s, want %s", org, now.Format(time.RFC3339), fmtCounters(got), fmtCounters(want))
	}
}

func testPassesUnderCaps(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{
		call(lim(10), lim(5)),
		{{Meter: meter.MonthDownloads, N: 3, Limit: lim(100)}, {Meter: meter.MonthExports, N: 1, Limit: lim(2)}},
	}}
	res := apply(t, s, op)
	checkPassed(t, "first export", res)
	checkAfter(t, "first export", res.After, counters(meter.MonthCalls, 1, meter.HourCalls, 1, meter.MonthDownloads, 3, meter.MonthExports, 1))
	if res.Granted != 0 || res.LessonsRead != 0 {
		t.Errorf("first export: Granted, LessonsRead = %d, %d; want 0, 0 (no Shorten step, no Read)", res.Granted, res.LessonsRead)
	}
	res = apply(t, s, op)
	checkPassed(t, "second export", res)
	checkAfter(t, "second export", res.After, counters(meter.MonthCalls, 2, meter.HourCalls, 2, meter.MonthDownloads, 6, meter.MonthExports, 2))
	// The export allowance of 2 is spent: the call stays billed, the
	// export stage bills nothing (EXPORT_LIMIT).
	res = apply(t, s, op)
	checkRefused(t, "third export", res, meter.MonthExports)
	checkAfter(t, "third export", res.After, counters(meter.MonthCalls, 3, meter.HourCalls, 3, meter.MonthDownloads, 6, meter.MonthExports, 2))
	if res.Refused != nil && (res.Refused.N != 1 || res.Refused.Limit == nil || *res.Refused.Limit != 2) {
		t.Errorf("third export: Refused = %+v, want the export step (N 1, limit 2)", *res.Refused)
	}
	checkUsage(t, s, "acme", t0, res.After)
}

func testLimitInclusive(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{{{Meter: meter.MonthDownloads, N: 1, Limit: lim(3)}}}}
	for i := 1; i <= 3; i++ {
		checkPassed(t, fmt.Sprintf("download %d of limit 3", i), apply(t, s, op))
	}
	res := apply(t, s, op)
	checkRefused(t, "download 4 of limit 3", res, meter.MonthDownloads)
	checkAfter(t, "download 4 of limit 3", res.After, counters(meter.MonthDownloads, 3))

	// A zero limit refuses any unit, and admits a step of N 0.
	zero := meter.Op{Org: "zero", Now: t0, Stages: []meter.Stage{{{Meter: meter.MonthExports, N: 1, Limit: lim(0)}}}}
	checkRefused(t, "export under limit 0", apply(t, s, zero), meter.MonthExports)
	zero.Stages[0][0].N = 0
	checkPassed(t, "N 0 under limit 0", apply(t, s, zero))
	// A batch larger than what is left is refused whole.
	big := meter.Op{Org: "big", Now: t0, Stages: []meter.Stage{{{Meter: meter.HourMints, N: 100, Limit: lim(150)}}}}
	checkPassed(t, "100 mints of 150", apply(t, s, big))
	res = apply(t, s, big)
	checkRefused(t, "200 mints of 150", res, meter.HourMints)
	checkAfter(t, "200 mints of 150", res.After, counters(meter.HourMints, 100))
	big.Stages[0][0].N = 50
	res = apply(t, s, big)
	checkPassed(t, "150 mints of 150", res)
	checkAfter(t, "150 mints of 150", res.After, counters(meter.HourMints, 150))
}

// A mint stopped by the monthly download quota bills the call plus the
// hourly mint reservation (spec: Limits, "Effects of refusals").
func testQuotaKeepsEarlierStages(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	mint := func(n int64) meter.Op {
		return meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{
			call(nil, nil),
			{{Meter: meter.HourMints, N: n, Limit: lim(1000)}},
			{{Meter: meter.MonthDownloads, N: n, Limit: lim(150)}},
		}}
	}
	res := apply(t, s, mint(100))
	checkPassed(t, "mint 100", res)
	checkAfter(t, "mint 100", res.After, counters(meter.MonthCalls, 1, meter.HourCalls, 1, meter.HourMints, 100, meter.MonthDownloads, 100))
	res = apply(t, s, mint(100))
	checkRefused(t, "mint 100 more", res, meter.MonthDownloads)
	checkAfter(t, "mint 100 more", res.After, counters(meter.MonthCalls, 2, meter.HourCalls, 2, meter.HourMints, 200, meter.MonthDownloads, 100))
	checkUsage(t, s, "acme", t0, res.After)
	// The refused step is a copy: changing it changes nothing stored.
	if res.Refused != nil {
		res.Refused.N = 0
	}
	res = apply(t, s, mint(50))
	checkPassed(t, "mint the last 50", res)
	checkAfter(t, "mint the last 50", res.After, counters(meter.MonthCalls, 3, meter.HourCalls, 3, meter.HourMints, 250, meter.MonthDownloads, 150))
}

// An hourly cap hit bills the call only (spec: Limits).
func testForceBillsAndRefuses(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{
		{{Meter: meter.MonthCalls, N: 1}, {Meter: meter.HourCalls, N: 1, Limit: lim(2), Force: true}},
		{{Meter: meter.HourLessonReads, N: 1, Limit: lim(100)}},
	}}
	for i := 1; i <= 2; i++ {
		checkPassed(t, fmt.Sprintf("call %d of 2 per hour", i), apply(t, s, op))
	}
	for i := 3; i <= 4; i++ {
		what := fmt.Sprintf("call %d of 2 per hour", i)
		res := apply(t, s, op)
		checkRefused(t, what, res, meter.HourCalls)
		if res.Refused != nil && !res.Refused.Force {
			t.Errorf("%s: Refused.Force = false, want the Force step", what)
		}
		checkAfter(t, what, res.After, counters(meter.MonthCalls, i, meter.HourCalls, i, meter.HourLessonReads, 2))
	}
	// The next hour admits again.
	res := apply(t, s, meter.Op{Org: "acme", Now: t0.Add(time.Hour), Stages: op.Stages})
	checkPassed(t, "call in the next hour", res)
	checkAfter(t, "call in the next hour", res.After, counters(meter.MonthCalls, 5, meter.HourCalls, 1, meter.HourLessonReads, 1))
}

func testHardRefusalBeatsForce(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{
		{{Meter: meter.MonthCalls, N: 1, Limit: lim(2)}, {Meter: meter.HourCalls, N: 1, Limit: lim(1), Force: true}},
	}}
	checkPassed(t, "call 1", apply(t, s, op))
	res := apply(t, s, op)
	checkRefused(t, "call 2 over the hourly cap", res, meter.HourCalls)
	checkAfter(t, "call 2 over the hourly cap", res.After, counters(meter.MonthCalls, 2, meter.HourCalls, 2))
	// Both over: the monthly quota refuses and nothing is billed.
	res = apply(t, s, op)
	checkRefused(t, "call 3 over quota and cap", res, meter.MonthCalls)
	checkAfter(t, "call 3 over quota and cap", res.After, counters(meter.MonthCalls, 2, meter.HourCalls, 2))
}

// Test-prep pages are shortened to what is left (spec: Route rules 6).
func testShorten(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	page := func(n int64) meter.Op {
		return meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{
			call(nil, nil),
			{{Meter: meter.HourLessonReads, N: 1}},
			{{Meter: meter.MonthTestprepItems, N: n, Limit: lim(60), Shorten: true}},
		}}
	}
	for i, want := range []int64{25, 25, 10} {
		what := fmt.Sprintf("page %d", i+1)
		res := apply(t, s, page(25))
		checkPassed(t, what, res)
		if res.Granted != want {
			t.Errorf("%s: Granted = %d, want %d", what, res.Granted, want)
		}
		checkAfter(t, what, res.After, counters(meter.MonthCalls, i+1, meter.HourCalls, i+1, meter.HourLessonReads, i+1, meter.MonthTestprepItems, min(60, 25*(i+1))))
	}
	res := apply(t, s, page(25))
	checkRefused(t, "page 4, nothing left", res, meter.MonthTestprepItems)
	if res.Granted != 0 {
		t.Errorf("page 4: Granted = %d, want 0", res.Granted)
	}
	checkAfter(t, "page 4", res.After, counters(meter.MonthCalls, 4, meter.HourCalls, 4, meter.HourLessonReads, 4, meter.MonthTestprepItems, 60))

	// Without a limit, and within one, the step is granted whole.
	res = apply(t, s, meter.Op{Org: "free", Now: t0, Stages: []meter.Stage{{{Meter: meter.MonthTestprepItems, N: 40, Shorten: true}}}})
	if res.Refused != nil || res.Granted != 40 {
		t.Errorf("unlimited page of 40: Granted %d, refused %v; want 40, passed", res.Granted, res.Refused != nil)
	}
	res = apply(t, s, meter.Op{Org: "free", Now: t0, Stages: []meter.Stage{{{Meter: meter.MonthTestprepItems, N: 10, Limit: lim(100), Shorten: true}}}})
	if res.Refused != nil || res.Granted != 10 {
		t.Errorf("page of 10 with 60 left: Granted %d, refused %v; want 10, passed", res.Granted, res.Refused != nil)
	}
}

func testStageAllOrNothing(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{
		call(nil, nil),
		{
			{Meter: meter.MonthTestprepItems, N: 5, Limit: lim(100), Shorten: true},
			{Meter: meter.MonthDownloads, N: 5, Limit: lim(100)},
			{Meter: meter.HourMints, N: 5, Limit: lim(3)},
		},
	}}
	res := apply(t, s, op)
	checkRefused(t, "stage with one step over", res, meter.HourMints)
	checkAfter(t, "stage with one step over", res.After, counters(meter.MonthCalls, 1, meter.HourCalls, 1))
	if res.Granted != 0 {
		t.Errorf("stage with one step over: Granted = %d, want 0 (stage not billed)", res.Granted)
	}
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 1, meter.HourCalls, 1))
}

func testSameMeterTwiceInStage(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{{
		{Meter: meter.MonthDownloads, N: 3, Limit: lim(5)},
		{Meter: meter.MonthDownloads, N: 3, Limit: lim(5)},
	}}}
	res := apply(t, s, op)
	checkRefused(t, "3+3 downloads of 5", res, meter.MonthDownloads)
	checkAfter(t, "3+3 downloads of 5", res.After, meter.Counters{})
	op.Stages[0][1].N = 2
	res = apply(t, s, op)
	checkPassed(t, "3+2 downloads of 5", res)
	checkAfter(t, "3+2 downloads of 5", res.After, counters(meter.MonthDownloads, 5))
}

func testHourRollover(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := func(now time.Time) meter.Op {
		return meter.Op{Org: "acme", Now: now, Stages: []meter.Stage{call(nil, lim(2))}}
	}
	last := time.Date(2026, 11, 22, 10, 59, 59, 999999999, time.UTC)
	checkPassed(t, "10:00 call 1", apply(t, s, op(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))))
	checkPassed(t, "10:59:59.999 call 2", apply(t, s, op(last)))
	res := apply(t, s, op(last))
	checkRefused(t, "10:59:59.999 call 3", res, meter.HourCalls)
	checkAfter(t, "10:59:59.999 call 3", res.After, counters(meter.MonthCalls, 2, meter.HourCalls, 2))
	res = apply(t, s, op(last.Add(time.Nanosecond)))
	checkPassed(t, "11:00:00 call", res)
	checkAfter(t, "11:00:00 call", res.After, counters(meter.MonthCalls, 3, meter.HourCalls, 1))
	checkUsage(t, s, "acme", last, counters(meter.MonthCalls, 3, meter.HourCalls, 2))
	// The hour is UTC's: 06:30 at UTC-4:30 is 11:00 UTC.
	zone := time.FixedZone("UTC-4:30", -(4*3600 + 1800))
	res = apply(t, s, op(time.Date(2026, 11, 22, 6, 30, 0, 0, zone)))
	checkPassed(t, "06:30 UTC-4:30 call", res)
	checkAfter(t, "06:30 UTC-4:30 call", res.After, counters(meter.MonthCalls, 4, meter.HourCalls, 2))
}

func testMonthRollover(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := func(org string, now time.Time) meter.Op {
		return meter.Op{Org: org, Now: now, Stages: []meter.Stage{{{Meter: meter.MonthExports, N: 1, Limit: lim(1)}}}}
	}
	for _, tc := range []struct {
		org        string
		last, next time.Time
	}{
		{"nov-dec", time.Date(2026, 11, 30, 23, 59, 59, 999999999, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{"dec-jan", time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		checkPassed(t, tc.org+": last instant, export 1", apply(t, s, op(tc.org, tc.last)))
		checkRefused(t, tc.org+": last instant, export 2", apply(t, s, op(tc.org, tc.last)), meter.MonthExports)
		res := apply(t, s, op(tc.org, tc.next))
		checkPassed(t, tc.org+": first instant", res)
		checkAfter(t, tc.org+": first instant", res.After, counters(meter.MonthExports, 1))
		checkUsage(t, s, tc.org, tc.last, counters(meter.MonthExports, 1))
	}
	// The month is UTC's: 2027-01-31 20:00 at UTC-5 is February already.
	res := apply(t, s, op("dec-jan", time.Date(2027, 1, 31, 20, 0, 0, 0, time.FixedZone("UTC-5", -5*3600))))
	checkPassed(t, "Jan 31 20:00 UTC-5", res)
	checkUsage(t, s, "dec-jan", time.Date(2027, 2, 1, 1, 0, 0, 0, time.UTC), counters(meter.MonthExports, 1))
	checkUsage(t, s, "dec-jan", time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC), counters(meter.MonthExports, 1))
	// Hourly and monthly counters both roll at the new year.
	hour := meter.Op{Org: "calls", Now: time.Date(2026, 12, 31, 23, 30, 0, 0, time.UTC), Stages: []meter.Stage{call(nil, nil)}}
	apply(t, s, hour)
	apply(t, s, hour)
	hour.Now = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	res = apply(t, s, hour)
	checkAfter(t, "call at 2027-01-01T00:00", res.After, counters(meter.MonthCalls, 1, meter.HourCalls, 1))
}

func testNullLimits(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	var stage meter.Stage
	for _, m := range meter.Meters {
		stage = append(stage, meter.Step{Meter: m, N: 1 << 40})
	}
	stage[1].Force = true
	stage[2].Shorten = true
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{stage}}
	for i := int64(1); i <= 3; i++ {
		res := apply(t, s, op)
		checkPassed(t, "no caps", res)
		var want meter.Counters
		for _, m := range meter.Meters {
			want[m] = i << 40
		}
		checkAfter(t, "no caps", res.After, want)
		if res.Granted != 1<<40 {
			t.Errorf("no caps: Granted = %d, want %d", res.Granted, int64(1<<40))
		}
	}
}

func testIndependentOrgs(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := func(org string) meter.Op {
		return meter.Op{Org: org, Now: t0, Stages: []meter.Stage{call(lim(2), nil)}, Read: &meter.Read{Lesson: lesson(3)}}
	}
	apply(t, s, op("a"))
	apply(t, s, op("a"))
	checkRefused(t, "org a, call 3", apply(t, s, op("a")), meter.MonthCalls)
	res := apply(t, s, op("b"))
	checkPassed(t, "org b, call 1", res)
	checkAfter(t, "org b, call 1", res.After, counters(meter.MonthCalls, 1, meter.HourCalls, 1))
	if res.LessonsRead != 1 {
		t.Errorf("org b: LessonsRead = %d, want 1", res.LessonsRead)
	}
	checkUsage(t, s, "a", t0, counters(meter.MonthCalls, 2, meter.HourCalls, 2))
	checkUsage(t, s, "c", t0, meter.Counters{})
	// Org ids are compared exactly.
	checkUsage(t, s, "A", t0, meter.Counters{})
}

// lesson is the id of the suite's lesson i: class i+1 of one subject.
func lesson(i int) string { return fmt.Sprintf("high/algebra/%d", i+1) }

// read is a lesson read of lesson(i) with no caps, by an org granted
// none (the alarm never trips).
func read(org string, now time.Time, i int) meter.Op {
	return meter.Op{Org: org, Now: now, Stages: []meter.Stage{call(nil, nil), {{Meter: meter.HourLessonReads, N: 1}}},
		Read: &meter.Read{Lesson: lesson(i)}}
}

func checkRead(t *testing.T, s meter.Store, op meter.Op, want int) {
	t.Helper()
	res := apply(t, s, op)
	checkPassed(t, "read "+op.Read.Lesson, res)
	if res.LessonsRead != want {
		t.Errorf("read %s at %s: LessonsRead = %d, want %d", op.Read.Lesson, op.Now.Format(time.RFC3339), res.LessonsRead, want)
	}
}

func checkDay(t *testing.T, s meter.Store, org string, now time.Time, want int) {
	t.Helper()
	if got := usage(t, s, org, now).LessonsRead; got != want {
		t.Errorf("Usage(%s at %s): lessons read = %d, want %d", org, now.Format(time.RFC3339), got, want)
	}
}

func testLessonsRead(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	long := strings.Repeat("x", 256)
	for i, tc := range []struct {
		lesson string
		want   int
	}{
		{lesson(0), 1}, {lesson(7), 2}, {lesson(8), 3}, {lesson(1000), 4}, {lesson(7), 4}, {lesson(0), 4},
		{lesson(1000), 4}, {lesson(9), 5}, {long, 6}, {"HIGH/algebra/1", 7},
	} {
		op := read("acme", t0.Add(time.Duration(i)*time.Minute), 0)
		op.Read.Lesson = tc.lesson
		checkRead(t, s, op, tc.want)
	}
	checkDay(t, s, "acme", t0, 7)
	checkDay(t, s, "other", t0, 0)
	// An op without a Read reports 0 and records nothing.
	res := apply(t, s, meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}})
	if res.LessonsRead != 0 {
		t.Errorf("op without Read: LessonsRead = %d, want 0", res.LessonsRead)
	}
	checkDay(t, s, "acme", t0, 7)
	// An op with no stages passes and reads.
	checkRead(t, s, meter.Op{Org: "acme", Now: t0, Read: &meter.Read{Lesson: lesson(11)}}, 8)
}

func testLessonsReadNewDay(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	last := time.Date(2026, 11, 22, 23, 59, 59, 999999999, time.UTC)
	checkRead(t, s, read("acme", last, 5), 1)
	checkRead(t, s, read("acme", last, 6), 2)
	next := last.Add(time.Nanosecond)
	checkRead(t, s, read("acme", next, 5), 1)
	checkDay(t, s, "acme", last, 2)
	checkDay(t, s, "acme", next, 1)
	// The day is UTC's: 20:00 on the 23rd at UTC-5 is the 24th.
	local := time.Date(2026, 11, 23, 20, 0, 0, 0, time.FixedZone("UTC-5", -5*3600))
	checkRead(t, s, read("acme", local, 5), 1)
	checkDay(t, s, "acme", next, 1)
}

// The day's record is one per org and day, by lesson id: origins serving
// different corpus versions (whose granted lessons differ) add to the same
// record, and a lesson counts once whichever of them reads it (issue #14:
// a rolling reload used to restart the record).
func testLessonsReadAnyCorpus(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := func(i, granted int) meter.Op {
		o := read("acme", t0, i)
		o.Read.Granted = granted
		return o
	}
	checkRead(t, s, op(1, 3000), 1)
	checkRead(t, s, op(2, 3010), 2)
	checkRead(t, s, op(1, 3010), 2)
	checkRead(t, s, op(3, 3000), 3)
	checkRead(t, s, op(2, 3000), 3)
	checkDay(t, s, "acme", t0, 3)
}

func testLessonsReadRefused(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := func(i int) meter.Op {
		return meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{
			call(nil, nil),
			{{Meter: meter.HourLessonReads, N: 1, Limit: lim(2)}},
		}, Read: &meter.Read{Lesson: lesson(i), Granted: 5}}
	}
	checkRead(t, s, op(1), 1)
	res := apply(t, s, op(2))
	checkPassed(t, "read 2 of 5 granted", res)
	if res.LessonsRead != 2 || res.Tripped {
		t.Errorf("read 2 of 5 granted: LessonsRead %d, Tripped %v; want 2, false (40%% is not more than 40%%)", res.LessonsRead, res.Tripped)
	}
	// Over the hourly cap: not recorded, so it trips nothing either.
	res = apply(t, s, op(3))
	checkRefused(t, "read over the hourly cap", res, meter.HourLessonReads)
	if res.LessonsRead != 2 || res.Tripped {
		t.Errorf("refused read: LessonsRead %d, Tripped %v; want 2 (the day's count, read not recorded), false", res.LessonsRead, res.Tripped)
	}
	u := usage(t, s, "acme", t0)
	if u.LessonsRead != 2 || u.Alarm != nil {
		t.Errorf("after a refused read: lessons read %d, alarm %+v; want 2, none", u.LessonsRead, u.Alarm)
	}
	// The next hour admits lesson 3, which was not recorded before.
	next := op(3)
	next.Now = t0.Add(time.Hour)
	checkRead(t, s, next, 3)
}

func testUsageMatchesAfter(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	ops := []meter.Op{
		read("acme", t0, 4),
		{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil), {{Meter: meter.HourMints, N: 7}}, {{Meter: meter.MonthDownloads, N: 7}}}},
		{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil), {{Meter: meter.MonthExports, N: 1}, {Meter: meter.MonthDownloads, N: 30}}}},
		{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil), {{Meter: meter.MonthTestprepItems, N: 25, Limit: lim(20), Shorten: true}}}},
		read("acme", t0, 9),
	}
	var last meter.Result
	for _, op := range ops {
		last = apply(t, s, op)
	}
	u := usage(t, s, "acme", t0)
	checkAfter(t, "Usage", u.Counters, last.After)
	if n := u.LessonsRead; n != last.LessonsRead || n != 2 {
		t.Errorf("Usage: lessons read = %d, want %d (last LessonsRead) = 2", n, last.LessonsRead)
	}
	want := counters(meter.MonthCalls, 5, meter.HourCalls, 5, meter.HourLessonReads, 2, meter.HourMints, 7,
		meter.MonthDownloads, 37, meter.MonthExports, 1, meter.MonthTestprepItems, 20)
	checkAfter(t, "last op", last.After, want)
	// Another hour of the same month: the month's counters, no hour's.
	checkUsage(t, s, "acme", t0.Add(time.Hour), counters(meter.MonthCalls, 5, meter.MonthDownloads, 37, meter.MonthExports, 1, meter.MonthTestprepItems, 20))
}

func testInvalidOps(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	good := meter.Stage{{Meter: meter.MonthCalls, N: 1}}
	for _, tc := range []struct {
		name string
		op   meter.Op
	}{
		{"empty org", meter.Op{Now: t0, Stages: []meter.Stage{good}}},
		{"unknown meter", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{good, {{Meter: meter.Meter(len(meter.Meters)), N: 1}}}}},
		{"negative N", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{good, {{Meter: meter.MonthDownloads, N: -1}}}}},
		{"empty lesson id", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{good}, Read: &meter.Read{Granted: 10}}},
		{"lesson id of 257 bytes", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{good}, Read: &meter.Read{Lesson: strings.Repeat("x", 257)}}},
		{"negative granted", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{good}, Read: &meter.Read{Lesson: lesson(1), Granted: -1}}},
	} {
		if _, err := s.Apply(t.Context(), tc.op); err == nil {
			t.Errorf("Apply(%s): no error", tc.name)
		}
	}
	for name, op := range invalidLedgerOps() {
		if _, err := s.Apply(t.Context(), op); err == nil {
			t.Errorf("Apply(%s): no error", name)
		}
	}
	if rows := ledger(t, s, "acme", 10); len(rows) != 0 {
		t.Errorf("invalid ops wrote %d ledger rows", len(rows))
	}
	// A done context applies nothing.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Apply(ctx, meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{good}}); err == nil {
		t.Errorf("Apply with a cancelled context: no error")
	}
	checkUsage(t, s, "acme", t0, meter.Counters{})
	// The store still works.
	checkAfter(t, "valid op", apply(t, s, meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{good}}).After, counters(meter.MonthCalls, 1))
}

// Clients and ops per client of the concurrency tests.
const (
	clients      = 64
	opsPerClient = 8
)

// 64 clients race for a hard cap: exactly the cap is admitted, and the
// stage before the capped one is billed for every op.
func testConcurrentHardCap(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	const limit = 100
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{
		call(nil, nil),
		{{Meter: meter.HourMints, N: 1}, {Meter: meter.MonthDownloads, N: 1, Limit: lim(limit)}},
	}}
	admitted, maxAfter := hammer(t, []meter.Store{s}, op)
	if admitted != limit {
		t.Errorf("admitted %d of %d ops at a cap of %d, want exactly %d", admitted, clients*opsPerClient, limit, limit)
	}
	if maxAfter != limit {
		t.Errorf("largest After downloads = %d, want %d", maxAfter, limit)
	}
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, clients*opsPerClient, meter.HourCalls, clients*opsPerClient,
		meter.HourMints, limit, meter.MonthDownloads, limit))
}

// hammer applies op from 64 clients, opsPerClient times each, spread over
// stores, and returns how many passed and the largest After of the
// downloads meter.
func hammer(t *testing.T, stores []meter.Store, op meter.Op) (admitted, maxAfter int64) {
	t.Helper()
	var passed, most atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		s := stores[c%len(stores)]
		wg.Go(func() {
			for range opsPerClient {
				res, err := s.Apply(t.Context(), op)
				if err != nil {
					errs <- err
					return
				}
				if res.Refused == nil {
					passed.Add(1)
				}
				for {
					m := most.Load()
					if res.After[meter.MonthDownloads] <= m || most.CompareAndSwap(m, res.After[meter.MonthDownloads]) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Apply: %v", err)
	}
	return passed.Load(), most.Load()
}

// 64 clients without caps: every increment counts, and each client's
// lesson read is recorded.
func testConcurrentNoLost(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			for i := range opsPerClient {
				op := read("acme", t0, c)
				op.Stages = append(op.Stages, meter.Stage{{Meter: meter.MonthDownloads, N: int64(i + 1)}})
				if _, err := s.Apply(t.Context(), op); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Apply: %v", err)
	}
	n := clients * opsPerClient
	u := usage(t, s, "acme", t0)
	got, read := u.Counters, u.LessonsRead
	want := counters(meter.MonthCalls, n, meter.HourCalls, n, meter.HourLessonReads, n, meter.MonthDownloads, clients*opsPerClient*(opsPerClient+1)/2)
	if got != want {
		t.Errorf("Usage after %d concurrent ops = %s, want %s", n, fmtCounters(got), fmtCounters(want))
	}
	if read != clients {
		t.Errorf("lessons read by %d clients = %d, want %d", clients, read, clients)
	}
}

// Ops whose context ends while they wait are either applied and
// answered, or answered with an error and not applied: the count equals
// the answers without error.
func testCancelled(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}}
	var ok, cancelled atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range opsPerClient {
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration((c+i)%8)*250*time.Microsecond)
				_, err := s.Apply(ctx, op)
				cancel()
				switch {
				case err == nil:
					ok.Add(1)
				case ctx.Err() != nil:
					cancelled.Add(1)
				default:
					t.Errorf("Apply: %v", err)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d ops applied, %d withdrawn", ok.Load(), cancelled.Load())
	n := int(ok.Load())
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, n, meter.HourCalls, n))
}

// Two stores over one database, as two origins would be, stay exact.
func testTwoStores(t *testing.T, open func(t *testing.T) meter.Store) {
	a, b := open(t), open(t)
	const limit = 50
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{
		call(nil, nil),
		{{Meter: meter.MonthDownloads, N: 1, Limit: lim(limit)}},
	}}
	admitted, maxAfter := hammer(t, []meter.Store{a, b}, op)
	if admitted != limit || maxAfter != limit {
		t.Errorf("two stores admitted %d (largest After %d) at a cap of %d, want exactly %d", admitted, maxAfter, limit, limit)
	}
	want := counters(meter.MonthCalls, clients*opsPerClient, meter.HourCalls, clients*opsPerClient, meter.MonthDownloads, limit)
	checkUsage(t, a, "acme", t0, want)
	checkUsage(t, b, "acme", t0, want)
}

func testReopen(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	apply(t, s, read("acme", t0, 12))
	apply(t, s, meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{{{Meter: meter.MonthExports, N: 1, Limit: lim(1)}}}})
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = open(t)
	want := counters(meter.MonthCalls, 1, meter.HourCalls, 1, meter.HourLessonReads, 1, meter.MonthExports, 1)
	checkUsage(t, s, "acme", t0, want)
	checkDay(t, s, "acme", t0, 1)
	checkRefused(t, "export after reopen", apply(t, s, meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{{{Meter: meter.MonthExports, N: 1, Limit: lim(1)}}}}), meter.MonthExports)
	// The reopened store finds lesson 12 in the day's record, and adds 13.
	checkRead(t, s, read("acme", t0, 12), 1)
	checkRead(t, s, read("acme", t0, 13), 2)
	checkRead(t, s, read("acme", t0, 12), 2)
}

// Close commits what is queued and refuses what comes after.
func testClose(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}}
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range clients {
		wg.Go(func() {
			if _, err := s.Apply(t.Context(), op); err == nil {
				ok.Add(1)
			}
		})
	}
	time.Sleep(time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	if _, err := s.Apply(t.Context(), op); err == nil {
		t.Errorf("Apply after Close: no error")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	s = open(t)
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, int(ok.Load()), meter.HourCalls, int(ok.Load())))
}
