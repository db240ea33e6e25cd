package meter

import (
	"context"
	"strconv"
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/apierr"
)

// The billing API: one function per kind of outcome, each the spec's rule
// in one place (spec: Limits, meters table and "Effects of refusals").
// Every function takes the organisation as read by the gate for this
// request, so its plan's limits are current.
//
// What is not here bills nothing: openapi.json, /v1/license, and every
// refusal before the gate or by entitlement (401, 403, a 400 on a
// parameter, a 404 on an unknown route). Nor does a request these
// functions refuse because the enumeration alarm is in force: it is the
// gate's refusal, 403 ORG_SUSPENDED, which bills nothing (the gate reads
// the stored status; the meter holds the alarm, so its refusal comes at
// billing time, docs/decisions.md: Enumeration alarm).

// Key is what o's meters and enumeration record are kept under: its id and
// its generation, so that an organisation created again under a deleted
// one's id starts with no meter or count of the old one (DESIGN.md, admin
// API: a new org starts with no meters), and a request of the old one
// still in flight, or a batched commit of its meters, cannot add to the
// new one's. An organisation created before generations existed keeps
// its bare id, and so its meters. Org ids never hold '/'.
func Key(o *store.Org) string {
	if o.Generation == "" {
		return o.ID
	}
	return o.ID + "/" + o.Generation
}

// Biller applies the billing rules to a Store.
type Biller struct {
	Store Store
}

// Bill is the outcome of a billing call.
type Bill struct {
	Result
	// Err is the 429 that refused the request, or the 403 ORG_SUSPENDED
	// of an enumeration alarm in force; nil when it passed.
	Err *apierr.Error
	op  Op
	org *store.Org
}

// call is the stages every billed request starts with. A spent monthly
// quota refuses with nothing billed; an hourly cap hit bills the call and
// refuses (spec: an hourly cap hit bills the call only).
func call(o *store.Org) []Stage {
	return []Stage{
		{{Meter: MonthCalls, N: 1, Limit: o.Quota.Calls}},
		{{Meter: HourCalls, N: 1, Limit: o.RateLimits.CallsPerHour, Force: true}},
	}
}

// Call bills one call and nothing else: a page of tiers, subjects,
// classes, search hits or the test-prep catalog; a 304 on those routes and
// on an inline export; and a refusal after the gate that bills the call
// only (a bad id, an ambiguous subject, an expired cursor, an unknown
// subject, test, section or media id).
func (b *Biller) Call(ctx context.Context, o *store.Org, now time.Time) (Bill, error) {
	return b.apply(ctx, o, Op{Org: Key(o), Now: now, Stages: call(o)})
}

// LessonRead bills a lesson, transcript, quiz or media-list read: one call
// and one lesson read against the hourly cap. read is the lesson for the
// enumeration alarm, nil for a 404 LESSON_NOT_FOUND (which still bills a
// call and a lesson read). Bill.Tripped reports the read that tripped the
// alarm: it is served, and the organisation's next call is refused.
func (b *Biller) LessonRead(ctx context.Context, o *store.Org, now time.Time, read *Read) (Bill, error) {
	stages := append(call(o), Stage{{Meter: HourLessonReads, N: 1, Limit: o.RateLimits.LessonReadsPerHour}})
	return b.apply(ctx, o, Op{Org: Key(o), Now: now, Stages: stages, Read: read})
}

// Mint bills a batch of n media URLs: one call; n hourly mints reserved
// first; then n monthly downloads. A batch stopped by the hourly cap bills
// the call only; one stopped by the monthly download quota bills the call
// plus the hourly reservation (spec: Effects of refusals).
func (b *Biller) Mint(ctx context.Context, o *store.Org, now time.Time, n int) (Bill, error) {
	stages := append(call(o),
		Stage{{Meter: HourMints, N: int64(n), Limit: o.RateLimits.URLMintsPerHour}},
		Stage{{Meter: MonthDownloads, N: int64(n), Limit: o.Quota.Downloads}})
	return b.apply(ctx, o, Op{Org: Key(o), Now: now, Stages: stages})
}

// Export bills an export that ships a bundle or a signed link: one call,
// one export and one download per class (a class export is one class),
// the export and its downloads all or nothing. An inline export answered
// 304 is Call instead.
func (b *Biller) Export(ctx context.Context, o *store.Org, now time.Time, classes int) (Bill, error) {
	stages := append(call(o), Stage{
		{Meter: MonthExports, N: 1, Limit: o.Quota.Exports},
		{Meter: MonthDownloads, N: int64(classes), Limit: o.Quota.Downloads},
	})
	return b.apply(ctx, o, Op{Org: Key(o), Now: now, Stages: stages})
}

// TestprepPage bills a page of up to want test-prep items: one call, one
// lesson read against the hourly cap (the enumeration alarm does not see
// it), and the items, shortened to what is left of the monthly allowance
// rather than refused. Bill.Granted is the number of items to ship; they
// are charged before they ship (spec: Route rules §6).
func (b *Biller) TestprepPage(ctx context.Context, o *store.Org, now time.Time, want int) (Bill, error) {
	st := Stage{{Meter: HourLessonReads, N: 1, Limit: o.RateLimits.LessonReadsPerHour}}
	if want > 0 {
		st = append(st, Step{Meter: MonthTestprepItems, N: int64(want), Limit: o.Quota.TestprepItems, Shorten: true})
	}
	return b.apply(ctx, o, Op{Org: Key(o), Now: now, Stages: append(call(o), st)})
}

func (b *Biller) apply(ctx context.Context, o *store.Org, op Op) (Bill, error) {
	res, err := b.Store.Apply(ctx, op)
	if err != nil {
		return Bill{}, err
	}
	bill := Bill{Result: res, op: op, org: o}
	switch {
	case res.Suspended:
		bill.Err = apierr.New(apierr.OrgSuspended, "The organisation's plan is suspended by the enumeration alarm: more than 40% of its granted lessons were read in one UTC day. Content access is suspended; contact the service operator.")
	case res.Refused != nil:
		bill.Err = refusal(o, *res.Refused, res.After, op.Now)
	}
	return bill, nil
}

// Alarm reports whether lessonsRead distinct lessons in one UTC day is
// more than 40% of granted (spec: States and transitions, enumeration
// alarm). The first lesson read of a day that leaves the day's count
// above it trips the alarm (Result.Tripped).
func Alarm(lessonsRead, granted int) bool {
	return granted > 0 && lessonsRead*5 > granted*2
}

// NextHour and NextMonth are the next resets after t, UTC.
func NextHour(t time.Time) time.Time { return t.UTC().Truncate(time.Hour).Add(time.Hour) }

// NextMonth is the top of the next UTC month.
func NextMonth(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// secondsUntil is the whole seconds from now to t, at least 1.
func secondsUntil(now, t time.Time) int64 {
	s := int64((t.Sub(now) + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// refusal is the 429 for a refused step: RATE_LIMITED for an hourly cap
// (Retry-After at most 3600 s), EXPORT_LIMIT for the export allowance,
// QUOTA_EXCEEDED for any other monthly meter (Retry-After to the month
// boundary, quotaResetsAt the instant).
func refusal(o *store.Org, s Step, after Counters, now time.Time) *apierr.Error {
	if s.Meter.Hourly() {
		wait := secondsUntil(now, NextHour(now))
		return &apierr.Error{Code: apierr.RateLimited, RetryAfter: apierr.Int(wait),
			Message: "The hourly " + s.Meter.String() + " cap of " + limitText(s.Limit) + " is reached; retry after " + strconv.FormatInt(wait, 10) + " s."}
	}
	reset := NextMonth(now)
	e := &apierr.Error{Code: apierr.QuotaExceeded, RetryAfter: apierr.Int(secondsUntil(now, reset)),
		QuotaResetsAt: reset.Format(time.RFC3339),
		Message:       "The monthly " + s.Meter.String() + " quota of " + limitText(s.Limit) + " is spent; it resets at " + reset.Format(time.RFC3339) + "."}
	if s.Meter == MonthExports {
		e.Code = apierr.ExportLimit
		e.ExportsUsed = apierr.Int(after.Get(MonthExports))
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

// Headers are the RateLimit-Policy and RateLimit fields (IETF
// draft-ietf-httpapi-ratelimit-headers) for the capped meters this bill
// touched, so clients can pace themselves before they meet a 429. A bill
// with no capped meter has none.
func (b Bill) Headers() []apierr.Header {
	var policy, state []byte
	seen := [numMeters]bool{}
	for _, st := range b.op.Stages {
		for _, s := range st {
			if s.Limit == nil || seen[s.Meter] {
				continue
			}
			seen[s.Meter] = true
			name, window, reset := `"`+s.Meter.String()+`-month"`, int64(0), NextMonth(b.op.Now)
			if s.Meter.Hourly() {
				name, reset = `"`+s.Meter.String()+`-hour"`, NextHour(b.op.Now)
				window = 3600
			} else {
				window = int64(reset.Sub(reset.AddDate(0, -1, 0)) / time.Second)
			}
			left := *s.Limit - b.After.Get(s.Meter)
			if left < 0 {
				left = 0
			}
			if len(policy) > 0 {
				policy = append(policy, ", "...)
				state = append(state, ", "...)
			}
			policy = append(policy, name+";q="+strconv.FormatInt(*s.Limit, 10)+";w="+strconv.FormatInt(window, 10)...)
			state = append(state, name+";r="+strconv.FormatInt(left, 10)+";t="+strconv.FormatInt(secondsUntil(b.op.Now, reset), 10)...)
		}
	}
	if policy == nil {
		return nil
	}
	return []apierr.Header{{Name: "RateLimit-Policy", Value: string(policy)}, {Name: "RateLimit", Value: string(state)}}
}
