// Package billing is the origin's billing policy (spec: Limits, meters
// table and "Effects of refusals"): one method per kind of outcome, each
// the spec's rule in one place, expressed as a meter.Op the meter.Store
// applies; the 429 (or 403 ORG_SUSPENDED) a refused op answers; and the
// RateLimit headers of a bill. Every method takes the organisation as read
// by the gate for this request, so its plan's limits are current.
//
// What is not here bills nothing: openapi.json, /v1/license, and every
// refusal before the gate or by entitlement (401, 403, a 400 on a
// parameter, a 404 on an unknown route). Nor does a request these
// functions refuse because the enumeration alarm is in force: it is the
// gate's refusal, 403 ORG_SUSPENDED, which bills nothing (the gate reads
// the stored status; the meter holds the alarm, so its refusal comes at
// billing time, docs/decisions/enumeration-alarm.md).
package billing

import (
	"context"
	"strconv"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/ratelimit"
)

// Biller applies the billing rules to a meter.Store.
//
// Each method returns the Bill of the op and, when the op was refused, the
// refusal as an *apierr.Error: the 429 of the cap or quota that refused
// it, or the 403 ORG_SUSPENDED of an enumeration alarm in force. The Bill
// is filled on a refusal too (what was billed, its Headers). Any other
// error is the store's: nothing was applied and the Bill is zero.
type Biller struct {
	Store meter.Store
	// Leases, when set, recalls an organisation's edge leases when an op
	// was refused only because of their reservations
	// (meter.Result.Reserved): the op is then applied once more, so that
	// a lease never causes a false 429 (docs/edge.md, Leases).
	Leases Recaller
}

// Recaller takes back an organisation's leases (origin/lease.Manager).
type Recaller interface {
	// Recall returns once org's leases (an organisation's meter.Key) are
	// revoked, or their reservations ended, or its bound passed.
	Recall(ctx context.Context, org string)
}

// Bill is what a billing call did. LedgerIDs (of meter.Result) are the
// ids of the ledger rows a Mint or an Export wrote, in the order of its
// entries: the ids their signed links carry.
type Bill struct {
	meter.Result
	op meter.Op
}

// call is the stages every billed request starts with. A spent monthly
// quota refuses with nothing billed; an hourly cap hit bills the call and
// refuses (spec: an hourly cap hit bills the call only).
func call(o *store.Org) []meter.Stage {
	return []meter.Stage{
		{{Meter: meter.MonthCalls, N: 1, Limit: o.Quota.Calls}},
		{{Meter: meter.HourCalls, N: 1, Limit: o.RateLimits.CallsPerHour, Force: true}},
	}
}

// Call bills one call and nothing else: a page of tiers, subjects,
// classes, search hits or the test-prep catalog; a 304 on those routes and
// on an inline export; and a refusal after the gate that bills the call
// only (a bad id, an ambiguous subject, an expired cursor, an unknown
// subject, test, section or media id).
func (b *Biller) Call(ctx context.Context, o *store.Org, now time.Time) (Bill, error) {
	return b.apply(ctx, meter.Op{Org: meter.Key(o), Now: now, Stages: call(o)}, "")
}

// LessonRead bills a lesson, transcript, quiz or media-list read: one call
// and one lesson read against the hourly cap. read is the lesson for the
// enumeration alarm, nil for a 404 LESSON_NOT_FOUND (which still bills a
// call and a lesson read). Bill.Tripped reports the read that tripped the
// alarm: it is served, and the organisation's next call is refused.
func (b *Biller) LessonRead(ctx context.Context, o *store.Org, now time.Time, read *meter.Read) (Bill, error) {
	stages := append(call(o), meter.Stage{{Meter: meter.HourLessonReads, N: 1, Limit: o.RateLimits.LessonReadsPerHour}})
	return b.apply(ctx, meter.Op{Org: meter.Key(o), Now: now, Stages: stages, Read: read}, "")
}

// Mint bills a batch of media URLs, one per ledger entry (duplicates
// included), and writes the entries to the export ledger in the same
// transaction: one call; the hourly mints reserved first; then the
// monthly downloads. A batch stopped by the hourly cap bills the call
// only; one stopped by the monthly download quota bills the call plus the
// hourly reservation (spec: Effects of refusals); neither writes a row.
func (b *Biller) Mint(ctx context.Context, o *store.Org, now time.Time, urls []meter.Entry) (Bill, error) {
	n := int64(len(urls))
	stages := append(call(o),
		meter.Stage{{Meter: meter.HourMints, N: n, Limit: o.RateLimits.URLMintsPerHour}},
		meter.Stage{{Meter: meter.MonthDownloads, N: n, Limit: o.Quota.Downloads}})
	return b.apply(ctx, meter.Op{Org: meter.Key(o), Now: now, Stages: stages, Ledger: urls}, "")
}

// Export bills an export that ships a bundle or a signed link, and writes
// its ledger entry in the same transaction: one call, one export and one
// download per class (a class export is one class), the export and its
// downloads all or nothing, either format. A spent export allowance is
// EXPORT_LIMIT, a spent download quota QUOTA_EXCEEDED: either bills the
// call only and writes no row. An inline export answered 304, or refused
// 413, is Call instead.
func (b *Biller) Export(ctx context.Context, o *store.Org, now time.Time, classes int, export meter.Entry) (Bill, error) {
	op := exportOp(o, now, classes)
	op.Ledger = []meter.Entry{export}
	return b.apply(ctx, op, "")
}

// The order of an inline export (issue #36, point 3): it used to build
// its bundle and only then bill, so eight at once with room for one built
// eight bundles and refused seven. Now its units are reserved first, as a
// mint's are: ReserveExport bills the export's op, but for its ledger row,
// before any bundle work, so a refused export builds nothing however many
// arrive at once; Shipped writes the row once the bundle ships, and
// Refund gives back the export and its downloads when it does not (a 413,
// no room, a failed build), the call staying billed, as the spec bills a
// 413. Each of the three is applied under a Once key of its own (the
// request's, and "/shipped" or "/refund" after it), so an edge sending
// the request to a second origin bills, ships and refunds it once.
//
// Shipped and Refund of one request exclude each other across origins
// (meter.Op.Unless; the review of #36 point 3): the edge may send the
// request to origin B while origin A, which reserved it, is slow; B's
// reservation is A's duplicate and B ships; A then fails and refunds. Its
// Refund names "/shipped", so it gives nothing back once any origin
// shipped. The other way round, A refunded before B ships: B's Shipped
// names "/refund" and applies nothing, and Shipped then bills the export
// and its downloads again with the row, under "/reshipped" (once however
// many origins ship), against the limits as they are now: an allowance
// another export took meanwhile refuses it (EXPORT_LIMIT or
// QUOTA_EXCEEDED), the bundle is not sent, and the request is billed its
// call only. Either way a request that ships bills one export.

// ReserveExport bills an inline export before its bundle is read or
// built: Export's op without its ledger row (Shipped writes it). Every
// inline export is billed so, whether its bundle is stored or not, so
// that two origins serving one request apply one op of one shape.
func (b *Biller) ReserveExport(ctx context.Context, o *store.Org, now time.Time, classes int) (Bill, error) {
	return b.apply(ctx, exportOp(o, now, classes), "")
}

// Shipped writes the ledger row of an inline export of classes classes
// ReserveExport billed, once its bundle ships; it bills nothing, unless
// the request's reservation was refunded already (by an origin that
// failed it): then it bills the export and its downloads again, and a
// refusal of those (a 429 as Export's, or 403 ORG_SUSPENDED) is its
// error: the bundle must not ship.
func (b *Biller) Shipped(ctx context.Context, o *store.Org, now time.Time, classes int, export meter.Entry) error {
	bill, err := b.applyUnless(ctx, meter.Op{Org: meter.Key(o), Now: now, Ledger: []meter.Entry{export}}, "/shipped", "/refund")
	if err != nil || !bill.Excluded {
		return err
	}
	op := meter.Op{Org: meter.Key(o), Now: now, Stages: []meter.Stage{exportStage(o, classes)}, Ledger: []meter.Entry{export}}
	_, err = b.apply(ctx, op, "/reshipped")
	return err
}

// Refund gives back the export and the downloads ReserveExport billed for
// an inline export that does not ship; its call stays billed. Once any
// origin shipped the request (Shipped), it gives back nothing.
func (b *Biller) Refund(ctx context.Context, o *store.Org, now time.Time, classes int) error {
	_, err := b.applyUnless(ctx, meter.Op{Org: meter.Key(o), Now: now, Stages: []meter.Stage{{
		{Meter: meter.MonthExports, N: 1, Refund: true},
		{Meter: meter.MonthDownloads, N: int64(classes), Refund: true},
	}}}, "/refund", "/shipped")
	return err
}

// exportOp is the op of an export of classes classes, without a ledger
// row.
func exportOp(o *store.Org, now time.Time, classes int) meter.Op {
	return meter.Op{Org: meter.Key(o), Now: now, Stages: append(call(o), exportStage(o, classes))}
}

// exportStage bills an export of classes classes: one export and a
// download per class, all or nothing.
func exportStage(o *store.Org, classes int) meter.Stage {
	return meter.Stage{
		{Meter: meter.MonthExports, N: 1, Limit: o.Quota.Exports},
		{Meter: meter.MonthDownloads, N: int64(classes), Limit: o.Quota.Downloads},
	}
}

// ExportSpent reports whether an export of classes classes by o is sure
// to be refused by Export, given o's counters before it (meter.Store's
// Usage): its monthly calls, exports or downloads, or its hourly calls,
// are spent. Counters only grow within their periods, so what it reports
// Export refuses; an export it does not report may still be refused.
func ExportSpent(o *store.Org, c meter.Counters, classes int) bool {
	over := func(m meter.Meter, n int64, limit *int64) bool { return limit != nil && c.Get(m)+n > *limit }
	return over(meter.MonthCalls, 1, o.Quota.Calls) || over(meter.HourCalls, 1, o.RateLimits.CallsPerHour) ||
		over(meter.MonthExports, 1, o.Quota.Exports) || over(meter.MonthDownloads, int64(classes), o.Quota.Downloads)
}

// Suspended is the refusal of a request of an organisation whose
// enumeration alarm is in force: 403 ORG_SUSPENDED, nothing billed.
func Suspended() *apierr.Error {
	return apierr.New(apierr.OrgSuspended, "The organisation's plan is suspended by the enumeration alarm: more than 40% of its granted lessons were read in one UTC day. Content access is suspended; contact the service operator.")
}

// TestprepPage bills a page of up to want test-prep items: one call, one
// lesson read against the hourly cap (the enumeration alarm does not see
// it), and the items, shortened to what is left of the monthly allowance
// rather than refused. Bill.Granted is the number of items to ship; they
// are charged before they ship (spec: Route rules §6).
func (b *Biller) TestprepPage(ctx context.Context, o *store.Org, now time.Time, want int) (Bill, error) {
	st := meter.Stage{{Meter: meter.HourLessonReads, N: 1, Limit: o.RateLimits.LessonReadsPerHour}}
	if want > 0 {
		st = append(st, meter.Step{Meter: meter.MonthTestprepItems, N: int64(want), Limit: o.Quota.TestprepItems, Shorten: true})
	}
	return b.apply(ctx, meter.Op{Org: meter.Key(o), Now: now, Stages: append(call(o), st)}, "")
}

// apply applies op under the request's Once key followed by suffix: ""
// for a request's bill, another for a second op of the request
// (Shipped, Refund), whose shape differs.
func (b *Biller) apply(ctx context.Context, op meter.Op, suffix string) (Bill, error) {
	return b.applyUnless(ctx, op, suffix, "")
}

// applyUnless is apply, the op excluded (meter.Op.Unless) by the op of
// the request's key followed by unless when unless is not "" and the
// request has a key.
func (b *Biller) applyUnless(ctx context.Context, op meter.Op, suffix, unless string) (Bill, error) {
	once(ctx, &op)
	if op.Once != "" {
		if unless != "" {
			op.Unless = op.Once + unless
		}
		op.Once += suffix
	}
	res, err := b.Store.Apply(ctx, op)
	if err == nil && res.Reserved && b.Leases != nil {
		b.Leases.Recall(ctx, op.Org)
		res, err = b.Store.Apply(ctx, op)
	}
	if err != nil {
		return Bill{}, err
	}
	bill := Bill{Result: res, op: op}
	switch {
	case res.Suspended:
		return bill, Suspended()
	case res.Refused != nil:
		return bill, refusal(*res.Refused, res.After, op.Now)
	}
	return bill, nil
}

// secondsUntil is the whole seconds from now to t, at least 1.
func secondsUntil(now, t time.Time) int64 { return ratelimit.Seconds(t.Sub(now)) }

// refusal is the 429 for a refused step: RATE_LIMITED for an hourly cap
// (Retry-After at most 3600 s), EXPORT_LIMIT for the export allowance,
// QUOTA_EXCEEDED for any other monthly meter (Retry-After to the month
// boundary, quotaResetsAt the instant).
func refusal(s meter.Step, after meter.Counters, now time.Time) *apierr.Error {
	if s.Meter.Hourly() {
		wait := secondsUntil(now, meter.NextHour(now))
		return &apierr.Error{Code: apierr.RateLimited, RetryAfter: apierr.Int(wait),
			Message: "The hourly " + s.Meter.String() + " cap of " + limitText(s.Limit) + " is reached; retry after " + strconv.FormatInt(wait, 10) + " s."}
	}
	reset := meter.NextMonth(now)
	e := &apierr.Error{Code: apierr.QuotaExceeded, RetryAfter: apierr.Int(secondsUntil(now, reset)),
		QuotaResetsAt: reset.Format(time.RFC3339),
		Message:       "The monthly " + s.Meter.String() + " quota of " + limitText(s.Limit) + " is spent; it resets at " + reset.Format(time.RFC3339) + "."}
	if s.Meter == meter.MonthExports {
		e.Code = apierr.ExportLimit
		e.ExportsUsed = apierr.Int(after.Get(meter.MonthExports))
		e.ExportsLimit = apierr.Int(*s.Limit)
		e.Message = "The monthly export allowance of " + limitText(s.Limit) + " is spent; it resets at " + reset.Format(time.RFC3339) + "."
	}
	return e
}

func limitText(l *int64) string {
	if l == nil {
		return "none"
	}
	return strconv.FormatInt(*l, 10)
}

// CallBill is the Bill of one call of o at now had it left the meters at
// after: what a 304 bills, for the headers of the 304s an edge answers
// under a lease (docs/edge.md, Leases).
func CallBill(o *store.Org, now time.Time, after meter.Counters) Bill {
	return Bill{Result: meter.Result{After: after}, op: meter.Op{Org: meter.Key(o), Now: now, Stages: call(o)}}
}

// Limit is one capped meter of a bill, as its RateLimit fields name it.
type Limit struct {
	Name   string    // "calls-month", "calls-hour", ...
	Quota  int64     // its limit
	Window int64     // its period, in seconds
	Left   int64     // what is left of it after the bill, at least 0
	Reset  time.Time // its next reset
}

// Limits are the capped meters the bill touched, each once, in the order
// of its op's steps: those Headers reports.
func (b Bill) Limits() []Limit {
	var out []Limit
	var seen uint64 // a bit per meter
	for _, st := range b.op.Stages {
		for _, s := range st {
			if s.Limit == nil || seen&(1<<s.Meter) != 0 {
				continue
			}
			seen |= 1 << s.Meter
			l := Limit{Name: s.Meter.String() + "-month", Quota: *s.Limit, Reset: meter.NextMonth(b.op.Now),
				Left: max(*s.Limit-b.After.Get(s.Meter), 0)}
			if s.Meter.Hourly() {
				l.Name, l.Reset, l.Window = s.Meter.String()+"-hour", meter.NextHour(b.op.Now), 3600
			} else {
				l.Window = int64(l.Reset.Sub(l.Reset.AddDate(0, -1, 0)) / time.Second)
			}
			out = append(out, l)
		}
	}
	return out
}

// Headers are the RateLimit-Policy and RateLimit fields (IETF
// draft-ietf-httpapi-ratelimit-headers) for the capped meters this bill
// touched, so clients can pace themselves before they meet a 429. A bill
// with no capped meter has none.
func (b Bill) Headers() []apierr.Header {
	var policy, state []byte
	for _, l := range b.Limits() {
		if len(policy) > 0 {
			policy = append(policy, ", "...)
			state = append(state, ", "...)
		}
		policy = ratelimit.AppendPolicy(policy, l.Name, l.Quota, l.Window)
		state = ratelimit.AppendState(state, l.Name, l.Left, secondsUntil(b.op.Now, l.Reset))
	}
	if policy == nil {
		return nil
	}
	return []apierr.Header{{Name: "RateLimit-Policy", Value: string(policy)}, {Name: "RateLimit", Value: string(state)}}
}
