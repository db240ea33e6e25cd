// Package meter is the origin's metering contract (spec: Limits): the
// per-organisation meters, monthly and hourly, applied atomically with
// their caps, durably, and the enumeration alarm: the per-day record of
// distinct lessons read and the alarm itself, which the read that trips
// it records in its own transaction and which refuses every later op of
// the organisation until it is lifted (spec: States and transitions); and
// the export ledger, a row per minted URL and per export that ships,
// written in the transaction of the op that bills it (Op.Ledger).
//
// The Store applies an Op: a sequence of stages, each a set of steps that
// are billed all or nothing. Stages run in order and stop at the first
// refused stage; the stages before it stay billed. This one mechanism
// expresses every rule of the spec's "Effects of refusals": origin/billing
// builds the op each route bills and turns a refusal into its error. A
// Store reports a refusal as data (Result.Refused, Result.Suspended), not
// as an error: an error from a Store means nothing was applied. Backends:
// sqlitemeter, pgmeter; metertest is the conformance suite both pass.
package meter

import (
	"context"
	"time"

	"github.com/lectern-api/lectern/origin/store"
)

// Meter names one counter.
type Meter uint8

// The meters of the spec's table.
const (
	MonthCalls Meter = iota
	MonthDownloads
	MonthExports
	MonthTestprepItems
	HourCalls
	HourLessonReads
	HourMints
	numMeters
)

// Meters lists every meter.
var Meters = []Meter{MonthCalls, MonthDownloads, MonthExports, MonthTestprepItems, HourCalls, HourLessonReads, HourMints}

// Hourly reports whether the meter resets at the top of the UTC hour;
// the others reset at the top of the UTC month.
func (m Meter) Hourly() bool { return m >= HourCalls }

func (m Meter) String() string {
	return [...]string{"calls", "downloads", "exports", "testprepitems", "calls", "lessonreads", "mints"}[m]
}

// Period is the key of the period m counts in at t: "2026-11" for monthly
// meters, "2026-11-22T10" for hourly ones, UTC.
func (m Meter) Period(t time.Time) string {
	t = t.UTC()
	if m.Hourly() {
		return t.Format("2006-01-02T15")
	}
	return t.Format("2006-01")
}

// NextHour and NextMonth are the next resets after t, UTC.
func NextHour(t time.Time) time.Time { return t.UTC().Truncate(time.Hour).Add(time.Hour) }

// NextMonth is the top of the next UTC month.
func NextMonth(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// Step adds N to a meter under a limit (nil: no cap).
type Step struct {
	Meter Meter
	N     int64
	Limit *int64
	// Force bills the step even when it goes over the limit, and still
	// refuses the op (an hourly cap hit bills the call).
	Force bool
	// Shorten grants min(N, what is left) when at least one unit is
	// left, instead of refusing (test-prep pages).
	Shorten bool
}

// Stage is a set of steps billed all or nothing.
type Stage []Step

// Op is one request's metering.
type Op struct {
	Org    string // the organisation's Key
	Now    time.Time
	Stages []Stage
	// Read, when set, records a lesson read for the enumeration alarm in
	// the same transaction as the meters, if the op passes.
	Read *Read
	// Ledger are the export ledger's rows the op writes, in the same
	// transaction as the meters, if the op passes (at most MaxLedger). A
	// refused or suspended op writes none.
	Ledger []Entry
}

// MaxLedger bounds Op.Ledger: a mint batch is at most 100 URLs.
const MaxLedger = 100

// The kinds of ledger rows.
const (
	KindMedia  = "media"  // a minted media URL
	KindExport = "export" // an export that ships (a signed link or an inline bundle)
)

// Entry is what a ledger row records of one minted URL or shipped export
// (spec: Route rules §4, "Every minted URL is written to the durable
// export ledger"). Its time is the op's Now (Row.Created).
type Entry struct {
	Kind   string // KindMedia or KindExport
	Target string // what it gives access to: a media id, or an export's subject or class
	Format string // "url" for a media URL; an export's format, "zip_url" or "inline"
	Client string // the OAuth client of the request
	// Scopes are the request token's scopes, each without spaces.
	Scopes         []string
	ContentVersion string
	RequestID      string
	// Expires is when the link stops working; zero when none was issued
	// (an inline export).
	Expires time.Time
	// KeyID names the key that signed the link; "" when none was issued.
	KeyID string
}

// Row is a stored ledger row. Its times are kept in UTC to the
// microsecond.
type Row struct {
	// ID is the row's number: rows are numbered in the order their
	// transactions committed, ascending across the whole database, so a
	// listing after an ID never misses a row committed later.
	ID      int64
	Org     string    // the organisation's Key
	Created time.Time // the Now of the op that wrote it
	Entry
}

// Read is a lesson read for the enumeration alarm. The alarm's record is
// the set of distinct lessons an organisation read on one UTC day, kept by
// lesson id, so it survives a corpus reload and is the same from every
// origin whatever corpus version each serves.
type Read struct {
	// Lesson is the lesson's id, "<tier>/<slug>/<classNum>": stable
	// across corpus versions.
	Lesson string
	// Granted is the organisation's granted lessons under the corpus the
	// request is served from: the alarm's denominator (Alarm).
	Granted int
}

// Alarm reports whether lessonsRead distinct lessons in one UTC day is
// more than 40% of granted (spec: States and transitions, enumeration
// alarm). The first lesson read of a day that leaves the day's count
// above it trips the alarm (Result.Tripped).
func Alarm(lessonsRead, granted int) bool {
	return granted > 0 && lessonsRead*5 > granted*2
}

// Result is what an Op did.
type Result struct {
	// Suspended is set when the op was refused because the enumeration
	// alarm of its organisation is in force: nothing was billed or
	// recorded, and Refused is nil. The alarm is read after the batch
	// holds its locks, so an op committed after the op that tripped it
	// (from any origin) is refused, and so is every later op of that
	// batch.
	Suspended bool
	// Refused is the step that refused the op, or nil when it passed.
	Refused *Step
	// Granted is the N granted to a Shorten step (N when not shortened).
	Granted int64
	// After holds every meter's count after the op, in the periods of
	// Op.Now (refused steps not included, forced ones included).
	After Counters
	// LessonsRead is the count of distinct lessons read by the
	// organisation on Op.Now's UTC day, after the op (0 without Op.Read).
	LessonsRead int
	// Tripped is set when Op.Read tripped the enumeration alarm: the
	// read, which passed and is served, left the day's count above 40%
	// of Read.Granted (Alarm), and the alarm had not tripped on that day
	// yet. The alarm is recorded in the op's transaction: from then on
	// every op of the organisation is Suspended until Store.Reinstate.
	Tripped bool
	// LedgerIDs are the ids of the rows Op.Ledger wrote, in its order;
	// nil when the op was refused or suspended.
	LedgerIDs []int64
}

// AlarmState is an enumeration alarm as the read that tripped it left it.
type AlarmState struct {
	TrippedAt   time.Time // that read's Op.Now
	Day         string    // its UTC day, "2006-01-02"
	LessonsRead int       // distinct lessons read that day, that read included
	Granted     int       // its Read.Granted
}

// Usage is what Store.Usage reads of an organisation.
type Usage struct {
	Counters
	// LessonsRead is the count of distinct lessons read on the day asked.
	LessonsRead int
	// Alarm is the enumeration alarm in force, or nil when none is.
	Alarm *AlarmState
}

// Counters are the counts of every meter in one month and hour.
type Counters [numMeters]int64

// Get returns the count of m.
func (c *Counters) Get(m Meter) int64 { return c[m] }

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

// Store applies ops durably: an op's effects are committed before Apply
// returns, and concurrent ops are exact (no over-admission at a hard cap,
// no lost increment, no op admitted after the one that tripped the
// enumeration alarm).
type Store interface {
	// Apply applies op and returns what it did. An error means nothing was
	// applied.
	Apply(ctx context.Context, op Op) (Result, error)
	// Usage reads the counters of org (an organisation's Key) in the
	// periods of now, the count of distinct lessons it read on now's UTC
	// day, and its enumeration alarm if one is in force.
	Usage(ctx context.Context, org string, now time.Time) (Usage, error)
	// Reinstate lifts the enumeration alarm of org (the operator's
	// reinstatement) and reports whether one was in force. The day's
	// record stays: reading more lessons on the day it tripped does not
	// trip it again.
	Reinstate(ctx context.Context, org string) (bool, error)
	// Ledger lists the ledger rows of org (an organisation's Key) with
	// an ID above after, in ID order (the order they committed), at
	// most limit of them (limit >= 1).
	Ledger(ctx context.Context, org string, after int64, limit int) ([]Row, error)
	// LedgerRow reads the ledger row numbered id, whatever its org (a
	// signed link carries its row's id; forensics names the org from it),
	// and reports whether there is one.
	LedgerRow(ctx context.Context, id int64) (Row, bool, error)
	Close() error
}
