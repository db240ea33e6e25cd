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
	"errors"
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
	// Refund gives back N units an earlier op of the same request billed
	// (an inline export reserved before its bundle was built, which did
	// not ship): the count goes down by N, never below 0, and the step is
	// never refused; an op of refunds alone is applied even when the
	// enumeration alarm is in force (it takes nothing). A refund step has
	// no Limit, Force or Shorten (an op with one is invalid). Apply it at the billing op's Now, so that it
	// counts in the same periods, and under a Once key of its own.
	Refund bool
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
	// Once, when set, is the key of the request the op bills (an edge
	// call's: the edge sends one request to another origin when the first
	// does not answer in time, and both may serve it). An op whose key
	// was already applied for Org, by any Store of the database, bills
	// nothing, writes no ledger row and reports the first application's
	// outcome (Result.Duplicate). Keys are kept OnceWindow (PruneOnce);
	// at most MaxOnce bytes.
	Once string
	// OnceSigned is when the edge signed the request of Once (zero: not
	// known). An op signed more than OnceMaxAge before the database's
	// clock at its transaction is refused, nothing applied (ErrTooOld):
	// its key may already be forgotten, and its client gave up long ago.
	OnceSigned time.Time
	// Unless, when set, is the Once key of another op of the same request
	// that excludes this one: the two ends of an inline export, Shipped
	// and Refund, of which only the first applied may stand. When a key
	// Unless names was applied for Org before (by any Store of the
	// database, in an earlier batch or earlier in the same one), the op
	// applies nothing, writes no ledger row, keeps no record of its own
	// key (which would exclude the op it lost to, should another origin
	// apply that one again) and reports Result.Excluded. An op whose own
	// key was applied before is its Duplicate first. At most MaxOnce
	// bytes.
	Unless string
}

// ErrTooOld is Apply's refusal of an op whose OnceSigned is older than
// OnceMaxAge: nothing was applied.
var ErrTooOld = errors.New("meter: the request was signed too long ago to be billed once (its key may be forgotten)")

// OnceWindow is how long an Op.Once key is kept, and OnceMaxAge how old
// an op's request may be when it is applied (Op.OnceSigned): the margin
// covers the origins' clocks disagreeing, so a key is never needed after
// it is pruned.
const (
	OnceWindow = time.Hour
	OnceMaxAge = OnceWindow - 5*time.Minute
)

// MaxOnce bounds Op.Once.
const MaxOnce = 128

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
	// Duplicate is set when the op's Once key was applied before: the op
	// billed nothing and wrote nothing; Refused, Granted and LedgerIDs are
	// those of the first application (Refused points into this op's
	// Stages, which are the same request's), After the counts now.
	Duplicate bool
	// Excluded is set when the op's Unless key was applied before: the
	// op billed nothing, wrote nothing and left no record of its key;
	// After holds the counts now.
	Excluded bool
	// Reserved is set when the op was refused only because of leases'
	// outstanding reservations (LeaseStore): without them, Refused would
	// be nil. The origin then recalls the organisation's leases and
	// applies the op again, so a lease never causes a false 429.
	Reserved bool
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
// one's id starts with no meter or count of the old one (docs/operations.md,
// the admin API: a new org starts with no meters), and a request of the old one
// still in flight, or a batched commit of its meters, cannot add to the
// new one's. An organisation created before generations existed keeps
// its bare id, and so its meters. Org ids never hold '/'.
func Key(o *store.Org) string { return KeyOf(o.ID, o.Generation) }

// KeyOf is Key of the organisation id of generation gen, as a signed link
// names it.
func KeyOf(id, gen string) string {
	if gen == "" {
		return id
	}
	return id + "/" + gen
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
	// LedgerBefore lists the ledger rows of every org created before
	// before (Row.Created < before) with an ID above after, in ID order,
	// at most limit of them (limit >= 1): the rows TrimLedger(before)
	// deletes, a page at a time, to archive them first. Fewer than limit
	// means there are no more.
	LedgerBefore(ctx context.Context, before time.Time, after int64, limit int) ([]Row, error)
	// TrimLedger deletes the ledger rows of every org created before
	// before and returns how many it deleted. It works through the
	// ledger in ID order, LedgerChunk rows at a time, each chunk in a
	// transaction of its own, so that no transaction is long however
	// large the ledger; an error leaves the chunks before it deleted
	// (the count says how many rows): trimming again finishes the job.
	// IDs are never reused: a row written later is numbered above every
	// row ever written.
	TrimLedger(ctx context.Context, before time.Time) (int64, error)
	Close() error
}

// OnceStore forgets the Op.Once keys that can no longer be needed
// (sqlitemeter and pgmeter implement it).
type OnceStore interface {
	// PruneOnce deletes the keys applied before before and returns how
	// many it deleted.
	PruneOnce(ctx context.Context, before time.Time) (int64, error)
}

// LedgerChunk bounds the ledger rows one statement of LedgerBefore or
// TrimLedger reads, and so the rows a transaction of TrimLedger deletes.
const LedgerChunk = 10_000

// Leases (docs/edge.md, "Leases"): an edge instance holds, per
// organisation, a short lease with a block of calls reserved against the
// organisation's calls quota and callsPerHour cap, answers 304s within it
// and reports its cumulative usage. A reservation is not billed; what a
// lease used is, when it is reported. Until a lease is closed (its final
// report) or its Settle time passes, the part of its block not yet
// reported used is outstanding: every MonthCalls and HourCalls step with
// a limit counts it as spent, so the calls quota and cap are never
// exceeded however many edges hold leases.

// LeaseGrant asks for a lease.
type LeaseGrant struct {
	Org string // the organisation's Key
	Now time.Time
	// ID is the new lease's id, unique (the caller draws 128 random bits).
	ID string
	// Epoch is LeaseStore.Epoch(Org) as the caller read it before it read
	// the organisation: the grant is refused (Granted.Stale) if it moved,
	// so a lease never outlives a change acknowledged before it committed.
	Epoch int64
	Want  int64 // at most this many calls
	// Floor: no lease is granted (Calls 0) if fewer calls than this could
	// be reserved.
	Floor int64
	// Share: at most 1/Share of what is left under each limit is
	// reserved, so leases shrink near the quota (the origin uses 4).
	Share int64
	// MonthLimit and HourLimit are the calls quota and callsPerHour as the
	// request's organisation has them; nil: no cap.
	MonthLimit, HourLimit *int64
	// Expires is the lease's end on the origin's clock; Settle, later,
	// when its reservation is released without a final report.
	Expires, Settle time.Time
	// RevokeURL is where the edge host takes a push (revoke or settle);
	// "" when it cannot.
	RevokeURL string
}

// Granted is what LeaseStore.GrantLease did.
type Granted struct {
	Calls     int64 // the block reserved; 0: no lease was recorded
	Suspended bool  // the enumeration alarm is in force: no lease
	Stale     bool  // the epoch moved: no lease
	// After holds the billed counts (reservations are not billed) in the
	// periods of Now.
	After Counters
}

// Lease is a recorded lease.
type Lease struct {
	ID, Org     string
	Epoch       int64
	Calls, Used int64  // the block, and what reports said it used (at most Calls)
	Month, Hour string // the periods its usage is billed in: those of its grant
	Expires     time.Time
	Settle      time.Time
	RevokeURL   string
	Closed      bool // a final report came
}

// Report is an edge's cumulative usage of a lease: Used 304s so far;
// Final once it will use it no more.
type Report struct {
	Lease string
	Used  int64
	Final bool
}

// LeaseStore keeps leases with the meters, in their transactions
// (sqlitemeter and pgmeter implement it; metertest checks both).
type LeaseStore interface {
	// Epoch is org's lease epoch (an organisation's Key): it moves with
	// every BumpEpoch of org and of every organisation.
	Epoch(ctx context.Context, org string) (int64, error)
	// BumpEpoch moves org's epoch; org "" moves every organisation's (a
	// corpus reload).
	BumpEpoch(ctx context.Context, org string) error
	// GrantLease reserves a block of calls for a new lease in one
	// transaction with the meters: none when the alarm is in force, the
	// epoch moved, or fewer than Floor calls could be reserved; else
	// min(Want, (limit - count - outstanding) / Share) under each limit.
	GrantLease(ctx context.Context, g LeaseGrant) (Granted, error)
	// ReportLeases applies cumulative reports: a report above what its
	// lease recorded bills the difference (Used at most Calls) to the
	// lease's own month and hour; an equal or lower one changes nothing;
	// Final closes the lease. A report that comes after the lease stopped
	// reserving (Settle passed without a final report) bills no more than
	// the limits at its grant allow. Unknown ids are ignored.
	ReportLeases(ctx context.Context, now time.Time, rs []Report) error
	// OpenLeases lists the leases of org (every org's when org is "")
	// not closed whose Settle is after now.
	OpenLeases(ctx context.Context, org string, now time.Time) ([]Lease, error)
	// PruneLeases deletes the leases that ended before before: closed
	// ones whose validity (Expires) ended, and any whose reservation
	// (Settle) ended. A report for one is ignored from then on, as for an
	// unknown id. It returns how many it deleted.
	PruneLeases(ctx context.Context, before time.Time) (int64, error)
}
