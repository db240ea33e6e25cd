package metertest

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// mintAt is mint at now: the rows' Created.
func mintAt(org string, now time.Time, first, n int) meter.Op {
	op := mint(org, first, n)
	op.Now = now
	return op
}

// ledgerBefore lists every row created before before, a page of limit at
// a time, and checks the pages: ids ascending, each page after its
// predecessor's, every row before before.
func ledgerBefore(t *testing.T, s meter.Store, before time.Time, limit int) []meter.Row {
	t.Helper()
	var all []meter.Row
	after := int64(0)
	for {
		page, err := s.LedgerBefore(t.Context(), before, after, limit)
		if err != nil {
			t.Fatalf("LedgerBefore(%s, after %d, limit %d): %v", before.Format(time.RFC3339Nano), after, limit, err)
		}
		if len(page) > limit {
			t.Fatalf("LedgerBefore(after %d, limit %d): %d rows", after, limit, len(page))
		}
		for _, r := range page {
			if r.ID <= after {
				t.Fatalf("LedgerBefore: row %d after %d, want ascending ids", r.ID, after)
			}
			if !r.Created.Before(before) {
				t.Fatalf("LedgerBefore(%s): row %d created %s", before.Format(time.RFC3339Nano), r.ID, r.Created.Format(time.RFC3339Nano))
			}
			after = r.ID
		}
		all = append(all, page...)
		if len(page) < limit {
			return all
		}
	}
}

func rowIDs(rows []meter.Row) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// The ledger's retention: LedgerBefore lists every org's rows created
// before a time (to the microsecond: a row's time sorts as time, not as
// its text) in id order, whatever order their times are in, and
// TrimLedger deletes exactly those, however many windows of
// meter.LedgerChunk rows they span, while ops go on; ids are never
// reused.
func testLedgerTrim(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	old := t0.Add(-72*time.Hour + 987654321) // kept as …:00.987654Z
	if rows, err := s.LedgerBefore(t.Context(), t0, 0, 10); err != nil || len(rows) != 0 {
		t.Fatalf("LedgerBefore of an empty ledger: %d rows, %v", len(rows), err)
	}
	if n, err := s.TrimLedger(t.Context(), t0); err != nil || n != 0 {
		t.Fatalf("TrimLedger of an empty ledger: %d, %v", n, err)
	}
	// Rows of several orgs; a later op may carry an earlier time.
	ops := []meter.Op{
		mintAt("acme", old, 0, 3),
		mintAt("other", t0.Add(-48*time.Hour), 3, 2),
		mintAt("acme", t0, 5, 2),
		mintAt("other", t0.Add(-96*time.Hour), 7, 1),
		mintAt("acme/g2", t0.Add(-time.Hour), 8, 1),
	}
	ids := make([][]int64, len(ops))
	for i, op := range ops {
		ids[i] = apply(t, s, op).LedgerIDs
	}
	all := slices.Concat(ledger(t, s, "acme", 100), ledger(t, s, "other", 100), ledger(t, s, "acme/g2", 100))
	slices.SortFunc(all, func(a, b meter.Row) int { return int(a.ID - b.ID) })
	rowsOf := func(which ...int) []meter.Row {
		var want []int64
		for _, i := range which {
			want = append(want, ids[i]...)
		}
		var out []meter.Row
		for _, r := range all {
			if slices.Contains(want, r.ID) {
				out = append(out, r)
			}
		}
		return out
	}
	for _, tc := range []struct {
		what   string
		before time.Time
		want   []meter.Row
	}{
		{"24 hours back", t0.Add(-24 * time.Hour), rowsOf(0, 1, 3)},
		{"after every row", t0.Add(time.Hour), all},
		{"before every row", t0.Add(-96 * time.Hour), nil},
		{"at a row's time (not before it)", t0.Add(-48 * time.Hour), rowsOf(0, 3)},
		{"a nanosecond past a row's time", t0.Add(-48*time.Hour + 1), rowsOf(0, 1, 3)},
		{"half a second past a whole second", t0.Add(-48*time.Hour + 500*time.Millisecond), rowsOf(0, 1, 3)},
		{"at a fraction's microsecond", old.Truncate(time.Microsecond), rowsOf(3)},
		{"a nanosecond before it", old.Truncate(time.Microsecond).Add(-1), rowsOf(3)},
		{"a nanosecond after it", old.Truncate(time.Microsecond).Add(1), rowsOf(0, 3)},
		{"at the second of a fraction", old.Truncate(time.Second), rowsOf(3)},
		{"at the next second", old.Truncate(time.Second).Add(time.Second), rowsOf(0, 3)},
		{"in another zone", t0.Add(-24 * time.Hour).In(time.FixedZone("UTC+5", 5*3600)), rowsOf(0, 1, 3)},
	} {
		for _, limit := range []int{1, 2, 100} {
			got := ledgerBefore(t, s, tc.before, limit)
			if !reflect.DeepEqual(rowIDs(got), rowIDs(tc.want)) {
				t.Errorf("%s, pages of %d: ids %v, want %v", tc.what, limit, rowIDs(got), rowIDs(tc.want))
			} else if len(got) > 0 && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: rows %+v, want them as listed: %+v", tc.what, got, tc.want)
			}
		}
	}
	if page, err := s.LedgerBefore(t.Context(), t0.Add(time.Hour), ids[1][0], 2); err != nil || !slices.Equal(rowIDs(page), []int64{ids[1][1], ids[2][0]}) {
		t.Errorf("LedgerBefore(after %d, limit 2) = %v, %v; want %v", ids[1][0], rowIDs(page), err, []int64{ids[1][1], ids[2][0]})
	}

	// The trim deletes the rows listed, and only those.
	n, err := s.TrimLedger(t.Context(), t0.Add(-24*time.Hour))
	if err != nil || n != 6 {
		t.Fatalf("TrimLedger(24 hours back) = %d, %v; want 6", n, err)
	}
	if got := ledgerBefore(t, s, t0.Add(time.Hour), 100); !slices.Equal(rowIDs(got), rowIDs(rowsOf(2, 4))) {
		t.Errorf("after the trim: ids %v, want %v", rowIDs(got), rowIDs(rowsOf(2, 4)))
	}
	checkRows(t, "acme's rows after the trim", ledger(t, s, "acme", 10), ops[2], ids[2])
	if rows := ledger(t, s, "other", 10); len(rows) != 0 {
		t.Errorf("other's rows after the trim: %v", rowIDs(rows))
	}
	for _, id := range slices.Concat(ids[0], ids[1], ids[3]) {
		if r, ok, err := s.LedgerRow(t.Context(), id); ok || err != nil {
			t.Errorf("LedgerRow(%d) of a trimmed row = %+v, %v, %v", id, r, ok, err)
		}
	}
	if r, ok, err := s.LedgerRow(t.Context(), ids[4][0]); !ok || err != nil || r.Org != "acme/g2" {
		t.Errorf("LedgerRow(%d) of a kept row = %+v, %v, %v", ids[4][0], r, ok, err)
	}
	if n, err := s.TrimLedger(t.Context(), t0.Add(-24*time.Hour)); err != nil || n != 0 {
		t.Errorf("TrimLedger again = %d, %v; want 0", n, err)
	}
	// Every row trimmed, the last id included: the next row is numbered
	// above every row ever written.
	if n, err := s.TrimLedger(t.Context(), t0.Add(time.Hour)); err != nil || n != 3 {
		t.Errorf("TrimLedger(after every row) = %d, %v; want 3", n, err)
	}
	if next := apply(t, s, mint("acme", 9, 1)).LedgerIDs; len(next) != 1 || next[0] <= ids[4][0] {
		t.Errorf("after trimming every row: LedgerIDs %v, want one above %d", next, ids[4][0])
	}

}

// More rows than a window of meter.LedgerChunk, old and new interleaved:
// listed across windows (a page that spans two included), and trimmed
// while ops go on, which keep every row they write.
func testLedgerTrimWindows(t *testing.T, open func(t *testing.T) meter.Store) {
	s := open(t)
	before := t0.Add(-24 * time.Hour)
	var oldIDs, newIDs []int64
	for i := range meter.LedgerChunk/meter.MaxLedger + 5 {
		if i%3 == 0 {
			newIDs = append(newIDs, apply(t, s, mintAt("acme", t0, 0, meter.MaxLedger)).LedgerIDs...)
		} else {
			oldIDs = append(oldIDs, apply(t, s, mintAt(fmt.Sprintf("org-%d", i%4), before.Add(-time.Duration(i)*time.Second), 0, meter.MaxLedger)).LedgerIDs...)
		}
	}
	if len(oldIDs)+len(newIDs) <= meter.LedgerChunk || len(oldIDs) >= meter.LedgerChunk {
		t.Fatalf("%d old rows and %d new: want more than a window in all, fewer old", len(oldIDs), len(newIDs))
	}
	for _, limit := range []int{1000, len(oldIDs) - 1, meter.LedgerChunk + 1} {
		if got := rowIDs(ledgerBefore(t, s, before, limit)); !slices.Equal(got, oldIDs) {
			t.Errorf("pages of %d: %d rows, want %d", limit, len(got), len(oldIDs))
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for c := range 4 {
		wg.Go(func() {
			for i := range 10 {
				res, err := s.Apply(t.Context(), mintAt("acme", t0.Add(time.Minute), c*10+i, 2))
				if err != nil {
					t.Errorf("Apply during the trim: %v", err)
					return
				}
				mu.Lock()
				newIDs = append(newIDs, res.LedgerIDs...)
				mu.Unlock()
			}
		})
	}
	n, err := s.TrimLedger(t.Context(), before)
	wg.Wait()
	if err != nil || n != int64(len(oldIDs)) {
		t.Fatalf("TrimLedger = %d, %v; want %d", n, err, len(oldIDs))
	}
	slices.Sort(newIDs)
	if got := rowIDs(ledgerBefore(t, s, t0.Add(time.Hour), 1000)); !slices.Equal(got, newIDs) {
		t.Errorf("after the trim: %d rows, want the %d new ones", len(got), len(newIDs))
	}
	if got := ledgerBefore(t, s, before, 10); len(got) != 0 {
		t.Errorf("after the trim: %d rows before its time", len(got))
	}
}
