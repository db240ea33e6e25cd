// Package meter is the origin's metering contract (spec: Limits): the
// per-organisation meters, monthly and hourly, applied atomically with
// their caps, durably, and the enumeration alarm's per-day record of
// distinct lessons read.
//
// The Store applies an Op: a sequence of stages, each a set of steps that
// are billed all or nothing. Stages run in order and stop at the first
// refused stage; the stages before it stay billed. This one mechanism
// expresses every rule of the spec's "Effects of refusals": see billing.go
// for the ops each route bills. Backends: sqlitemeter, pgmeter; metertest
// is the conformance suite both pass.
package meter

import (
	"context"
	"time"
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
}

// Read is a lesson read for the enumeration alarm: distinct lessons per
// organisation and UTC day, kept as a bitset of lesson ordinals.
type Read struct {
	Ordinal int // the lesson's position in the corpus, 0-based
	// Version scopes the ordinals: a day's bitset kept under another
	// corpus version is discarded and started afresh.
	Version string
}

// Result is what an Op did.
type Result struct {
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
	// FirstRead is set when Op.Read recorded a lesson not read before on
	// that day: the read that may cross the alarm's threshold.
	FirstRead bool
}

// Counters are the counts of every meter in one month and hour.
type Counters [numMeters]int64

// Get returns the count of m.
func (c *Counters) Get(m Meter) int64 { return c[m] }

// Store applies ops durably: an op's effects are committed before Apply
// returns, and concurrent ops are exact (no over-admission at a hard cap,
// no lost increment).
type Store interface {
	// Apply applies op and returns what it did. An error means nothing was
	// applied.
	Apply(ctx context.Context, op Op) (Result, error)
	// Usage reads the counters of org (an organisation's Key) in the
	// periods of now, and the count of distinct lessons read on now's UTC
	// day under version.
	Usage(ctx context.Context, org string, now time.Time, version string) (Counters, int, error)
	Close() error
}
