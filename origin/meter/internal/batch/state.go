package batch

import (
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/lectern-api/lectern/origin/meter"
)

// Key names one counter row: a meter of an org in one period.
type Key struct {
	Org    string
	Meter  meter.Meter
	Period string
}

func compareKeys(a, b Key) int {
	if c := strings.Compare(a.Org, b.Org); c != 0 {
		return c
	}
	if c := strings.Compare(a.Period, b.Period); c != 0 {
		return c
	}
	return strings.Compare(a.Meter.String(), b.Meter.String())
}

// MeterOf is the meter stored under name in a period of the given kind;
// the spec's names repeat across kinds ("calls" is a month and an hour
// meter), the period's shape tells them apart.
func MeterOf(name string, hourly bool) (meter.Meter, bool) {
	for _, m := range meter.Meters {
		if m.Hourly() == hourly && m.String() == name {
			return m, true
		}
	}
	return 0, false
}

// Periods are the periods an op counts in: its org's month and hour.
type Periods struct {
	Org   string
	Month string // "2006-01"
	Hour  string // "2006-01-02T15"
}

// Day names one org's record of the lessons it read on one UTC day.
type Day struct {
	Org  string
	Date string // "2006-01-02", UTC
}

// DayOf is the UTC date of t, as Day.Date holds it.
func DayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// DayChange is what the ops of a batch did to a day's record: its new
// count, and the lessons they added to it, each not in it before.
type DayChange struct {
	N     int
	Added []string
}

// Alarm is an org's enumeration alarm as stored: the state the read that
// last tripped it left (Day "" when it never tripped), and whether it is
// in force (tripped and not lifted since).
type Alarm struct {
	meter.AlarmState
	InForce bool
}

// day is what a batch knows of one day's record.
type day struct {
	n       int             // distinct lessons read that day
	lessons []string        // the batch's lessons of that day, sorted
	read    map[string]bool // which of them are in the record
	added   []string        // those the ops added
}

type alarm struct {
	Alarm
	dirty bool
}

// State is what one batch transaction read, and what its jobs did to it.
// It holds the alarm of every org of the batch, every counter of every
// op's periods, and for each day an op reads a lesson on, the day's count
// and which of the batch's lessons its record holds; the transaction
// holds the write lock (SQLite) or the row locks (PostgreSQL) of the ones
// its jobs may change, so evaluating them one after another in memory is
// exact, and each sees the effects of the ones before it.
type State struct {
	jobs    []Job
	counts  map[Key]int64
	dirty   map[Key]bool
	days    map[Day]*day
	dayKeys []Day
	alarms  map[string]*alarm
	orgs    []string
	ledger  []*LedgerRow

	// Leases (lease.go).
	leases    map[string]*Lease   // by id: those read and those granted
	open      map[string][]*Lease // by org: those that may reserve
	leaseIDs  []string
	reported  []string
	leaseOrgs []string
	epochOrgs []string
	epochs    map[string]int64 // by org, "" the global one
	floor     time.Time
	joined    []Periods // of the leases the reports name
	adds      []add     // apply's scratch

	// Op.Once keys (once.go).
	onceKeys []OnceKey
	once     map[OnceKey]*Once // those stored and those the batch applied
	newOnce  []*Once
	clock    time.Time // the database's, at Load (SetClock)
}

// LedgerRow is a ledger row a passing op of the batch writes. Save stores
// the batch's rows in their order (Ledger) and numbers each (ID): higher
// than every row committed before, ascending in that order.
type LedgerRow struct {
	meter.Row
	job int // the index of its op's job
}

// Ledger are the ledger rows the passing ops write, in job order and, in
// a job, in its Op.Ledger's order.
func (s *State) Ledger() []*LedgerRow { return s.ledger }

// ScopesText is how a ledger row's scopes are stored: space-separated
// (Validate refuses a scope holding white space).
func ScopesText(scopes []string) string { return strings.Join(scopes, " ") }

// ParseScopes reads ScopesText: nil for none.
func ParseScopes(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, " ")
}

// Micro is t in UTC to the microsecond, as every backend keeps a ledger
// row's times (PostgreSQL's timestamptz holds microseconds); zero stays
// zero.
func Micro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// addLedger records the ledger rows of op, the job at index i, which
// passed.
func (s *State) addLedger(i int, op meter.Op) {
	for _, e := range op.Ledger {
		e.Expires = Micro(e.Expires)
		s.ledger = append(s.ledger, &LedgerRow{Row: meter.Row{Org: op.Org, Created: Micro(op.Now), Entry: e}, job: i})
	}
}

// numMeters is the number of meters.
const numMeters = len(meter.Counters{})

// newState is the state of jobs before Load: every counter they may read
// is 0, every day's record and every alarm empty, as when no row is
// stored.
func newState(jobs []Job) *State {
	s := &State{jobs: jobs, counts: map[Key]int64{}, dirty: map[Key]bool{}, days: map[Day]*day{}, alarms: map[string]*alarm{}}
	for _, j := range jobs {
		s.initLeases(j)
		if j.Reports != nil {
			continue // their orgs join once their leases are read (joinReported)
		}
		if j.Grant != nil {
			j.Op = meter.Op{Org: j.Grant.Org, Now: j.Grant.Now}
		}
		if _, ok := s.alarms[j.Op.Org]; !ok {
			s.alarms[j.Op.Org] = &alarm{}
			s.orgs = append(s.orgs, j.Op.Org)
		}
		if j.Reinstate {
			continue
		}
		for _, k := range opKeys(j.Op) {
			s.counts[k] = 0
		}
		if r := j.Op.Read; r != nil {
			dk := Day{j.Op.Org, DayOf(j.Op.Now)}
			d := s.days[dk]
			if d == nil {
				d = &day{read: map[string]bool{}}
				s.days[dk] = d
				s.dayKeys = append(s.dayKeys, dk)
			}
			if !slices.Contains(d.lessons, r.Lesson) {
				d.lessons = append(d.lessons, r.Lesson)
			}
		}
	}
	slices.Sort(s.orgs)
	s.initOnce()
	s.sortLeaseNames()
	slices.SortFunc(s.dayKeys, func(a, b Day) int {
		if c := strings.Compare(a.Org, b.Org); c != 0 {
			return c
		}
		return strings.Compare(a.Date, b.Date)
	})
	for _, d := range s.days {
		slices.Sort(d.lessons)
	}
	return s
}

// ops yields the jobs' ops, reinstatements, grants and reports left out.
func (s *State) ops() iter.Seq[meter.Op] {
	return func(yield func(meter.Op) bool) {
		for _, j := range s.jobs {
			if j.isOp() && !yield(j.Op) {
				return
			}
		}
	}
}

// Orgs are the distinct orgs of the jobs, sorted: the alarms a batch
// reads and locks, always in this order.
func (s *State) Orgs() []string { return s.orgs }

// Periods are the distinct periods of the ops, in their order, then
// those of the grants and of the leases the reports name.
func (s *State) Periods() []Periods {
	seen := map[Periods]bool{}
	var ps []Periods
	add := func(p Periods) {
		if !seen[p] {
			seen[p] = true
			ps = append(ps, p)
		}
	}
	for op := range s.ops() {
		add(Periods{op.Org, meter.MonthCalls.Period(op.Now), meter.HourCalls.Period(op.Now)})
	}
	for _, j := range s.jobs {
		if g := j.Grant; g != nil {
			add(Periods{g.Org, meter.MonthCalls.Period(g.Now), meter.HourCalls.Period(g.Now)})
		}
	}
	for _, p := range s.joined {
		add(p)
	}
	return ps
}

// Stepped are the distinct counters the ops may write, sorted: the rows a
// batch locks, always in this order, so two batches never deadlock.
func (s *State) Stepped() []Key {
	seen := map[Key]bool{}
	var ks []Key
	for op := range s.ops() {
		for _, stage := range op.Stages {
			for _, st := range stage {
				k := Key{op.Org, st.Meter, st.Meter.Period(op.Now)}
				if !seen[k] {
					seen[k] = true
					ks = append(ks, k)
				}
			}
		}
	}
	for _, p := range s.joined { // a report bills its lease's calls
		for _, k := range []Key{{p.Org, meter.MonthCalls, p.Month}, {p.Org, meter.HourCalls, p.Hour}} {
			if !seen[k] {
				seen[k] = true
				ks = append(ks, k)
			}
		}
	}
	slices.SortFunc(ks, compareKeys)
	return ks
}

// Days are the distinct days whose records the ops may write, sorted.
func (s *State) Days() []Day { return s.dayKeys }

// Lessons are the distinct lessons the ops read on d, sorted: the only
// ones of d's record a batch needs to look up.
func (s *State) Lessons(d Day) []string {
	if dd := s.days[d]; dd != nil {
		return dd.lessons
	}
	return nil
}

// Count is the count of k as the ops left it (what was loaded before any
// op ran).
func (s *State) Count(k Key) int64 { return s.counts[k] }

// DayCount is the count of lessons read on d as the ops left it.
func (s *State) DayCount(d Day) int {
	if dd := s.days[d]; dd != nil {
		return dd.n
	}
	return 0
}

// Read reports whether lesson is in d's record as the ops left it (of the
// lessons the ops read on d; any other is reported false).
func (s *State) Read(d Day, lesson string) bool {
	dd := s.days[d]
	return dd != nil && dd.read[lesson]
}

// Alarm is the alarm of org as the jobs left it.
func (s *State) Alarm(org string) Alarm {
	if a := s.alarms[org]; a != nil {
		return a.Alarm
	}
	return Alarm{}
}

// Set records the stored count of k.
func (s *State) Set(k Key, n int64) { s.counts[k] = n }

// SetDayCount records the stored count of lessons read on d.
func (s *State) SetDayCount(d Day, n int) {
	if dd := s.days[d]; dd != nil {
		dd.n = n
	}
}

// SetRead records that lesson is in d's record.
func (s *State) SetRead(d Day, lesson string) {
	if dd := s.days[d]; dd != nil {
		dd.read[lesson] = true
	}
}

// SetAlarm records the stored alarm of org.
func (s *State) SetAlarm(org string, a Alarm) {
	if sa := s.alarms[org]; sa != nil {
		sa.Alarm = a
	}
}

// Changed yields the counters the ops changed, with their new counts.
func (s *State) Changed() iter.Seq2[Key, int64] {
	return func(yield func(Key, int64) bool) {
		for k := range s.dirty {
			if !yield(k, s.counts[k]) {
				return
			}
		}
	}
}

// ChangedDays yields the days whose records the ops added lessons to.
func (s *State) ChangedDays() iter.Seq2[Day, DayChange] {
	return func(yield func(Day, DayChange) bool) {
		for _, k := range s.dayKeys {
			if d := s.days[k]; len(d.added) > 0 && !yield(k, DayChange{N: d.n, Added: d.added}) {
				return
			}
		}
	}
}

// ChangedAlarms yields the alarms the jobs tripped or lifted, with their
// new state.
func (s *State) ChangedAlarms() iter.Seq2[string, Alarm] {
	return func(yield func(string, Alarm) bool) {
		for _, org := range s.orgs {
			if a := s.alarms[org]; a.dirty && !yield(org, a.Alarm) {
				return
			}
		}
	}
}

// opKeys are the counters op may read: every meter in its periods,
// indexed by meter.
func opKeys(op meter.Op) [numMeters]Key {
	var ks [numMeters]Key
	for _, m := range meter.Meters {
		ks[m] = Key{op.Org, m, m.Period(op.Now)}
	}
	return ks
}

// apply evaluates j against s and records its effects in s.
func (s *State) apply(j Job) Outcome {
	switch {
	case j.Reinstate:
		var res meter.Result
		if a := s.alarms[j.Op.Org]; a.InForce {
			res.Suspended = true
			a.InForce = false
			a.dirty = true
		}
		return Outcome{Result: res}
	case j.Grant != nil:
		g, err := s.grant(*j.Grant)
		return Outcome{Granted: g, Err: err}
	case j.Reports != nil:
		s.report(j.Op.Now, j.Reports)
		return Outcome{}
	}
	if s.tooOld(j.Op) {
		return Outcome{Err: meter.ErrTooOld}
	}
	if o := s.onceOf(j.Op); o != nil {
		return Outcome{Result: s.duplicate(j.Op, o)}
	}
	if s.excluded(j.Op) {
		res := meter.Result{Excluded: true}
		s.after(j.Op, &res)
		return Outcome{Result: res}
	}
	return Outcome{Result: s.applyOp(j.Op)}
}

// add is a step's addition to a counter.
type add struct {
	k Key
	n int64
}

// applyOp evaluates op against s and records its effects in s.
//
// An op of an org whose alarm is in force is refused whole (Suspended),
// but a refund (refundOnly).
// Otherwise a stage is billed all or nothing. Within a stage, a step that
// does not fit its limit refuses the op and bills none of the stage, even
// when another step of the stage is a Force step over its limit (a
// monthly quota refusal bills nothing, spec: Limits, "Effects of
// refusals"); when only Force steps are over, the stage is billed and the
// first of them refuses the op. Steps of one stage on the same counter
// add up. A MonthCalls or HourCalls step with a limit counts the leases'
// outstanding reservations as spent; an op they alone refuse (it passes
// without them) is Reserved and bills nothing at all, no stage of it, so
// that the origin, having recalled the leases, applies it again and bills
// it once. An op that passes records its Read, and trips the alarm when
// the day's count is then over the threshold and the alarm has not
// tripped on that day yet (once lifted, it stays lifted for the day).
func (s *State) applyOp(op meter.Op) meter.Result {
	var res meter.Result
	a := s.alarms[op.Org]
	if a.InForce && !refundOnly(op) {
		res.Suspended = true
		s.after(op, &res)
		return res
	}
	adds, granted, refused := s.evaluate(op, true, s.adds[:0])
	s.adds = adds
	if refused != nil && len(s.open[op.Org]) > 0 {
		if _, _, without := s.evaluate(op, false, nil); without == nil {
			step := *refused
			res.Refused, res.Reserved = &step, true
			s.after(op, &res)
			return res
		}
	}
	for _, a := range adds {
		s.counts[a.k] += a.n
		s.dirty[a.k] = true
	}
	if granted >= 0 {
		res.Granted = granted
	}
	if refused != nil {
		step := *refused
		res.Refused = &step
	}
	if r := op.Read; r != nil && res.Refused == nil {
		date := DayOf(op.Now)
		d := s.days[Day{op.Org, date}]
		if !d.read[r.Lesson] {
			d.read[r.Lesson] = true
			d.n++
			d.added = append(d.added, r.Lesson)
		}
		if meter.Alarm(d.n, r.Granted) && a.Day != date {
			a.Alarm = Alarm{AlarmState: meter.AlarmState{TrippedAt: op.Now, Day: date, LessonsRead: d.n, Granted: r.Granted}, InForce: true}
			a.dirty = true
			res.Tripped = true
		}
	}
	s.after(op, &res)
	return res
}

// refundOnly reports whether op only gives back (meter.Step.Refund): it
// is applied even when its org's alarm is in force, since it takes
// nothing, and the request it refunds passed before the alarm.
func refundOnly(op meter.Op) bool {
	if op.Read != nil || len(op.Ledger) > 0 || len(op.Stages) == 0 {
		return false
	}
	for _, st := range op.Stages {
		for _, step := range st {
			if !step.Refund {
				return false
			}
		}
	}
	return true
}

// evaluate runs op's stages against s without changing it, appending to
// adds what the stages it bills add; it returns them, the N granted to a
// Shorten step of a billed stage (-1: none) and the step that refused the
// op (nil: it passed). reserve counts the leases' outstanding
// reservations against MonthCalls and HourCalls limits.
func (s *State) evaluate(op meter.Op, reserve bool, adds []add) ([]add, int64, *meter.Step) {
	granted := int64(-1)
	for _, stage := range op.Stages {
		start := len(adds)
		var hard, forced *meter.Step
		stageGranted := int64(-1)
		for i := range stage {
			st := &stage[i]
			k := Key{op.Org, st.Meter, st.Meter.Period(op.Now)}
			cur := s.counts[k]
			for _, a := range adds {
				if a.k == k {
					cur += a.n
				}
			}
			n := st.N
			if st.Refund {
				n = -min(n, cur) // never below 0
			}
			if st.Limit != nil {
				left := *st.Limit - cur
				if reserve {
					left -= s.outstanding(op.Org, st.Meter, k.Period, op.Now)
				}
				switch {
				case n <= left:
				case st.Shorten && left >= 1:
					n = left
				case st.Force:
					if forced == nil {
						forced = st
					}
				default:
					if hard == nil {
						hard = st
					}
				}
			}
			if st.Shorten {
				stageGranted = n
			}
			adds = append(adds, add{k, n})
		}
		if hard != nil {
			return adds[:start], granted, hard
		}
		if stageGranted >= 0 {
			granted = stageGranted
		}
		if forced != nil {
			return adds, granted, forced
		}
	}
	return adds, granted, nil
}

// after fills in what res reports of the state op leaves: every meter's
// count and, for an op with a Read, the day's count of lessons read.
func (s *State) after(op meter.Op, res *meter.Result) {
	for m, k := range opKeys(op) {
		res.After[m] = s.counts[k]
	}
	if op.Read != nil {
		res.LessonsRead = s.days[Day{op.Org, DayOf(op.Now)}].n
	}
}
