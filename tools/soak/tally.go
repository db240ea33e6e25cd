package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// kind is what a request of the mix was: it decides the request's bill
// and the answers it may get.
type kind uint8

const (
	kTiers kind = iota
	kSubjects
	kSubject
	kClasses
	kLesson
	kTranscript
	kQuiz
	kMedia
	kMint
	kSearch
	kExportSubject
	kExportClass
	kTestprep
	kTestprepItems
	kLicense
	kProgress
	kPutProgress
	kFile // a download of a minted or exported link (/files/)
	numKinds
)

var kindNames = [numKinds]string{"tiers", "subjects", "subject", "classes", "lesson", "transcript", "quiz", "media",
	"mint", "search", "export-subject", "export-class", "testprep", "testprep-items", "license", "progress",
	"put-progress", "file"}

func (k kind) String() string { return kindNames[k] }

// lessonRead reports whether a 200 of the kind is a lesson read (spec:
// Route rules §2; a test-prep page counts against the same cap).
func (k kind) lessonRead() bool {
	return k == kLesson || k == kTranscript || k == kQuiz || k == kMedia || k == kTestprepItems
}

// outcome is one request of the mix and its answer, as the client saw it.
type outcome struct {
	Org        int // index in the run's organisations
	Kind       kind
	ReqID      string // the X-Request-Id the client sent (the tiers keep it)
	Start, End time.Time
	Status     int    // 0: no answer (the connection failed or was cut)
	Code       string // error.code of an error body
	N          int    // mint: ids asked; test-prep: limit asked; export: classes bundled
	Items      int    // test-prep items returned
	// Ledger: a mint's ids in request order with the ledger rows their
	// links name; an export's target ("tier/slug[/N]").
	MintIDs  []string
	LinkRows []int64
	Export   string
	// Progress: the learner, lesson and score of a PUT.
	Learner, Lesson string
	Score           *float64
	// Unexpected, when not empty, says why the answer is not one the
	// request may get.
	Unexpected string
}

// answered reports whether the client got a definite answer: its bill is
// known. Anything else (no answer, 5xx) may or may not have been billed.
func (o *outcome) answered() bool { return o.Status != 0 && o.Status < 500 }

// success is a 2xx or 304.
func (o *outcome) success() bool { return o.Status/100 == 2 || o.Status == 304 }

// units holds one count per meter, indexed by meter.Meter.
type units [7]int64

func (u *units) add(v units) {
	for i := range u {
		u[i] += v[i]
	}
}

// plan is what the tally needs of an organisation's plan: whether a
// QUOTA_EXCEEDED can be its monthly calls quota (which bills nothing). The
// soak gives an organisation with a calls quota no other monthly quota,
// so the code names the meter.
type plan struct {
	CallsQuota bool
}

// call is the bill of one call: the monthly and the hourly meter.
func call() units {
	var u units
	u[meter.MonthCalls], u[meter.HourCalls] = 1, 1
	return u
}

// billOf is what an answered request must have billed (spec: Limits,
// meters table and "Effects of refusals"; docs/decisions/meters.md), and
// known false for a request whose answer was lost, with the most it can
// have billed instead.
func billOf(o *outcome, p plan) (u units, known bool) {
	if !o.answered() {
		return maxBill(o), false
	}
	if o.Kind == kFile || o.Kind == kLicense { // unmetered: a link is a capability; route 16
		return units{}, true
	}
	switch {
	case o.Status == 304:
		return call(), true // a 304 bills one call and nothing else, inline exports included
	case o.success():
		u = call()
		switch o.Kind {
		case kLesson, kTranscript, kQuiz, kMedia:
			u[meter.HourLessonReads] = 1
		case kMint:
			u[meter.HourMints], u[meter.MonthDownloads] = int64(o.N), int64(o.N)
		case kExportSubject, kExportClass:
			u[meter.MonthExports], u[meter.MonthDownloads] = 1, int64(o.N)
		case kTestprepItems:
			u[meter.HourLessonReads], u[meter.MonthTestprepItems] = 1, int64(o.Items)
		}
		return u, true
	}
	switch o.Code {
	case "RATE_LIMITED", "EXPORT_LIMIT", "WRITE_CONFLICT", "PAYLOAD_TOO_LARGE",
		"BAD_LESSON_ID", "AMBIGUOUS_SUBJECT", "CURSOR_EXPIRED", "UNKNOWN_SUBJECT", "UNKNOWN_TEST", "UNKNOWN_SECTION", "UNKNOWN_MEDIA":
		return call(), true // an hourly cap, a spent allowance, a lost race or a bad target: the call only
	case "LESSON_NOT_FOUND":
		u = call()
		if o.Kind.lessonRead() {
			u[meter.HourLessonReads] = 1 // a 404 on a lesson route is a lesson read; on a PUT it is not
		}
		return u, true
	case "QUOTA_EXCEEDED":
		if p.CallsQuota {
			return units{}, true // the monthly calls quota: nothing billed
		}
		u = call()
		if o.Kind == kMint {
			u[meter.HourMints] = int64(o.N) // the download quota: the call and the hourly reservation
		}
		return u, true
	}
	return units{}, true // 401, 403, a 400 on a parameter, 404 NOT_FOUND: free
}

// maxBill is the most a request of o's kind can bill.
func maxBill(o *outcome) units {
	if o.Kind == kFile || o.Kind == kLicense {
		return units{}
	}
	u := call()
	switch o.Kind {
	case kLesson, kTranscript, kQuiz, kMedia:
		u[meter.HourLessonReads] = 1
	case kMint:
		u[meter.HourMints], u[meter.MonthDownloads] = int64(o.N), int64(o.N)
	case kExportSubject, kExportClass:
		u[meter.MonthExports], u[meter.MonthDownloads] = 1, int64(o.N)
	case kTestprepItems:
		u[meter.HourLessonReads], u[meter.MonthTestprepItems] = 1, int64(o.N)
	}
	return u
}

// tally is one organisation's expected meters for the periods of one
// instant: Acked is what the answered requests billed; Unknown is the
// most the others can have billed (no answer, 5xx, or a request that
// began in an earlier period and ended in this one, which the origin may
// have billed in either).
type tally struct {
	Acked, Unknown units
	Lost           int // requests without an answer (or 5xx) counted in Unknown
}

// tallyAt adds up outcomes per organisation for the periods of at, the
// instant the meters are read: a request that ended in an earlier period
// is not counted.
func tallyAt(outs []outcome, plans []plan, at time.Time) []tally {
	ts := make([]tally, len(plans))
	for i := range outs {
		o := &outs[i]
		u, known := billOf(o, plans[o.Org])
		t := &ts[o.Org]
		if !known {
			t.Lost++
		}
		for _, m := range meter.Meters {
			p := m.Period(at)
			switch {
			case m.Period(o.End) != p:
				// ended in an earlier period
			case known && m.Period(o.Start) == p:
				t.Acked[m] += u[m]
			default:
				t.Unknown[m] += u[m]
			}
		}
	}
	return ts
}

// meterNames are the meters as the admin API names them.
var meterNames = [7]string{"month.calls", "month.downloads", "month.exports", "month.testprepitems", "hour.calls", "hour.lessonreads", "hour.mints"}

// meterReport is the meters check: every organisation's meters within
// its tally (acknowledged ≤ metered ≤ acknowledged + unknown).
type meterReport struct {
	Acked, Unknown, Metered units // over every organisation
	Lost                    int
	Failures                []string
}

// checkMeters compares the meters read (per organisation, in the periods
// of the instant the tallies were made for) with the tallies.
func checkMeters(names []string, ts []tally, metered []units) meterReport {
	var r meterReport
	for i, t := range ts {
		r.Acked.add(t.Acked)
		r.Unknown.add(t.Unknown)
		r.Metered.add(metered[i])
		r.Lost += t.Lost
		for m := range meterNames {
			if got := metered[i][m]; got < t.Acked[m] || got > t.Acked[m]+t.Unknown[m] {
				r.Failures = append(r.Failures, fmt.Sprintf("%s %s: metered %d, want %d acknowledged + at most %d unknown",
					names[i], meterNames[m], got, t.Acked[m], t.Unknown[m]))
			}
		}
	}
	return r
}

// ledgerRow is what the ledger check reads of a row of the admin API's
// export ledger.
type ledgerRow struct {
	ID        int64  `json:"id"`
	Kind      string `json:"kind"`
	Target    string `json:"target"`
	RequestID string `json:"requestId"`
}

// ledgerReport is the ledger check.
type ledgerReport struct {
	MintedURLs, Exports, Rows int // acknowledged; rows read
	Failures                  []string
}

// checkLedger holds an organisation's ledger (rows of names[org]) to the
// outcomes: every URL a 200 mint answered is a media row of that request
// with its id, in order, under the row id its link names; every export a
// 200 shipped is one export row of its request; and every row belongs to
// a mint or export that was answered 200 or whose answer was lost.
func checkLedger(names []string, outs []outcome, rows [][]ledgerRow) ledgerReport {
	var r ledgerReport
	byReq := make([]map[string][]ledgerRow, len(rows))
	for org, rs := range rows {
		r.Rows += len(rs)
		byReq[org] = map[string][]ledgerRow{}
		for _, row := range rs {
			byReq[org][row.RequestID] = append(byReq[org][row.RequestID], row)
		}
	}
	fail := func(format string, args ...any) {
		if len(r.Failures) < 20 {
			r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
		}
	}
	owners := make([]map[string]bool, len(rows)) // request ids that may own rows
	for i := range owners {
		owners[i] = map[string]bool{}
	}
	for i := range outs {
		o := &outs[i]
		isExport := o.Kind == kExportSubject || o.Kind == kExportClass
		if o.Kind != kMint && !isExport {
			continue
		}
		if !o.answered() {
			owners[o.Org][o.ReqID] = true
			// Its answer was lost (an origin killed or frozen under it,
			// the edge sending it to another): billed at most once.
			if most := max(o.N, 1); isExport && len(byReq[o.Org][o.ReqID]) > 1 || !isExport && len(byReq[o.Org][o.ReqID]) > most {
				fail("%s: request %s without an answer has %d ledger rows: billed twice", names[o.Org], o.ReqID, len(byReq[o.Org][o.ReqID]))
			}
			continue
		}
		if o.Status != 200 {
			continue
		}
		owners[o.Org][o.ReqID] = true
		got := byReq[o.Org][o.ReqID]
		if isExport {
			r.Exports++
			if len(got) != 1 || got[0].Kind != "export" || got[0].Target != o.Export {
				fail("%s: export %s (request %s) shipped; ledger rows %v, want one export row", names[o.Org], o.Export, o.ReqID, got)
			}
			continue
		}
		r.MintedURLs += len(o.MintIDs)
		ok := len(got) == len(o.MintIDs) && len(o.LinkRows) == len(o.MintIDs)
		for j := 0; ok && j < len(got); j++ {
			ok = got[j].Kind == "media" && got[j].Target == o.MintIDs[j] && got[j].ID == o.LinkRows[j]
		}
		if !ok {
			fail("%s: mint (request %s) answered %d URLs (rows %v); ledger rows %v", names[o.Org], o.ReqID, len(o.MintIDs), o.LinkRows, got)
		}
	}
	for org, rs := range rows {
		for _, row := range rs {
			if !owners[org][row.RequestID] {
				fail("%s: ledger row %d (%s %s) of request %q, which shipped nothing", names[org], row.ID, row.Kind, row.Target, row.RequestID)
			}
		}
	}
	return r
}

// record is a learner's progress as the final GET read it.
type record struct {
	XP    int64
	Items map[string]recordItem // by lessonId
}

type recordItem struct {
	Score, BestScore *float64
}

// progressReport is the progress check.
type progressReport struct {
	Learners, Classes, AckedPuts int
	Failures                     []string
}

// checkProgress holds each learner's final record to the PUTs: every
// class a PUT answered 200 for is recorded; its bestScore is the best
// score of the PUTs that may have been saved (answered 200, or lost), at
// least the best answered 200; its score is one of theirs, and the last
// answered one's when no other PUT of the class overlapped or followed
// it; no class is recorded that no such PUT wrote; and the XP is the sum
// over classes of 10 + floor(bestScore / 10). A 409 saved nothing.
func checkProgress(outs []outcome, records map[string]record) progressReport {
	type key struct{ learner, lesson string }
	puts := map[key][]*outcome{}
	learners := map[string]bool{}
	var r progressReport
	for i := range outs {
		o := &outs[i]
		if o.Kind != kPutProgress || o.Learner == "" {
			continue
		}
		learners[o.Learner] = true
		if o.Status == 200 {
			r.AckedPuts++
		}
		if o.Status == 200 || !o.answered() {
			k := key{o.Learner, o.Lesson}
			puts[k] = append(puts[k], o)
		}
	}
	fail := func(format string, args ...any) {
		if len(r.Failures) < 20 {
			r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
		}
	}
	eq := func(a, b *float64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
	for k, ps := range puts {
		var last *outcome // the answered PUT that began last
		var best *float64
		for _, p := range ps {
			if p.Status == 200 {
				if last == nil || p.Start.After(last.Start) {
					last = p
				}
				if p.Score != nil && (best == nil || *p.Score > *best) {
					best = p.Score
				}
			}
		}
		rec, ok := records[k.learner].Items[k.lesson]
		if !ok {
			if last != nil {
				fail("%s %s: %d PUTs answered 200, not in the final record", k.learner, k.lesson, countOK(ps))
			}
			continue
		}
		r.Classes++
		var scores []*float64
		for _, p := range ps {
			scores = append(scores, p.Score)
		}
		if !slices.ContainsFunc(scores, func(s *float64) bool { return eq(s, rec.Score) }) {
			fail("%s %s: score %s was never sent", k.learner, k.lesson, fmtScore(rec.Score))
		}
		if rec.BestScore != nil && !slices.ContainsFunc(scores, func(s *float64) bool { return eq(s, rec.BestScore) }) ||
			best != nil && (rec.BestScore == nil || *rec.BestScore < *best) {
			fail("%s %s: bestScore %s, but a PUT answered 200 sent %s", k.learner, k.lesson, fmtScore(rec.BestScore), fmtScore(best))
		}
		if last != nil && !eq(rec.Score, last.Score) {
			alone := true
			for _, p := range ps {
				if p != last && !p.End.Before(last.Start) {
					alone = false
				}
			}
			if alone {
				fail("%s %s: score %s, but the last PUT (answered 200, nothing after it) sent %s", k.learner, k.lesson, fmtScore(rec.Score), fmtScore(last.Score))
			}
		}
	}
	for learner, rec := range records {
		r.Learners++
		var xp int64
		for lesson, it := range rec.Items {
			if _, ok := puts[key{learner, lesson}]; !ok {
				fail("%s %s: recorded, but no PUT that may have saved wrote it", learner, lesson)
			}
			xp += 10
			if it.BestScore != nil {
				xp += int64(*it.BestScore) / 10
			}
		}
		if xp != rec.XP {
			fail("%s: xp %d, want %d from its %d classes", learner, rec.XP, xp, len(rec.Items))
		}
	}
	for learner := range learners {
		if _, ok := records[learner]; !ok {
			fail("%s: wrote progress; no final record read", learner)
		}
	}
	sort.Strings(r.Failures)
	return r
}

func countOK(ps []*outcome) int {
	n := 0
	for _, p := range ps {
		if p.Status == 200 {
			n++
		}
	}
	return n
}

func fmtScore(s *float64) string {
	if s == nil {
		return "null"
	}
	return strings.TrimSuffix(fmt.Sprintf("%.2f", *s), ".00")
}
