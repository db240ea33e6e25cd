package metertest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// A request is billed once per organisation (meter.Op.Once): the edge may
// send one request to a second origin when the first does not answer in
// time, and both may serve it. The first op of a key bills; any later op
// of the key, from any Store on the database, bills nothing, writes no
// ledger row and reports the first one's outcome.

func onceOp(op meter.Op, key string) meter.Op {
	op.Once = key
	return op
}

// A mint applied twice under one key bills once, writes its rows once,
// and the second application reports the first's rows.
func testOnceBillsOnce(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	first := apply(t, s, onceOp(mint("acme", 0, 3), "k1"))
	checkPassed(t, "the first mint", first)
	if first.Duplicate {
		t.Errorf("the first application is marked Duplicate")
	}
	again := apply(t, s, onceOp(mint("acme", 0, 3), "k1"))
	checkPassed(t, "the same mint again", again)
	if !again.Duplicate || !slices.Equal(again.LedgerIDs, first.LedgerIDs) {
		t.Errorf("the same mint again: Duplicate %v, LedgerIDs %v; want true, %v", again.Duplicate, again.LedgerIDs, first.LedgerIDs)
	}
	want := counters(meter.MonthCalls, 1, meter.HourCalls, 1, meter.HourMints, 3)
	checkAfter(t, "the duplicate", again.After, want)
	checkUsage(t, s, "acme", t0, want)
	if rows := ledger(t, s, "acme", 10); len(rows) != 3 {
		t.Errorf("%d ledger rows after a mint of 3 applied twice, want 3", len(rows))
	}
	// Another key, or the same key of another org, bills.
	apply(t, s, onceOp(mint("acme", 3, 1), "k2"))
	apply(t, s, onceOp(mint("other", 0, 1), "k1"))
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 2, meter.HourCalls, 2, meter.HourMints, 4))
	checkUsage(t, s, "other", t0, counters(meter.MonthCalls, 1, meter.HourCalls, 1, meter.HourMints, 1))
	// An op without a key always bills.
	apply(t, s, mint("acme", 4, 1))
	apply(t, s, mint("acme", 4, 1))
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 4, meter.HourCalls, 4, meter.HourMints, 6))
}

// A refusal is the outcome a duplicate reports too, and a forced step
// (an hourly cap hit bills the call) is billed once; a shortened page
// reports the first's grant.
func testOnceOutcome(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	capped := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{{{Meter: meter.HourCalls, N: 1, Limit: lim(0), Force: true}}}}
	for i := range 2 {
		res := apply(t, s, onceOp(capped, "cap"))
		checkRefused(t, fmt.Sprintf("the capped op, application %d", i+1), res, meter.HourCalls)
	}
	checkUsage(t, s, "acme", t0, counters(meter.HourCalls, 1))
	page := meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{{{Meter: meter.MonthTestprepItems, N: 10, Limit: lim(4), Shorten: true}}}}
	first := apply(t, s, onceOp(page, "page"))
	again := apply(t, s, onceOp(page, "page"))
	if first.Granted != 4 || again.Granted != 4 || !again.Duplicate || again.Refused != nil {
		t.Errorf("a shortened page twice: granted %d then %d (Duplicate %v, Refused %v), want 4 and 4", first.Granted, again.Granted, again.Duplicate, again.Refused)
	}
	checkUsage(t, s, "acme", t0, counters(meter.HourCalls, 1, meter.MonthTestprepItems, 4))
	// A suspended op records nothing: once the alarm is lifted the key
	// bills.
	tripAt(t, s, "sus", t0)
	if res := apply(t, s, onceOp(read("sus", t0, 7), "r")); !res.Suspended {
		t.Fatalf("a read under the alarm: %+v, want Suspended", res)
	}
	if _, err := s.Reinstate(t.Context(), "sus"); err != nil {
		t.Fatal(err)
	}
	if res := apply(t, s, onceOp(read("sus", t0, 7), "r")); res.Suspended || res.Duplicate || res.Refused != nil {
		t.Errorf("the read after reinstatement: %+v, want it billed", res)
	}
}

// Two ops of one key in one batch: the second is the duplicate.
func testOnceSameBatch(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	b, ok := s.(Batcher)
	if !ok {
		t.Skip("the store applies no batch of the test's choosing (metertest.Batcher)")
	}
	res, err := b.ApplyBatch(t.Context(), []meter.Op{mint("acme", 0, 1), onceOp(mint("acme", 1, 2), "k"), onceOp(mint("acme", 1, 2), "k"), mint("acme", 3, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if res[1].Duplicate || !res[2].Duplicate || !slices.Equal(res[1].LedgerIDs, res[2].LedgerIDs) || len(res[1].LedgerIDs) != 2 {
		t.Errorf("one key twice in a batch: %+v then %+v", res[1], res[2])
	}
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 3, meter.HourCalls, 3, meter.HourMints, 4))
	if rows := ledger(t, s, "acme", 10); len(rows) != 4 {
		t.Errorf("%d ledger rows, want 4", len(rows))
	}
}

// Concurrent applications of one key, from every Store given (two
// origins on one database), bill it once.
func testOnceConcurrent(t *testing.T, stores []meter.Store) {
	const keys, each = 40, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[string][]int64{}
	for k := range keys {
		for i := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("req-%d", k)
				res, err := stores[i%len(stores)].Apply(t.Context(), onceOp(mint("acme", k, 1), key))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if prev, ok := ids[key]; ok && !slices.Equal(prev, res.LedgerIDs) {
					t.Errorf("%s: ledger ids %v and %v", key, prev, res.LedgerIDs)
				}
				ids[key] = res.LedgerIDs
			}()
		}
	}
	wg.Wait()
	checkUsage(t, stores[0], "acme", t0, counters(meter.MonthCalls, keys, meter.HourCalls, keys, meter.HourMints, keys))
	if rows := ledger(t, stores[0], "acme", 100); len(rows) != keys {
		t.Errorf("%d ledger rows for %d keys applied %d times each, want %d", len(rows), keys, each, keys)
	}
}

func testOnceConcurrentOneStore(t *testing.T, open func(t *testing.T) meter.Store) {
	testOnceConcurrent(t, []meter.Store{open(t)})
}

func testOnceConcurrentTwoStores(t *testing.T, open func(t *testing.T) meter.Store) {
	testOnceConcurrent(t, []meter.Store{open(t), open(t)})
}

// PruneOnce forgets the keys applied before its time: the same key then
// bills again (the origin refuses a request older than OnceWindow, so in
// service it never comes).
func testOncePrune(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	p, ok := s.(meter.OnceStore)
	if !ok {
		t.Fatalf("%T does not implement meter.OnceStore", s)
	}
	op := onceOp(meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}}, "k")
	apply(t, s, op)
	if n, err := p.PruneOnce(t.Context(), t0); err != nil || n != 0 {
		t.Errorf("PruneOnce(at its time) = %d, %v; want 0", n, err)
	}
	if res := apply(t, s, op); !res.Duplicate {
		t.Errorf("before the prune: not a duplicate")
	}
	if n, err := p.PruneOnce(t.Context(), t0.Add(meter.OnceWindow)); err != nil || n != 1 {
		t.Errorf("PruneOnce(a window later) = %d, %v; want 1", n, err)
	}
	if res := apply(t, s, op); res.Duplicate {
		t.Errorf("after the prune: a duplicate")
	}
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 2, meter.HourCalls, 2))
}

// An op of a key whose first application billed something else (two
// origins disagreed on what the request bills, or a key was reused) is
// not its duplicate: it is billed as it is, so nothing is served unbilled.
func testOnceOtherShape(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	callOnly := onceOp(meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}}, "k")
	apply(t, s, callOnly)
	readOp := onceOp(read("acme", t0, 3), "k")
	if res := apply(t, s, readOp); res.Duplicate {
		t.Errorf("a lesson read under a key first billed as a call: a duplicate")
	}
	export := onceOp(mint("acme", 0, 2), "k")
	if res := apply(t, s, export); res.Duplicate || len(res.LedgerIDs) != 2 {
		t.Errorf("a mint under a key first billed as a call: Duplicate %v, ledger ids %v", res.Duplicate, res.LedgerIDs)
	}
	// The first record stays: the call again is its duplicate.
	if res := apply(t, s, callOnly); !res.Duplicate {
		t.Errorf("the first op again: not a duplicate")
	}
}

// An op whose request was signed more than OnceMaxAge before the
// database's clock is refused with nothing applied (its key may be
// forgotten); one signed just now is billed.
func testOnceTooOld(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := onceOp(meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}}, "old")
	op.OnceSigned = time.Now().Add(-meter.OnceMaxAge - time.Minute)
	if _, err := s.Apply(t.Context(), op); !errors.Is(err, meter.ErrTooOld) {
		t.Errorf("an op signed %s ago: %v, want ErrTooOld", meter.OnceMaxAge+time.Minute, err)
	}
	op.Once, op.OnceSigned = "new", time.Now()
	apply(t, s, op)
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 1, meter.HourCalls, 1))
}
