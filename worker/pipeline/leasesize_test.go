package pipeline

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/lease"
)

// Lease sizing by rate and the report cadence (docs/edge.md, "In the
// module": Asking, Renewal, Reports), on the scripted origin of
// lease_test.go.

// load is acme's revalidations at a steady pace, against an origin that
// grants every lease request in full at once and acknowledges every usage
// call: what the module asks for, and how often it gates.
type load struct {
	w      *leaseWorld
	wants  []int64 // the want of each lease request, in order
	gates  int     // revalidations gated
	usages int     // usage calls
	leases int     // leases granted
}

// run answers n revalidations, one every step ms.
func (l *load) run(n int, step int64) {
	l.w.t.Helper()
	for range n {
		l.w.now += step
		out := l.w.acme()
		switch {
		case gated304(out):
			l.gates++
			l.w.p.drop(l.w.p.pending[out.Handle])
		case !leased304(out):
			l.w.t.Fatalf("got %+v, want a 304, gated or leased", out)
		}
		l.background(out.Background)
	}
}

// background plays the origin's part in bg, and in whatever the answer's
// own output carries.
func (l *load) background(bg Background) {
	l.w.t.Helper()
	for bg.Handle != 0 {
		if strings.HasSuffix(bg.URL, lease.Path) {
			r := l.w.leaseRequest(bg, l.w.tok)
			l.wants = append(l.wants, r.Want)
			l.leases++
			bg = l.w.grant(bg.Handle, acmeLease("L"+strconv.Itoa(l.leases), r.Want)).Background
			continue
		}
		l.w.usageCall(bg)
		l.usages++
		bg = l.w.answer(bg.Handle, 204).Background
	}
}

// Under a steady load of a revalidation a ms (5,000 a validity), the
// leases grow at each renewal, at most tenfold, to MaxCalls: 8, 80, 800,
// 1024, and stay there; only the first revalidation is gated.
func TestLeaseSizeGrowsUnderLoad(t *testing.T) {
	l := &load{w: newLeaseWorld(t)}
	l.run(3000, 1)
	if len(l.wants) < 5 {
		t.Fatalf("lease requests %v, want at least 5", l.wants)
	}
	if want := []int64{lease.MinCalls, 80, 800, lease.MaxCalls}; !reflect.DeepEqual(l.wants[:4], want) {
		t.Errorf("first lease sizes %v, want %v", l.wants[:4], want)
	}
	for i, n := range l.wants[4:] {
		if n != lease.MaxCalls {
			t.Errorf("lease request %d asks %d, want %d", i+5, n, lease.MaxCalls)
		}
	}
	if l.gates != 1 {
		t.Errorf("%d revalidations gated, want the first alone", l.gates)
	}
}

// A quiet organisation's leases stay at MinCalls: a revalidation every
// 3 s (renewed at half the validity, one use in it), or every 7 s (each
// lease expired, the last one's use no longer recent).
func TestLeaseSizeStaysSmallWhenIdle(t *testing.T) {
	for _, step := range []int64{3000, 7000, 12000} {
		l := &load{w: newLeaseWorld(t)}
		l.run(10, step)
		if len(l.wants) < 4 {
			t.Fatalf("every %d ms: lease requests %v, want at least 4", step, l.wants)
		}
		for i, n := range l.wants {
			if n != lease.MinCalls {
				t.Errorf("every %d ms: lease request %d asks %d, want %d", step, i+1, n, lease.MinCalls)
			}
		}
	}
}

// When the rate drops, the leases shrink: from MaxCalls at a revalidation
// a ms to a revalidation every 100 ms, the first renewal (its lease's
// uses, the busy ones too, over the time since it was asked) asks for
// less, and every later one for twice the 50 uses a validity.
func TestLeaseSizeShrinksWhenTheRateDrops(t *testing.T) {
	l := &load{w: newLeaseWorld(t)}
	l.run(2000, 1)
	if last := l.wants[len(l.wants)-1]; last != lease.MaxCalls {
		t.Fatalf("after the busy spell the leases are %d, want %d", last, lease.MaxCalls)
	}
	busy := len(l.wants)
	l.run(300, 100) // 30 s: a dozen renewals
	slow := l.wants[busy:]
	if len(slow) < 10 {
		t.Fatalf("lease requests at the lower rate %v, want at least 10", slow)
	}
	if slow[0] >= lease.MaxCalls {
		t.Errorf("the first renewal at the lower rate asks %d, want less than %d", slow[0], lease.MaxCalls)
	}
	for i, n := range slow[1:] {
		if want := lease.Size(50); n != want {
			t.Errorf("at the lower rate, lease request %d asks %d, want %d", i+2, n, want)
		}
	}
	if l.gates != 1 {
		t.Errorf("%d revalidations gated, want the first alone", l.gates)
	}
}

// With no lease to measure (the last expired, its renewal failed), the
// next request asks for what the last lease measured while that is
// recent, within a validity of the lease's end; after that, MinCalls.
func TestLeaseSizeAfterALapse(t *testing.T) {
	l := &load{w: newLeaseWorld(t)}
	l.run(1000, 1)
	ol := l.w.p.ls.orgs[orgKey{id: "acme"}]
	cur := ol.cur
	used, end := cur.used, cur.sentAt+cur.valid
	l.w.now = end + 1000
	out := l.w.acme() // gated: the lease has expired
	if !gated304(out) {
		t.Fatalf("after the lease's end: got %+v, want the gate", out)
	}
	if r := l.w.leaseRequest(out.Background, l.w.tok); r.Want != lease.Size(used) {
		t.Errorf("a second after the lease's end: asks %d, want %d (%d uses in its validity)", r.Want, lease.Size(used), used)
	}
	l.w.answer(out.Background.Handle, 503)
	l.w.now = end + cur.valid
	out = l.w.acme()
	if r := l.w.leaseRequest(out.Background, l.w.tok); r.Want != lease.MinCalls {
		t.Errorf("a validity after the lease's end: asks %d, want %d", r.Want, lease.MinCalls)
	}
}

// rateSize's arithmetic: the uses over the time since the lease was
// asked, that time within a tenth of the validity and the validity.
func TestRateSize(t *testing.T) {
	for _, c := range []struct {
		used, elapsed, valid, want int64
	}{
		{used: 4, elapsed: 0, valid: 5000, want: 80},       // a burst: measured over 500 ms
		{used: 4, elapsed: 4, valid: 5000, want: 80},       //
		{used: 100, elapsed: 2500, valid: 5000, want: 400}, // renewed at half the validity
		{used: 1, elapsed: 2500, valid: 5000, want: lease.MinCalls},
		{used: 300, elapsed: 9000, valid: 5000, want: 600}, // expired: its whole validity
		{used: 512, elapsed: 100, valid: 5000, want: lease.MaxCalls},
		{used: 0, elapsed: 3000, valid: 5000, want: lease.MinCalls},
		{used: 1, elapsed: 0, valid: 0, want: lease.MinCalls}, // no division by zero
	} {
		l := &heldLease{used: c.used, sentAt: 1000, valid: c.valid}
		if got := rateSize(l, 1000+c.elapsed); got != c.want {
			t.Errorf("rateSize(used %d, %d ms of %d) = %d, want %d", c.used, c.elapsed, c.valid, got, c.want)
		}
	}
}

// The report cadence: by default a usage call once a lease has
// lease.ReportEvery unacknowledged uses (TestLeaseReportsAcknowledgedOnSuccess);
// configured with reportEvery n, at n; with 0, at ReportInterval alone,
// however many uses.
func TestLeaseReportEvery(t *testing.T) {
	world := func(every string) *leaseWorld {
		t.Helper()
		parsed, err := ParseConfig([]byte(`{"origin":"o","jwksUrl":"j","issuer":"i","audience":"a","secret":"s","reportEvery":` + every + `}`))
		if err != nil {
			t.Fatal(err)
		}
		cfg := testCfg
		cfg.ReportEvery = parsed.ReportEvery
		w := newLeaseWorldOf(t, cfg)
		w.leaseUp(acmeLease("L1", 1024))
		return w
	}

	w := world("5")
	for i := int64(1); i <= 5; i++ {
		out := w.acme()
		if i < 5 && out.Background.Handle != 0 {
			t.Fatalf("reportEvery 5, use %d: background %+v", i, out.Background)
		}
		if i == 5 && !reflect.DeepEqual(w.usageCall(out.Background), []lease.Report{{Lease: "L1", Used: 5}}) {
			t.Errorf("reportEvery 5: report %+v", w.sent)
		}
	}

	w = world("0")
	first := w.now
	for i := range 500 { // fewer than half the calls: no renewal
		if out := w.acme(); !leased304(out) || out.Background.Handle != 0 {
			t.Fatalf("reportEvery 0, use %d: got %+v, want the leased 304 alone", i+1, out)
		}
	}
	w.now = first + reportInterval - 1
	if out := w.acme(); out.Background.Handle != 0 {
		t.Fatalf("reportEvery 0, before ReportInterval: background %+v", out.Background)
	}
	w.now = first + reportInterval + leaseSweepEvery
	out := w.acme()
	if got := w.usageCall(out.Background); !reflect.DeepEqual(got, []lease.Report{{Lease: "L1", Used: 502}}) {
		t.Errorf("reportEvery 0, at ReportInterval: report %+v, want L1 at 502", got)
	}
}

// configure's reportEvery: absent is the default, 0 reports by interval
// only, 1 to 1024 is a count; anything else is a configuration error.
func TestParseConfigReportEvery(t *testing.T) {
	base := `{"origin":"http://origin.test","jwksUrl":"j","issuer":"i","audience":"a","secret":"s","leases":true`
	for in, want := range map[string]int64{`}`: 0, `,"reportEvery":0}`: ReportByInterval, `,"reportEvery":16}`: 16,
		`,"reportEvery":1}`: 1, `,"reportEvery":1024}`: 1024} {
		if cfg, err := ParseConfig([]byte(base + in)); err != nil || cfg.ReportEvery != want {
			t.Errorf("config %s: ReportEvery %d (%v), want %d", in, cfg.ReportEvery, err, want)
		}
	}
	for _, bad := range []string{`-1`, `-16`, `1.5`, `16.0`, `1e1`, `"16"`, `true`, `null`, `1025`, `99999999999999999999`} {
		if _, err := ParseConfig([]byte(base + `,"reportEvery":` + bad + `}`)); err == nil {
			t.Errorf("config with reportEvery %s accepted", bad)
		}
	}
}
