package metertest

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// entry is the ledger entry number i of a test: a media URL for even i,
// an export (without a link, as an inline one) for odd i.
func entry(i int) meter.Entry {
	e := meter.Entry{Kind: meter.KindMedia, Target: fmt.Sprintf("high-algebra-1-img-%d", i), Format: "url",
		Client: "client-1", Scopes: []string{"service-api/media.download", "service-api/content.read"},
		ContentVersion: "2026-11-01+abc", RequestID: fmt.Sprintf("req-%d", i),
		Expires: t0.Add(15*time.Minute + 123456789), KeyID: "k1"}
	if i%2 == 1 {
		e = meter.Entry{Kind: meter.KindExport, Target: "high/algebra", Format: "inline", Client: "client-2",
			ContentVersion: "2026-11-01+abc", RequestID: fmt.Sprintf("req-%d", i)}
	}
	return e
}

// mint is an op with no caps writing the entries first to first+n-1.
func mint(org string, first, n int) meter.Op {
	op := meter.Op{Org: org, Now: t0.Add(987654321), Stages: []meter.Stage{call(nil, nil), {{Meter: meter.HourMints, N: int64(n)}}}}
	for i := range n {
		op.Ledger = append(op.Ledger, entry(first+i))
	}
	return op
}

// ledger lists every ledger row of org, a page of limit at a time, and
// checks the pages: ids ascending, each page's after its predecessor's.
func ledger(t *testing.T, s meter.Store, org string, limit int) []meter.Row {
	t.Helper()
	var all []meter.Row
	after := int64(0)
	for {
		page, err := s.Ledger(t.Context(), org, after, limit)
		if err != nil {
			t.Fatalf("Ledger(%s, after %d, limit %d): %v", org, after, limit, err)
		}
		if len(page) > limit {
			t.Fatalf("Ledger(%s, after %d, limit %d): %d rows", org, after, limit, len(page))
		}
		for _, r := range page {
			if r.ID <= after {
				t.Fatalf("Ledger(%s): row %d after %d, want ascending ids", org, r.ID, after)
			}
			if r.Org != org {
				t.Fatalf("Ledger(%s): a row of %s", org, r.Org)
			}
			after = r.ID
		}
		all = append(all, page...)
		if len(page) < limit {
			return all
		}
	}
}

// checkRows checks that rows are the entries of op, numbered ids.
func checkRows(t *testing.T, what string, rows []meter.Row, op meter.Op, ids []int64) {
	t.Helper()
	if len(rows) != len(op.Ledger) || len(ids) != len(op.Ledger) {
		t.Fatalf("%s: %d rows, %d ids, want %d", what, len(rows), len(ids), len(op.Ledger))
	}
	for i, r := range rows {
		want := meter.Row{ID: ids[i], Org: op.Org, Created: op.Now.UTC().Truncate(time.Microsecond), Entry: op.Ledger[i]}
		if !want.Expires.IsZero() {
			want.Expires = want.Expires.UTC().Truncate(time.Microsecond)
		}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("%s: row %d = %+v, want %+v", what, i, r, want)
		}
	}
}

func ascending(ids []int64) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
}

// A passing op writes its entries, numbered in its order, and the listing
// returns them as written (times to the microsecond, UTC).
func testLedgerWritten(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	if rows := ledger(t, s, "acme", 10); len(rows) != 0 {
		t.Fatalf("a new store lists %d ledger rows", len(rows))
	}
	op := mint("acme", 0, 4)
	res := apply(t, s, op)
	checkPassed(t, "a mint of 4", res)
	if !ascending(res.LedgerIDs) || len(res.LedgerIDs) != 4 || res.LedgerIDs[0] < 1 {
		t.Fatalf("LedgerIDs = %v, want 4 ascending ids from 1 up", res.LedgerIDs)
	}
	rows := ledger(t, s, "acme", 10)
	checkRows(t, "after one mint", rows, op, res.LedgerIDs)
	// A row read by its id, whatever its org, is the row listed.
	for _, r := range rows {
		got, ok, err := s.LedgerRow(t.Context(), r.ID)
		if err != nil || !ok || !reflect.DeepEqual(got, r) {
			t.Errorf("LedgerRow(%d) = %+v, %v, %v; want %+v", r.ID, got, ok, err, r)
		}
	}
	for _, id := range []int64{0, -1, res.LedgerIDs[3] + 1, 1 << 62} {
		if got, ok, err := s.LedgerRow(t.Context(), id); ok || err != nil {
			t.Errorf("LedgerRow(%d) of no row = %+v, %v, %v; want none", id, got, ok, err)
		}
	}
	// An op without entries writes none and reports none.
	if res := apply(t, s, meter.Op{Org: "acme", Now: t0, Stages: []meter.Stage{call(nil, nil)}}); res.LedgerIDs != nil {
		t.Errorf("an op without entries: LedgerIDs %v", res.LedgerIDs)
	}
	// The meters and the rows are of one op: both there.
	checkUsage(t, s, "acme", t0, counters(meter.MonthCalls, 2, meter.HourCalls, 2, meter.HourMints, 4))
	if n := len(ledger(t, s, "acme", 10)); n != 4 {
		t.Errorf("%d rows, want 4", n)
	}
}

// A refused op (a hard quota, an hourly cap that bills the call, a
// refusal in a later stage) and a suspended one write no row; the next
// passing op's ids are above every earlier one's.
func testLedgerNotWhenRefused(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	first := apply(t, s, mint("acme", 0, 2))
	quota := mint("acme", 10, 3)
	quota.Stages[0] = call(lim(1), nil) // spent by the first op
	hour := mint("acme", 20, 3)
	hour.Stages = []meter.Stage{call(nil, nil), {{Meter: meter.HourCalls, N: 1, Limit: lim(1), Force: true}}}
	later := mint("acme", 30, 3)
	later.Stages = append(later.Stages, meter.Stage{{Meter: meter.MonthDownloads, N: 3, Limit: lim(2)}})
	for what, op := range map[string]meter.Op{"quota": quota, "hourly cap": hour, "a later stage": later} {
		res := apply(t, s, op)
		if res.Refused == nil || res.LedgerIDs != nil {
			t.Errorf("%s: Refused %v, LedgerIDs %v; want refused, none", what, res.Refused, res.LedgerIDs)
		}
	}
	tripAt(t, s, "acme", t0)
	if res := apply(t, s, mint("acme", 40, 3)); !res.Suspended || res.LedgerIDs != nil {
		t.Errorf("a suspended op: Suspended %v, LedgerIDs %v; want true, none", res.Suspended, res.LedgerIDs)
	}
	rows := ledger(t, s, "acme", 100)
	checkRows(t, "after the refusals", rows, mint("acme", 0, 2), first.LedgerIDs)
	next := apply(t, s, mint("other", 50, 1))
	if len(next.LedgerIDs) != 1 || next.LedgerIDs[0] <= first.LedgerIDs[1] {
		t.Errorf("the next row's id %v, want one above %d", next.LedgerIDs, first.LedgerIDs[1])
	}
}

// Listing pages by id (after, limit), an org's rows only; ids ascend
// across orgs in the order the ops were applied.
func testLedgerPaging(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	var acme, other []int64
	for i := range 6 {
		acme = append(acme, apply(t, s, mint("acme", 3*i, 3)).LedgerIDs...)
		other = append(other, apply(t, s, mint("other", 100+i, 1)).LedgerIDs...)
	}
	all := append(slices.Clone(acme), other...)
	slices.Sort(all)
	if !ascending(acme) || !ascending(other) || len(slices.Compact(all)) != 24 {
		t.Fatalf("ids of sequential ops: acme %v, other %v; want 24 distinct, ascending per org", acme, other)
	}
	for _, limit := range []int{1, 4, 18, 100} {
		var got []int64
		for _, r := range ledger(t, s, "acme", limit) {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, acme) {
			t.Errorf("acme's rows by pages of %d: %v, want %v", limit, got, acme)
		}
	}
	page, err := s.Ledger(t.Context(), "acme", acme[4], 5)
	if err != nil || len(page) != 5 || page[0].ID != acme[5] || page[4].ID != acme[9] {
		t.Errorf("Ledger(after %d, limit 5) = %d rows (%v), want ids %v", acme[4], len(page), err, acme[5:10])
	}
	if page, err := s.Ledger(t.Context(), "acme", acme[17], 5); err != nil || len(page) != 0 {
		t.Errorf("Ledger after the last row: %d rows, %v; want none", len(page), err)
	}
	if page, err := s.Ledger(t.Context(), "nobody", 0, 5); err != nil || len(page) != 0 {
		t.Errorf("Ledger of an org with no rows: %d rows, %v; want none", len(page), err)
	}
	if got := ledger(t, s, "other", 2); len(got) != 6 || got[5].Target != entry(105).Target {
		t.Errorf("other's rows: %d, want 6 ending with %s", len(got), entry(105).Target)
	}
}

// Ops of one batch each get their own ids, ascending in batch order; a
// refused op of the batch writes none.
func testLedgerSameBatch(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	b, ok := s.(Batcher)
	if !ok {
		t.Skip("the store applies no batch of the test's choosing (metertest.Batcher)")
	}
	refused := mint("acme", 10, 2)
	refused.Stages = append(refused.Stages, meter.Stage{{Meter: meter.MonthExports, N: 1, Limit: lim(0)}})
	ops := []meter.Op{mint("acme", 0, 3), mint("other", 3, 1), refused, mint("acme", 4, 2)}
	res, err := b.ApplyBatch(t.Context(), ops)
	if err != nil {
		t.Fatal(err)
	}
	if res[2].LedgerIDs != nil {
		t.Errorf("the refused op of the batch: LedgerIDs %v", res[2].LedgerIDs)
	}
	ids := slices.Concat(res[0].LedgerIDs, res[1].LedgerIDs, res[3].LedgerIDs)
	if len(ids) != 6 || !ascending(ids) {
		t.Fatalf("ids of the batch's ops: %v, want 6 ascending in batch order", ids)
	}
	rows := ledger(t, s, "acme", 10)
	both := ops[0]
	both.Ledger = slices.Concat(ops[0].Ledger, ops[3].Ledger)
	checkRows(t, "acme's rows of the batch", rows, both, slices.Concat(res[0].LedgerIDs, res[3].LedgerIDs))
}

// Concurrent ops, over every store given: every acknowledged row is
// listed, once, with the id its op was given; the ids of one client's
// successive ops ascend (a later commit numbers higher).
func ledgerHammer(t *testing.T, stores []meter.Store) {
	var mu sync.Mutex
	acked := map[int64]string{} // id → target
	var wg sync.WaitGroup
	for c := range clients {
		s := stores[c%len(stores)]
		wg.Go(func() {
			last := int64(0)
			for i := range opsPerClient {
				op := mint("acme", 0, 2)
				for k := range op.Ledger {
					op.Ledger[k].Target = fmt.Sprintf("c%d-op%d-%d", c, i, k)
				}
				res, err := s.Apply(t.Context(), op)
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				if len(res.LedgerIDs) != 2 || res.LedgerIDs[0] <= last || !ascending(res.LedgerIDs) {
					t.Errorf("client %d op %d: LedgerIDs %v, want 2 ascending above %d", c, i, res.LedgerIDs, last)
					return
				}
				last = res.LedgerIDs[1]
				mu.Lock()
				for k, id := range res.LedgerIDs {
					if prev, dup := acked[id]; dup {
						t.Errorf("id %d given to %s and %s", id, prev, op.Ledger[k].Target)
					}
					acked[id] = op.Ledger[k].Target
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, s := range stores {
		rows := ledger(t, s, "acme", 100)
		if len(rows) != len(acked) || len(rows) != 2*clients*opsPerClient {
			t.Errorf("%d rows listed, %d acknowledged, want %d", len(rows), len(acked), 2*clients*opsPerClient)
		}
		for _, r := range rows {
			if acked[r.ID] != r.Target {
				t.Errorf("row %d holds %s, its op was given it for %q", r.ID, r.Target, acked[r.ID])
			}
		}
	}
}

func testLedgerConcurrent(t *testing.T, open func(t *testing.T) meter.Store) {
	ledgerHammer(t, []meter.Store{open(t)})
}

func testLedgerConcurrentTwoStores(t *testing.T, open func(t *testing.T) meter.Store) {
	ledgerHammer(t, []meter.Store{open(t), open(t)})
}

// Rows survive a reopen, and the reopened store numbers above them.
func testLedgerReopen(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	op := mint("acme", 0, 3)
	res := apply(t, s, op)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t)
	checkRows(t, "after reopening", ledger(t, s, "acme", 10), op, res.LedgerIDs)
	if next := apply(t, s, mint("acme", 3, 1)).LedgerIDs; len(next) != 1 || next[0] <= res.LedgerIDs[2] {
		t.Errorf("after reopening: LedgerIDs %v, want one above %d", next, res.LedgerIDs[2])
	}
}

// invalidLedgerOps are ops whose entries no store may write: each is an
// error and applies nothing (InvalidOps).
func invalidLedgerOps() map[string]meter.Op {
	with := func(edit func(e *meter.Entry)) meter.Op {
		op := mint("acme", 0, 2)
		edit(&op.Ledger[1])
		return op
	}
	return map[string]meter.Op{
		"101 ledger rows":           mint("acme", 0, meter.MaxLedger+1),
		"an unknown kind":           with(func(e *meter.Entry) { e.Kind = "download" }),
		"an empty target":           with(func(e *meter.Entry) { e.Target = "" }),
		"a target of 513 bytes":     with(func(e *meter.Entry) { e.Target = strings.Repeat("x", 513) }),
		"a NUL in the target":       with(func(e *meter.Entry) { e.Target = "a\x00b" }),
		"a client not UTF-8":        with(func(e *meter.Entry) { e.Client = "\xff" }),
		"a request id of 129 bytes": with(func(e *meter.Entry) { e.RequestID = strings.Repeat("r", 129) }),
		"a scope with a space":      with(func(e *meter.Entry) { e.Scopes = []string{"a b"} }),
		"an empty scope":            with(func(e *meter.Entry) { e.Scopes = []string{""} }),
		"17 scopes":                 with(func(e *meter.Entry) { e.Scopes = slices.Repeat([]string{"s"}, 17) }),
		"a key id of 129 bytes":     with(func(e *meter.Entry) { e.KeyID = strings.Repeat("k", 129) }),
		"a format of 129 bytes":     with(func(e *meter.Entry) { e.Format = strings.Repeat("f", 129) }),
		"a contentVersion with NUL": with(func(e *meter.Entry) { e.ContentVersion = "\x00" }),
	}
}
