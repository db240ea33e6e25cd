package metertest

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// LeaseStore is a Store that keeps leases (meter.LeaseStore).
type LeaseStore interface {
	meter.Store
	meter.LeaseStore
}

// RunLeases runs the lease suite (meter.LeaseStore's contract), as Run
// runs the meters'; open is as Run's.
func RunLeases(t *testing.T, kind Kind, open func(t *testing.T) LeaseStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) LeaseStore)
	}{
		{"GrantWithinLimits", testGrantWithinLimits},
		{"GrantCountsOutstanding", testGrantCountsOutstanding},
		{"ReservationRefusesApply", testReservationRefuses},
		{"ReservationOnForcedHourCap", testReservationForced},
		{"ReleasedByFinalReport", testReleasedByFinal},
		{"ReleasedBySettle", testReleasedBySettle},
		{"ReportsIdempotent", testReportsIdempotent},
		{"ReportBilledToLeasePeriods", testReportLeasePeriods},
		{"LateReportClamped", testLateReportClamped},
		{"LateReportGrantsLimits", testLateReportGrantsLimits},
		{"StaleEpoch", testStaleEpoch},
		{"AlarmRefusesGrant", testAlarmRefusesGrant},
		{"InvalidLeases", testInvalidLeases},
		{"LeasesReopen", testLeasesReopen},
		{"BumpAfterGrants", testBumpAfterGrants},
		{"PruneEnded", testPruneEnded},
		{"LeasesConcurrentExact", func(t *testing.T, open func(t *testing.T) LeaseStore) {
			s := open(t)
			testLeasesConcurrent(t, []LeaseStore{s, s})
		}},
	}
	if kind == Shared {
		tests = append(tests, struct {
			name string
			fn   func(t *testing.T, open func(t *testing.T) LeaseStore)
		}{"LeasesConcurrentExactTwoStores", func(t *testing.T, open func(t *testing.T) LeaseStore) {
			testLeasesConcurrent(t, []LeaseStore{open(t), open(t)})
		}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open)
		})
	}
}

// The org of the lease tests; a lease's validity and report grace.
const (
	leaseOrg = "lessee"
	validity = 5 * time.Second
	grace    = 2 * time.Second
)

// grantAt is the grant of lease id for leaseOrg at now, with the origin's
// Floor 8 and Share 4, at the epoch s reports.
func grantAt(t *testing.T, s LeaseStore, id string, now time.Time, want int64, month, hour *int64) meter.LeaseGrant {
	t.Helper()
	e, err := s.Epoch(t.Context(), leaseOrg)
	if err != nil {
		t.Fatal(err)
	}
	return meter.LeaseGrant{Org: leaseOrg, Now: now, ID: id, Epoch: e, Want: want, Floor: 8, Share: 4,
		MonthLimit: month, HourLimit: hour, Expires: now.Add(validity), Settle: now.Add(validity + grace),
		RevokeURL: "http://edge.test/internal/revoke"}
}

func grant(t *testing.T, s LeaseStore, g meter.LeaseGrant) meter.Granted {
	t.Helper()
	got, err := s.GrantLease(t.Context(), g)
	if err != nil {
		t.Fatalf("GrantLease(%s, want %d): %v", g.ID, g.Want, err)
	}
	return got
}

func checkCalls(t *testing.T, what string, got meter.Granted, want int64) {
	t.Helper()
	if got.Calls != want || got.Suspended || got.Stale {
		t.Errorf("%s: Calls %d, Suspended %v, Stale %v; want %d, false, false", what, got.Calls, got.Suspended, got.Stale, want)
	}
}

func report(t *testing.T, s LeaseStore, now time.Time, rs ...meter.Report) {
	t.Helper()
	if err := s.ReportLeases(t.Context(), now, rs); err != nil {
		t.Fatalf("ReportLeases(%v): %v", rs, err)
	}
}

func openLeases(t *testing.T, s LeaseStore, org string, now time.Time) []meter.Lease {
	t.Helper()
	ls, err := s.OpenLeases(t.Context(), org, now)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// monthCalls bills n calls against a monthly quota only.
func monthCalls(org string, now time.Time, n int64, quota *int64) meter.Op {
	return meter.Op{Org: org, Now: now, Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: n, Limit: quota}}}}
}

func checkBilled(t *testing.T, s LeaseStore, what string, now time.Time, month, hour int64) {
	t.Helper()
	u := usage(t, s, leaseOrg, now)
	if u.Get(meter.MonthCalls) != month || u.Get(meter.HourCalls) != hour {
		t.Errorf("%s: billed month %d, hour %d; want %d, %d", what, u.Get(meter.MonthCalls), u.Get(meter.HourCalls), month, hour)
	}
}

// A grant is min(Want, left/Share) under each limit, none below Floor
// (nothing recorded), any Want without limits; After is what is billed;
// the lease is recorded as granted and listed until its Settle.
func testGrantWithinLimits(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	apply(t, s, meter.Op{Org: leaseOrg, Now: t0, Stages: []meter.Stage{call(nil, nil)}})
	checkCalls(t, "no limits", grant(t, s, grantAt(t, s, "L1", t0, 700, nil, nil)), 700)
	checkCalls(t, "month 1701, 1 billed, 700 reserved: 1000/4", grant(t, s, grantAt(t, s, "L2", t0, 700, lim(1701), nil)), 250)
	g := grant(t, s, grantAt(t, s, "L3", t0, 100, nil, lim(1+700+250+40)))
	checkCalls(t, "hour 41 left: 40/4", g, 10)
	if g.After.Get(meter.MonthCalls) != 1 || g.After.Get(meter.HourCalls) != 1 {
		t.Errorf("After %s, want the 1 call billed in month and hour", fmtCounters(g.After))
	}
	checkCalls(t, "want under the share", grant(t, s, grantAt(t, s, "L4", t0, 9, lim(1e6), lim(1e6))), 9)
	checkCalls(t, "hour 35 left: 8 is the floor", grant(t, s, grantAt(t, s, "L5", t0, 100, nil, lim(1+700+250+10+9+35))), 8)
	// The hour has 1+700+250+10+9+8 spent or reserved of 1006: 28 left, 7 < Floor.
	checkCalls(t, "below the floor", grant(t, s, grantAt(t, s, "L6", t0, 100, nil, lim(1006))), 0)

	ls := openLeases(t, s, leaseOrg, t0)
	want := map[string]int64{"L1": 700, "L2": 250, "L3": 10, "L4": 9, "L5": 8}
	if len(ls) != len(want) {
		t.Fatalf("OpenLeases: %d leases, want %d: %+v", len(ls), len(want), ls)
	}
	for _, l := range ls {
		if l.Calls != want[l.ID] || l.Used != 0 || l.Closed || l.Org != leaseOrg || l.Month != "2026-11" || l.Hour != "2026-11-22T10" ||
			!l.Expires.Equal(t0.Add(validity)) || !l.Settle.Equal(t0.Add(validity+grace)) || l.RevokeURL != "http://edge.test/internal/revoke" {
			t.Errorf("OpenLeases: %+v, want %d calls granted at t0", l, want[l.ID])
		}
	}
	if ls := openLeases(t, s, leaseOrg, t0.Add(validity+grace)); len(ls) != 0 {
		t.Errorf("OpenLeases at Settle: %d leases, want none", len(ls))
	}
	g2 := grantAt(t, s, "M1", t0, 8, nil, nil)
	g2.Org = "other"
	checkCalls(t, "another org", grant(t, s, g2), 8)
	if ls := openLeases(t, s, "", t0); len(ls) != 6 {
		t.Errorf("OpenLeases of every org: %d leases, want 6", len(ls))
	}
}

// Leases reserve against each other: a grant counts the outstanding ones.
func testGrantCountsOutstanding(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	checkCalls(t, "first", grant(t, s, grantAt(t, s, "L1", t0, 1000, lim(1000), nil)), 250)
	checkCalls(t, "second: (1000-250)/4", grant(t, s, grantAt(t, s, "L2", t0, 1000, lim(1000), nil)), 187)
	report(t, s, t0, meter.Report{Lease: "L1", Used: 250, Final: true})
	// Billed 250, reserved 187: (1000-437)/4.
	checkCalls(t, "third", grant(t, s, grantAt(t, s, "L3", t0, 1000, lim(1000), nil)), 140)
}

// An op refused only by reservations is Reserved and bills nothing; one
// refused whatever the leases is not Reserved; steps without a limit
// ignore reservations.
func testReservationRefuses(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	quota := lim(20)
	checkPassed(t, "a call before any lease", apply(t, s, monthCalls(leaseOrg, t0, 1, quota)))
	g := grantAt(t, s, "L1", t0, 16, quota, nil)
	g.Share = 1
	checkCalls(t, "grant", grant(t, s, g), 16)
	for i := range 3 {
		checkPassed(t, fmt.Sprintf("call %d", i+2), apply(t, s, monthCalls(leaseOrg, t0, 1, quota)))
	}
	res := apply(t, s, monthCalls(leaseOrg, t0, 1, quota))
	checkRefused(t, "call 5 with 16 reserved", res, meter.MonthCalls)
	if !res.Reserved {
		t.Errorf("call 5: Reserved false, want true")
	}
	checkBilled(t, s, "after the reserved refusal", t0, 4, 0)
	if res := apply(t, s, monthCalls(leaseOrg, t0, 1, nil)); res.Refused != nil || res.Reserved {
		t.Errorf("a call without a limit: Refused %v, Reserved %v; want it passed", res.Refused, res.Reserved)
	}
	// Billed 5 of 20 with 16 reserved: 17 calls would not fit without
	// the lease either.
	res = apply(t, s, monthCalls(leaseOrg, t0, 16, quota))
	checkRefused(t, "16 calls", res, meter.MonthCalls)
	if res.Reserved {
		t.Errorf("16 calls over the quota anyway: Reserved true, want false")
	}
	// Other meters ignore leases.
	if res := apply(t, s, meter.Op{Org: leaseOrg, Now: t0, Stages: []meter.Stage{{{Meter: meter.HourLessonReads, N: 20, Limit: lim(20)}}}}); res.Refused != nil {
		t.Errorf("lesson reads under their cap: refused by %v", res.Refused)
	}
}

// A call refused by a reservation on the forced hourly cap bills nothing,
// not even its monthly stage: the origin applies it again once the
// leases are recalled, and bills it once.
func testReservationForced(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	perHour := lim(10)
	g := grantAt(t, s, "L1", t0, 8, nil, perHour)
	g.Share, g.Floor = 1, 1
	checkCalls(t, "grant", grant(t, s, g), 8)
	callOp := meter.Op{Org: leaseOrg, Now: t0, Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1, Limit: lim(100)}},
		{{Meter: meter.HourCalls, N: 1, Limit: perHour, Force: true}}}}
	for i := range 2 {
		checkPassed(t, fmt.Sprintf("call %d", i+1), apply(t, s, callOp))
	}
	res := apply(t, s, callOp)
	checkRefused(t, "call 3", res, meter.HourCalls)
	if !res.Reserved {
		t.Errorf("call 3: Reserved false, want true")
	}
	checkBilled(t, s, "after the reserved refusal", t0, 2, 2)
	report(t, s, t0, meter.Report{Lease: "L1", Used: 8, Final: true})
	res = apply(t, s, callOp)
	checkRefused(t, "call 3 over the cap after the lease's 8", res, meter.HourCalls)
	if res.Reserved {
		t.Errorf("a call over the hourly cap anyway: Reserved true, want false")
	}
	checkBilled(t, s, "a forced refusal bills", t0, 11, 11)
}

// A final report releases what its lease did not use.
func testReleasedByFinal(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	quota := lim(20)
	g := grantAt(t, s, "L1", t0, 20, quota, nil)
	g.Share = 1
	checkCalls(t, "grant", grant(t, s, g), 20)
	if res := apply(t, s, monthCalls(leaseOrg, t0, 1, quota)); !res.Reserved {
		t.Fatalf("a call with the quota reserved: Refused %v, Reserved %v; want Reserved", res.Refused, res.Reserved)
	}
	report(t, s, t0, meter.Report{Lease: "L1", Used: 5})
	checkBilled(t, s, "a report of 5", t0, 5, 5)
	if res := apply(t, s, monthCalls(leaseOrg, t0, 1, quota)); !res.Reserved {
		t.Errorf("a call with 15 still reserved: Reserved false, want true")
	}
	report(t, s, t0, meter.Report{Lease: "L1", Used: 7, Final: true})
	checkBilled(t, s, "a final report of 7", t0, 7, 7)
	if ls := openLeases(t, s, leaseOrg, t0); len(ls) != 0 {
		t.Errorf("OpenLeases after the final report: %+v, want none", ls)
	}
	checkPassed(t, "13 calls after the final report", apply(t, s, monthCalls(leaseOrg, t0, 13, quota)))
}

// A lease stops reserving when its Settle passes without a final report.
func testReleasedBySettle(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	quota := lim(20)
	g := grantAt(t, s, "L1", t0, 20, quota, nil)
	g.Share = 1
	checkCalls(t, "grant", grant(t, s, g), 20)
	before := g.Settle.Add(-time.Microsecond)
	if res := apply(t, s, monthCalls(leaseOrg, before, 1, quota)); !res.Reserved {
		t.Errorf("a call just before Settle: Reserved false, want true")
	}
	checkPassed(t, "a call at Settle", apply(t, s, monthCalls(leaseOrg, g.Settle, 1, quota)))
	checkPassed(t, "19 more later", apply(t, s, monthCalls(leaseOrg, g.Settle.Add(time.Minute), 19, quota)))
}

// Reports are cumulative: a duplicate, a lower or reordered one changes
// nothing; Used is at most Calls; a final closes; unknown ids are
// ignored.
func testReportsIdempotent(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	checkCalls(t, "grant", grant(t, s, grantAt(t, s, "L1", t0, 16, nil, nil)), 16)
	report(t, s, t0, meter.Report{Lease: "L1", Used: 5})
	report(t, s, t0, meter.Report{Lease: "L1", Used: 5})
	report(t, s, t0, meter.Report{Lease: "L1", Used: 3}, meter.Report{Lease: "nobody", Used: 9})
	checkBilled(t, s, "5, 5, 3", t0, 5, 5)
	report(t, s, t0, meter.Report{Lease: "L1", Used: 9}, meter.Report{Lease: "L1", Used: 7})
	checkBilled(t, s, "9 then 7", t0, 9, 9)
	report(t, s, t0, meter.Report{Lease: "L1", Used: 40})
	checkBilled(t, s, "40 of 16", t0, 16, 16)
	ls := openLeases(t, s, leaseOrg, t0)
	if len(ls) != 1 || ls[0].Used != 16 || ls[0].Closed {
		t.Fatalf("OpenLeases: %+v, want L1 open with 16 used", ls)
	}
	report(t, s, t0, meter.Report{Lease: "L1", Used: 2, Final: true})
	checkBilled(t, s, "a lower final", t0, 16, 16)
	if ls := openLeases(t, s, leaseOrg, t0); len(ls) != 0 {
		t.Errorf("OpenLeases after a final: %+v, want none", ls)
	}
	report(t, s, t0, meter.Report{Lease: "L1", Used: 16, Final: true})
	checkBilled(t, s, "the final again", t0, 16, 16)
}

// Usage reported in a later hour (and month) is billed to the lease's own.
func testReportLeasePeriods(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	end := time.Date(2026, 11, 30, 23, 59, 58, 0, time.UTC)
	g := grantAt(t, s, "L1", end, 16, lim(1000), lim(1000))
	g.Expires, g.Settle = end.Add(time.Second), end.Add(time.Hour) // a long grace, to report in the next hour reserving
	checkCalls(t, "grant", grant(t, s, g), 16)
	next := end.Add(30 * time.Minute)
	report(t, s, next, meter.Report{Lease: "L1", Used: 6})
	report(t, s, end.Add(2*time.Hour), meter.Report{Lease: "L1", Used: 10, Final: true})
	checkBilled(t, s, "the grant's month and hour", end, 10, 10)
	checkBilled(t, s, "the month and hour of the reports", next, 0, 0)
}

// A report after Settle bills no more than the limits of the grant leave.
func testLateReportClamped(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	quota := lim(20)
	g := grantAt(t, s, "L1", t0, 16, quota, nil)
	g.Share = 1
	checkCalls(t, "grant", grant(t, s, g), 16)
	report(t, s, t0, meter.Report{Lease: "L1", Used: 2})
	late := g.Settle.Add(time.Second)
	checkPassed(t, "12 calls after Settle", apply(t, s, monthCalls(leaseOrg, late, 12, quota)))
	report(t, s, late, meter.Report{Lease: "L1", Used: 16})
	checkBilled(t, s, "16 reported late: 14 more, 6 left under the quota", late, 20, 8)
	report(t, s, late, meter.Report{Lease: "L1", Used: 16, Final: true})
	checkBilled(t, s, "the same again", late, 20, 8)
	if res := apply(t, s, monthCalls(leaseOrg, late, 1, quota)); res.Refused == nil || res.Reserved {
		t.Errorf("a call at the quota: Refused %v, Reserved %v; want refused, not Reserved", res.Refused, res.Reserved)
	}
}

// A late report is clamped by the limits of its grant, not today's: the
// quota raised since does not let it bill more.
func testLateReportGrantsLimits(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	g := grantAt(t, s, "L1", t0, 8, lim(10), nil)
	g.Share = 1
	checkCalls(t, "grant", grant(t, s, g), 8)
	late := g.Settle.Add(time.Second)
	checkPassed(t, "5 calls under a raised quota", apply(t, s, monthCalls(leaseOrg, late, 5, lim(100))))
	report(t, s, late, meter.Report{Lease: "L1", Used: 8, Final: true})
	checkBilled(t, s, "8 reported late under a grant's quota of 10", late, 10, 5)
}

// A grant whose epoch moved, of its org or of every org, is refused and
// records nothing.
func testStaleEpoch(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	ctx := t.Context()
	g := grantAt(t, s, "L1", t0, 16, nil, nil)
	if err := s.BumpEpoch(ctx, leaseOrg); err != nil {
		t.Fatal(err)
	}
	if got := grant(t, s, g); !got.Stale || got.Calls != 0 {
		t.Errorf("a grant after its org's bump: Stale %v, Calls %d; want true, 0", got.Stale, got.Calls)
	}
	other, err := s.Epoch(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	g = grantAt(t, s, "L2", t0, 16, nil, nil)
	if g.Epoch != other+1 {
		t.Errorf("Epoch after one bump of %s: %d, of another org %d", leaseOrg, g.Epoch, other)
	}
	if err := s.BumpEpoch(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if got := grant(t, s, g); !got.Stale || got.Calls != 0 {
		t.Errorf("a grant after the global bump: Stale %v, Calls %d; want true, 0", got.Stale, got.Calls)
	}
	if o, err := s.Epoch(ctx, "other"); err != nil || o != other+1 {
		t.Errorf("another org's epoch after the global bump: %d, %v; want %d", o, err, other+1)
	}
	if ls := openLeases(t, s, "", t0); len(ls) != 0 {
		t.Errorf("OpenLeases after stale grants: %+v, want none", ls)
	}
	checkCalls(t, "a grant at the new epoch", grant(t, s, grantAt(t, s, "L3", t0, 16, nil, nil)), 16)
}

// No lease while the enumeration alarm is in force.
func testAlarmRefusesGrant(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	tripAt(t, s, leaseOrg, t0)
	if got := grant(t, s, grantAt(t, s, "L1", t0, 16, nil, nil)); !got.Suspended || got.Calls != 0 {
		t.Errorf("a grant under the alarm: Suspended %v, Calls %d; want true, 0", got.Suspended, got.Calls)
	}
	if ls := openLeases(t, s, leaseOrg, t0); len(ls) != 0 {
		t.Errorf("OpenLeases: %+v, want none", ls)
	}
	if _, err := s.Reinstate(t.Context(), leaseOrg); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, "after reinstatement", grant(t, s, grantAt(t, s, "L2", t0, 16, nil, nil)), 16)
}

// A grant or report no store could record is an error and records
// nothing; so is a grant of an id already recorded.
func testInvalidLeases(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	ctx := t.Context()
	for name, mod := range map[string]func(*meter.LeaseGrant){
		"empty org":       func(g *meter.LeaseGrant) { g.Org = "" },
		"empty id":        func(g *meter.LeaseGrant) { g.ID = "" },
		"share 0":         func(g *meter.LeaseGrant) { g.Share = 0 },
		"negative want":   func(g *meter.LeaseGrant) { g.Want = -1 },
		"expired":         func(g *meter.LeaseGrant) { g.Expires = g.Now },
		"settle early":    func(g *meter.LeaseGrant) { g.Settle = g.Expires.Add(-time.Millisecond) },
		"revoke URL NUL":  func(g *meter.LeaseGrant) { g.RevokeURL = "http://x/\x00" },
		"id not UTF-8":    func(g *meter.LeaseGrant) { g.ID = "\xff" },
		"id over its max": func(g *meter.LeaseGrant) { g.ID = string(make([]byte, 200)) },
	} {
		g := grantAt(t, s, "L1", t0, 16, nil, nil)
		mod(&g)
		if got, err := s.GrantLease(ctx, g); err == nil {
			t.Errorf("grant with %s: %+v, want an error", name, got)
		}
	}
	if err := s.ReportLeases(ctx, t0, []meter.Report{{Lease: "L1", Used: -1}}); err == nil {
		t.Errorf("a negative report: no error")
	}
	if err := s.ReportLeases(ctx, t0, []meter.Report{{Lease: "", Used: 1}}); err == nil {
		t.Errorf("a report of no lease: no error")
	}
	checkCalls(t, "a valid grant", grant(t, s, grantAt(t, s, "L1", t0, 16, nil, nil)), 16)
	if got, err := s.GrantLease(ctx, grantAt(t, s, "L1", t0, 8, nil, nil)); err == nil {
		t.Errorf("a second grant of L1: %+v, want an error", got)
	}
	if ls := openLeases(t, s, leaseOrg, t0); len(ls) != 1 || ls[0].Calls != 16 {
		t.Errorf("OpenLeases: %+v, want L1 of 16 alone", ls)
	}
}

// Leases outlive the Store: reopened, it counts the reservation, takes
// the reports, and knows the ids.
func testLeasesReopen(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	quota := lim(16)
	checkPassed(t, "a call", apply(t, s, monthCalls(leaseOrg, t0, 1, quota)))
	g := grantAt(t, s, "L1", t0, 12, quota, nil)
	g.Share = 1
	checkCalls(t, "grant", grant(t, s, g), 12)
	s.Close()
	s = open(t)
	checkPassed(t, "3 calls", apply(t, s, monthCalls(leaseOrg, t0, 3, quota)))
	if res := apply(t, s, monthCalls(leaseOrg, t0, 1, quota)); !res.Reserved {
		t.Errorf("a call over the reservation after reopening: Reserved false, want true")
	}
	report(t, s, t0, meter.Report{Lease: "L1", Used: 4, Final: true})
	checkBilled(t, s, "after the final report", t0, 8, 4)
	checkPassed(t, "8 calls", apply(t, s, monthCalls(leaseOrg, t0, 8, quota)))
	if _, err := s.GrantLease(t.Context(), g); err == nil {
		t.Errorf("L1 granted again after reopening: want an error")
	}
}

// A bump concurrent with grants: once BumpEpoch returns, every grant at
// the old epoch either was refused (Stale) or is listed by OpenLeases (it
// committed before the bump), so revoking what OpenLeases lists misses
// none.
func testBumpAfterGrants(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	e, err := s.Epoch(t.Context(), leaseOrg)
	if err != nil {
		t.Fatal(err)
	}
	var granted sync.Map // id → true
	var n atomic.Int64
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := range 25 {
				g := meter.LeaseGrant{Org: leaseOrg, Now: t0, ID: fmt.Sprintf("B%d-%d", c, i), Epoch: e, Want: 8, Floor: 8, Share: 1,
					Expires: t0.Add(validity), Settle: t0.Add(validity + grace)}
				got, err := s.GrantLease(t.Context(), g)
				if err != nil {
					t.Error(err)
					return
				}
				if got.Calls > 0 {
					granted.Store(g.ID, true)
					n.Add(1)
				}
			}
		})
	}
	for n.Load() < 10 {
		runtime.Gosched()
	}
	if err := s.BumpEpoch(t.Context(), leaseOrg); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, l := range openLeases(t, s, leaseOrg, t0) {
		listed[l.ID] = true
	}
	wg.Wait()
	granted.Range(func(id, _ any) bool {
		if !listed[id.(string)] {
			t.Errorf("lease %s granted at the old epoch, not listed after the bump returned", id)
		}
		return true
	})
	t.Logf("%d granted, %d listed after the bump", n.Load(), len(listed))
}

// Many clients granting, using and reporting leases, and applying calls,
// against one small quota, on the given Stores (one database): billed
// never exceeds the quota, and is exactly the calls Apply billed plus the
// usage the leases reported.
func testLeasesConcurrent(t *testing.T, stores []LeaseStore) {
	const (
		quota   = 300
		clients = 12
		rounds  = 40
	)
	var applied, reported, ids atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		s := stores[c%len(stores)]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 19))
			for range rounds {
				if rng.IntN(2) == 0 {
					res, err := s.Apply(t.Context(), monthCalls(leaseOrg, t0, 1, lim(quota)))
					if err != nil {
						t.Error(err)
						return
					}
					if res.Refused == nil {
						applied.Add(1)
					}
					continue
				}
				e, err := s.Epoch(t.Context(), leaseOrg)
				if err != nil {
					t.Error(err)
					return
				}
				id := fmt.Sprintf("C%d", ids.Add(1))
				g := meter.LeaseGrant{Org: leaseOrg, Now: t0, ID: id, Epoch: e, Want: 32, Floor: 1, Share: 4,
					MonthLimit: lim(quota), Expires: t0.Add(validity), Settle: t0.Add(validity + grace)}
				got, err := s.GrantLease(t.Context(), g)
				if err != nil {
					t.Error(err)
					return
				}
				if got.Calls == 0 {
					continue
				}
				// Use part or all of it and report it in steps (a
				// duplicate among them), the last final and, for some,
				// over the block: billed is min(report, Calls).
				used := rng.Int64N(got.Calls + 1)
				final := used + int64(rng.IntN(3))
				for _, r := range []meter.Report{{Lease: id, Used: used / 2}, {Lease: id, Used: used / 2},
					{Lease: id, Used: final, Final: true}} {
					if err := s.ReportLeases(t.Context(), t0, []meter.Report{r}); err != nil {
						t.Error(err)
						return
					}
				}
				reported.Add(min(final, got.Calls))
			}
		})
	}
	wg.Wait()
	u := usage(t, stores[0], leaseOrg, t0)
	billed := u.Get(meter.MonthCalls)
	if billed > quota {
		t.Errorf("billed %d calls, over the quota of %d", billed, quota)
	}
	if want := applied.Load() + reported.Load(); billed != want {
		t.Errorf("billed %d calls, want %d applied + %d reported = %d", billed, applied.Load(), reported.Load(), want)
	}
	if ls := openLeases(t, stores[0], leaseOrg, t0); len(ls) != 0 {
		t.Errorf("%d leases open after every final report, want none", len(ls))
	}
	t.Logf("billed %d of %d: %d applied, %d reported by %d leases asked for", billed, quota, applied.Load(), reported.Load(), ids.Load())
}

// PruneLeases deletes the leases that ended before its time (closed and
// past their validity, or past their Settle), and only those; a report
// for a deleted one is ignored.
func testPruneEnded(t *testing.T, open func(t *testing.T) LeaseStore) {
	s := open(t)
	prune := func(before time.Time, want int64) {
		t.Helper()
		n, err := s.PruneLeases(t.Context(), before)
		if err != nil || n != want {
			t.Errorf("PruneLeases(%v): %d, %v; want %d", before.Sub(t0), n, err, want)
		}
	}
	checkCalls(t, "L1", grant(t, s, grantAt(t, s, "L1", t0, 16, nil, nil)), 16)
	report(t, s, t0, meter.Report{Lease: "L1", Used: 3, Final: true})           // closed; valid until t0+5s
	checkCalls(t, "L2", grant(t, s, grantAt(t, s, "L2", t0, 16, nil, nil)), 16) // never reported: settles at t0+7s
	later := t0.Add(time.Hour)
	checkCalls(t, "L3", grant(t, s, grantAt(t, s, "L3", later, 16, nil, nil)), 16)

	prune(t0.Add(validity), 0) // L1's validity ends at that instant, not before
	prune(t0.Add(validity+grace), 1)
	prune(t0.Add(validity+grace+time.Microsecond), 1)
	prune(t0.Add(validity+grace+time.Second), 0)
	if ls := openLeases(t, s, leaseOrg, later); len(ls) != 1 || ls[0].ID != "L3" {
		t.Errorf("OpenLeases after the prune: %+v, want L3 alone", ls)
	}
	report(t, s, t0.Add(validity+grace+time.Second), meter.Report{Lease: "L2", Used: 10})
	checkBilled(t, s, "a report for a pruned lease", t0, 3, 3)
}
