package metertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// The enumeration alarm (spec: States and transitions): the first lesson
// read of a UTC day that leaves the org's distinct lessons read that day
// above 40% of its granted lessons is served and trips the alarm in its
// own transaction; every later op of the org, in commit order and from
// any Store on the database, is refused with nothing billed or recorded
// until Reinstate.

// Batcher is a Store that can apply several ops in one transaction, as
// one batch of its committer would. Each backend's tests provide it, for
// AlarmSameBatch; it is used only while no other op is in flight.
type Batcher interface {
	ApplyBatch(ctx context.Context, ops []meter.Op) ([]meter.Result, error)
}

// alarmRead is a lesson read of lesson(i) by an org granted granted
// lessons, with no caps.
func alarmRead(org string, now time.Time, i, granted int) meter.Op {
	op := read(org, now, i)
	op.Read.Granted = granted
	return op
}

// day is t0's UTC day, as AlarmState.Day holds it.
const day = "2026-11-22"

// tripAt reads lessons 0 to 4 of 10 granted for org, the fifth at at,
// checking that only the fifth trips the alarm (5 of 10 is more than 40%).
func tripAt(t *testing.T, s meter.Store, org string, at time.Time) meter.Result {
	t.Helper()
	for i := range 4 {
		res := apply(t, s, alarmRead(org, t0, i, 10))
		checkPassed(t, fmt.Sprintf("read %d of 10", i+1), res)
		if res.Tripped || res.Suspended {
			t.Fatalf("read %d of 10: Tripped %v, Suspended %v; want neither", i+1, res.Tripped, res.Suspended)
		}
	}
	res := apply(t, s, alarmRead(org, at, 4, 10))
	checkPassed(t, "read 5 of 10", res)
	if !res.Tripped || res.Suspended || res.LessonsRead != 5 {
		t.Fatalf("read 5 of 10: Tripped %v, Suspended %v, LessonsRead %d; want true, false, 5", res.Tripped, res.Suspended, res.LessonsRead)
	}
	return res
}

// checkAlarm checks the alarm in force for org, or none when want is nil.
func checkAlarm(t *testing.T, s meter.Store, org string, now time.Time, want *meter.AlarmState) {
	t.Helper()
	got := usage(t, s, org, now).Alarm
	switch {
	case want == nil && got != nil:
		t.Errorf("Usage(%s).Alarm = %+v, want none in force", org, *got)
	case want != nil && got == nil:
		t.Errorf("Usage(%s).Alarm = none, want %+v", org, *want)
	case want != nil && (!got.TrippedAt.Equal(want.TrippedAt) || got.Day != want.Day || got.LessonsRead != want.LessonsRead || got.Granted != want.Granted):
		t.Errorf("Usage(%s).Alarm = %+v, want %+v", org, *got, *want)
	}
}

// checkSuspended checks that op is refused by the alarm with nothing
// billed or recorded.
func checkSuspended(t *testing.T, s meter.Store, what string, op meter.Op) {
	t.Helper()
	before := usage(t, s, op.Org, op.Now)
	res := apply(t, s, op)
	if !res.Suspended || res.Refused != nil || res.Tripped {
		t.Errorf("%s: Suspended %v, Refused %v, Tripped %v; want true, nil, false", what, res.Suspended, res.Refused, res.Tripped)
	}
	checkAfter(t, what, res.After, before.Counters)
	after := usage(t, s, op.Org, op.Now)
	if after.Counters != before.Counters || after.LessonsRead != before.LessonsRead {
		t.Errorf("%s billed or recorded: Usage %s, %d lessons read; before %s, %d", what,
			fmtCounters(after.Counters), after.LessonsRead, fmtCounters(before.Counters), before.LessonsRead)
	}
	if op.Read != nil && res.LessonsRead != before.LessonsRead {
		t.Errorf("%s: LessonsRead = %d, want the day's %d", what, res.LessonsRead, before.LessonsRead)
	}
}

func testAlarmTrips(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	// Reading a lesson again adds nothing: 4 distinct of 10 is 40%.
	for i := range 4 {
		apply(t, s, alarmRead("acme", t0, i, 10))
	}
	for i := range 4 {
		if res := apply(t, s, alarmRead("acme", t0, i, 10)); res.Tripped || res.LessonsRead != 4 {
			t.Errorf("read %d again: Tripped %v, LessonsRead %d; want false, 4", i+1, res.Tripped, res.LessonsRead)
		}
	}
	checkAlarm(t, s, "acme", t0, nil)
	at := t0.Add(90 * time.Second)
	res := apply(t, s, alarmRead("acme", at, 4, 10))
	checkPassed(t, "read 5 of 10", res)
	if !res.Tripped || res.Suspended || res.LessonsRead != 5 {
		t.Fatalf("read 5 of 10: Tripped %v, Suspended %v, LessonsRead %d; want true, false, 5", res.Tripped, res.Suspended, res.LessonsRead)
	}
	checkAfter(t, "read 5 of 10", res.After, counters(meter.MonthCalls, 9, meter.HourCalls, 9, meter.HourLessonReads, 9))
	want := &meter.AlarmState{TrippedAt: at, Day: day, LessonsRead: 5, Granted: 10}
	checkAlarm(t, s, "acme", t0, want)
	// In force on any later day until lifted, and after a restart.
	checkAlarm(t, s, "acme", t0.AddDate(0, 1, 0), want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	checkAlarm(t, s, "acme", t0, want)
	checkSuspended(t, s, "a call after a restart", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}})
}

func testAlarmRefuses(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	tripAt(t, s, "acme", t0)
	for _, tc := range []struct {
		what string
		op   meter.Op
	}{
		{"a call", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}}},
		{"a read of a lesson read before", alarmRead("acme", t0, 0, 10)},
		{"a read of a new lesson", alarmRead("acme", t0, 7, 10)},
		{"a read granted more lessons", alarmRead("acme", t0, 8, 1000)},
		{"a mint", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil), {{Meter: meter.HourMints, N: 3}}, {{Meter: meter.MonthDownloads, N: 3}}}}},
		{"an export", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil), {{Meter: meter.MonthExports, N: 1}, {Meter: meter.MonthDownloads, N: 1}}}}},
		{"a test-prep page", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil), {{Meter: meter.HourLessonReads, N: 1}, {Meter: meter.MonthTestprepItems, N: 10, Shorten: true}}}}},
		{"a call over its cap", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(lim(0), lim(0))}}},
		{"an op with no stages", meter.Op{Org: "acme", Now: t0}},
		{"a read the next day", alarmRead("acme", t0.AddDate(0, 0, 1), 0, 10)},
	} {
		checkSuspended(t, s, tc.what, tc.op)
	}
	checkDay(t, s, "acme", t0, 5)
	checkDay(t, s, "acme", t0.AddDate(0, 0, 1), 0)
}

func testAlarmSameBatch(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	b, ok := s.(Batcher)
	if !ok {
		t.Skip("the store applies no batch of the test's choosing (metertest.Batcher)")
	}
	ops := []meter.Op{alarmRead("acme", t0, 0, 10), alarmRead("acme", t0, 1, 10), alarmRead("acme", t0, 2, 10),
		alarmRead("acme", t0, 3, 10), alarmRead("acme", t0, 4, 10), // the crossing read
		alarmRead("acme", t0, 5, 10), alarmRead("acme", t0, 0, 10),
		{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}},
		alarmRead("other", t0, 0, 100), // another org's op is its own
	}
	res, err := b.ApplyBatch(t.Context(), ops)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		tripped, suspended := i == 4, i > 4 && i < 8
		if r.Tripped != tripped || r.Suspended != suspended || r.Refused != nil {
			t.Errorf("op %d of the batch: Tripped %v, Suspended %v, Refused %v; want %v, %v, nil", i, r.Tripped, r.Suspended, r.Refused, tripped, suspended)
		}
	}
	if n := res[len(res)-1].LessonsRead; n != 1 {
		t.Errorf("the other org's read: LessonsRead %d, want 1", n)
	}
	u := usage(t, s, "acme", t0)
	if want := counters(meter.MonthCalls, 5, meter.HourCalls, 5, meter.HourLessonReads, 5); u.Counters != want || u.LessonsRead != 5 {
		t.Errorf("after the batch: Usage %s, %d lessons read; want %s, 5", fmtCounters(u.Counters), u.LessonsRead, fmtCounters(want))
	}
	checkAlarm(t, s, "acme", t0, &meter.AlarmState{TrippedAt: t0, Day: day, LessonsRead: 5, Granted: 10})
	checkAlarm(t, s, "other", t0, nil)
}

// The concurrency tests' numbers: issue #14's reproduction, 32 clients
// and 335 granted lessons, which trips at the 135th (134 is exactly 40%).
const (
	alarmClients = 32
	alarmGranted = 335
	alarmServed  = 135
)

func testAlarmConcurrent(t *testing.T, open func(t *testing.T) meter.Store) {
	alarmHammer(t, []meter.Store{open(t)})
}

func testAlarmConcurrentTwoStores(t *testing.T, open func(t *testing.T) meter.Store) {
	alarmHammer(t, []meter.Store{open(t), open(t)})
}

// alarmHammer reads every granted lesson once, from 32 clients spread
// over stores: exactly the reads up to the crossing one are served and
// recorded, and exactly one trips the alarm.
func alarmHammer(t *testing.T, stores []meter.Store) {
	var served, tripped, suspended atomic.Int64
	var most atomic.Int64
	var wg sync.WaitGroup
	for c := range alarmClients {
		s := stores[c%len(stores)]
		wg.Go(func() {
			for i := c; i < alarmGranted; i += alarmClients {
				res, err := s.Apply(t.Context(), alarmRead("acme", t0, i, alarmGranted))
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				switch {
				case res.Suspended:
					suspended.Add(1)
				case res.Refused == nil:
					served.Add(1)
					if res.Tripped {
						tripped.Add(1)
					}
					for {
						m := most.Load()
						if int64(res.LessonsRead) <= m || most.CompareAndSwap(m, int64(res.LessonsRead)) {
							break
						}
					}
				default:
					t.Errorf("read %d refused by %+v", i, *res.Refused)
				}
			}
		})
	}
	wg.Wait()
	if served.Load() != alarmServed || tripped.Load() != 1 || suspended.Load() != alarmGranted-alarmServed {
		t.Errorf("%d reads of %d granted lessons from %d clients on %d stores: %d served, %d tripped, %d suspended; want %d, 1, %d",
			alarmGranted, alarmGranted, alarmClients, len(stores), served.Load(), tripped.Load(), suspended.Load(), alarmServed, alarmGranted-alarmServed)
	}
	if most.Load() != alarmServed {
		t.Errorf("largest LessonsRead of a served read = %d, want %d", most.Load(), alarmServed)
	}
	for _, s := range stores {
		u := usage(t, s, "acme", t0)
		if want := counters(meter.MonthCalls, alarmServed, meter.HourCalls, alarmServed, meter.HourLessonReads, alarmServed); u.Counters != want || u.LessonsRead != alarmServed {
			t.Errorf("Usage %s, %d lessons read; want %s, %d", fmtCounters(u.Counters), u.LessonsRead, fmtCounters(want), alarmServed)
		}
		if u.Alarm == nil || u.Alarm.LessonsRead != alarmServed || u.Alarm.Granted != alarmGranted {
			t.Errorf("Usage.Alarm = %+v, want one tripped at %d of %d", u.Alarm, alarmServed, alarmGranted)
		}
	}
}

// The threshold is each read's own: reads counted by origins whose
// corpora grant different numbers of lessons still trip the alarm once
// the day's count is over 40% of the reading one's, even when it was
// over the other's threshold already (a "crossing" of one origin's
// threshold would never be seen).
func testAlarmAnyGranted(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	for i := range 44 { // 44 of 110 is 40%
		if res := apply(t, s, alarmRead("acme", t0, i, 110)); res.Tripped {
			t.Fatalf("read %d of 110 tripped the alarm", i+1)
		}
	}
	res := apply(t, s, alarmRead("acme", t0, 44, 100))
	checkPassed(t, "read 45, of 100 granted", res)
	if !res.Tripped {
		t.Errorf("read 45 by an origin granting 100: not tripped")
	}
	checkAlarm(t, s, "acme", t0, &meter.AlarmState{TrippedAt: t0, Day: day, LessonsRead: 45, Granted: 100})
}

func testAlarmReinstate(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	if lifted, err := s.Reinstate(t.Context(), "acme"); err != nil || lifted {
		t.Fatalf("Reinstate with no alarm: %v, %v; want false, nil", lifted, err)
	}
	tripAt(t, s, "acme", t0)
	if lifted, err := s.Reinstate(t.Context(), "acme"); err != nil || !lifted {
		t.Fatalf("Reinstate: %v, %v; want true, nil", lifted, err)
	}
	checkAlarm(t, s, "acme", t0, nil)
	if lifted, err := s.Reinstate(t.Context(), "acme"); err != nil || lifted {
		t.Errorf("Reinstate again: %v, %v; want false, nil", lifted, err)
	}
	// Access resumes; the day's count is past the threshold already, and
	// reading more lessons that day does not trip it again.
	for i := 5; i < 10; i++ {
		res := apply(t, s, alarmRead("acme", t0, i, 10))
		if res.Refused != nil || res.Suspended || res.Tripped || res.LessonsRead != i+1 {
			t.Errorf("read %d of 10 after reinstatement: Refused %v, Suspended %v, Tripped %v, LessonsRead %d; want served, %d",
				i+1, res.Refused, res.Suspended, res.Tripped, res.LessonsRead, i+1)
		}
	}
	checkAlarm(t, s, "acme", t0, nil)
	// The next day starts a new count, which trips it again.
	next := t0.AddDate(0, 0, 1)
	for i := range 5 {
		res := apply(t, s, alarmRead("acme", next, i, 10))
		if res.Suspended || res.Tripped != (i == 4) {
			t.Errorf("read %d of 10 the next day: Suspended %v, Tripped %v; want false, %v", i+1, res.Suspended, res.Tripped, i == 4)
		}
	}
	checkAlarm(t, s, "acme", next, &meter.AlarmState{TrippedAt: next, Day: "2026-11-23", LessonsRead: 5, Granted: 10})
	// A lifted alarm stays lifted after a restart.
	if _, err := s.Reinstate(t.Context(), "acme"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	checkAlarm(t, s, "acme", next, nil)
	checkPassed(t, "a read after reinstatement and a restart", apply(t, s, alarmRead("acme", next, 9, 10)))
	// A done context withdraws a reinstatement.
	tripAt(t, s, "acme2", t0)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Reinstate(ctx, "acme2"); err == nil {
		t.Errorf("Reinstate with a cancelled context: no error")
	}
	checkAlarm(t, s, "acme2", t0, &meter.AlarmState{TrippedAt: t0, Day: day, LessonsRead: 5, Granted: 10})
}

// An alarm is its org key's: another org, and the same org created again
// under another key (meter.Key), are not suspended.
func testAlarmPerOrg(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	tripAt(t, s, "acme/gen-1", t0)
	for _, org := range []string{"acme/gen-2", "acme", "other"} {
		res := apply(t, s, alarmRead(org, t0, 0, 10))
		if res.Suspended || res.Refused != nil || res.LessonsRead != 1 {
			t.Errorf("%s: Suspended %v, Refused %v, LessonsRead %d; want served, 1", org, res.Suspended, res.Refused, res.LessonsRead)
		}
		checkAlarm(t, s, org, t0, nil)
	}
	if lifted, err := s.Reinstate(t.Context(), "acme/gen-2"); err != nil || lifted {
		t.Errorf("Reinstate of another key: %v, %v; want false, nil", lifted, err)
	}
	checkSuspended(t, s, "the tripped key's call", meter.Op{Org: "acme/gen-1", Now: t0, Stages: []meter.Stage{call(nil, nil)}})
}

// An alarm one Store trips refuses the next op on another, and one
// Store's reinstatement lifts it for the other.
func testAlarmTwoStores(t *testing.T, open func(t *testing.T) meter.Store) {
	a, b := open(t), open(t)
	tripAt(t, a, "acme", t0)
	checkSuspended(t, b, "a call through the other store", meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}})
	if lifted, err := b.Reinstate(t.Context(), "acme"); err != nil || !lifted {
		t.Fatalf("Reinstate through the other store: %v, %v", lifted, err)
	}
	checkPassed(t, "a read through the first store", apply(t, a, alarmRead("acme", t0, 6, 10)))
}
