package main

import (
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

var t0 = time.Date(2026, 11, 26, 15, 30, 0, 0, time.UTC)

// out is an outcome of org 0 that took a second from t0 + at.
func out(k kind, status int, code string, at time.Duration) outcome {
	return outcome{Kind: k, Status: status, Code: code, Start: t0.Add(at), End: t0.Add(at + time.Second)}
}

func u(pairs ...int64) units {
	var v units
	for i := 0; i+1 < len(pairs); i += 2 {
		v[pairs[i]] = pairs[i+1]
	}
	return v
}

const (
	mc = int64(meter.MonthCalls)
	md = int64(meter.MonthDownloads)
	me = int64(meter.MonthExports)
	mt = int64(meter.MonthTestprepItems)
	hc = int64(meter.HourCalls)
	hl = int64(meter.HourLessonReads)
	hm = int64(meter.HourMints)
)

func TestBillOf(t *testing.T) {
	calls := u(mc, 1, hc, 1)
	with := func(o outcome, f func(*outcome)) outcome { f(&o); return o }
	for _, tc := range []struct {
		name  string
		o     outcome
		plan  plan
		want  units
		known bool
	}{
		{"tiers 200", out(kTiers, 200, "", 0), plan{}, calls, true},
		{"lesson 200", out(kLesson, 200, "", 0), plan{}, u(mc, 1, hc, 1, hl, 1), true},
		{"lesson 304", out(kLesson, 304, "", 0), plan{}, calls, true},
		{"lesson 404", out(kLesson, 404, "LESSON_NOT_FOUND", 0), plan{}, u(mc, 1, hc, 1, hl, 1), true},
		{"put 404", out(kPutProgress, 404, "LESSON_NOT_FOUND", 0), plan{}, calls, true},
		{"put 409", out(kPutProgress, 409, "WRITE_CONFLICT", 0), plan{}, calls, true},
		{"mint 200", with(out(kMint, 200, "", 0), func(o *outcome) { o.N = 7 }), plan{}, u(mc, 1, hc, 1, hm, 7, md, 7), true},
		{"mint download quota", with(out(kMint, 429, "QUOTA_EXCEEDED", 0), func(o *outcome) { o.N = 7 }), plan{}, u(mc, 1, hc, 1, hm, 7), true},
		{"mint calls quota", with(out(kMint, 429, "QUOTA_EXCEEDED", 0), func(o *outcome) { o.N = 7 }), plan{CallsQuota: true}, units{}, true},
		{"mint hourly cap", with(out(kMint, 429, "RATE_LIMITED", 0), func(o *outcome) { o.N = 7 }), plan{}, calls, true},
		{"subject export 200", with(out(kExportSubject, 200, "", 0), func(o *outcome) { o.N = 6 }), plan{}, u(mc, 1, hc, 1, me, 1, md, 6), true},
		{"inline export 304", with(out(kExportSubject, 304, "", 0), func(o *outcome) { o.N = 6 }), plan{}, calls, true},
		{"export limit", out(kExportClass, 429, "EXPORT_LIMIT", 0), plan{}, calls, true},
		{"test-prep page", with(out(kTestprepItems, 200, "", 0), func(o *outcome) { o.N, o.Items = 20, 4 }), plan{}, u(mc, 1, hc, 1, hl, 1, mt, 4), true},
		{"unknown test", out(kTestprepItems, 404, "UNKNOWN_TEST", 0), plan{}, calls, true},
		{"licence", out(kLicense, 200, "", 0), plan{}, units{}, true},
		{"file", out(kFile, 200, "", 0), plan{}, units{}, true},
		{"scope", out(kTiers, 403, "insufficient_scope", 0), plan{}, units{}, true},
		{"not granted", out(kLesson, 403, "CONTENT_NOT_GRANTED", 0), plan{}, units{}, true},
		{"bad parameter", out(kTiers, 400, "BAD_REQUEST", 0), plan{}, units{}, true},
		{"ambiguous", out(kSubject, 400, "AMBIGUOUS_SUBJECT", 0), plan{}, calls, true},
		{"lost lesson", out(kLesson, 0, "", 0), plan{}, u(mc, 1, hc, 1, hl, 1), false},
		{"lost export", with(out(kExportSubject, 500, "INTERNAL", 0), func(o *outcome) { o.N = 6 }), plan{}, u(mc, 1, hc, 1, me, 1, md, 6), false},
		{"lost test-prep page", with(out(kTestprepItems, 0, "", 0), func(o *outcome) { o.N = 20 }), plan{}, u(mc, 1, hc, 1, hl, 1, mt, 20), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := billOf(&tc.o, tc.plan)
			if got != tc.want || known != tc.known {
				t.Errorf("got %v known %v, want %v known %v", got, known, tc.want, tc.known)
			}
		})
	}
}

// A tally that disagrees with the meters fails the check, on either
// side: below what was acknowledged (a lost bill) or above it by more
// than the lost requests can explain (a double bill).
func TestCheckMeters(t *testing.T) {
	outs := []outcome{out(kTiers, 200, "", 0), out(kLesson, 200, "", time.Second), out(kLesson, 0, "", 2*time.Second)}
	ts := tallyAt(outs, []plan{{}}, t0.Add(time.Minute))
	if want := (tally{Acked: u(mc, 2, hc, 2, hl, 1), Unknown: u(mc, 1, hc, 1, hl, 1), Lost: 1}); ts[0] != want {
		t.Fatalf("tally %+v, want %+v", ts[0], want)
	}
	for _, tc := range []struct {
		name    string
		metered units
		fails   []string
	}{
		{"exact", u(mc, 2, hc, 2, hl, 1), nil},
		{"the lost one billed", u(mc, 3, hc, 3, hl, 2), nil},
		{"an acknowledged call lost", u(mc, 1, hc, 2, hl, 1), []string{"month.calls: metered 1"}},
		{"a lesson read lost", u(mc, 2, hc, 2), []string{"hour.lessonreads: metered 0"}},
		{"billed twice", u(mc, 4, hc, 4, hl, 1), []string{"month.calls: metered 4", "hour.calls: metered 4"}},
		{"a download from nowhere", u(mc, 2, hc, 2, hl, 1, md, 1), []string{"month.downloads: metered 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := checkMeters([]string{"acme"}, ts, []units{tc.metered})
			if len(r.Failures) != len(tc.fails) {
				t.Fatalf("failures %q, want %d", r.Failures, len(tc.fails))
			}
			for i, f := range tc.fails {
				if !strings.Contains(r.Failures[i], f) {
					t.Errorf("failure %q, want it to say %q", r.Failures[i], f)
				}
			}
		})
	}
}

// The meters read show the periods of the instant they are read at: a
// request of an earlier hour is not in the hourly meters, and one that
// straddles the hour may be in either.
func TestTallyPeriods(t *testing.T) {
	hour := t0.Truncate(time.Hour).Add(time.Hour) // 16:00
	outs := []outcome{
		{Kind: kLesson, Status: 200, Start: hour.Add(-10 * time.Minute), End: hour.Add(-10*time.Minute + time.Second)},
		{Kind: kLesson, Status: 200, Start: hour.Add(-time.Second / 2), End: hour.Add(time.Second / 2)},
		{Kind: kLesson, Status: 200, Start: hour.Add(time.Minute), End: hour.Add(time.Minute + time.Second)},
	}
	got := tallyAt(outs, []plan{{}}, hour.Add(5*time.Minute))[0]
	want := tally{Acked: u(mc, 3, hc, 1, hl, 1), Unknown: u(hc, 1, hl, 1)}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestCheckLedger(t *testing.T) {
	mint := out(kMint, 200, "", 0)
	mint.ReqID, mint.MintIDs, mint.LinkRows = "r1", []string{"a#c1#audio", "b#c1#image"}, []int64{1, 2}
	export := out(kExportClass, 200, "", time.Second)
	export.ReqID, export.Export = "r2", "high/biology/1"
	lost := out(kExportSubject, 0, "", 2*time.Second)
	lost.ReqID = "r3"
	refused := out(kMint, 429, "RATE_LIMITED", 3*time.Second)
	refused.ReqID = "r4"
	outs := []outcome{mint, export, lost, refused}
	good := []ledgerRow{{1, "media", "a#c1#audio", "r1"}, {2, "media", "b#c1#image", "r1"}, {3, "export", "high/biology/1", "r2"}}
	for _, tc := range []struct {
		name  string
		rows  []ledgerRow
		fails string
	}{
		{"every row", good, ""},
		{"the lost export's row too", append(good[:3:3], ledgerRow{4, "export", "high/biology", "r3"}), ""},
		{"a minted URL missing", []ledgerRow{good[0], good[2]}, "mint (request r1)"},
		{"a row under another id than the link's", []ledgerRow{good[0], {5, "media", "b#c1#image", "r1"}, good[2]}, "mint (request r1)"},
		{"the export missing", good[:2], "export high/biology/1"},
		{"a row of a refused mint", append(good[:3:3], ledgerRow{6, "media", "a#c1#audio", "r4"}), "shipped nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := checkLedger([]string{"acme"}, outs, [][]ledgerRow{tc.rows})
			if tc.fails == "" && len(r.Failures) > 0 || tc.fails != "" && (len(r.Failures) != 1 || !strings.Contains(r.Failures[0], tc.fails)) {
				t.Errorf("failures %q, want %q", r.Failures, tc.fails)
			}
			if r.MintedURLs != 2 || r.Exports != 1 {
				t.Errorf("counted %d URLs, %d exports; want 2, 1", r.MintedURLs, r.Exports)
			}
		})
	}
}

func TestCheckProgress(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	put := func(lesson string, score *float64, status int, at time.Duration) outcome {
		o := out(kPutProgress, status, "", at)
		o.Learner, o.Lesson, o.Score = "ana", lesson, score
		return o
	}
	outs := []outcome{
		put("high/biology/1", f(40), 200, 0),
		put("high/biology/1", f(90), 200, 2*time.Second),
		put("high/biology/1", f(70), 200, 4*time.Second), // the last: nothing after it
		put("high/biology/2", nil, 200, 0),
		put("high/biology/3", f(99), 409, 0), // a conflict saves nothing
		put("high/biology/4", f(10), 0, 0),   // lost: may or may not be saved
	}
	good := map[string]recordItem{"high/biology/1": {f(70), f(90)}, "high/biology/2": {nil, nil}}
	rec := func(xp int64, items map[string]recordItem) map[string]record {
		return map[string]record{"ana": {XP: xp, Items: items}}
	}
	with := func(k string, it recordItem) map[string]recordItem {
		m := map[string]recordItem{k: it}
		for kk, v := range good {
			if kk != k {
				m[kk] = v
			}
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		recs  map[string]record
		fails string
	}{
		{"as written", rec(29, good), ""},
		{"the lost write saved", rec(40, with("high/biology/4", recordItem{f(10), f(10)})), ""},
		{"an acknowledged class missing", rec(10, map[string]recordItem{"high/biology/2": {nil, nil}}), "not in the final record"},
		{"bestScore below an acknowledged score", rec(27, with("high/biology/1", recordItem{f(70), f(70)})), "bestScore 70"},
		{"the last write's score lost", rec(29, with("high/biology/1", recordItem{f(90), f(90)})), "score 90, but the last PUT"},
		{"a score never sent", rec(29, with("high/biology/1", recordItem{f(55), f(90)})), "score 55 was never sent"},
		{"the conflict saved", rec(48, with("high/biology/3", recordItem{f(99), f(99)})), "no PUT that may have saved"},
		{"xp wrong", rec(40, good), "xp 40, want 29"},
		{"no record", map[string]record{}, "no final record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := checkProgress(outs, tc.recs)
			found := false
			for _, f := range r.Failures {
				found = found || strings.Contains(f, tc.fails)
			}
			if tc.fails == "" && len(r.Failures) > 0 || tc.fails != "" && !found {
				t.Errorf("failures %q, want %q", r.Failures, tc.fails)
			}
		})
	}
	// Overlapping writes: either may be the last saved.
	outs = []outcome{put("high/biology/1", f(40), 200, 0), put("high/biology/1", f(60), 200, time.Second/2)}
	for _, score := range []float64{40, 60} {
		if r := checkProgress(outs, rec(16, map[string]recordItem{"high/biology/1": {f(score), f(60)}})); len(r.Failures) > 0 {
			t.Errorf("score %v of two overlapping writes: %q", score, r.Failures)
		}
	}
}

func TestWindows(t *testing.T) {
	var outs []outcome
	for i := range 100 {
		o := out(kTiers, 200, "", time.Duration(i)*100*time.Millisecond)
		o.End = o.Start.Add(time.Duration(i+1) * time.Millisecond)
		if i >= 40 && i < 60 {
			o.Status = 500
		}
		outs = append(outs, o)
	}
	f := fault{What: "SIGKILL origin", At: t0.Add(4 * time.Second), Done: t0.Add(4 * time.Second)}
	recoverTime(&f, outs)
	if want := t0.Add(6*time.Second + 61*time.Millisecond); !f.Recovered.Equal(want) {
		t.Fatalf("recovered at %v, want %v", f.Recovered, want)
	}
	ws := faultWindows(f, 2*time.Second, t0.Add(time.Minute), outs)
	for i, want := range []window{{Name: "before", Requests: 20, P99: 40 * time.Millisecond},
		{Name: "during", Requests: 20, Errors: 20, P99: 60 * time.Millisecond},
		{Name: "after", Requests: 20, P99: 80 * time.Millisecond}} {
		if ws[i].Name != want.Name || ws[i].Requests != want.Requests || ws[i].Errors != want.Errors || ws[i].P99 != want.P99 {
			t.Errorf("window %s: %d requests, %d errors, p99 %s; want %d, %d, %s", ws[i].Name, ws[i].Requests, ws[i].Errors, ws[i].P99,
				want.Requests, want.Errors, want.P99)
		}
	}
	never := fault{What: "SIGKILL origin", At: t0.Add(time.Hour), Done: t0.Add(time.Hour)}
	recoverTime(&never, outs)
	if !never.Recovered.IsZero() {
		t.Errorf("recovered at %v from a fault after every request", never.Recovered)
	}
}
